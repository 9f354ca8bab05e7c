"""Audit cases for EFPA (dphist/algorithms/efpa.py): the honest algorithm and mutants on one flip pair.

The pair, on 8 cells: D = [9, 4, 5, 0, 0, 0, 5, 4] (a smooth, even histogram: its energy is in the total and the
first frequency) and D′ = D with one record added to cell 1.  At ε = 1 (ε₁ = ε₂ = 1/2) the two best candidates
are m = 1 (the total alone) and m = 2 (the total and the first frequency), within a fraction of the score's
sensitivity of each other, and the true argmax moves from m = 1 on D to m = 2 on D′ (``flip_pair`` checks it).
The measurement names how many coefficients it measured, so the audit's structure events see the choice.

Mutant ``mutant-efpa-argmax``: pays for and draws the selection, then keeps the argmax of the true scores (the
choice then reads the data for free: it keeps 1 frequency on D and 2 on D′ with certainty).  A mutant stating half
the measurement's sensitivity was tried and not caught at the audit's default sample sizes (lower bound 0.79 at
ε = 1: the extra ε₂ = 1/2 it leaks on one noisy total is too small to show in 15,000 adaptive runs), so it is
not a case here.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .cases import Case

EPSILON = Fraction(1)


def flip_pair() -> tuple[np.ndarray, np.ndarray]:
    """(D, D′) as in the module docstring."""
    data = np.array([9, 4, 5, 0, 0, 0, 5, 4], dtype=np.int64)
    neighbour = data.copy()
    neighbour[1] += 1
    return data, neighbour


def true_argmax(table: np.ndarray, epsilon: Fraction = EPSILON) -> int:
    """The number of frequencies the true scores favour on ``table`` (what the argmax mutant keeps)."""
    from dphist.algorithms.efpa import EFPA, RoundedDFT, weight_bits
    from dphist.privacy import PrivacyBudget
    from dphist.privacy.bits import SeededBits

    algo = EFPA()
    budget = PrivacyBudget(epsilon, bits=SeededBits(0))
    share = algo.params["select_share"]
    _, measure = budget.split([share, 1 - share])
    dft = RoundedDFT(table.size, weight_bits(table.size, measure))
    return int(np.argmax(algo.scores(dft, dft.analyse(table), measure))) + 1


def cases(mutants: bool = True) -> list:
    """The honest EFPA on the flip pair and, with ``mutants``, the argmax mutant on the same pair."""
    from dphist.algorithms.efpa import EFPA

    class ArgmaxEFPA(EFPA):
        """EFPA that pays for and draws its selection, then keeps the best true score instead (the bug)."""

        name = "mutant-efpa-argmax"

        def choose(self, draw, scores):
            draw.choose(scores)
            return int(np.argmax(scores))

    data, neighbour = flip_pair()
    out = [Case("efpa (8,) one record moves the best number of frequencies", EFPA(), data, neighbour, EPSILON)]
    if mutants:
        out.append(Case(f"{ArgmaxEFPA.name} one record moves the best number of frequencies", ArgmaxEFPA(), data,
                        neighbour, EPSILON, mutant=True))
    return out
