"""UGrid and AGrid (Qardaji, Yang, Li, "Differentially private grids for geospatial data", ICDE 2013), 2-D tables.

Both cut a table of n₁ × n₂ cells into blocks of nearly equal size: an axis of n cells cut into m blocks (1 ≤ m ≤ n)
has the block edges ⌊i·n/m⌋, i = 0 … m (:func:`block_edges`; sizes differ by at most one cell, a public function of
n and m).  A grid of "M blocks" on n₁ × n₂ cells takes m_i = ⌈n_i·√(M/(n₁n₂))⌉ blocks on axis i (clipped to [1, n_i]):
blocks as near square as the cells allow, m × m on a square table (:func:`grid_blocks`).

UGrid (budget ε; the grid part ε_g = (1 − total_share)·ε; total_share 1/10, c = 5 by default):

    measure:  N̂ = max(1, total + noise) with total_share·ε  (Δ₁ = Δ₂ = 1: one record moves the total by 1)
    select:   M = N̂·ε̃/c blocks, i.e. m = ⌈√(N̂·ε̃/c)⌉ per side on a square table (post-processing of N̂)
    measure:  every block's count + noise at ε_g (disjoint blocks: Δ₁ = Δ₂ = 1, parallel composition)
    infer:    each block's noisy count spread evenly over its cells.
    interval: a cell's covers its block's share (true count ÷ cells): the block's noisy count ± the exact 95 %
              half-width of its noise, over its cells.

AGrid (budget ε; ε_g as above; total_share 1/20, c = 5, α = 1/2, c₂ = 5 by default):

    measure:  N̂ as in UGrid
    select:   level 1: m₁ = max(10, ⌈√(N̂·ε̃/c)/4⌉) per side (M₁ = m₁² blocks)
    measure:  every level-1 block's count + noise at α·ε_g (disjoint: Δ = 1, parallel)
    select:   inside level-1 block j with noisy count N′_j: m₂ = ⌈√(N′_j·(1 − α)·ε̃/c₂)⌉ per side (1 when N′_j ≤ 0),
              i.e. M₂ = m₂² blocks of block j cut as above (post-processing of the level-1 answers)
    measure:  every level-2 block of every level-1 block, in ONE call at (1 − α)·ε_g: the level-2 blocks of all
              level-1 blocks are disjoint (together they tile the table), so Δ₁ = Δ₂ = 1 and parallel composition
    infer:    per level-1 block, the inverse-variance average of its noisy count y and of the sum s of its k
              children's noisy counts, ŷ = (v_s·y + v_y·s)/(v_y + v_s) with v_y, v_s = k·v₂ the noise variances
              (the paper's weight α²m₂²/((1 − α)² + α²m₂²) on y under Laplace), then each child gets its own count
              plus (ŷ − s)/k (the two-level least-squares estimate); each level-2 count spread over its cells.
    interval: a cell's covers its level-2 block's share: the normal interval from the fitted count's exact
              noise variance given the grids, v₂ − v₂²/(v₁ + k·v₂), over the block's cells.

ε̃, the "ε" in the grid-size rules: the paper sizes the grid for noise Lap(1/ε) on every block.  We use the ε whose
continuous Laplace noise has the same standard deviation as the grid step's noise (:func:`equivalent_epsilon`):
with the pure budget's discrete Laplace of scale b = factor/ε_g, ε̃ = 1/b (= ε_g for one record); under zCDP the grid
step's discrete Gaussian has σ = factor/√(2ρ_g) and Laplace of scale b has standard deviation √2·b, so ε̃ = √2/σ =
2√ρ_g/factor.  For AGrid ε̃ is the whole grid part's (ε_g, as the reference uses the whole ε); the level rules
apply α and 1 − α to it.

Privacy: the noisy total costs total_share·ε; the grid step(s) cost ε_g = (1 − total_share)·ε (UGrid: one parallel
measurement; AGrid: α·ε_g + (1 − α)·ε_g, each parallel over disjoint blocks).  Every size and every later query is
a function of earlier noisy answers (post-processing), so the steps compose sequentially to exactly ε (ρ under
zCDP, where each measurement is Gaussian at its share of ρ).  The true total is never read: the reference
implementation (dpcomp_core UG.py / AG.py) reads the true N to size the grid, which leaks; we pay for a noisy one.

Differences from the reference (read for facts only): c = 5 by default, not 10 (measured, see _COMMON_OPTIONS); its blocks are squares of side ⌈√(n₁n₂/M)⌉ with a short last
block; ours are nearly equal (at most one cell apart), with the same number of blocks per axis in the common case.
Its level-2 weight uses m₂² children; ours uses the actual number k of level-2 blocks and the exact noise variances
(the same under Laplace when no axis is clipped).
"""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Estimate, Step
from .privtree import count_halfwidth

