"""Data-adaptive partitioning that reads only noisy counts: NoiseFirst (Xu et al. 2012), DPCube (Xiao et al.
2012/2014) and the k-d tree (Xiao, Xiong, Yuan 2010); docs/algorithms.md §4 and §5.2.

All start from one noisy measurement of every cell; everything that decides the partition is computed from
those noisy counts, so it is post-processing and costs nothing more.

    NoiseFirst (1-D)  measure: x̃ = x + DLap(1/ε)                                    (Δ = 1, all of ε)
                      infer:   the v-optimal partition of x̃ into κ buckets for κ = 1..K (dynamic program
                               over a public grid of candidate boundaries), κ* minimising the bias-corrected
                               error T[κ] − (n − 2κ)σ²; release bucket means (or x̃ itself if κ = n is better)
    DPCube (any d)    measure: x̃ = x + DLap(1/ε₁), ε₁ = αε, on blocks of cells of a size from a noisy total
                               N̂ = N + DLap(1/ε₀) (ε₀ = ε/20; block=auto)                (Δ = 1 each)
                      infer:   k-d splits of the table while they lower Ĥ(P₁) + Ĥ(P₂) + 2κ below Ĥ(P) + κ,
                               Ĥ the bias-corrected SSE of x̃, κ = σ₂² the variance of one noisy total
                      measure: every partition's total + DLap(1/ε₂), ε₂ = (1 − α)ε    (Δ = 1: disjoint)
                      infer:   per partition P, z_P = the inverse-variance combination of its two total
                               estimates; release x̃ + (z_P − S̃_P)/|P| (``gls``, unbiased), z_P/|P| evenly
                               (``uniform``), or between the two by λ_P = Ĥ/(Ĥ + (|P| − 1)σ₁²) (``shrink``)
    DPCube, 2-D       (release=refine, the default on two or more axes; α = 1/2) as the reference: the split
                      cost is the raw SSE of x̃ + κ per partition, κ = 3σ₂² (4.5σ₂² at low signal, from N̂, and
                      blocks of at most 9 cells per axis), a box also cut where its noisy blocks differ
                      significantly (bias-corrected SSE > 3 standard deviations); phase 2 measures a grid of m_P =
                      max(F̃_P, 1)·ε₂/10 sub-blocks inside each partition P (F̃_P its phase-1 noisy total; all
                      sub-blocks disjoint: Δ = 1), combined with F̃_P by inverse variance, spread evenly
    DPCube, N̂         (block=auto; and auto's N̂ where auto runs it) the partitions' z_P are independent and
                      cover the table, and N̂ measures their sum independently of both phases: least squares
                      moves each by z_P + v_P·(N̂ − Σz)/(V + Σv) (v_P its variance, V N̂'s; post-processing,
                      free).  The partitions' summed variance grows with their number, so this matters most at
                      high signal: with the same noise, the error fell by 2 / 7 / 34 % at 1e3 / 1e5 / 1e7
                      records in 1-D (DPBench, ε = 0.1) and 3 / 16 / 34 % in 2-D; the k-d tree's, whose median
                      cuts make many more partitions, by 3 / 11 / 39 % and 18 / 69 / 79 %
    k-d tree          as DPCube, but a box is cut at the noisy median of its longest axis while Ĥ > κ
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..errors import UsageError
from ..inference.measurements import Measurement, by_query, pooled_total, total_measurement
from ..inference.nonnegative import with_sum_measurement
from ..privacy import PrivacyBudget, discrete_laplace_variance
from . import options as option
from .base import Algorithm, Ceiling, Estimate, Step

__all__ = ["NoiseFirst", "DPCube", "KDTree", "v_optimal_costs", "dp_ceilings", "dp_work"]


# --------------------------------------------------------------------------------------------------------------
# NoiseFirst


def v_optimal_costs(values: np.ndarray, cuts: np.ndarray, max_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The v-optimal dynamic program over candidate boundaries ``cuts`` (0 = c_0 < ... < c_g = n).

    Returns ``cost[κ-1, j]``, the least total SSE of ``values[:c_j]`` split into κ buckets whose edges are cut
    points (κ = 1..min(max_buckets, g); inf where impossible), and ``back[κ-1, j]``, the previous cut of that
    best split.  O(K g²) time and one g×g float64 matrix of memory (134 MB at g = 4096).
    """
    P = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])[cuts]
    Q = np.concatenate([[0.0], np.cumsum(np.square(values, dtype=np.float64))])[cuts]
    g = cuts.size - 1
    # sse[j, i] = SSE of the bucket [c_i, c_j).  Rows are bucket ends, so every DP step reduces along
    # contiguous memory, and only the lower triangle (i < j) is ever read.
    with np.errstate(divide="ignore", invalid="ignore"):
        sse = P[:, None] - P[None, :]
        np.square(sse, out=sse)
        sse /= (cuts[:, None] - cuts[None, :]).astype(np.float64)
        np.subtract(Q[:, None] - Q[None, :], sse, out=sse)
    np.maximum(sse, 0.0, out=sse)  # float dust below zero
    block = 256
    upper = np.triu_indices(block)
    for a in range(0, g + 1, block):  # bucket [c_i, c_j) needs i < j (only the diagonal blocks are ever read)
        diagonal = sse[a:a + block, a:a + block]
        diagonal[upper[0][upper[1] < diagonal.shape[1]], upper[1][upper[1] < diagonal.shape[1]]] = np.inf
    K = min(max_buckets, g)
    cost = np.full((K, g + 1), np.inf)
    back = np.zeros((K, g + 1), dtype=np.int64)
    cost[0] = sse[:, 0]
    for k in range(1, K):
        for start in range(0, g + 1, block):  # the same blocks as the mask above
            a, b = max(start, k), min(start + block, g + 1)  # ends j >= k only: fewer cuts hold fewer buckets
            if a >= b:
                continue
            total = sse[a:b, :b] + cost[k - 1, :b]
            back[k, a:b] = np.argmin(total, axis=1)
            cost[k, a:b] = total[np.arange(b - a), back[k, a:b]]
    return cost, back


#: The ceilings of the v-optimal dynamic program (NoiseFirst; StructureFirst's scores): O(K·g²) steps of about
#: 2.5 ns (measured on 2 cores: 11 s at K = 256, g = 4096), and one g × g table of float64.
DP_STEPS_LIMIT = 2 * 10**10
DP_BYTES_LIMIT = 1 << 29


def dp_ceilings(buckets: str, count: str) -> tuple[Ceiling, Ceiling]:
    """The time and memory ceilings of :func:`v_optimal_costs` for an algorithm whose option ``buckets`` sets K
    (as ``count``) and whose option ``grid`` sets g."""
    return (Ceiling((buckets, "grid"), "steps", f"K·g² for K = {count} buckets over g = min(grid, cells) candidate "
                                                "boundaries (the v-optimal dynamic program)",
                    DP_STEPS_LIMIT, "about a minute of one core"),
            Ceiling(("grid",), "bytes", "8·g² for the dynamic program's g × g table of float64, g = min(grid, cells)",
                    DP_BYTES_LIMIT, "512 MiB of memory"))


