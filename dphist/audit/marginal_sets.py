"""Marginal sets as the audit sees them: the measurements of a release with several marginals.

Strategy "full" is one algorithm run on the table over all the marginals' columns (audited as that algorithm);
its marginals are post-processing.  Strategy "separate" is the new mechanism: k identity measurements of
marginals of the same records, with ε split by :func:`~dphist.accountant.split_budget` exactly as a release
plans it.  One record changes one cell of every marginal, so the k measurements compose to ε; a split that
forgot the composition would spend kε.  The least-squares reconciliation and rounding that follow read only
these measurements, so they cannot add privacy loss and are not part of the audited output.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..accountant import split_budget
from ..algorithms.base import Algorithm, Estimate
from ..algorithms.identity import Identity
from ..marginals import derive_marginal
from ..noise import BitSource

__all__ = ["SeparateMarginals", "OverspentMarginals", "MARGINALS"]

#: The audited set on a 3-column table: every pair, each sharing one column with each other.
MARGINALS = ((0, 1), (1, 2), (0, 2))


class SeparateMarginals(Algorithm):
    """Each marginal in :data:`MARGINALS` of the table measured by identity with an equal share of ε."""

    name = "marginals-separate"
    summary = "a marginal set under strategy separate: identity on each marginal at ε/k"

    def budgets(self, epsilon: Fraction, k: int) -> list[Fraction]:
        return split_budget(Fraction(epsilon), [Fraction(1)] * k)

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        axes = tuple(range(counts.ndim))
        identity = Identity()
        estimates = [identity.run(derive_marginal(counts, axes, m), budget, bits)
                     for m, budget in zip(MARGINALS, self.budgets(epsilon, len(MARGINALS)))]
        return Estimate(values=np.zeros(counts.shape), measurements=[r for e in estimates for r in e.measurements],
                        noisy=[n for e in estimates for n in e.noisy])


class OverspentMarginals(SeparateMarginals):
    """Mutant: every marginal measured with the whole ε, as if the marginals were of different records."""

    name = "mutant-marginals-no-composition"

    def budgets(self, epsilon: Fraction, k: int) -> list[Fraction]:
        return [Fraction(epsilon)] * k