__all__ = ["UGrid", "AGrid", "block_edges", "grid_blocks", "grid_boxes", "box_sums", "equivalent_epsilon", "L1",
           "L2_SQUARED"]

L1 = 1  # add/remove of one record changes the total, and the count of exactly one block of a grid, by 1
L2_SQUARED = 1


def _positive_number(value) -> Fraction:
    number = option.exact(value)
    if number is None or number <= 0:
        raise ValueError("must be a positive number (e.g. 10 or 5/2)")
    return number


def block_edges(n: int, m: int) -> np.ndarray:
    """The m + 1 edges ⌊i·n/m⌋ (i = 0 … m) of n cells cut into m nearly equal blocks (1 ≤ m ≤ n): int64, increasing,
    block sizes ⌊n/m⌋ or ⌈n/m⌉.  Public: a function of n and m only."""
    if not 1 <= m <= n:
        raise ValueError(f"cannot cut {n} cells into {m} blocks")
    return (np.arange(m + 1, dtype=np.int64) * n) // m


def grid_blocks(shape: tuple[int, int], blocks: float) -> tuple[int, int]:
    """Blocks per axis for a grid of about ``blocks`` (M, a float ≥ 0) near-square blocks on ``shape``:
    m_i = ⌈n_i·√(M/(n₁n₂))⌉ clipped to [1, n_i]; m × m with m = ⌈√M⌉ on a square table."""
    n1, n2 = shape
    side = math.sqrt(max(blocks, 0.0) / (n1 * n2))  # blocks per cell along an axis
    # the 1e-9 keeps an exact integer (√M = 10) from rounding up through float error
    return tuple(int(min(n, max(1, math.ceil(n * side - 1e-9)))) for n in (n1, n2))


def equivalent_epsilon(budget: PrivacyBudget, amount) -> float:
    """The ε̃ of the grid-size rules for a measurement of one-record Δ = 1 bought with ``amount`` of ``budget``: the
    ε whose continuous Laplace noise Lap(1/ε̃) has the standard deviation of that measurement's noise (module
    docstring).  Public: it depends on the budget's definition, factor and the amount only."""
    if budget.noise == "gaussian":
        return math.sqrt(2) / budget.gaussian_sigma(amount)  # discrete Gaussian σ = factor·Δ₂/√(2ρ)
    return budget.inverse_scale(L1, amount)  # 1/b, discrete Laplace scale b = factor·Δ₁/ε


