"""Audit cases for AHP (dphist/algorithms/ahp.py): the honest algorithm and a mutant that clusters the TRUE
counts, both on a pair of 8-cell tables (D, D + one record) whose true-count clustering has a different number of
clusters, the worst case for a structure chosen from the data (docs/privacy.md §2.3)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dphist.algorithms.ahp import AHP

from .cases import Case

__all__ = ["cases", "flip_pair", "TrueCountAHP"]


class TrueCountAHP(AHP):
    """AHP that thresholds, sorts and clusters the true counts instead of the noisy ones (the bug); it still pays
    for and draws the noisy cells, so its budget adds up."""

    name = "mutant-ahp-clusters-on-true-counts"

    def run(self, counts, budget, columns=None):
        self.true_counts = np.asarray(counts).reshape(-1)
        return super().run(counts, budget, columns)

    def clusters(self, noisy, cutoff, c):
        return super().clusters(self.true_counts, cutoff, c)


def flip_pair(epsilon: Fraction = Fraction(1)) -> tuple[np.ndarray, np.ndarray]:
    """(D, D + one record in the last cell), 8 cells, on which AHP's clustering of the true counts (default
    options, budget ``epsilon``) has a different number of clusters."""
    algo = AHP()
    ratio = algo.params["ratio"]
    scale1, scale2 = 1 / (epsilon * ratio), 1 / (epsilon * (1 - ratio))
    cutoff, c = algo.threshold(8, scale1), 2 * float(scale2) ** 2
    for a in range(0, 12):
        for b in range(a, 40):
            data = np.array([0, 0, 0, 0, a, a, b, b], dtype=np.int64)
            neighbour = data.copy()
            neighbour[-1] += 1
            if algo.clusters(data, cutoff, c)[1].size != algo.clusters(neighbour, cutoff, c)[1].size:
                return data, neighbour
    raise RuntimeError("no flipping pair found")


def cases(mutants: bool = True, epsilon: Fraction = Fraction(1)) -> list:
    """The honest AHP on the flip pair and, with ``mutants``, the true-count mutant on the same pair."""
    data, neighbour = flip_pair(epsilon)
    out = [Case("ahp (8,) one record flips the true-count clusters", AHP(), data, neighbour, epsilon)]
    if mutants:
        out.append(Case(f"{TrueCountAHP.name} one record flips the clusters", TrueCountAHP(), data, neighbour,
                        epsilon, mutant=True))
    return out
