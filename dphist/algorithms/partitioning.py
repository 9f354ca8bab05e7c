"""Data-adaptive partitioning that reads only noisy counts: NoiseFirst (Xu et al. 2012), DPCube (Xiao et al.
2012/2014) and the k-d tree (Xiao, Xiong, Yuan 2010); algorithms.md §4 and §5.2.

All start from one noisy measurement of every cell; everything that decides the partition is computed from
those noisy counts, so it is post-processing and costs nothing more.

    NoiseFirst (1-D)  measure: x̃ = x + DLap(1/ε)                                    (Δ = 1, all of ε)
                      infer:   the v-optimal partition of x̃ into κ buckets for κ = 1..K (dynamic program
                               over a public grid of candidate boundaries), κ* minimising the bias-corrected
                               error T[κ] − (n − 2κ)σ²; release bucket means (or x̃ itself if κ = n is better)
    DPCube (any d)    measure: x̃ = x + DLap(1/ε₁), ε₁ = αε                            (Δ = 1)
                      infer:   k-d splits of the table while they lower Ĥ(P₁) + Ĥ(P₂) + 2κ below Ĥ(P) + κ,
                               Ĥ the bias-corrected SSE of x̃, κ = σ₂² the variance of one noisy total
                      measure: every partition's total + DLap(1/ε₂), ε₂ = (1 − α)ε    (Δ = 1: disjoint)
                      infer:   per partition P, z_P = the inverse-variance combination of its two total
                               estimates; release x̃ + (z_P − S̃_P)/|P| (``gls``, unbiased), z_P/|P| evenly
                               (``uniform``), or between the two by λ_P = Ĥ/(Ĥ + (|P| − 1)σ₁²) (``shrink``)
    k-d tree          as DPCube, but a box is cut at the noisy median of its longest axis while Ĥ > κ
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..noise import BitSource, Replicated, discrete_laplace_variance
from . import options as option
from .base import Algorithm, Estimate, measure

__all__ = ["NoiseFirst", "DPCube", "KDTree", "v_optimal_costs"]


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

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 1:
            raise UsageError("algorithm 'noisefirst' works on one-column tables")

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        noisy, record = measure(counts, 1, epsilon, bits, "every cell")
        if isinstance(bits, Replicated):
            # Audits read only the measurement; everything below is post-processing of it.
            return Estimate(values=noisy.astype(np.float64), measurements=[record], noisy=[noisy])
        sigma2 = discrete_laplace_variance(record.scale)
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
        return Estimate(values=values, measurements=[record], noisy=[noisy],
                        structure={"candidate_boundaries": int(cuts.size), "max_buckets": self.params["max_buckets"]},
                        choices={"buckets": chosen})


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
                  rule: str = "best") -> list[tuple[tuple, tuple]]:
    """Greedy k-d splitting of the noisy table (post-processing).  ``rule="best"`` (DPCube): a box is cut where
    the two halves' costs Ĥ + κ add up to the least, while that beats keeping it whole; ``rule="median"`` (k-d
    tree): at the noisy median of its longest axis, while the box's Ĥ exceeds κ.  Returns the leaf boxes."""
    table = _NoisyTable(noisy)
    d = noisy.ndim
    stack = [((0,) * d, tuple(noisy.shape), 0)]
    leaves = []
    while stack:
        lo, hi, depth = stack.pop()
        whole = float(table.heterogeneity([np.array(l) for l in lo], [np.array(h) for h in hi], sigma2)) + kappa
        best = None
        if depth < max_depth and rule == "median":
            cut = _median_cut(noisy, lo, hi, depth)
            if cut is not None:
                axis, c = cut
                left_hi, right_lo = list(hi), list(lo)
                left_hi[axis], right_lo[axis] = c, c
                # Uniformity threshold: split while the box's estimated SSE exceeds what one more noisy total
                # costs, whether or not this particular cut lowers it (the next cut may).
                best = (-np.inf if whole > 2 * kappa else np.inf, axis, c)
        elif depth < max_depth:
            for axis in range(d):
                if hi[axis] - lo[axis] < 2:
                    continue
                cut = np.arange(lo[axis] + 1, hi[axis])
                left_hi = [np.full(cut.size, h) for h in hi]
                left_hi[axis] = cut
                right_lo = [np.full(cut.size, l) for l in lo]
                right_lo[axis] = cut
                cost = (table.heterogeneity([np.full(cut.size, l) for l in lo], left_hi, sigma2)
                        + table.heterogeneity(right_lo, [np.full(cut.size, h) for h in hi], sigma2) + 2 * kappa)
                i = int(np.argmin(cost))
                if best is None or cost[i] < best[0]:
                    best = (float(cost[i]), axis, int(cut[i]))
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


