"""Deliberately broken algorithms.  Each claims the ε it is given but spends more; the audit must catch them all.

They mirror real bugs in DP code (docs/privacy.md §3): a noise scale off by a factor, a tree whose
height was forgotten in its sensitivity, a budget split that overspends, a decision read off the true data.
The privacy kernel checks that budgets add up, so a mutant lies where the kernel cannot see: in the sensitivity
it states, or in what its decisions read.  Each overrides only public methods of the algorithm it breaks.
"""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np

from dphist.algorithms.auto.choice import Auto
from dphist.algorithms.hierarchical import H
from dphist.algorithms.identity import Identity
from dphist.algorithms.partitioning import DPCube, KDTree
from dphist.algorithms.privelet import Privelet
from dphist.algorithms.structurefirst import StructureFirst
from dphist.privacy import PrivacyBudget

__all__ = ["MUTANTS", "ZCDP_MUTANTS", "shrunk_residual"]


class _UnderstatedSensitivity(PrivacyBudget):
    """A budget that divides every stated L1 sensitivity by ``shrink`` before the kernel sees it (the bug).

    It intercepts the public Laplace calls (``measure`` on a pure budget goes through them), not only
    :meth:`scale`: the kernel computes a measurement's scale itself, so overriding ``scale`` alone would leave
    the noise correct and the mutant harmless."""

    shrink = Fraction(1)

    def scale(self, sensitivity, epsilon) -> Fraction:
        return super().scale(Fraction(sensitivity) / self.shrink, epsilon)

    def laplace(self, answers, sensitivity, amount, what, composition="parallel over disjoint cells", delta=0,
                publish_count=True):
        return super().laplace(answers, Fraction(sensitivity) / self.shrink, amount, what, composition, delta,
                               publish_count)

    def laplace_weighted(self, answers, relative, sensitivity, amount, what, composition):
        return super().laplace_weighted(answers, relative, Fraction(sensitivity) / self.shrink, amount, what,
                                        composition)


def _understating(budget: PrivacyBudget, shrink: Fraction) -> PrivacyBudget:
    """``budget`` itself, turned into one that understates every sensitivity ``shrink``-fold (it keeps its
    bits, trace and repetitions; its children inherit the bug)."""
    budget.__class__ = type(f"Understating{type(budget).__name__}", (_UnderstatedSensitivity, type(budget)),
                            {"shrink": shrink})
    return budget


class HalfScaleIdentity(Identity):
    """Identity with half the noise scale it should have (a factor-2 slip, e.g. replace-one vs add/remove)."""

    name = "mutant-identity-half-scale"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        return super().run(counts, _understating(budget, Fraction(2)), columns)


class ShrunkScaleIdentity(Identity):
    """Identity with 0.8 times the noise scale it should have."""

    name = "mutant-identity-scale-0.8"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        return super().run(counts, _understating(budget, Fraction(5, 4)), columns)


class HeightForgottenTree(H):
    """A binary tree that gives every level the whole ε, as if a record touched only one node of the tree."""

    name = "mutant-tree-height-forgotten"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        levels = self.tree_for(counts.shape)[0].levels - 1  # measured levels (root dropped)
        return super().run(counts, _understating(budget, Fraction(levels)), columns)


class OverspentTree(H):
    """A binary tree whose level budgets add up to 1.1 ε (a 10 % overspent split)."""

    name = "mutant-tree-overspent-10pct"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        return super().run(counts, _understating(budget, Fraction(11, 10)), columns)


class TotalForgottenPrivelet(Privelet):
    """Privelet whose sensitivity counts the differences but forgets the total coefficient: L instead of L + 1."""

    name = "mutant-privelet-total-forgotten"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        rho = int(np.prod([a.sensitivity for a in self.axes_for(counts.shape)]))
        forgotten = int(np.prod([max(a.sensitivity - 1, 1) for a in self.axes_for(counts.shape)]))
        return super().run(counts, _understating(budget, Fraction(rho, forgotten)), columns)


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

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        self.true_counts = counts  # tiny audit options measure every cell, so the blocks are the cells
        return super().run(counts, budget, columns)

    def partition(self, cells, sigma1, sigma2, penalty=None, significance=False):
        return super().partition(self.true_counts, sigma1, sigma2, penalty, significance)


class TrueCountKDTree(KDTree):
    """The k-d tree that takes its medians and uniformity tests from the true counts instead of the noisy ones."""

    name = "mutant-kdtree-partition-on-true-counts"
    flip_pair = "kdtree"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        self.true_counts = counts
        return super().run(counts, budget, columns)

    def partition(self, cells, sigma1, sigma2, penalty=None, significance=False):
        return super().partition(self.true_counts, sigma1, sigma2, penalty, significance)


class ArgmaxStructureFirst(StructureFirst):
    """StructureFirst that takes the best-scoring boundary instead of drawing one (no exponential mechanism)."""

    name = "mutant-structurefirst-argmax"
    flip_pair = "structurefirst"

    def boundaries(self, scores, g, k, choose):
        def best(quality):
            choose(quality)  # still pays for and draws the selection, then ignores it
            return int(np.argmax(quality))
        return super().boundaries(scores, g, k, best)


