"""Hierarchical methods: H (binary ranges), Hb (branching chosen for the domain), quadtree (algorithms.md §3).

    strategy:  a public tree of nested ranges (1-D) or boxes (d-D) over the cells, from the shape and b only
    measure:   every node of each measured level + DLap(1/ε_l); a level partitions the cells, so its L1
               sensitivity is 1 and the levels compose sequentially: Σ_l ε_l = ε
    infer:     exact tree least squares with the levels' noise variances (two passes), then top-down
               non-negativity and integer rounding that keep every parent equal to the sum of its children

Defaults: the root is not measured (its total is recovered from its children, and the saved budget lowers the
error on range queries, algorithms.md §3.1, §3.3); budgets are uniform over levels for ``h``/``hb`` and
geometric (more to the leaves) for ``quadtree`` (Cormode et al. 2012).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..inference import tree_least_squares, tree_nonnegative_integers
from ..privacy import PrivacyBudget
from ..trees import Tree, height_for, product_tree
from . import options as option
from .base import Algorithm, Estimate

__all__ = ["H", "Hb", "QuadTree", "best_branching", "level_weights"]

def best_branching(shape: tuple[int, ...]) -> int:
    """The branching factor per axis that minimises the closed-form error of Qardaji, Yang and Li (PVLDB 2013).

    1-D: (b-1)h³ - 2(b+1)h²/3 with h the least integer with b**h >= n.  d-D (d >= 2), per axis with side
    n = round(N**(1/d)): b^(d-1) (n^(d-1) - 1) h², which is the paper's 2-D expression b (n-1) h² for d = 2 (for
    d >= 3 it is our extension of it).  Integer arithmetic only; ties go to the smaller b.
    """
    d = len(shape)
    cells = int(np.prod(shape))
    if d == 1:
        n = cells
        cost = lambda b, h: 3 * (b - 1) * h**3 - 2 * (b + 1) * h**2  # noqa: E731  (x3 keeps it integral)
    else:
        n = max(2, round(cells ** (1 / d)))
        cost = lambda b, h: b ** (d - 1) * (n ** (d - 1) - 1) * h**2  # noqa: E731
    if n < 2:
        return 2
    best = None
    for b in range(2, min(n, 4096) + 1):
        value = cost(b, height_for(n, b))
        if best is None or value < best[0]:
            best = (value, b)
    return best[1]


def level_weights(measured: list[int], leaf_level: int, split: str, d: int) -> list[Fraction]:
    """Relative budget shares of the ``measured`` levels (the budget splits in proportion to them).

    uniform: equal shares.  geometric: a level i steps above the leaves gets weight 2^(-(d-1) i / 3), which
    minimises the variance of a d-dimensional range query (Cormode et al. 2012; in 1-D, where that is uniform,
    2^(-i/3)).  The irrational weights are rounded to rationals first, so the split itself stays exact.
    """
    if split == "uniform":
        weights = [Fraction(1)] * len(measured)
    else:
        exponent = max(d - 1, 1) / 3
        weights = [Fraction(2 ** (-exponent * (leaf_level - l))).limit_denominator(10**6) for l in measured]
    return weights


class _TreeMethod(Algorithm):
    """Shared plan for every hierarchical method; subclasses fix the tree's branching and budget defaults."""

    default_branching: int | str = 2
    default_split = "uniform"
    options = {
        "branching": (None, option.branching),
        "budget_split": (None, option.choice("uniform", "geometric")),
        "root": ("auto", option.choice("auto", "keep", "drop")),
    }

    def tree_for(self, shape: tuple[int, ...]) -> tuple[Tree, int]:
        b = self.params["branching"] or self.default_branching
        if b == "auto":
            b = best_branching(shape)
        return product_tree(shape, b), b

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # select: the public tree and the levels to measure
        shape = counts.shape
        tree, b = self.tree_for(shape)
        keep_root = self.params["root"] == "keep" or tree.levels == 1
        measured = list(range(0 if keep_root else 1, tree.levels))
        split = self.params["budget_split"] or self.default_split
        level_budgets = budget.split(level_weights(measured, tree.levels - 1, split, len(shape)))

        # measure: each level's node sums (a level partitions the cells: Δ = 1)
        sums = tree.level_sums(counts)
        noisy: list[np.ndarray | None] = [None] * tree.levels
        variances: list[float] = [math.inf] * tree.levels
        for level, part in zip(measured, level_budgets):
            noisy[level], record = part.laplace(
                sums[level], 1, part.amount, f"tree level {level} ({tree.sizes[level]} nodes)",
                composition="parallel over the level's disjoint nodes; levels add up sequentially")
            variances[level] = record.noise_variance

        # infer: tree least squares, then top-down non-negative integers
        fit = tree_least_squares(tree, noisy, variances)
        leaves = fit.values[-1]
        return Estimate(
            values=leaves.reshape(leaves.shape[:-1] + shape),
            variance=fit.variances[-1].reshape(shape),
            total=fit.values[0][..., 0] if leaves.ndim > 1 else float(fit.values[0][0]),
            integers=lambda: tree_nonnegative_integers(tree, fit),
            structure={"branching": b, "root_measured": keep_root, "budget_split": split, **tree.describe()},
        )


class H(_TreeMethod):
    name = "h"
    summary = "binary tree of ranges with least-squares consistency (Hay et al. 2010); good for range queries"
    default_branching = 2


class Hb(_TreeMethod):
    name = "hb"
    summary = "tree of ranges with the branching chosen for the domain (Qardaji et al. 2013); range queries"
    default_branching = "auto"


class QuadTree(_TreeMethod):
    name = "quadtree"
    summary = "quadtree (2 splits per axis) with geometric level budgets (Cormode et al. 2012); 2-D ranges"
    default_branching = 2
    default_split = "geometric"
