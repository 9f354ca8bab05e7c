"""Marginal sets as the audit sees them: the measurements of a release with several marginals.

Strategy "full" is one algorithm run on the table over all the marginals' columns (audited as that algorithm);
its marginals are post-processing.  Strategy "separate" is the new mechanism: k identity measurements of
marginals of the same records, with the budget split in equal shares exactly as a release plans it.  One record changes one cell of every marginal, so the k measurements compose to ε; a split that
forgot the composition would spend kε.  The least-squares reconciliation and rounding that follow read only
these measurements, so they cannot add privacy loss and are not part of the audited output.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dphist.algorithms.base import Algorithm, Estimate
from dphist.algorithms.identity import Identity
from dphist.algorithms.marginal_sets import derive_marginal
from dphist.privacy import PrivacyBudget

__all__ = ["SeparateMarginals", "OverspentMarginals", "MARGINALS"]

#: The audited set on a 3-column table: every pair, each sharing one column with each other.
MARGINALS = ((0, 1), (1, 2), (0, 2))


class SeparateMarginals(Algorithm):
    """Each marginal in :data:`MARGINALS` of the table measured by identity with an equal share of the budget."""

    name = "marginals-separate"
    summary = "a marginal set under strategy separate: identity on each marginal at ε/k"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        axes = tuple(range(counts.ndim))
        for m, part in zip(MARGINALS, budget.split([1] * len(MARGINALS))):
            self.measure(derive_marginal(counts, axes, m), part)
        return Estimate(values=np.zeros(counts.shape))

    def measure(self, marginal: np.ndarray, part: PrivacyBudget) -> None:
        Identity().run(marginal, part)


class OverspentMarginals(SeparateMarginals):
    """Mutant: every marginal measured with the whole ε, as if the marginals were of different records (its
    sensitivity is claimed as 1/k, so each part's ε/k buys the noise of ε)."""

    name = "mutant-marginals-no-composition"

    def measure(self, marginal: np.ndarray, part: PrivacyBudget) -> None:
        part.laplace(marginal, Fraction(1, len(MARGINALS)), part.epsilon, "every cell (composition forgotten)")
