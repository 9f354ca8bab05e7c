"""Deliberately broken algorithms.  Each claims the ε it is given but spends more; the audit must catch them all.

They mirror real bugs in DP code (privacy-engineering.md §3): a noise scale off by a factor, a tree whose
height was forgotten in its sensitivity, a budget split that overspends.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..algorithms.auto import Auto
from ..algorithms.hierarchical import H
from ..algorithms.identity import Identity
from ..algorithms.partitioning import DPCube, KDTree
from ..algorithms.privelet import Privelet
from ..algorithms.structurefirst import StructureFirst
from ..noise import BitSource

__all__ = ["MUTANTS"]


class HalfScaleIdentity(Identity):
    """Identity with half the noise scale it should have (a factor-2 slip, e.g. replace-one vs add/remove)."""

    name = "mutant-identity-half-scale"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None):
        return super().run(counts, epsilon * 2, bits, columns)


class ShrunkScaleIdentity(Identity):
    """Identity with 0.8 times the noise scale it should have."""

    name = "mutant-identity-scale-0.8"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None):
        return super().run(counts, epsilon * Fraction(5, 4), bits, columns)


class HeightForgottenTree(H):
    """A binary tree that gives every level the whole ε, as if a record touched only one node of the tree."""

    name = "mutant-tree-height-forgotten"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None):
        levels = self.tree_for(counts.shape)[0].levels - 1  # measured levels (root dropped)
        return super().run(counts, epsilon * levels, bits, columns)


class OverspentTree(H):
    """A binary tree whose level budgets add up to 1.1 ε (a 10 % overspent split)."""

    name = "mutant-tree-overspent-10pct"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None):
        return super().run(counts, epsilon * Fraction(11, 10), bits, columns)


class TotalForgottenPrivelet(Privelet):
    """Privelet whose sensitivity counts the differences but forgets the total coefficient: L instead of L + 1."""

    name = "mutant-privelet-total-forgotten"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None):
        rho = int(np.prod([a.sensitivity for a in self.axes_for(counts.shape)]))
        forgotten = int(np.prod([max(a.sensitivity - 1, 1) for a in self.axes_for(counts.shape)]))
        return super().run(counts, epsilon * Fraction(rho, forgotten), bits, columns)


class UnweightedNominalPrivelet(Privelet):
    """The nominal wavelet with every coefficient at the base scale: the group weights 2(f − 1) forgotten."""

    name = "mutant-privelet-nominal-unweighted"
    needs_hierarchy = True

    def axes_for(self, shape, columns=None):
        axes = super().axes_for(shape, columns)
        for a in axes:
            a.relative_scales = np.ones_like(a.relative_scales)
        return axes


class TrueCountDPCube(DPCube):
    """DPCube that chooses its partition from the true counts instead of the noisy ones."""

    name = "mutant-dpcube-partition-on-true-counts"
    flip_pair = "dpcube"

    def partition(self, cells, counts, sigma1, sigma2):
        return super().partition(counts, counts, sigma1, sigma2)


class TrueCountKDTree(KDTree):
    """The k-d tree that takes its medians and uniformity tests from the true counts instead of the noisy ones."""

    name = "mutant-kdtree-partition-on-true-counts"
    flip_pair = "kdtree"

    def partition(self, cells, counts, sigma1, sigma2):
        return super().partition(counts, counts, sigma1, sigma2)


class ArgmaxStructureFirst(StructureFirst):
    """StructureFirst that takes the best-scoring boundary instead of drawing one (no exponential mechanism)."""

    name = "mutant-structurefirst-argmax"
    flip_pair = "structurefirst"

    def select(self, quality, epsilon, sensitivity, bits):
        return int(np.argmax(quality))


class TrueTotalAuto(Auto):
    """Auto choosing the algorithm from the true total instead of the noisy one (a decision that reads the data
    without paying for it)."""

    name = "mutant-auto-choice-on-true-total"
    flip_pair = "auto"

    def total_for_choice(self, noisy_total: float, counts: np.ndarray) -> float:
        return float(counts.sum())


MUTANTS = [HalfScaleIdentity, ShrunkScaleIdentity, HeightForgottenTree, OverspentTree, TotalForgottenPrivelet,
           UnweightedNominalPrivelet, TrueCountDPCube, TrueCountKDTree,
           ArgmaxStructureFirst, TrueTotalAuto]