class TrueTotalAuto(Auto):
    """Auto choosing the algorithm from the true total instead of the noisy one (a decision that reads the data
    without paying for it)."""

    name = "mutant-auto-choice-on-true-total"
    flip_pair = "auto"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        self.true_total = float(counts.sum())
        return super().run(counts, budget, columns)

    def choose(self, shape, epsilon, noisy_total, columns=None, total_sd=0.0) -> dict:
        return super().choose(shape, epsilon, self.true_total, columns, total_sd)


MUTANTS = [HalfScaleIdentity, ShrunkScaleIdentity, HeightForgottenTree, OverspentTree, TotalForgottenPrivelet,
           UnweightedNominalPrivelet, TrueCountDPCube, TrueCountKDTree,
           ArgmaxStructureFirst, TrueTotalAuto]


# -- zCDP mutants: they run on a ρ-zCDP budget (discrete Gaussian noise) -----------------------------------------


class _ShrunkGaussian:
    """Mixed into a zCDP budget: every discrete Gaussian draw uses ``variance_factor`` times the σ² the kernel
    computed (the bug), while the record and the trace keep the stated σ²."""

    variance_factor = Fraction(1)

    def _gaussian_noise(self, sigma2, shape):
        return super()._gaussian_noise(Fraction(sigma2) * self.variance_factor, shape)


class _UnderstatedL2:
    """Mixed into a zCDP budget: every stated squared L2 sensitivity is divided by ``l2_shrink`` (the bug)."""

    l2_shrink = Fraction(1)

    def gaussian_weighted(self, answers, relative, l2_squared, amount, what, composition):
        return super().gaussian_weighted(answers, relative, Fraction(l2_squared) / self.l2_shrink, amount, what,
                                         composition)


def _with_bug(budget: PrivacyBudget, mixin: type, **attributes) -> PrivacyBudget:
    """``budget`` itself with ``mixin`` put in front of its class (it keeps its bits, trace and repetitions;
    its children inherit the bug)."""
    budget.__class__ = type(f"{mixin.__name__.strip('_')}{type(budget).__name__}", (mixin, type(budget)), attributes)
    return budget


class _ShrunkResidual:
    """Mixed into a zCDP budget: the residual measurement named ``target`` draws its discrete Gaussian with
    ``variance_factor`` times the s² the kernel computed (the bug), while it is charged its full ρ_A and its
    record and trace state the full σ²."""

    target = ""
    variance_factor = Fraction(1)
    _shrinking = False

    def gaussian_residual(self, marginal, amount, what):
        if what != self.target:
            return super().gaussian_residual(marginal, amount, what)
        self._shrinking = True
        try:
            return super().gaussian_residual(marginal, amount, what)
        finally:
            self._shrinking = False

    def _gaussian_noise(self, sigma2, shape):
        factor = self.variance_factor if self._shrinking else 1
        return super()._gaussian_noise(Fraction(sigma2) * factor, shape)


def shrunk_residual(budget: PrivacyBudget, what: str, variance_factor) -> PrivacyBudget:
    """``budget`` (a zCDP budget) itself, turned into one whose residual measurement named ``what`` draws its noise
    with ``variance_factor`` times the variance it states and is charged for (its children inherit the bug; the
    residual marginal-set mutant of residual_cases.py uses it)."""
    return _with_bug(budget, _ShrunkResidual, target=what, variance_factor=Fraction(variance_factor))


class ShrunkSigmaGaussianIdentity(Identity):
    """Identity on a zCDP budget whose discrete Gaussian has σ × 0.8 (σ² × 0.64): a slip in the sampler's
    variance parameter (e.g. σ passed where σ² belongs, at σ near 1).  It spends ρ/0.64 = 1.5625ρ."""

    name = "mutant-gaussian-identity-sigma-0.8"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        return super().run(counts, _with_bug(budget, _ShrunkGaussian, variance_factor=Fraction(16, 25)), columns)


class UnsquaredL2Tree(H):
    """A binary tree on a zCDP budget whose levels are accounted as if ρ composed like a norm: its L2
    sensitivity √h (h measured levels, one node each changed by one record) stated where the squared L2
    sensitivity h belongs, so each level gets the noise of ρ/√h instead of ρ/h and the tree spends ρ√h.
    Audited on 16 cells (h = 4 measured levels below the root): the noise of 2ρ."""

    name = "mutant-gaussian-tree-l2-unsquared"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None):
        levels = self.tree_for(counts.shape)[0].levels - 1  # measured levels (root dropped)
        root = math.isqrt(levels)
        if root * root != levels:
            raise ValueError(f"{self.name} needs a square number of measured levels, got {levels}")
        return super().run(counts, _with_bug(budget, _UnderstatedL2, l2_shrink=Fraction(root)), columns)


#: Mutants audited on ρ-zCDP budgets; each must be caught by the zCDP criterion.
ZCDP_MUTANTS = [ShrunkSigmaGaussianIdentity, UnsquaredL2Tree]