class DPCube(Algorithm):
    data_adaptive = True
    name = "dpcube"
    summary = "noisy cells, k-d partition of them, noisy partition totals, combined (Xiao et al.); small counts"
    # Defaults from the DPBench grid (1-D, ε = 0.1, 18 data sets × 10 runs): α = 3/4 with the unbiased GLS
    # release beat α = 1/2 with the uniform one at every scale (median 0.199 vs 0.228 at 1e3, 2.66e-3 vs
    # 3.56e-3 at 1e5, 5.0e-5 vs 5.3e-5 at 1e7).  Uniform spreading biases range queries that end inside a
    # partition, and that bias adds up along a prefix.
    options = {"alpha": (Fraction(3, 4), option.fraction_between_0_and_1), "max_depth": (64, option.positive_int),
               "release": ("gls", option.choice("uniform", "gls", "shrink"))}
    option_help = {"alpha": "share of ε for the noisy cells (the rest measures the partition totals)",
                   "max_depth": "most k-d cuts from the whole table to a partition",
                   "release": "inside a partition: gls (noisy cells moved to the combined total, unbiased), "
                              "uniform (the total spread evenly) or shrink (between them, per partition)"}

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        eps1 = epsilon * self.params["alpha"]
        eps2 = epsilon - eps1
        # Phase 1 (all repetitions at once when auditing).
        cells, first_record = measure(counts, 1, eps1, bits, "phase 1: every cell")
        sigma1 = discrete_laplace_variance(first_record.scale)
        sigma2 = discrete_laplace_variance(Fraction(1) / eps2)
        runs = cells.reshape((-1,) + counts.shape)
        # The partition of each run, from its noisy cells only (post-processing of phase 1).
        partitions = [tuple(self.partition(run, counts, sigma1, sigma2)) for run in runs]
        labels, totals = [], []
        for leaves in partitions:
            label = np.zeros(counts.shape, dtype=np.int64)
            for i, (lo, hi) in enumerate(leaves):
                label[tuple(slice(l, h) for l, h in zip(lo, hi))] = i
            labels.append(label.ravel())
            totals.append(np.bincount(label.ravel(), weights=counts.ravel(), minlength=len(leaves)).round())
        # Phase 2: every partition's total; partitions are disjoint, so one record moves one total by 1.
        lengths = [len(p) for p in partitions]
        noisy_all, second_record = measure(np.concatenate(totals).astype(np.int64), 1, eps2,
                                           bits.bits if isinstance(bits, Replicated) else bits,
                                           "phase 2: the total of every partition (chosen from phase 1)")
        offsets = np.cumsum([0] + lengths)
        values, audit_view = [], []
        for r, (run, flat) in enumerate(zip(runs, labels)):
            noisy_totals = noisy_all[offsets[r]:offsets[r + 1]]
            size = np.bincount(flat, minlength=lengths[r]).astype(np.float64)
            from_cells = np.bincount(flat, weights=run.ravel().astype(np.float64), minlength=lengths[r])
            w = size * sigma1 / (size * sigma1 + sigma2)  # inverse-variance weight of the phase-2 total
            combined = w * noisy_totals + (1 - w) * from_cells
            if self.params["release"] == "uniform":
                values.append((combined / size)[flat])
            elif self.params["release"] == "gls":
                values.append(run.ravel() + ((combined - from_cells) / size)[flat])
            else:  # shrink: λ_P = Ĥ / (Ĥ + (|P| − 1)σ₁²) of each cell's deviation from its partition's mean
                cell = run.ravel().astype(np.float64)
                deviation = cell - (from_cells / size)[flat]
                spread = np.bincount(flat, weights=deviation * deviation, minlength=lengths[r])
                noise = (size - 1) * sigma1
                signal = np.maximum(spread - noise, 0.0)
                with np.errstate(invalid="ignore", divide="ignore"):
                    keep = np.where(signal > 0, signal / (signal + noise), 0.0)
                values.append((combined / size)[flat] + keep[flat] * deviation)
            # Audit view of phase 2: each cell holds its partition's noisy total over the partition size, so
            # the view changes by exactly as much (in L1) as the partition totals do.
            audit_view.append((noisy_totals / size)[flat])
        shape = cells.shape
        second = replace(second_record, queries=int(round(np.mean(lengths))))
        return Estimate(values=np.reshape(values, shape), measurements=[first_record, second],
                        noisy=[cells, np.reshape(audit_view, shape)],
                        structure={"alpha": str(self.params["alpha"]), "release": self.params["release"],
                                   "max_depth": self.params["max_depth"]},
                        choices={"partitions": lengths[0]} if runs.shape[0] == 1 and cells.ndim == counts.ndim
                        else {"structure": partitions})

    split_rule = "best"

    def partition(self, cells: np.ndarray, counts: np.ndarray, sigma1: float, sigma2: float):
        """The k-d partition, from the phase-1 noisy cells only (``counts`` is not used: see the mutant)."""
        return _kd_partition(cells, sigma1, sigma2, self.params["max_depth"], self.split_rule)


class KDTree(DPCube):
    """DPCube's two phases with the classic k-d tree split (Xiao, Xiong, Yuan 2010): cut each box at the
    median of its noisy mass along its longest axis, while that lowers the estimated error."""

    name = "kdtree"
    summary = "noisy cells, k-d tree of noisy medians, noisy partition totals, combined (Xiao et al. 2010)"
    split_rule = "median"
