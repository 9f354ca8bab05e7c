"""Audit cases for MWEM (dphist/algorithms/mwem.py): the honest algorithm and a mutant that takes the argmax.

Both run the dyadic candidate queries on 8 cells, one round, one replay pass (cheap Python runs: MWEM is data-adaptive,
so the audit runs it once per sample).  The pair puts m and m + 1 records in the first and last cells and adds
one record to the first: the two single-cell candidates then lead every other score whatever the noisy total,
and the true argmax moves from the last cell to the first (np.argmax takes the first of a tie).  A selection
that ignores its permute-and-flip draw gives itself away in which range it measures (each round's measurement
names its range, so the audit's structure events see it; the two answers are alike, m + 1, so the values
alone would not).  One round, because the
audit's structure events are whole runs' sequences of choices: a second, noisier draw would spread the
mutant's telling first choice over many sequences.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .cases import Case

TINY = {"queries": "dyadic", "rounds": 1, "replay": 1}


def flip_pair(m: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """(D, D′): D = [m, 0, …, 0, m + 1] on 8 cells, D′ = D with one record added to the first cell."""
    data = np.zeros(8, dtype=np.int64)
    data[0], data[-1] = m, m + 1
    neighbour = data.copy()
    neighbour[0] += 1
    return data, neighbour


def cases(mutants: bool = True) -> list:
    """The honest MWEM on the flip pair and, with ``mutants``, the argmax mutant on the same pair."""
    from dphist.algorithms.mwem import MWEM

    class ArgmaxMWEM(MWEM):
        """MWEM that pays for and draws each selection, then takes the best-scoring query instead (the bug)."""

        name = "mutant-mwem-argmax"

        @staticmethod
        def pick(scores, choose):
            choose(scores)
            return int(np.argmax(scores))

    eps = Fraction(1)
    data, neighbour = flip_pair()
    out = [Case("mwem (8,) dyadic, one record moves the worst query", MWEM(**TINY), data, neighbour, eps)]
    if mutants:
        out.append(Case(f"{ArgmaxMWEM.name} one record moves the worst query", ArgmaxMWEM(**TINY), data, neighbour,
                        eps, mutant=True))
    return out