def dp_work(cells: int, grid: int, buckets: int) -> tuple[int, int]:
    """The amounts of :func:`dp_ceilings` for ``buckets`` (K, before the cap at g) on ``cells`` cells."""
    g = min(cells, grid)
    return min(buckets, g) * g * g, 8 * g * g


def _bucket_edges(back: np.ndarray, k: int, g: int) -> list[int]:
    """Cut indices (into the candidate grid) of the best k-bucket split, from the back pointers."""
    edges = [g]
    for level in range(k - 1, 0, -1):
        edges.append(int(back[level, edges[-1]]))
    edges.append(0)
    return edges[::-1]


class NoiseFirst(Algorithm):
    data_adaptive = True
    name = "noisefirst"
    summary = "noisy cells merged into the best buckets for their noise (Xu et al. 2012); one column, small counts"
    options = {"max_buckets": (256, option.positive_int), "grid": (512, option.positive_int)}
    option_help = {"max_buckets": "most buckets the merge may use (the DP costs O(max_buckets · grid²))",
                   "grid": "bucket edges are restricted to this many equal steps over the domain"}

    ceilings = dp_ceilings("max_buckets", "min(max_buckets, g)")
    #: Why a release has no interval (:class:`~dphist.algorithms.base.Estimate`'s ``no_interval``).
    NO_INTERVAL = ("NoiseFirst chooses its buckets from the same noisy cells it then averages (a cell whose noise is "
                   "extreme gets a bucket of its own), so an interval for the chosen buckets would cover far less "
                   "than 95 % (86-91 % measured on DPBench)")

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 1:
            raise UsageError("algorithm 'noisefirst' works on one-column tables")

    def work(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return dp_work(math.prod(shape), self.params["grid"], self.params["max_buckets"])

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        return [Step("every cell", "laplace", Fraction(1))]

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        # measure: every cell, with all of ε
        noisy, record = budget.laplace(counts, 1, budget.amount, "every cell")
        # infer: the bucketing is post-processing of the noisy cells
        sigma2 = record.noise_variance
        n = counts.shape[0]
        # Public candidate boundaries: at most `grid` equal steps over the domain.
        cuts = np.unique(np.round(np.linspace(0, n, min(n, self.params["grid"]) + 1)).astype(np.int64))
        row = noisy.astype(np.float64)
        cost, back = v_optimal_costs(row, cuts, self.params["max_buckets"])
        kappa = np.arange(1, cost.shape[0] + 1)
        error = cost[:, -1] - (n - 2 * kappa) * sigma2  # E[SSE(x̃_B)] = SSE(x_B) + (m − 1)σ²
        best = int(np.argmin(error))
        if error[best] >= n * sigma2:  # the noisy cells themselves are expected to do better
            values, chosen = row, n
        else:
            edges = cuts[_bucket_edges(back, best + 1, cuts.size - 1)]
            sizes = np.diff(edges)
            values, chosen = np.repeat(np.add.reduceat(row, edges[:-1]) / sizes, sizes), best + 1
        # No interval: the buckets are chosen from the very noise they average.  Given the buckets, a bucket's
        # mean would have variance σ²/|B|, but the merge sets apart the cells whose noise is extreme, so those
        # intervals cover far too little (docs/algorithms.md §5.2: 86–91 % pooled on DPBench, a third of the
        # single-cell buckets at low signal).
        return Estimate(values=values,
                        structure={"candidate_boundaries": int(cuts.size), "max_buckets": self.params["max_buckets"]},
                        choices={"buckets": chosen}, no_interval=self.NO_INTERVAL)


# --------------------------------------------------------------------------------------------------------------
# DPCube


class _NoisyTable:
    """Box sums of the noisy table and of its squares, from d-dimensional summed-area tables."""

    def __init__(self, noisy: np.ndarray):
        self.shape = noisy.shape
        self.sat = self._summed(noisy.astype(np.float64))
        self.sat2 = self._summed(np.square(noisy.astype(np.float64)))

    @staticmethod
    def _summed(x: np.ndarray) -> np.ndarray:
        out = np.pad(x, [(1, 0)] * x.ndim)
        for axis in range(x.ndim):
            out = np.cumsum(out, axis=axis)
        return out

    def box(self, table: np.ndarray, lo, hi) -> np.ndarray:
        """Sums over boxes [lo, hi) where lo/hi are sequences of per-axis int arrays (broadcast together)."""
        d = len(self.shape)
        total = 0.0
        for corner in range(1 << d):
            index, sign = [], 1
            for k in range(d):
                if corner >> k & 1:
                    index.append(hi[k])
                else:
                    index.append(lo[k])
                    sign = -sign
            total = total + sign * table[tuple(index)]
        return total

    def heterogeneity(self, lo, hi, sigma2: float) -> np.ndarray:
        """Bias-corrected SSE of the noisy cells of each box: max(0, SSE − (|box| − 1)σ²)."""
        size = np.prod([np.asarray(h) - np.asarray(l) for l, h in zip(lo, hi)], axis=0).astype(np.float64)
        s, s2 = self.box(self.sat, lo, hi), self.box(self.sat2, lo, hi)
        return np.maximum(0.0, s2 - s * s / size - (size - 1) * sigma2)


def _median_cut(noisy: np.ndarray, lo: tuple, hi: tuple, depth: int) -> tuple[int, int] | None:
    """The k-d tree cut of a box: along the box's longest axis (ties: the axis after the last one cut), at the
    median of the noisy mass (negative noisy counts count as 0; the middle if there is no mass)."""
    sizes = [h - l for l, h in zip(lo, hi)]
    if max(sizes) < 2:
        return None
    d = len(sizes)
    axis = max(range(d), key=lambda a: (sizes[a], -((a - depth) % d)))
    box = np.maximum(noisy[tuple(slice(l, h) for l, h in zip(lo, hi))], 0)
    mass = np.cumsum(box.sum(axis=tuple(a for a in range(d) if a != axis)))
    if mass[-1] <= 0:
        return axis, lo[axis] + sizes[axis] // 2
    cut = int(np.searchsorted(mass, mass[-1] / 2)) + 1  # cells [lo, lo + cut) hold at least half the mass
    return axis, lo[axis] + min(max(cut, 1), sizes[axis] - 1)


def _kd_partition(noisy: np.ndarray, sigma2: float, kappa: float, max_depth: int,
                  rule: str = "best", significant: tuple[float, float] | None = None) -> list[tuple[tuple, tuple]]:
    """Greedy k-d splitting of the noisy table (post-processing).  ``rule="best"`` (DPCube): a box is cut where
    the two halves' costs Ĥ + κ add up to the least, while that beats keeping it whole; ``rule="median"`` (k-d
    tree): at the noisy median of its longest axis, while the box's Ĥ exceeds κ.  Returns the leaf boxes."""
    if rule == "best":
        return _best_partition(noisy, sigma2, kappa, max_depth, significant)
    table = _NoisyTable(noisy)
    d = noisy.ndim
    stack = [((0,) * d, tuple(noisy.shape), 0)]
    leaves = []
    while stack:
        lo, hi, depth = stack.pop()
        whole = float(table.heterogeneity([np.array(l) for l in lo], [np.array(h) for h in hi], sigma2)) + kappa
        best = None
        if depth < max_depth:
            cut = _median_cut(noisy, lo, hi, depth)
            if cut is not None:
                axis, c = cut
                left_hi, right_lo = list(hi), list(lo)
                left_hi[axis], right_lo[axis] = c, c
                # Uniformity threshold: split while the box's estimated SSE exceeds what one more noisy total
                # costs, whether or not this particular cut lowers it (the next cut may).
                best = (-np.inf if whole > 2 * kappa else np.inf, axis, c)
        if best is None or best[0] >= whole:
            leaves.append((lo, hi))
            continue
        _, axis, c = best
        left_hi = list(hi)
        left_hi[axis] = c
        right_lo = list(lo)
        right_lo[axis] = c
        stack.append((tuple(right_lo), hi, depth + 1))
        stack.append((lo, tuple(left_hi), depth + 1))
    return leaves


def _best_partition(noisy: np.ndarray, sigma2: float, kappa: float, max_depth: int,
                    significant: tuple[float, float] | None = None) -> list[tuple[tuple, tuple]]:
    """``_kd_partition(rule="best")`` one depth at a time: every box of a depth is scored in one pass of array
    operations (each box's candidates are every cut along every axis, axis by axis; the first least cost wins, as
    box by box).  The leaves come back in the order of a left-first walk (sorted by their path of left/right
    turns), so the result is the box-by-box one exactly.

    ``significant`` = (σ², z): a box is also cut (at its best cut) when its bias-corrected SSE, SSE − (k − 1)σ²
    for k noisy values of noise variance σ², exceeds z·√(5k)·σ², about z standard deviations of that SSE on a
    box of equal true counts (Laplace noise: Var(η²) = E η⁴ − σ⁴ = 5σ⁴).  The cost rule alone is myopic: a
    table whose records sit in a few cells far from its edges gains little from any ONE straight cut, although
    the few cuts that isolate them gain a lot, so it could stay one box."""
    table = _NoisyTable(noisy)
    d = noisy.ndim
    lo = np.zeros((1, d), dtype=np.int64)
    hi = np.asarray(noisy.shape, dtype=np.int64)[None, :]
    paths = [()]
    leaves: list[tuple[tuple, tuple, tuple]] = []
    depth = 0
    while lo.shape[0]:
        whole = table.heterogeneity(list(lo.T), list(hi.T), sigma2) + kappa
        k = lo.shape[0]
        split = np.zeros(k, dtype=bool)
        cut_axis = np.zeros(k, dtype=np.int64)
        cut_at = np.zeros(k, dtype=np.int64)
        if depth < max_depth:
            owners, axes, cuts = [], [], []
            for axis in range(d):  # candidates axis by axis, cut positions in order: the box-by-box tie order
                width = hi[:, axis] - lo[:, axis] - 1  # cuts lo+1 … hi−1
                n = np.maximum(width, 0)
                owner = np.repeat(np.arange(k), n)
                start = np.repeat(np.cumsum(n) - n, n)
                owners.append(owner)
                axes.append(np.full(owner.size, axis))
                cuts.append(lo[owner, axis] + 1 + (np.arange(owner.size) - start))
            owner = np.concatenate(owners)
            if owner.size:
                axis_of = np.concatenate(axes)
                cut = np.concatenate(cuts)
                order = np.argsort(owner, kind="stable")  # per box: axis 0's cuts, then axis 1's, …
                owner, axis_of, cut = owner[order], axis_of[order], cut[order]
                box_lo, box_hi = lo[owner], hi[owner]
                left_hi, right_lo = box_hi.copy(), box_lo.copy()
                rows = np.arange(owner.size)
                left_hi[rows, axis_of] = cut
                right_lo[rows, axis_of] = cut
                cost = (table.heterogeneity(list(box_lo.T), list(left_hi.T), sigma2)
                        + table.heterogeneity(list(right_lo.T), list(box_hi.T), sigma2) + 2 * kappa)
                first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
                least = np.minimum.reduceat(cost, first)
                # the first candidate of each box at its least cost
                hit = np.flatnonzero(cost == least[np.searchsorted(first, rows, side="right") - 1])
                pick = hit[np.r_[True, owner[hit][1:] != owner[hit][:-1]]]
                boxes = owner[pick]
                split[boxes] = cost[pick] < whole[boxes]
                if significant is not None:
                    variance, z = significant
                    k_box = np.prod(hi - lo, axis=1).astype(np.float64)
                    excess = table.heterogeneity(list(lo.T), list(hi.T), variance)  # max(0, SSE − (k − 1)σ²)
                    heterogeneous = excess > z * np.sqrt(5 * k_box) * variance
                    split[boxes] |= heterogeneous[boxes]
                cut_axis[boxes] = axis_of[pick]
                cut_at[boxes] = cut[pick]
        for i in np.flatnonzero(~split):
            leaves.append((paths[i], tuple(int(v) for v in lo[i]), tuple(int(v) for v in hi[i])))
        idx = np.flatnonzero(split)
        left_lo, left_hi = lo[idx], hi[idx].copy()
        right_lo, right_hi = lo[idx].copy(), hi[idx]
        left_hi[np.arange(idx.size), cut_axis[idx]] = cut_at[idx]
        right_lo[np.arange(idx.size), cut_axis[idx]] = cut_at[idx]
        lo = np.concatenate([left_lo, right_lo])
        hi = np.concatenate([left_hi, right_hi])
        paths = [paths[i] + (0,) for i in idx] + [paths[i] + (1,) for i in idx]
        depth += 1
    leaves.sort(key=lambda leaf: leaf[0])
    return [(a, b) for _, a, b in leaves]


def _block(value) -> int | str:
    return "auto" if value in (None, "auto") else option.positive_int(value)


@lru_cache(maxsize=4096)
def _edges(length: int, block: int) -> np.ndarray:
    """Edges of ceil(length / block) near-equal runs of cells covering [0, length) (read-only: cached, since
    the refined release asks for the same few sizes once per partition)."""
    edges = np.unique(np.round(np.linspace(0, length, -(-length // block) + 1)).astype(np.int64))
    edges.flags.writeable = False
    return edges


def _coarsen(table: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    for axis, e in enumerate(edges):
        table = np.add.reduceat(table, e[:-1], axis=axis)
    return table


def _spread(values: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """Each block's value divided evenly over the block's cells (the inverse of :func:`_coarsen` for sums)."""
    for axis, e in enumerate(edges):
        sizes = np.diff(e)
        shape = [1] * values.ndim
        shape[axis] = sizes.size
        values = np.repeat(values / sizes.reshape(shape), sizes, axis=axis)
    return values


class DPCube(Algorithm):
    data_adaptive = True
    name = "dpcube"
    total_refit = "one more measurement of the sum of the partitions' totals (least squares)"
    summary = "noisy cells, k-d partition of them, noisy partition totals, combined (Xiao et al.); small counts"
    # Defaults from the DPBench grid (1-D, ε = 0.1, 18 data sets × 10 runs each).  The unbiased GLS release
    # beats the uniform one: uniform spreading biases every range that ends inside a partition, and along a
    # prefix that bias adds up.  Phase 1 on blocks of cells when the counts are small relative to the noise is
    # what the reference implementation does with its coarse grid; here the block size comes from a noisy total
    # (see ``auto_block``), so every cell is measured when the signal is strong.  There, partitions are small
    # and the two measurements of a small partition combine to one at ε·sqrt(α² + (1 − α)²): hence α = 9/10,
    # which cost nothing measurable at the small scales.
    options = {"alpha": (Fraction(9, 10), option.fraction_between_0_and_1),
               "refine_alpha": (Fraction(1, 2), option.fraction_between_0_and_1), "max_depth": (64, option.positive_int),
               "release": ("auto", option.choice("auto", "uniform", "gls", "shrink", "refine")), "block": ("auto", _block),
               "total_share": (Fraction(1, 20), option.fraction_between_0_and_1),
               "penalty": ("auto", option.positive_number_or_auto), "max_side": ("auto", _block),
               "significance": ("auto", option.choice("auto", "on", "off"))}
    option_help = {"alpha": "share of ε (after the total's) for phase 1; the rest measures the partition totals",
                   "refine_alpha": "the same share under the refine release (2-D default)",
                   "max_depth": "most k-d cuts from the whole table to a partition",
                   "release": "auto (gls on one axis, refine on more) or, inside a partition: refine (a grid of "
                              "sub-blocks measured, its size from the partition's noisy phase-1 total), gls (noisy cells moved to the combined total, unbiased), "
                              "uniform (the total spread evenly) or shrink (between them, per partition)",
                   "block": "phase 1 measures blocks of this many cells per axis (1 = every cell, the paper's "
                            "version), or auto: chosen from a noisy total",
                   "total_share": "with block=auto, the share of ε spent on the noisy total",
                   "penalty": "refine release: the cost of one more partition, in noisy totals' variances, or "
                              "auto: from the noisy total with block=auto (dpcube: rising to 4.5 at low signal; kdtree: 3), "
                              "else 3",
                   "max_side": "with block=auto on two or more axes, the most cells per axis in a phase-1 block, "
                               "or auto (dpcube: 9; kdtree: no cap)",
                   "significance": "refine release (dpcube): also cut a box whose noisy blocks differ by more than "
                                   "3 noise standard deviations (on, off, or auto: on at low signal, from the noisy "
                                   "total with block=auto)"}

    # c = scale · (reference / r)^power cells per block, fitted on the DPBench grid (ε = 0.1 and 1, scales 10³ to
    # 10⁷): one column, c ≈ 256, 16 and 1 at r ≈ 0.024, 2.4 and 244; two columns (sparser tables, larger
    # queries), c ≈ 256, 64, 4 and 1 at r ≈ 0.0015, 0.015, 0.15 and 1.5.  Tables of three or more columns use
    # the two-column rule (not fitted).
    BLOCK_RULE = {1: (16.0, 2.4, 0.6), 2: (4.0, 0.15, 0.9)}
    # Every depth of the k-d splitting scores at most one candidate cut per cell and axis (its boxes partition
    # the table), and a box of side n splits at most n − 1 times along it: max_depth bounds the work only up to
    # Σ(n_i − 1) levels.  The default's 64 levels are about 10^9 on 2^24 cells of one column.
    ceilings = (Ceiling(("max_depth",), "candidate cuts", "min(max_depth, Σ(side − 1)) levels × cells × columns "
                        "(the k-d splitting)", 10**10, "about a minute of one core"),)

    def work(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        levels = min(self.params["max_depth"], sum(n - 1 for n in shape))
        return (levels * math.prod(shape) * len(shape),)

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """A noisy total (block=auto), then phase 1 and phase 2 on the rest (Δ = 1 each), all Laplace."""
        total = self.params["total_share"] if self.params["block"] == "auto" else Fraction(0)
        alpha = self.params["refine_alpha" if self._release(len(shape)) == "refine" else "alpha"]
        rest = 1 - total
        steps = [Step("phase 1: every block of cells", "laplace", rest * alpha),
                 Step("phase 2: every partition's total", "laplace", rest * (1 - alpha))]
        return ([Step("the grand total", "laplace", total)] if total else []) + steps

    # Phase 1 keeps at least this many blocks along every axis (all of an axis's cells when it is shorter), so
    # that it can always split.  Without it a noisy total far below the truth (at 1,000 records and ε = 0.1,
    # N̂ near 0 about once in 300 runs) made one block of the whole table: nothing to split, and the mass of a
    # table whose records sit in one cell was spread over a quarter of it (DPBench ADULT-2D: one run at 0.24,
    # 20 times the others' error).
    MIN_BLOCKS_PER_AXIS = 8
    # On two or more axes, blocks of at most 9 cells per axis (the reference's fixed phase-1 grid has 11).  The
    # rule alone gives 16 × 16 at 1,000 records and ε = 0.1 on 256 × 256, where records that sit in a few cells
    # are spread over whole blocks: on DPBench LOAN-FUNDED-INCOME our error was 1.5 times the reference DPCube's.
    # With the penalty below and the significance cut (SIGNIFICANT_Z), 9 × 9 blocks gave 0.83-0.89 of it there
    # (tuning samples, seeds 7 and 11, 48 runs each), the worst data set 0.88 / 0.93 and the mean 0.73 / 0.73
    # over the 10 data sets (16 × 16 and the fixed penalty: worst 1.61 / 1.48, mean 0.72 / 0.68).
    MAX_SIDE = 9

    @staticmethod
    def signal(noisy_total: float, shape: tuple[int, ...], epsilon: Fraction) -> float:
        """r = max(N̂, 1)·ε/n: the expected count per cell in units of the noise scale, from the noisy total N̂
        (public once measured) and the table's ε per record (ε divided by the protected unit's rows)."""
        return max(float(noisy_total), 1.0) * float(epsilon) / int(np.prod(shape))

    def auto_block(self, noisy_total: float, shape: tuple[int, ...], epsilon: Fraction) -> tuple[int, ...]:
        """Phase-1 block size per axis from the noisy total: with r = :meth:`signal`, blocks of
        c = scale·(reference/r)^power cells (``BLOCK_RULE``), c^(1/d) per axis, 1 when the signal is strong, at
        most ⌈length/8⌉ cells along an axis (``MIN_BLOCKS_PER_AXIS``) and, on two or more axes, at most the
        ``max_side`` option (``MAX_SIDE``: 9)."""
        r = self.signal(noisy_total, shape, epsilon)
        scale, reference, power = self.BLOCK_RULE[min(len(shape), 2)]
        c = scale * (reference / r) ** power
        side = round(c ** (1 / len(shape)))
        cap = self.MAX_SIDE if self.params["max_side"] == "auto" else self.params["max_side"]
        if len(shape) >= 2 and cap is not None:
            side = min(side, cap)
        return tuple(int(min(max(side, 1), -(-length // self.MIN_BLOCKS_PER_AXIS))) for length in shape)

    # The refined release's split penalty in units of σ₂² (2-D): REFINE_PENALTY at r ≥ 0.015, rising log-linearly
    # to REFINE_PENALTY_LOW at r ≤ 0.0015 (r = :meth:`signal`; 256 × 256 at ε = 0.1: 10,000 and 1,000 records).
    # Where a partition's total is a few records in noise of about 30, a split that follows the phase-1 noise
    # costs more than the uniformity it buys: at 1,000 records (tuning samples, 10 data sets, blocks of 11,
    # without the significance cut) penalty 3 / 4.5 / 6 / 9 gave a mean of 0.70 / 0.72 / 0.77 / 0.87 and a worst
    # of 1.13 / 1.03 / 0.93 / 1.09 of the reference's DPCube; with 9-cell blocks and the significance cut 4.5
    # was as good as 6 on the worst data set and better on the mean (seed 7: 0.73 against 0.76).  At 10,000
    # records 3 stays best (mean 0.51 against 0.53 at 4.5 and 0.61 at 6).
    REFINE_PENALTY_LOW = 4.5
    PENALTY_SIGNALS = (0.0015, 0.015)

    def low_signal(self, noisy_total: float, shape: tuple[int, ...], epsilon: Fraction) -> float:
        """How low the signal is, from 0 (r ≥ 0.015) to 1 (r ≤ 0.0015), log-linear between (r = :meth:`signal`):
        it sets the refined release's penalty, and the significance cut is on where it is above 0."""
        low, high = self.PENALTY_SIGNALS
        r = self.signal(noisy_total, shape, epsilon)
        return min(max(math.log(high / r) / math.log(high / low), 0.0), 1.0)

    def auto_penalty(self, noisy_total: float, shape: tuple[int, ...], epsilon: Fraction) -> float:
        """The refined release's split penalty (units of σ₂²) from the noisy total, as :meth:`auto_block`."""
        t = self.low_signal(noisy_total, shape, epsilon)
        return self.REFINE_PENALTY + t * (self.REFINE_PENALTY_LOW - self.REFINE_PENALTY)

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # select: the phase-1 blocks, from a noisy total when the block size is automatic
        if self.params["block"] != "auto":
            return self._two_phases(counts, budget, tuple(min(self.params["block"], n) for n in counts.shape),
                                    self._penalty(), self._significance())
        share = self.params["total_share"]
        for_total, rest = budget.split([share, 1 - share])
        noisy_total, record = for_total.laplace(np.asarray(counts.sum()), 1, for_total.amount,
                                                "the grand total (to choose the phase-1 block size)",
                                                composition="one query")
        per_record = budget.epsilon_per_record(budget.amount)
        block = self.auto_block(float(noisy_total), counts.shape, per_record)
        penalty = self._penalty(self.auto_penalty(float(noisy_total), counts.shape, per_record))
        significance = self._significance(self.low_signal(float(noisy_total), counts.shape, per_record) > 0)
        # infer: the total is independent of both phases, so it joins their least squares (as auto's N̂ does)
        estimate = self.refit(self._two_phases(counts, rest, block, penalty, significance),
                              total_measurement(float(noisy_total), record.noise_variance))
        return dataclasses.replace(estimate, structure={**estimate.structure, **self.OWN_TOTAL})

    def _significance(self, automatic: bool = False) -> bool:
        """Whether the refined release takes the significance cut: the ``significance`` option, else
        ``automatic`` (from a noisy total; off without one); never with the k-d tree's median cuts."""
        if self.split_rule != "best":
            return False
        return {"on": True, "off": False}.get(self.params["significance"], automatic)

    def _penalty(self, automatic: float | None = None) -> float:
        """The refined release's split penalty (units of σ₂²): the ``penalty`` option, else ``automatic`` (from
        a noisy total), else REFINE_PENALTY."""
        if self.params["penalty"] != "auto":
            return float(self.params["penalty"])
        return self.REFINE_PENALTY if automatic is None else automatic

    def _two_phases(self, counts: np.ndarray, rest: PrivacyBudget, block: tuple[int, ...],
                    penalty: float, significance: bool = False) -> Estimate:
        """Phase 1 on blocks of ``block`` cells per axis, the k-d partition (the refined release's split penalty
        ``penalty`` and, if ``significance``, its significance cut), phase 2 and the release, all on ``rest``;
        its plan and measurements are what :meth:`infer` refits with a total measured elsewhere."""
        alpha = self.params["alpha"]
        if self._release(counts.ndim) == "refine":
            alpha = self.params["refine_alpha"]
        first, second = rest.split([alpha, 1 - alpha])
        edges = [_edges(n, b) for n, b in zip(counts.shape, block)]
        coarse = _coarsen(counts, edges)

        # measure: phase 1, every block of cells
        cells, record = first.laplace(coarse, 1, first.amount,
                                      "phase 1: every block of cells (blocks of a size chosen beforehand)")
        sigma1 = record.noise_variance
        sigma2 = discrete_laplace_variance(second.scale(1, second.amount))

        # select: the k-d partition of the noisy blocks (post-processing of phase 1)
        leaves = self.partition(cells, sigma1, sigma2, penalty, significance)
        label = np.zeros(coarse.shape, dtype=np.int64)
        for i, (lo, hi) in enumerate(leaves):
            label[tuple(slice(a, b) for a, b in zip(lo, hi))] = i
        flat = label.ravel()

        phase1 = Measurement(PHASE1, cells, sigma1)
        if self._release(counts.ndim) == "refine":
            return self._refined(counts, phase1, edges, leaves, second, sigma2, block, alpha, penalty, significance)
        # measure: phase 2, every partition's total (partitions are disjoint: one record moves one total by 1)
        totals = np.bincount(flat, weights=coarse.ravel(), minlength=len(leaves)).round().astype(np.int64)
        noisy_totals, _ = second.laplace(totals, 1, second.amount,
                                         "phase 2: the total of every partition (chosen from phase 1)")

        # infer: combine the two estimates of each partition, then spread blocks over their cells
        structure = {"alpha": str(alpha), "release": self._release(counts.ndim),
                     "max_depth": self.params["max_depth"], "block": self.params["block"]}
        plan = PartitionPlan(coarse.shape, tuple(edges), flat, len(leaves), structure,
                             {"partitions": len(leaves), "block": list(block)})
        return self.infer(plan, (phase1, Measurement(PARTITION_TOTALS, noisy_totals, sigma2)))

    def infer(self, plan: PartitionPlan | SubBlockPlan, measurements: tuple[Measurement, ...]) -> Estimate:
        """The release from the noisy blocks of phase 1 and the noisy totals of phase 2 (:meth:`combine`, or
        :func:`refined_release`), the total measured elsewhere (:func:`~dphist.inference.measurements.pooled_total`)
        one more measurement of the sum of the partitions' totals (least squares).  Post-processing."""
        own, total = by_query(measurements), pooled_total(measurements)
        extra = None if total is None else (total.values, total.variance)
        structure = plan.structure if total is None else {**plan.structure, **self.REFITTED}
        total_variance = None if total is None else float(total.variance)
        if isinstance(plan, SubBlockPlan):
            values = refined_release(plan, own[PHASE1], own[SUB_BLOCKS], extra)
            interval = ({"no_interval": self.REFINED_NO_INTERVAL} if self.REFINED_NO_INTERVAL else
                        refined_interval(plan, own[PHASE1].variance, own[SUB_BLOCKS].variance, total_variance))
        else:
            blocks, parts = own[PHASE1], own[PARTITION_TOTALS]
            value = self.combine(blocks.values.ravel().astype(np.float64), plan.labels, plan.partitions,
                                 parts.values, blocks.variance, parts.variance, extra)
            values = _spread(value.reshape(plan.blocks), list(plan.edges))
            interval = self.partition_interval(plan, blocks.variance, parts.variance, total_variance)
        return Estimate(values=values, structure=structure, choices=dict(plan.choices), plan=plan,
                        measurements=measurements, **interval)

    def partition_interval(self, plan: PartitionPlan, sigma1: float, sigma2: float,
                           total_variance: float | None) -> dict:
        """The interval entries of the Estimate (``variance`` and ``groups``, or ``no_interval``) of the release
        from partition totals, given the partition: ``gls`` moves each phase-1 block by its partition's share of
        the combined total's correction (:func:`adjusted_unit_variance`, each block's value spread evenly over
        its cells: the interval covers the block's share); ``uniform`` spreads the combined total over the
        partition's blocks (the partition's share, when its blocks have equal numbers of cells); ``shrink``
        is not linear.  The partition was chosen from the same phase-1 noise that the release reuses, so these
        variances hold for a fixed partition only; the coverage this gives is measured (docs/algorithms.md
        §4)."""
        release = "gls" if self.params["release"] == "auto" else self.params["release"]
        if release == "shrink":
            return {"no_interval": "release=shrink pulls each block towards its partition's mean by a factor read "
                                   "from the noisy blocks, which is not linear in them"}
        k, flat = plan.partitions, plan.labels
        size = np.bincount(flat, minlength=k).astype(np.float64)  # blocks per partition
        combined = size * sigma1 * sigma2 / (size * sigma1 + sigma2)
        cells_in_block = _spread(np.ones(plan.blocks), list(plan.edges))  # 1 / the cells of its block, per cell
        if release == "uniform":
            # each block gets c'_P / |P| of the refitted combined total c'_P (variance v − v²/D)
            if total_variance is not None:
                combined = combined - combined**2 / (total_variance + combined.sum())
            owner = flat[_block_ids(plan.blocks, list(plan.edges))]  # the partition of each cell
            cells = np.bincount(owner.ravel(), minlength=k)
            if np.any(np.abs(cells[owner] * cells_in_block - size[owner]) > 1e-9):
                return {"no_interval": "release=uniform gives each block of a partition an equal part of its "
                                       "total, and its blocks hold unequal numbers of cells, so no cell's value "
                                       "is the partition's share"}
            variance = (combined / size**2)[owner] * cells_in_block**2
            return {"variance": variance, "groups": owner}
        block_variance = adjusted_unit_variance(size, sigma1, sigma2, combined, total_variance)[flat]
        variance = _spread(block_variance.reshape(plan.blocks), list(plan.edges)) * cells_in_block
        groups = None if np.all(cells_in_block == 1) else _block_ids(plan.blocks, list(plan.edges))
        return {"variance": variance, "groups": groups}

    # Why the refined release has no interval.  Its variance for a fixed partition and fixed sub-blocks is exact
    # (:func:`refined_interval`), and those intervals covered 94 % of sub-block shares with the partition held
    # fixed; but the partition and the sub-blocks follow the phase-1 noise that the release averages in (through
    # each partition's phase-1 total), and over whole runs they covered 92.4–93.9 % on DPBench 2-D, data sets
    # down to 91.4 % (docs/algorithms.md §4): not reliably within 93–97.5 %.
    REFINED_NO_INTERVAL: str | None = (
        "the partition and its sub-blocks are chosen from the phase-1 noisy blocks that the release also averages "
        "in, so an interval for the chosen partition covers less than 95 % (92.4-93.9 % measured on DPBench 2-D)")

    # What a refit with a total measured elsewhere (auto's N̂) adds to the structure: the partitions' estimates
    # are independent and cover the table, so N̂ is one more measurement of their sum (least squares).
    REFITTED = {"partition_totals_also_from": "an earlier noisy total (least squares, as a measurement of their sum)"}
    OWN_TOTAL = {"partition_totals_also_from": "the grand total measured for the block size (least squares, as a "
                                               "measurement of their sum)"}

    # Refined release, fitted on the 2-D DPBench sets at ε = 0.1: κ = 3σ₂² against the raw SSE (the
    # reference's 1/ε₂ per partition on cells, in block units at its 11 × 11 blocks and ε₂ = ε/2, is about 3σ₂²);
    # c = 10 records·ε per sub-block as in UGrid.
    REFINE_PENALTY = 3.0
    REFINE_C = 10.0
    # At low signal (``low_signal`` above 0) the refined release also cuts a box whose noisy blocks differ by
    # more than z = 3 standard deviations of their noise (``_best_partition``'s ``significant``).  Without it, 1
    # run in 16 on DPBench SF-CABS-E at 1,000 records kept the whole table as one box (error 6 times the median
    # run); with it the mean error fell by 20 % there (tuning samples).  At high signal almost every box is
    # significantly uneven, and cutting on past the penalty raised the median error on the DPBench grid by 5 to
    # 15 % at 10⁷ records: hence the gate.
    SIGNIFICANT_Z = 3.0

    def _refined(self, counts, phase1, edges, leaves, second, sigma2, block, alpha, penalty, significance=False):
        """Phase 2 of the refined release.  Select (post-processing of phase 1): partition P, with phase-1 noisy
        total F_P, gets m_P = clip(max(F_P, 0)·ε₂/c, 1, |P| cells) sub-blocks, a near-equal grid with sides in
        proportion to P's.  Measure: every sub-block's true count + DLap(1/ε₂), one call (the sub-blocks of all
        partitions are disjoint: Δ₁ = 1 for one record).  Infer: z_P = the inverse-variance combination of the
        sub-blocks' sum (variance m_P·σ₂²) and F_P (variance |P|σ₁², |P| in blocks); each sub-block gets its
        noisy count + (z_P − sum)/m_P, spread evenly over its cells.  Returns the Estimate (table shape)."""
        eps2 = second.inverse_scale(1, second.amount)
        c = self.REFINE_C
        label = np.zeros(counts.shape, dtype=np.int64)
        owner, nblocks = [], []
        nxt = 0
        for i, ((lo, hi), f) in enumerate(zip(leaves, box_sums(phase1.values, leaves))):
            clo = [int(e[a]) for e, a in zip(edges, lo)]
            chi = [int(e[b]) for e, b in zip(edges, hi)]
            sides = [b - a for a, b in zip(clo, chi)]
            area = float(math.prod(sides))
            m = min(max(max(f, 0.0) * eps2 / c, 1.0), area)
            g = [int(min(max(round(L * (m / area) ** (1 / len(sides))), 1), L)) for L in sides]
            runs = [np.diff(_edges(L, -(-L // k))) for L, k in zip(sides, g)]
            count = math.prod(len(r) for r in runs)
            ids = np.arange(nxt, nxt + count).reshape([len(r) for r in runs])
            for axis, r in enumerate(runs):
                ids = np.repeat(ids, r, axis=axis)
            label[tuple(slice(a, b) for a, b in zip(clo, chi))] = ids
            owner += [i] * count
            nxt += count
            nblocks.append(float(math.prod(hi_ - lo_ for lo_, hi_ in zip(lo, hi))))
        flat = label.ravel()
        totals = np.bincount(flat, weights=counts.ravel(), minlength=nxt).round().astype(np.int64)
        noisy, _ = second.laplace(totals, 1, second.amount, "phase 2: sub-blocks of every partition")
        k = len(leaves)
        owner = np.asarray(owner)
        plan = SubBlockPlan(counts.shape, tuple(leaves), owner, flat, np.asarray(nblocks),
                            np.bincount(owner, minlength=k).astype(float), np.bincount(flat, minlength=nxt).astype(float),
                            {"alpha": str(alpha), "release": "refine", "max_depth": self.params["max_depth"],
                             "block": self.params["block"]},
                            {"partitions": k, "block": list(block), "subblocks": int(nxt),
                             "penalty": round(float(penalty), 4), "significance_cut": bool(significance)})
        return self.infer(plan, (phase1, Measurement(SUB_BLOCKS, noisy, sigma2)))

    def combine(self, run: np.ndarray, flat: np.ndarray, k: int, noisy_totals: np.ndarray, sigma1: float,
                sigma2: float, total: tuple[float, float] | None = None) -> np.ndarray:
        """Per block: the estimate from the noisy blocks ``run``, their partition labels ``flat`` and the noisy
        partition totals, by the chosen release (module docstring).  ``total``: (T, V), one more independent
        measurement of the table's total and its noise variance, folded into the partitions' combined totals by
        least squares (:func:`~dphist.inference.nonnegative.with_sum_measurement`)."""
        size = np.bincount(flat, minlength=k).astype(np.float64)  # blocks per partition
        from_cells = np.bincount(flat, weights=run, minlength=k)
        w = size * sigma1 / (size * sigma1 + sigma2)  # inverse-variance weight of the phase-2 total
        combined = w * noisy_totals + (1 - w) * from_cells
        if total is not None:
            combined, _ = with_sum_measurement(combined, size * sigma1 * sigma2 / (size * sigma1 + sigma2), *total)
        release = "gls" if self.params["release"] == "auto" else self.params["release"]  # refine never gets here
        if release == "uniform":
            return (combined / size)[flat]
        if release == "gls":
            return run + ((combined - from_cells) / size)[flat]
        # shrink: λ_P = Ĥ / (Ĥ + (|P| − 1)σ₁²) of each block's deviation from its partition's mean
        deviation = run - (from_cells / size)[flat]
        spread = np.bincount(flat, weights=deviation * deviation, minlength=k)
        noise = (size - 1) * sigma1
        signal = np.maximum(spread - noise, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            keep = np.where(signal > 0, signal / (signal + noise), 0.0)
        return (combined / size)[flat] + keep[flat] * deviation

    split_rule = "best"

    def partition(self, cells: np.ndarray, sigma1: float, sigma2: float, penalty: float | None = None,
                  significance: bool = False):
        """The k-d partition of the phase-1 noisy blocks ``cells``, as a list of boxes (lo, hi); ``penalty``:
        the refined release's cost of a partition in units of σ₂² (None: REFINE_PENALTY); ``significance``: the
        refined release also cuts a box whose blocks differ significantly (``SIGNIFICANT_Z``)."""
        if self._release(cells.ndim) == "refine":
            # Refined release (2-D): the reference's cost, the raw SSE of the noisy blocks (noise included, so
            # noisy regions split towards a grid) plus ``penalty`` noisy totals' variance per partition.
            penalty = self.REFINE_PENALTY if penalty is None else penalty
            significant = (sigma1, self.SIGNIFICANT_Z) if significance else None
            return _kd_partition(cells, 0.0, penalty * sigma2, self.params["max_depth"], self.split_rule,
                                 significant=significant)
        return _kd_partition(cells, sigma1, sigma2, self.params["max_depth"], self.split_rule)

    def _release(self, ndim: int) -> str:
        """The release in force: ``auto`` is gls on one axis, refine on two or more."""
        release = self.params["release"]
        return release if release != "auto" else ("gls" if ndim == 1 else "refine")


#: The queries of DPCube's measurements: the blocks of phase 1, and in phase 2 either every partition's total or
#: the sub-blocks of the refined release.
PHASE1 = "phase-1 blocks"
PARTITION_TOTALS = "phase-2 partition totals"
SUB_BLOCKS = "phase-2 sub-blocks"


@dataclass(frozen=True, eq=False)
class PartitionPlan:
    """What DPCube selected for the release from partition totals (a function of phase 1's noisy blocks and
    public numbers): the shape of the table of ``blocks``, the block ``edges`` per axis, the partition of every
    block (``labels``, C order), the number of ``partitions``, and the report's ``structure`` and ``choices``."""

    blocks: tuple[int, ...]
    edges: tuple[np.ndarray, ...]
    labels: np.ndarray
    partitions: int
    structure: dict
    choices: dict


@dataclass(frozen=True, eq=False)
class SubBlockPlan:
    """What DPCube's refined release selected (a function of phase 1's noisy blocks and public numbers): the
    table's ``shape``, the partitions as boxes of blocks (``leaves``), the partition of every sub-block
    (``owner``), the sub-block of every cell (``labels``, C order), per partition its blocks and its
    sub-blocks, the cells of every sub-block, and the report's ``structure`` and ``choices``."""

    shape: tuple[int, ...]
    leaves: tuple
    owner: np.ndarray
    labels: np.ndarray
    blocks_per_partition: np.ndarray
    subblocks_per_partition: np.ndarray
    cells_per_subblock: np.ndarray
    structure: dict
    choices: dict


def box_sums(cells: np.ndarray, leaves) -> list[float]:
    """The sum of the noisy blocks ``cells`` over each box (lo, hi) of ``leaves``, as floats."""
    return [float(cells[tuple(slice(a, b) for a, b in zip(lo, hi))].sum()) for lo, hi in leaves]


def refined_release(plan: SubBlockPlan, phase1: Measurement, subblocks: Measurement,
                    total: tuple[float, float] | None = None) -> np.ndarray:
    """The refined release's cells (the table's shape): per partition P, z_P = the inverse-variance combination
    of its sub-blocks' noisy sum (variance m_P σ₂²) and its phase-1 noisy total F_P (variance |P| σ₁², |P| in
    blocks), refitted with ``total`` = (T, V), if given, one more measurement of the sum of all z_P
    (:func:`~dphist.inference.nonnegative.with_sum_measurement`); each sub-block gets its noisy count
    + (z_P − sum)/m_P, spread evenly over its cells."""
    sigma1, sigma2 = phase1.variance, subblocks.variance
    k, m, nb = len(plan.leaves), plan.subblocks_per_partition, plan.blocks_per_partition
    noisy = subblocks.values
    s_sub = np.bincount(plan.owner, weights=noisy.astype(float), minlength=k)
    phase1_totals = np.asarray(box_sums(phase1.values, plan.leaves))
    w = nb * sigma1 / (nb * sigma1 + m * sigma2)
    z = w * s_sub + (1 - w) * phase1_totals
    if total is not None:
        # z_P's variance: the inverse-variance combination of m_P σ₂² and |P| σ₁²
        z_variance = m * sigma2 * nb * sigma1 / (m * sigma2 + nb * sigma1)
        z = with_sum_measurement(z, z_variance, *total)[0]
    value = noisy + ((z - s_sub) / m)[plan.owner]
    return (value / plan.cells_per_subblock)[plan.labels].reshape(plan.shape)


def adjusted_unit_variance(m: np.ndarray, unit: float, other: float, combined: np.ndarray,
                           total_variance: float | None) -> np.ndarray:
    """The exact variance of one released unit of a partition P (per partition, an array over them): P's m
    units were measured with independent noise of variance ``unit`` each (their sum S of variance m·unit), P's
    total once more independently (variance ``other``, an array or a number), combined by inverse variance to
    c_P = λS + (1 − λ)O, λ = other/(m·unit + other), of variance ``combined`` = v_P; with ``total_variance`` V,
    a total measured independently of all of them refits every c_P by least squares to
    c'_P = c_P + (v_P/D)(N̂ − Σ_Q c_Q), D = V + Σ_Q v_Q.  A unit's release is u + (c'_P − S)/m.

    Writing r = v_P/D (0 without the total), a = 1 − r and β = aλ − 1, the release's noise is
    (1 + β/m)·(its own) + β/m·(each other unit of P) + a(1 − λ)/m·(O's) + r/m·(N̂'s) − r/m·(c_Q's, Q ≠ P), all
    independent, so its variance is unit·(1 + 2β/m + β²/m) + (a(1 − λ)/m)²·other + (r/m)²·(D − v_P)."""
    m = np.asarray(m, dtype=np.float64)
    lam = other / (m * unit + other)
    if total_variance is None:
        r, rest = np.zeros_like(m), np.zeros_like(m)
    else:
        pooled = float(total_variance) + float(np.sum(combined))
        r, rest = combined / pooled, pooled - combined
    a = 1 - r
    beta = a * lam - 1
    return unit * (1 + 2 * beta / m + beta * beta / m) + (a * (1 - lam) / m) ** 2 * other + (r / m) ** 2 * rest


def refined_interval(plan: SubBlockPlan, sigma1: float, sigma2: float, total_variance: float | None) -> dict:
    """The interval entries of the refined release's Estimate, given its partition and sub-blocks (both chosen
    from phase 1): each sub-block's noisy count moved by its share of its partition's correction, spread evenly
    over its cells (:func:`adjusted_unit_variance` with the sub-blocks as the units and the phase-1 box sum,
    variance |P|σ₁², as the other measurement); the interval covers the sub-block's share."""
    m, nb = plan.subblocks_per_partition, plan.blocks_per_partition
    combined = m * sigma2 * nb * sigma1 / (m * sigma2 + nb * sigma1)
    per_subblock = adjusted_unit_variance(m, sigma2, nb * sigma1, combined, total_variance)[plan.owner]
    cells = plan.cells_per_subblock
    variance = (per_subblock / cells**2)[plan.labels].reshape(plan.shape)
    groups = None if np.all(cells == 1) else plan.labels.reshape(plan.shape).astype(np.int64)
    return {"variance": variance, "groups": groups}


def _block_ids(blocks: tuple[int, ...], edges: list[np.ndarray]) -> np.ndarray:
    """The C-order index of each cell's block (the table's shape): blocks of ``edges`` per axis."""
    ids = np.arange(math.prod(blocks), dtype=np.int64).reshape(blocks)
    for axis, e in enumerate(edges):
        ids = np.repeat(ids, np.diff(e), axis=axis)
    return ids


class KDTree(DPCube):
    """DPCube's two phases with the classic k-d tree split (Xiao, Xiong, Yuan 2010): cut each box at the
    median of its noisy mass along its longest axis, while that lowers the estimated error."""

    name = "kdtree"
    summary = "noisy cells, k-d tree of noisy medians, noisy partition totals, combined (Xiao et al. 2010)"
    split_rule = "median"
    # DPCube's low-signal blocks and penalty were fitted to its best-split cuts, not to median cuts, so
    # the k-d tree keeps the rule's blocks and the fixed penalty at every signal, and its median cuts take no
    # significance cut.
    MAX_SIDE = None
    REFINE_PENALTY_LOW = DPCube.REFINE_PENALTY
