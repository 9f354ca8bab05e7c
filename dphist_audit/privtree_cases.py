"""Audit cases for PrivTree (dphist/algorithms/privtree.py): an honest case and a mutant that decides its splits
on the true counts.

On D = eight empty cells and D′ = D plus one record in the first cell, the noise-free split test of the mutant
is deterministic: the root's biased count max(θ − δ, 0) does not exceed θ = 0 on D (one leaf) and 1 does on D′
(two leaves or more), so the number of leaf counts measured, which the audit reads as the run's structure,
tells the tables apart with certainty.  The honest algorithm at ε = 1 spends ε/2 on the structure and ε/2 on the
leaves and must pass on the same pair.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .cases import Case


def _mutant_class():
    from dphist.algorithms.privtree import PrivTree  # noqa: PLC0415  (the audit imports the algorithms lazily)

    class TrueCountPrivTree(PrivTree):
        """PrivTree whose split test reads the true counts without noise (the bias kept): it leaks."""

        name = "mutant-privtree-splits-on-true-counts"

        def split_tests(self, counts, noise, depth, delta, theta):
            return super().split_tests(counts, np.zeros_like(noise), depth, delta, theta)

    return TrueCountPrivTree


def cases(mutants: bool = True) -> list:
    """The PrivTree audit cases: honest on (8,) (one record added to the first cell), and its true-count mutant."""
    from dphist.algorithms.privtree import PrivTree  # noqa: PLC0415

    epsilon = Fraction(1)
    data = np.zeros(8, dtype=np.int64)
    neighbour = data.copy()
    neighbour[0] += 1
    out = [Case("privtree (8,) add to first cell of an empty table", PrivTree(), data, neighbour, epsilon)]
    if mutants:
        out.append(Case("privtree (8,) splits on true counts", _mutant_class()(), data, neighbour, epsilon,
                        mutant=True))
    return out
