"""Hierarchical methods: H (binary ranges), Hb (branching chosen for the domain), quadtree (docs/algorithms.md §3).

    strategy:  a public tree of nested ranges (1-D) or boxes (d-D) over the cells, from the shape and b only
    measure:   every node of each measured level + the budget's noise for linear queries: a level partitions
               the cells, so its L1 and squared L2 sensitivities are both 1, and the levels compose
               sequentially by the split: DLap(1/ε_l) with Σ_l ε_l = ε (pure ε), or a discrete Gaussian of
               variance 1/(2ρ_l) with Σ_l ρ_l = ρ (zCDP; with uniform shares the whole tree has Δ₂² = h)
    infer:     exact tree least squares with the levels' noise variances (two passes), then top-down
               non-negativity and integer rounding that keep every parent equal to the sum of its children

Defaults: the root is not measured (its total is recovered from its children, and the saved budget lowers the
error on range queries, docs/algorithms.md §3.1, §3.3); budgets are uniform over levels for ``h``/``hb`` and
geometric (more to the leaves) for ``quadtree`` (Cormode et al. 2012); Hb's branching is the closed form's,
except 4 per axis for 2-D tables under pure ε, where the released table is more accurate with it
(:func:`released_branching`).

Under zCDP (``budget.noise == "gaussian"``) a level costs √h, not h, in noise standard deviation, so the choices
that depend on the noise are re-derived for L2 (docs/algorithms.md §3.3, §8):

* Hb's branching minimises the L2 version of Qardaji et al.'s cost (:func:`best_branching`): the same count of
  nodes a range query needs, times a per-node variance of h (Δ₂² = h) instead of h² (Δ₁² = h²).
* Geometric level shares: with c_l nodes of level l cut by a query and variance 1/(2ρ_l) per node, minimising
  Σ_l c_l/ρ_l subject to Σ_l ρ_l = ρ gives ρ_l ∝ √c_l (Lagrange), against ε_l ∝ c_l^(1/3) for Laplace, whose
  variance is 2/ε_l²; with c_l ∝ 2^((d−1)i) at i steps above the leaves the weight is 2^(−(d−1)i/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, partial

import numpy as np

from ..inference.measurements import Measurement, by_query, pooled_total
from ..inference.nonnegative import tree_least_squares, tree_nonnegative_integers
from ..privacy import PrivacyBudget
from .strategies.trees import Tree, height_for, product_tree, range_tree
from . import options as option
from .base import Algorithm, Estimate, Step

__all__ = ["H", "Hb", "QuadTree", "best_branching", "released_branching", "level_weights", "l2_range_error",
           "with_root_measurement", "TreePlan", "level_query", "level_inputs"]

#: One record lies in exactly one node of a level and changes its sum by 1.
LEVEL_L1 = 1
LEVEL_L2_SQUARED = 1

def best_branching(shape: tuple[int, ...], noise: str = "laplace") -> int:
    """The branching factor per axis that minimises the closed-form error of Qardaji, Yang and Li (PVLDB 2013).

    1-D: (b-1)h³ - 2(b+1)h²/3 with h the least integer with b**h >= n.  d-D (d >= 2), per axis with side
    n = round(N**(1/d)): b^(d-1) (n^(d-1) - 1) h², which is the paper's 2-D expression b (n-1) h² for d = 2 (for
    d >= 3 it is our extension of it).  Integer arithmetic only; ties go to the smaller b.

    ``noise="gaussian"`` (zCDP): the costs are the number of nodes a query needs times the per-node noise
    variance, which is ∝ Δ₁² = h² under Laplace and ∝ Δ₂² = h under the Gaussian, so both costs are divided by
    h: (b-1)h² - 2(b+1)h/3 (1-D) and b^(d-1) (n^(d-1) - 1) h (d-D).  This picks b = 4 at n = 256 ... 4096,
    where the exact GLS errors of docs/algorithms.md §8 put H₄ within 2.5 % (n = 1024) and 4 % (n = 4096) of the
    best tree, H₂, and 1.4 times below H₁₆ (the pure-ε choice).
    """
    if noise not in ("laplace", "gaussian"):
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    if noise == "gaussian" and len(shape) == 1 and 2 <= int(shape[0]) <= EXACT_L2_CELLS:
        n = int(shape[0])
        errors = {b: l2_range_error(n, b) for b in range(2, min(n, L2_CANDIDATES) + 1)}
        return min(errors, key=lambda b: (round(errors[b], 9), b))
    power = 3 if noise == "laplace" else 2  # the 1-D cost's leading power of h
    d = len(shape)
    cells = int(np.prod(shape))
    if d == 1:
        n = cells
        cost = lambda b, h: 3 * (b - 1) * h**power - 2 * (b + 1) * h ** (power - 1)  # noqa: E731  (x3: integral)
    else:
        n = max(2, round(cells ** (1 / d)))
        cost = lambda b, h: b ** (d - 1) * (n ** (d - 1) - 1) * h ** (power - 1)  # noqa: E731
    if n < 2:
        return 2
    best = None
    for b in range(2, min(n, 4096) + 1):
        value = cost(b, height_for(n, b))
        if best is None or value < best[0]:
            best = (value, b)
    return best[1]


#: Hb's branching per axis for 2-D tables under pure ε (:func:`released_branching`).
RELEASED_BRANCHING_2D = 4


def released_branching(shape: tuple[int, ...], noise: str = "laplace") -> int:
    """The branching per axis Hb uses: :func:`best_branching`, except for 2-D tables under pure ε, which get
    ``RELEASED_BRANCHING_2D`` = 4 (16 children a node).  Public: a function of the shape and the noise only.

    Why: the closed form minimises the variance of the least-squares estimate, but what the steward receives is
    that estimate made non-negative and whole top-down, and on sparse tables that step removes much of the
    leaves' noise.  For 2-D tables the released error is lowest at b = 3–4, not at the closed form's 7–12.
    Measured on the DPBench 2-D data summed into 16² … 256² cells, ε = 0.1, 2000 random rectangles, mean ratio
    to the best branching per data set (4 samples × 2 runs; seed 1, not the held-out one):

    ======  =====================  =====================  ==================
    side    1e3 (b=4 / formula)    1e5 (b=4 / formula)    1e7 (b=4 / formula)
    ======  =====================  =====================  ==================
    16      1.15 / 1.15 (b=4)      1.18 / 1.18            1.15 / 1.15
    32      1.47 / 1.58 (b=6)      1.21 / 1.22            1.17 / 1.22
    64      1.54 / 1.52 (b=8)      1.15 / 1.49            1.14 / 1.33
    128     2.25 / 2.79 (b=12)     1.09 / 1.34            1.05 / 1.47
    256     2.68 / 2.39 (b=7)      1.02 / 1.24            1.04 / 1.15
    ======  =====================  =====================  ==================

    and at ε = 1 (sides 64 / 128 / 256, scale 1e5): 1.12 / 1.07 / 1.05 against 1.35 / 1.51 / 1.27.  The
    least-squares estimate alone still prefers the closed form (at 256², b = 4 is 1.23× b = 8 before the
    non-negative step).  At 1e3 no tree does well in 2-D and auto picks a data-adaptive algorithm there.
    The price is on single cells: more levels share ε, so each cell is noisier (on the same grid, cell error
    1.0–1.6× and one-way marginals 1.0–1.3× the closed form's, most at high signal); Hb is a method for
    ranges, and auto gives the cells workload identity wherever hb would not win.  1-D keeps the closed form
    (its trees are narrower for the same cells); zCDP keeps its own rule."""
    if noise == "laplace" and len(shape) == 2:
        return RELEASED_BRANCHING_2D
    return best_branching(shape, noise)


#: Up to this many cells (1-D) the Gaussian branching is chosen from exact errors (half a second at the limit; O(n²)).
EXACT_L2_CELLS = 1024
#: The branchings compared exactly; under L2 errors grow with b beyond 3 or 4 (docs/algorithms.md §8: H₁₆, H₃₂ worse).
L2_CANDIDATES = 8


@lru_cache(maxsize=256)
def l2_range_error(n: int, b: int) -> float:
    """The exact average variance over all n(n+1)/2 ranges of the GLS estimate of a b-ary range tree over n cells,
    root not measured, every other level measured with variance h (Δ₂² = h: ρ split uniformly over h levels),
    per unit σ² (σ² = 1/(2ρ)).

    Σ_k v_k ‖W L e_k‖² / |W| over the measured nodes k, with L the (linear) tree least squares: each node's unit
    noise is pushed through :func:`~dphist.inference.nonnegative.tree_least_squares` in batches, and ‖W z‖² = m·Σ(D − D̄)²
    over the prefix sums D of z (m = n + 1).  O(nodes · n) time."""
    tree = range_tree(n, b)
    levels = tree.levels
    measured = list(range(1 if levels > 1 else 0, levels))
    h = len(measured)
    variances = [math.inf] * levels
    for level in measured:
        variances[level] = float(h)
    total = 0.0
    chunk = max(1, 2**21 // n)  # about 16 MiB of float64 per batch of leaves
    for level in measured:
        size = tree.sizes[level]
        for start in range(0, size, chunk):
            k = min(chunk, size - start)
            noisy: list[np.ndarray | None] = [None] * levels
            for other in measured:
                noisy[other] = np.zeros((k, tree.sizes[other]))
            noisy[level][np.arange(k), start + np.arange(k)] = 1.0
            leaves = tree_least_squares(tree, noisy, variances).values[-1]
            prefix = np.zeros((k, n + 1))
            np.cumsum(leaves, axis=1, out=prefix[:, 1:])
            prefix -= prefix.mean(axis=1, keepdims=True)
            total += h * (n + 1) * float(np.einsum("ij,ij->", prefix, prefix))
    return total / (n * (n + 1) / 2)


def level_weights(measured: list[int], leaf_level: int, split: str, d: int, noise: str = "laplace") -> list[Fraction]:
    """Relative budget shares of the ``measured`` levels (the budget splits in proportion to them).

    uniform: equal shares.  geometric: a level i steps above the leaves gets weight 2^(-(d-1) i / 3), which
    minimises the variance of a d-dimensional range query (Cormode et al. 2012; in 1-D, where that is uniform,
    2^(-i/3)).  Under ``noise="gaussian"`` the shares are of ρ and the weight is 2^(-(d-1) i / 2) (ρ_l ∝ √c_l,
    see the module docstring; in 1-D 2^(-i/2)).  The irrational weights are rounded to rationals first, so the
    split itself stays exact.
    """
    if split == "uniform":
        weights = [Fraction(1)] * len(measured)
    else:
        exponent = max(d - 1, 1) / (3 if noise == "laplace" else 2)
        weights = [Fraction(2 ** (-exponent * (leaf_level - l))).limit_denominator(10**6) for l in measured]
    return weights


class _TreeMethod(Algorithm):
    """Shared plan for every hierarchical method; subclasses fix the tree's branching and budget defaults."""

    default_branching: int | str = 2
    default_split = "uniform"
    total_refit = "one more measurement of the tree's root (least squares)"
    options = {
        "branching": (None, option.branching),
        "budget_split": (None, option.choice("uniform", "geometric")),
        "root": ("auto", option.choice("auto", "keep", "drop")),
    }

    def tree_for(self, shape: tuple[int, ...], noise: str = "laplace") -> tuple[Tree, int]:
        """The public tree for ``shape`` and its branching (chosen for the noise when it is "auto")."""
        b = self.params["branching"] or self.default_branching
        if b == "auto":
            b = released_branching(shape, noise)
        return product_tree(shape, b), b

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """One measurement per measured level of the public tree (Δ = 1 each), at its share of the levels."""
        tree, _ = self.tree_for(shape, noise)
        keep_root = self.params["root"] == "keep" or tree.levels == 1
        measured = list(range(0 if keep_root else 1, tree.levels))
        weights = level_weights(measured, tree.levels - 1, self.params["budget_split"] or self.default_split,
                                len(shape), noise)
        total = sum(weights, Fraction(0))
        return [Step(f"tree level {level}", "measure", w / total, Fraction(LEVEL_L1), Fraction(LEVEL_L2_SQUARED))
                for level, w in zip(measured, weights)]

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # select: the public tree and the levels to measure
        shape = counts.shape
        noise = budget.noise
        tree, b = self.tree_for(shape, noise)
        keep_root = self.params["root"] == "keep" or tree.levels == 1
        measured = list(range(0 if keep_root else 1, tree.levels))
        split = self.params["budget_split"] or self.default_split
        level_budgets = budget.split(level_weights(measured, tree.levels - 1, split, len(shape), noise))

        # measure: each level's node sums (a level partitions the cells: Δ₁ = Δ₂² = 1 per level)
        sums = tree.level_sums(counts)
        measurements = []
        for level, part in zip(measured, level_budgets):
            noisy, record = part.measure(
                sums[level], LEVEL_L1, LEVEL_L2_SQUARED, part.amount, f"tree level {level} ({tree.sizes[level]} nodes)",
                composition="parallel over the level's disjoint nodes; levels add up sequentially")
            measurements.append(Measurement(level_query(level), noisy, record.noise_variance))

        # infer: tree least squares, then top-down non-negative integers
        structure = {"branching": b, "root_measured": keep_root, "budget_split": split, "noise": noise,
                     **tree.describe()}
        return self.infer(TreePlan(tree, shape, structure), tuple(measurements))

    def infer(self, plan: TreePlan, measurements: tuple[Measurement, ...]) -> Estimate:
        """Tree least squares over the measured levels (a total measured elsewhere: one more measurement of the
        root), with the tree's top-down non-negative integers.  Post-processing."""
        noisy, variances, refitted = level_inputs(plan.tree.levels, measurements)
        structure = plan.structure
        if refitted:
            structure = {**structure, "root_measured": True,
                         "root_also_from": "an earlier noisy total (least squares)"}
        fit = tree_least_squares(plan.tree, noisy, variances)
        leaves = fit.values[-1]
        return Estimate(
            values=leaves.reshape(leaves.shape[:-1] + plan.shape),
            variance=fit.variances[-1].reshape(plan.shape),
            total=fit.values[0][..., 0] if leaves.ndim > 1 else float(fit.values[0][0]),
            integers=partial(tree_nonnegative_integers, plan.tree, fit.values),
            structure=structure,
            plan=plan,
            measurements=measurements,
        )


@dataclass(frozen=True, eq=False)
class TreePlan:
    """What a tree method's run selected, all public (the shape, the options and the noise kind): the tree over
    the cells, the table's shape and the report's entries for the strategy."""

    tree: Tree
    shape: tuple[int, ...]
    structure: dict


def level_query(level: int) -> tuple[str, int]:
    """The query of a measurement of every node of one level of a tree (level 0: the root)."""
    return ("tree level", level)


def level_inputs(levels: int, measurements) -> tuple[list, list, bool]:
    """The inputs of :func:`~dphist.inference.nonnegative.tree_least_squares` for a tree of ``levels`` levels
    from ``measurements``: each level's noisy sums (None where not measured) and noise variances (inf there),
    with the measurements of the table's total (:func:`~dphist.inference.measurements.pooled_total`) folded into
    the root (:func:`with_root_measurement`); and whether there were any."""
    noisy: list[np.ndarray | None] = [None] * levels
    variances: list[float] = [math.inf] * levels
    for query, measurement in by_query(measurements).items():
        noisy[query[1]], variances[query[1]] = measurement.values, measurement.variance
    total = pooled_total(measurements)
    if total is not None:
        noisy, variances = with_root_measurement(noisy, variances, total.values, total.variance)
    return noisy, variances, total is not None


def with_root_measurement(noisy: list, variances: list, total: float, variance: float) -> tuple[list, list]:
    """The levels' noisy sums and noise variances with one more independent measurement of the root, ``total``
    of noise variance ``variance``: it becomes the root's measurement, or is combined with the root's own by
    inverse variance (the same least-squares fit as two measurements of one node).  Post-processing."""
    noisy, variances = list(noisy), list(variances)
    lead = next(a for a in noisy if a is not None).shape[:-1]  # leading axes of replicated runs, if any
    if noisy[0] is None:
        noisy[0], variances[0] = np.full(lead + (1,), float(total)), float(variance)
    else:
        own = float(variances[0])
        noisy[0] = (noisy[0] / own + float(total) / variance) / (1 / own + 1 / variance)
        variances[0] = 1 / (1 / own + 1 / variance)
    return noisy, variances


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