def box_sums(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact int64 sums of a 2-D ``counts`` over the boxes [lo, hi) (rows (n, 2)), by a summed-area table."""
    table = np.pad(counts.astype(np.int64), [(1, 0), (1, 0)]).cumsum(axis=0).cumsum(axis=1)
    return (table[hi[:, 0], hi[:, 1]] - table[lo[:, 0], hi[:, 1]]
            - table[hi[:, 0], lo[:, 1]] + table[lo[:, 0], lo[:, 1]])


def grid_boxes(lo: tuple[int, int], hi: tuple[int, int], per_axis: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The boxes (lo, hi rows, row-major) of the box [lo, hi) cut into per_axis[0] × per_axis[1] nearly equal blocks."""
    e0 = lo[0] + block_edges(hi[0] - lo[0], per_axis[0])
    e1 = lo[1] + block_edges(hi[1] - lo[1], per_axis[1])
    a0, a1 = np.meshgrid(np.arange(per_axis[0]), np.arange(per_axis[1]), indexing="ij")
    a0, a1 = a0.ravel(), a1.ravel()
    return (np.stack([e0[a0], e1[a1]], axis=1), np.stack([e0[a0 + 1], e1[a1 + 1]], axis=1))


def _grids_in_boxes(lo: np.ndarray, hi: np.ndarray, per_axis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every box [lo_j, hi_j) cut into per_axis[j, 0] × per_axis[j, 1] nearly equal blocks, in one pass: (lo, hi,
    owner), the blocks of box 0 first, each box's row-major, as :func:`grid_boxes` box by box."""
    a, b = per_axis[:, 0].astype(np.int64), per_axis[:, 1].astype(np.int64)
    count = a * b
    owner = np.repeat(np.arange(lo.shape[0]), count)
    local = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    r, c = local // b[owner], local % b[owner]
    h0, h1 = (hi[:, 0] - lo[:, 0])[owner], (hi[:, 1] - lo[:, 1])[owner]
    a_o, b_o = a[owner], b[owner]
    base0, base1 = lo[owner, 0], lo[owner, 1]
    out_lo = np.stack([base0 + (r * h0) // a_o, base1 + (c * h1) // b_o], axis=1)
    out_hi = np.stack([base0 + ((r + 1) * h0) // a_o, base1 + ((c + 1) * h1) // b_o], axis=1)
    return out_lo, out_hi, owner


def _owner(shape: tuple[int, int], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each cell's box index (int64, of ``shape``), where the boxes [lo, hi) tile the table."""
    # box i's index added at its corners by inclusion-exclusion (int64), then summed up both axes; since the boxes
    # tile the table every cell receives the index of its one box
    marks = np.zeros((shape[0] + 1, shape[1] + 1), dtype=np.int64)
    index = np.arange(lo.shape[0], dtype=np.int64)
    np.add.at(marks, (lo[:, 0], lo[:, 1]), index)
    np.add.at(marks, (lo[:, 0], hi[:, 1]), -index)
    np.add.at(marks, (hi[:, 0], lo[:, 1]), -index)
    np.add.at(marks, (hi[:, 0], hi[:, 1]), index)
    return marks.cumsum(axis=0).cumsum(axis=1)[:shape[0], :shape[1]]


def _spread(shape: tuple[int, int], lo: np.ndarray, hi: np.ndarray, block_values: np.ndarray) -> np.ndarray:
    """A float table of ``shape`` with each box's value spread evenly over its cells (the boxes tile the table)."""
    per_cell = np.asarray(block_values, dtype=np.float64) / np.prod(hi - lo, axis=1)
    return per_cell[_owner(shape, lo, hi)]


def _block_intervals(shape: tuple[int, int], lo: np.ndarray, hi: np.ndarray, variance: np.ndarray,
                     halfwidth: np.ndarray | None = None) -> dict:
    """The interval fields of an Estimate that spreads each block's estimated count evenly over its cells:
    ``groups`` (each cell's block) and, per cell, the block count's ``variance`` (and ``halfwidth``, if given)
    divided by k² (by k), k the block's cells."""
    owner = _owner(shape, lo, hi)
    k = np.prod(hi - lo, axis=1).astype(np.float64)
    out = {"groups": owner, "variance": (np.asarray(variance, dtype=np.float64) / (k * k))[owner]}
    if halfwidth is not None:
        out["halfwidth"] = (np.asarray(halfwidth, dtype=np.float64) / k)[owner]
    return out


class _Grid(Algorithm):
    data_adaptive = True  # the grid's size depends on the noisy total

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2:
            raise UsageError(f"algorithm '{self.name}' works on tables of exactly 2 columns, got {len(shape)}")
        if any(n < 1 for n in shape):
            raise UsageError(f"algorithm '{self.name}' needs at least one cell on every axis")

    def noisy_total(self, counts: np.ndarray, part: PrivacyBudget) -> int:
        """N̂ = max(1, total + noise), paid with all of ``part`` (Δ₁ = Δ₂ = 1)."""
        noisy, _ = part.measure(np.array([counts.sum(dtype=np.int64)]), L1, L2_SQUARED, part.amount,
                                "the table's total (sizes the grid)", composition="one query")
        return max(1, int(noisy[0]))


# Defaults measured on 2-D DPBench (ε = 0.1, scales 1e3 and 1e5, two seeds of 2 samples × 2 runs): c = 5 rather
# than the paper's 10 (UGrid with c = 10: 1.06-1.28 × the reference's UGrid error; with c = 5: 0.82-0.92; AGrid
# 0.96-0.99 against 0.95-0.96), total share 1/10 for UGrid (0.82-0.87 against 0.83-1.00 at 1/20) and 1/20 for
# AGrid (1/10: 1.03-1.05, 1/50 and 1/20: 0.89-1.02).
_COMMON_OPTIONS = {"c": (Fraction(5), _positive_number)}
_COMMON_HELP = {"c": "grid constant: about N·ε/c blocks (larger c: fewer, larger blocks)",
                "total_share": "share of ε spent on the noisy total that sizes the grid"}


class UGrid(_Grid):
    name = "ugrid"
    summary = ("uniform grid of about √(Nε/c) × √(Nε/c) blocks (c = 5), noisy block counts spread evenly "
               "(Qardaji et al. 2013); 2 columns, small counts")
    options = {**_COMMON_OPTIONS, "total_share": (Fraction(1, 10), option.fraction_between_0_and_1)}
    option_help = dict(_COMMON_HELP)

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        share = self.params["total_share"]
        return [Step("the table's total", "measure", share), Step("every grid block's count", "measure", 1 - share)]

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        c, share = self.params["c"], self.params["total_share"]
        first, grid = budget.split([share, 1 - share])
        n_hat = self.noisy_total(counts, first)
        eps = equivalent_epsilon(grid, grid.amount)
        per_axis = grid_blocks(counts.shape, n_hat * eps / float(c))
        lo, hi = grid_boxes((0, 0), counts.shape, per_axis)
        noisy, record = grid.measure(box_sums(counts, lo, hi), L1, L2_SQUARED, grid.amount,
                                     "every grid block's count (grid sized by the noisy total)")
        values = _spread(counts.shape, lo, hi, noisy.astype(np.float64))
        # A cell's interval covers its block's share: the block counts are measured afresh, independently of the
        # noisy total that sized the grid, so given the grid the exact half-width of one noisy count is exact.
        blocks = np.ones(lo.shape[0])
        return Estimate(values=values,
                        structure={"c": str(c), "total_share": str(share)},
                        choices={"grid": list(per_axis)},
                        **_block_intervals(counts.shape, lo, hi, record.noise_variance * blocks,
                                           count_halfwidth(record) * blocks))


class AGrid(_Grid):
    name = "agrid"
    summary = ("adaptive two-level grid: a coarse grid, then a finer grid inside each coarse block sized by its "
               "noisy count, combined by least squares (Qardaji et al. 2013); 2 columns, small counts")
    options = {**_COMMON_OPTIONS, "total_share": (Fraction(1, 20), option.fraction_between_0_and_1),
               "c2": (Fraction(5), _positive_number),
               "alpha": (Fraction(1, 2), option.fraction_between_0_and_1)}
    option_help = {**_COMMON_HELP, "c2": "level-2 grid constant: about N′·(1 − α)ε/c2 blocks inside a coarse block "
                                         "of noisy count N′",
                   "alpha": "share of the grid budget spent on the coarse (level-1) grid"}

    #: The least number of level-1 blocks per side (the paper's and the reference's 10).
    MIN_LEVEL1 = 10

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        share, alpha = self.params["total_share"], self.params["alpha"]
        return [Step("the table's total", "measure", share),
                Step("every level-1 block's count", "measure", (1 - share) * alpha),
                Step("every level-2 block's count", "measure", (1 - share) * (1 - alpha))]

    def level1_blocks(self, shape: tuple[int, int], n_hat: int, eps: float) -> tuple[int, int]:
        """Level-1 blocks per axis: m₁ = max(10, ⌈√(N̂ε̃/c)/4⌉) per side, as M₁ = m₁² blocks on ``shape``."""
        m1 = max(self.MIN_LEVEL1, math.ceil(math.sqrt(n_hat * eps / float(self.params["c"])) / 4 - 1e-9))
        return grid_blocks(shape, m1 * m1)

    def level2_side(self, noisy_count: int, eps: float) -> int:
        """m₂ = ⌈√(N′(1 − α)ε̃/c₂)⌉ per side for a level-1 block of noisy count N′ (1 when N′ ≤ 0)."""
        if noisy_count <= 0:
            return 1
        alpha, c2 = float(self.params["alpha"]), float(self.params["c2"])
        return max(1, math.ceil(math.sqrt(noisy_count * (1 - alpha) * eps / c2) - 1e-9))

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        share, alpha = self.params["total_share"], self.params["alpha"]
        first, grid = budget.split([share, 1 - share])
        n_hat = self.noisy_total(counts, first)
        eps = equivalent_epsilon(grid, grid.amount)
        level1_part, level2_part = grid.split([alpha, 1 - alpha])

        per_axis = self.level1_blocks(counts.shape, n_hat, eps)
        lo1, hi1 = grid_boxes((0, 0), counts.shape, per_axis)
        y1, rec1 = level1_part.measure(box_sums(counts, lo1, hi1), L1, L2_SQUARED, level1_part.amount,
                                       "every level-1 block's count (grid sized by the noisy total)")

        # level 2: each level-1 block's grid from its noisy count (post-processing); all level-2 blocks tile the
        # table, so one record moves one of them by 1: one parallel measurement at (1 − α)·ε_g
        sides = [self.level2_side(int(v), eps) for v in y1.tolist()]
        block_shapes = (hi1 - lo1).tolist()
        subs = np.array([grid_blocks((n0, n1), side * side) for (n0, n1), side in zip(block_shapes, sides)],
                        dtype=np.int64).reshape(-1, 2)
        lo2, hi2, owner = _grids_in_boxes(lo1, hi1, subs)
        y2, rec2 = level2_part.measure(box_sums(counts, lo2, hi2), L1, L2_SQUARED, level2_part.amount,
                                       "every level-2 block's count (grids sized by the level-1 noisy counts)")

        # infer: per level-1 block, inverse-variance average of its count and its children's sum, the difference
        # spread equally over the children (two-level least squares)
        v1, v2 = float(rec1.noise_variance), float(rec2.noise_variance)
        k = np.bincount(owner, minlength=lo1.shape[0]).astype(np.float64)
        s = np.bincount(owner, weights=y2.astype(np.float64), minlength=lo1.shape[0])
        vs = k * v2
        combined = (vs * y1.astype(np.float64) + v1 * s) / (v1 + vs)
        fitted = y2.astype(np.float64) + ((combined - s) / k)[owner]
        values = _spread(counts.shape, lo2, hi2, fitted)
        # A cell's interval covers its level-2 block's share.  Given the grids, a fitted block count is
        # y₂ + a·(y₁ − s)/k with a = k·v₂/(v₁ + k·v₂), whose noise variance is v₂ − v₂²/(v₁ + k·v₂) (k·v₂·v₁/(v₁ + k·v₂)
        # summed over a level-1 block's children: the least-squares variance).  The level-1 noise that sized the
        # level-2 grids is also in the estimate, so the normal interval from this variance is exact only given the
        # grids as if they were chosen independently; bench/intervals.py measures what it covers.
        fitted_variance = v2 - v2 * v2 / (v1 + k * v2)
        return Estimate(values=values,
                        **_block_intervals(counts.shape, lo2, hi2, fitted_variance[owner]),
                        structure={"c": str(self.params["c"]), "c2": str(self.params["c2"]), "alpha": str(alpha),
                                   "total_share": str(share)},
                        choices={"level1_grid": list(per_axis), "level2_blocks": int(lo2.shape[0]),
                                 "level2_sides": sides})
