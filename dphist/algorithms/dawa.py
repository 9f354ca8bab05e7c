"""DAWA, the data- and workload-aware algorithm (Li, Hay, Miklau, Wang, PVLDB 2014), 1-D and 2-D
(Hilbert order), with a partition
step whose privacy is proved below for exactly what the code does.

The histogram x has n cells.  ε₁ = ratio·ε (2/5 by default) pays for the partition, ε₂ = ε − ε₁ for the bucket
counts.  On a zCDP budget the amounts are ρ and the kernel converts each step.

    candidates: the aligned dyadic intervals I = [j·2^k, (j + 1)·2^k) ∩ [0, n), k = 1 … L = ⌈log₂ n⌉, of at
             least 2 cells, without repeats (a node whose right half lies past n); s_I = |I|, level k_I.
             Single cells are buckets too (their cost is 0 whatever the data).  Depends on n only.
    measure: one integer cost q_I per candidate, in ONE weighted discrete Laplace call:
                 q̃_I = q_I + DLap(s_I·g_I·b),   b = Δ/ε₁,   g_I = 2^⌊(L − k_I)/2⌋      (Δ: point 2 below)
             k_I < K = 5 (at most 16 cells):  q_I = Σ_{i∈I} |s_I·x_i − S_I| = s_I·dev(I)   (the L1 deviation)
             k_I ≥ K:                         q_I = ⌊Σ_{t=1}^{s_I} |s_I·P_t − t·S_I| / s_I⌋  (the prefix deviation)
             with S_I the interval's count and P_t the count of its first t cells; d̃_I = q̃_I/s_I is the cost in
             records (dev(I), or the mean absolute error of I's own prefixes under even spread).
    select:  from [0, n) down, halve an interval while d̃_I > λ + θ_I·g_I·b (``select=split``), θ_I = threshold
             on the L1 levels, prefix_threshold on the prefix levels, λ = penalty × one bucket count's noise
             scale at ε₂; else it is a bucket.  (``select=optimal``: the partition minimising Σ_B (d̃_B + λ).)
    measure: the k bucket counts through a tree over the buckets whose branching and per-level shares of ε₂
             (root not measured, even, or a root share r with the rest even) minimise the exact expected error
             of the CELL prefix workload given the bucket sizes s_1 … s_k (:func:`bucket_strategy`): a cell
             prefix ending at offset t of bucket j is Σ_{i<j} B_i + (t/s_j)·B_j, so for B̂ = L·y the workload's
             variance is Σ_nodes v_node·Σ_j [s_j a_j² + a_j c_j (s_j + 1) + c_j² (s_j + 1)(2s_j + 1)/(6s_j)],
             c = L·e_node, a_j = c_1 + … + c_{j−1}.  Each level partitions the buckets: Δ₁ = Δ₂² = 1.
    infer:   tree least squares over the bucket tree (``fit=nnls``: the least squares with bucket counts of at
             least 0, :func:`~dphist.inference.nonnegative.tree_nonnegative_least_squares`; auto's choice at low signal,
             measured in :func:`~dphist.algorithms.auto.choice.low_signal_options`), then each bucket's estimate
             spread evenly.

Privacy (add/remove one record in cell t; every Δ below is for one record, the budget multiplies it by the
protected unit's factor).

1. Sensitivity of one candidate.  Only candidates containing t change.  Adding a record to cell t of I moves
   x_t to x_t + 1 and S_I to S_I + 1.  The term i = t of q_I, |s_I x_t − S_I|, becomes |s_I x_t − S_I + s_I − 1|:
   it moves by at most s_I − 1.  Each of the other s_I − 1 terms |s_I x_i − S_I| becomes |s_I x_i − S_I − 1|:
   each moves by at most 1.  So |Δq_I| ≤ 2(s_I − 1) (and removal is the same step backwards), i.e.
   |Δ dev(I)| ≤ 2(1 − 1/s_I).  (Equality when all other cells of I are at or below the mean and so on; the
   bound is attained, e.g. on an empty interval: q_I goes from 0 to 2(s_I − 1).)
   Prefix levels (k ≥ K): adding a record to the j-th cell of I (j = 1 … s) adds 1 to P_t for t ≥ j and to S_I,
   so the t-th term's inside moves by s·[t ≥ j] − t, of size t for t < j and s − t for t ≥ j; the unfloored
   sum Q_I = Σ_t |s P_t − t S_I| moves by at most Σ_{t<j} t + Σ_{t≥j} (s − t) = j(j − 1)/2 + (s − j)(s − j + 1)/2,
   convex in j, at most s(s − 1)/2 (j = 1 or s; reached on an empty interval).  Flooring: if
   |Q − Q′| ≤ D then |⌊Q/s⌋ − ⌊Q′/s⌋| ≤ ⌈D/s⌉ (write Q′ = as + r, 0 ≤ r < s: ⌊(r + D)/s⌋ ≤ ⌊(s − 1 + D)/s⌋),
   so |Δp_I| ≤ ⌈(s − 1)/2⌉ = ⌊s/2⌋ and |Δp_I|/s_I ≤ 1/2.
2. Sensitivity of the whole vector.  The vector q = (q_I) is released in one call with relative scales
   r_I = s_I·g_I (whole numbers).  The weighted discrete Laplace mechanism (noise of scale r_I·b on the integer
   answer I, independent) is ε₁-DP when Σ_I |Δq_I|/r_I ≤ Δ for every neighbouring pair: the probability of
   each noisy answer changes by a factor at most exp(|Δq_I|/(r_I b)), and the product of these factors is at
   most exp(Δ/b) = exp(ε₁).  Cell t lies in at most one candidate per level k (the aligned intervals of a
   level are disjoint), of size at most 2^k and weight g_k, so
       Σ_I |Δq_I|/(s_I g_I) ≤ Σ_{I ∋ t, k_I < K} 2(1 − 1/s_I)/g_I + Σ_{I ∋ t, k_I ≥ K} (1/2)/g_I
                           ≤ Σ_{k<K} 2(1 − 2^−k)/g_k + Σ_{K≤k≤L} 1/(2 g_k) =: Δ.
   This Δ depends on n only; its L1 part is exact when n is a power of two (cell 0 lies in a full interval of
   every level, and an empty table reaches every bound of point 1), the prefix part is an upper bound (the
   floor makes the bound ⌊s/2⌋ reachable only for some tables; a brute force on 32 cells reached 0.99 Δ).
   At n = 4096, Δ ≈ 2.18 (7.78 with the L1 deviation on every level, 22.0 with that and all g = 1).  Note what this is NOT: it is
   not 2 per interval (nor 1/2 for the prefix deviation).  The paper's family is every interval, where cell t lies in (t + 1)(n − t) of them and the
   vector of all noisy costs would need Δ = Θ(n²) for this argument; a noise of scale 2/ε₁ per interval proves
   only that each single noisy cost is ε₁-DP, and the partition reads all of them.  Restricting the family to
   aligned dyadic intervals is what keeps Δ at O(log n) (at most 2L with any weights g ≥ 1).  The weighted
   scales s_I·g_I are the same for both kinds of cost, so the largest noise scale stays n·b.
3. The partition is a deterministic function of q̃ (and of public n, ε, the options): post-processing, free.
   The number of buckets k and their edges are therefore an ε₁-DP output.
4. Given the partition (an ε₁-DP output), the bucket tree and its level shares are a function of the bucket
   sizes (the edges) and public numbers only, never of the counts: post-processing of the ε₁ output, free.
   Each level's node sums partition the cells, so one record moves one node per level by 1: Δ₁ = 1 and
   Δ₂² = 1 per level, and the levels (shares adding up to 1 exactly) compose sequentially to ε₂ (ρ₂).
   Adaptive sequential composition: ε₁ + ε₂ = ε.
5. Spreading and least squares (constrained or not) are post-processing.  The true total is never read (the tree's levels carry it).
   A total measured elsewhere and independently (auto's N̂, :meth:`DAWA.infer`) is one more measurement of
   the bucket tree's root in the same least squares: post-processing of both.

Differences from the paper and dpcomp_core (read for facts only): they consider every interval and add noise of
scale 2/ε₁ (as far as we can read) to each interval's deviation, which point 2 does not support; here the family
is the aligned dyadic intervals, whose noisy costs have a proven joint sensitivity.  A bucket edge then falls on
a multiple of the bucket's size, so an edge at an arbitrary cut costs a few extra buckets.  The second stage is
a range tree over the buckets whose branching and root share are tuned to the cell prefix workload, instead of
GreedyH (which tunes every level's weight to the given workload by a greedy search).  The partition's cost is
the prefix deviation above 16 cells, where the paper's is the L1 deviation everywhere (below).

Choices, and what they were measured against (18 DPBench 1-D data sets, ε = 0.1, prefix workload, 4 samples × 4
runs, seed 7; "÷ best" is the mean of ours ÷ the reference implementation's best algorithm per data set):

* The prefix deviation above 16 cells: the L1 deviation of Poisson-sparse counts is mostly sampling noise (m
  records over s cells give dev ≈ 2m(1 − m/s) on exactly uniform data), so it split sparse near-uniform data
  into 6 … 16 buckets, and it barely drops when a heavy left half is split from an empty right one (≈ 2N both
  ways), which the prefix deviation sees (N/4 before, 0 after).  ÷ best went 2.11 → 1.60 at scale 1e3, 0.77 →
  0.80 at 1e5, 2.23 → 1.68 at 1e7 (seed 11: 2.03 → 1.70, 0.76 → 0.77, 2.21 → 1.61).  On every level the prefix
  deviation cost 1e7 (2.65); K = 5 was best of 4, 5, 6, 8, 10.  prefix_threshold 2/10 … 4/10 were within 4 %.
* Level weights g: the top levels get the least noise (a wrong decision high in the tree costs a whole
  subtree, and ``split`` reaches a small interval only through its ancestors); against equal weights (Δ = 22):
  0.80 against 0.99 of the reference DAWA's error at 1e3, 0.52 against 0.53 at 1e5.
* ``split`` rather than the paper's least-cost partition: on noisy costs the minimum favours intervals whose
  noise happened to be negative and splits far too much at low signal (2.5 against 1.0 of the reference's error
  at 1e3, equal weights).
* The bucket tree chosen for the workload against the data-blind one (root not measured, ε₂ even): ÷ best 2.14
  → 2.11 at 1e3, 0.90 → 0.77 at 1e5, 2.30 → 2.23 at 1e7.  Above 256 buckets only one branching is tried, above
  512 the data-blind tree is kept (the search would cost too much); the choice uses the continuous noise
  proportionalities (∝ 1/ε_l², ∝ 1/ρ_l), the least squares the exact discrete variances.
* ratio 2/5 and threshold 4/5 (dpcomp_core's ratio is 1/2, the paper's 1/4): ratios 1/4 … 1/2 and thresholds
  1/4 … 6/5 were within ±15 % of each other, measured with the data-blind tree.

2-D (a grid of r × c cells), as in the paper and dpcomp_core: the grid is read along the Hilbert curve
(:mod:`dphist.algorithms.strategies.hilbert`, the curve of the smallest 2^k square holding the grid, restricted to it), and
everything above runs on that sequence of n = r·c cells; the estimate is put back on the grid.  The order is a
public bijection of the cells, so one record still changes one cell of the sequence by 1: every sensitivity
above holds unchanged with n = r·c, and the budget composes as in 1-D.  A bucket is a run of the curve, and a
rectangle is a union of a few runs, so stage 2 is tuned to ALL cell ranges of the sequence
(``stage2=ranges``: :func:`range_quadratic` in place of the prefix workload).  2-D defaults (DEFAULTS_2D,
used where the user gives no value) and the choices, measured on the 10 DPBench 2-D data sets (256 × 256,
ε = 0.1, 2000 random rectangles, 2 samples × 2 runs, seed 2026; mean (worst) of ours ÷ the reference's best
algorithm per data set at scales 1e3 / 1e5):

* stage 2, with the 1-D partition defaults: prefix 2.35 (4.50) / 2.76 (3.98); identity on the buckets 2.40
  (4.50) / 2.74 (3.74); ranges 2.31 (4.50) / 2.73 (3.65).  With the 2-D partition (ratio 1/2, thresholds
  2/5 and 1/10): prefix 2.15 / 2.50, identity 2.23 / 2.43, ranges 2.15 / 2.48.  All within the ±15 % run
  noise: the error is the partition's, not the bucket tree's (at 1e5 a few dozen to ~160 buckets for 65,536
  cells).  ``ranges`` is kept as the one whose target matches the workload and was never worse than 3 %.
* the partition (stage 2 ranges): ratio 1/4 2.88 / 3.70, 2/5 2.31 / 2.73, 1/2 2.30 / 2.62; thresholds 2/5
  and 1/10 (from 4/5 and 3/10) 2.31 / 2.73 → 2.42 / 2.52 at ratio 2/5 and 2.15 / 2.48 at 1/2; with those
  thresholds ratio 3/5 2.08 (3.81) / 2.22 (3.20) (chosen: DEFAULTS_2D), 7/10 2.15 / 2.13; thresholds 1/5 and
  1/20 at 3/5 2.21 / 2.17; penalty 1/4 no better; thresholds 2 and 1 worse (2.74 / 3.73).  More of ε on the
  partition and lower thresholds give more, smaller buckets, which a rectangle's edges need.  One benchmark
  seed: the chosen defaults may be a little flattered by it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..errors import UsageError
from ..inference.measurements import Measurement
from ..inference.nonnegative import NNLS_MAX_LEAVES, tree_least_squares, tree_nonnegative_least_squares
from ..privacy import PrivacyBudget
from .strategies.trees import range_tree
from . import options as option
from .base import Algorithm, Estimate, Step
from .hierarchical import LEVEL_L1, LEVEL_L2_SQUARED, level_inputs, level_query
from .strategies.hilbert import hilbert_order
from .strategies.trees import Tree

__all__ = ["DAWA", "dyadic_candidates", "candidate_weights", "candidate_sensitivity", "level_weight", "top_level",
           "deviations", "prefix_deviations", "candidate_costs", "prefix_levels", "best_partition", "split_partition",
           "bucket_branching", "prefix_error", "cell_prefix_matrix", "prefix_quadratic", "strategy_errors",
           "bucket_strategy", "level_shares", "range_quadratic", "MAX_CELLS", "STAGE2_2D"]

MAX_CELLS = 1 << 20  # the candidate family has fewer than n intervals; the partition's search is O(n) Python steps
EXACT_BUCKETS = 512  # up to this many buckets the tree's branching is chosen from exact prefix errors (O(k²))
BRANCHINGS = (2, 3, 4, 6, 8, 12, 16)  # the branchings compared (and the flat tree, b = k)
LARGE_BRANCHING = 8  # beyond EXACT_BUCKETS: the exact best was 6 or 8 at k = 358 … 2,000, within 3 % of each other
SEARCH_BUCKETS = 256  # up to this many buckets stage 2 tries every branching (≤ ~50 ms); up to 512 only one
PREFIX_LEVEL = 5  # candidates of level ≥ 5 (more than 16 cells) are measured by their prefix deviation
STAGE2_2D = "ranges"  # the bucket tree's workload in 2-D (measured in the module docstring)
# Defaults on a 2-D grid for the options the user did not give (measured in the module docstring, "2-D")
DEFAULTS_2D = {"ratio": Fraction(3, 5), "threshold": Fraction(2, 5), "prefix_threshold": Fraction(1, 10)}
#: Why ``fit=nnls`` has no interval (:class:`~dphist.algorithms.base.Estimate`'s ``no_interval``).
NNLS_NO_INTERVAL = ("fit=nnls keeps every bucket count at 0 or above, which is not linear in the noisy sums, so "
                    "its variance is not known exactly")
ROOT_SHARES = tuple(Fraction(j, 16) for j in (1, 2, 4, 6, 8, 10, 12, 14))  # root shares tried besides none/even


def dyadic_candidates(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidate intervals [start, stop) for ``n`` cells: aligned dyadic intervals of at least 2 cells,
    truncated to [0, n), without repeats (a node whose right half lies past n equals its left half).

    Returns (starts, stops), int64 arrays ordered by level (size 2, 4, …) then position.  Depends on n only."""
    starts, stops = [], []
    size = 2
    while size // 2 < n:  # level k = log2(size); the last level is the one whose first node covers [0, n)
        lo = np.arange(0, n, size, dtype=np.int64)
        # keep a node only if its right half starts inside [0, n): otherwise it repeats its left half
        lo = lo[lo + size // 2 < n]
        starts.append(lo)
        stops.append(np.minimum(lo + size, n))
        size *= 2
    return np.concatenate(starts), np.concatenate(stops)


def top_level(n: int) -> int:
    """L = ⌈log₂ n⌉: the level of the candidate that covers [0, n)."""
    return max(1, (n - 1).bit_length())


def level_weight(level: int, top: int) -> int:
    """g_k = 2^⌊(L − k)/2⌋: the relative noise scale of a level-k candidate (the two top levels 1, then doubling
    every two levels down).  Public: a function of n only."""
    return 1 << ((top - level) // 2)


def candidate_weights(n: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """g_I = level_weight(k_I) with k_I = ⌈log₂ s_I⌉ the candidate's level (a kept truncated node holds more than
    half its level's size, so its size gives its level)."""
    top = top_level(n)
    levels = [max(1, (int(s) - 1).bit_length()) for s in (stops - starts).tolist()]
    return np.array([level_weight(k, top) for k in levels], dtype=np.int64)


def candidate_sensitivity(n: int, prefix_from: int = PREFIX_LEVEL) -> Fraction:
    """Δ = Σ_{k<K} 2(1 − 2^−k)/g_k + Σ_{K≤k≤L} 1/(2g_k), L = ⌈log₂ n⌉, K = ``prefix_from``: a bound on
    Σ_I |Δq_I|/(s_I g_I) over the candidates for one record, q_I the L1 deviation below level K and the floored
    prefix deviation from level K up (module docstring, point 2).  The L1 part is reached for n a power of
    two; the prefix part is an upper bound."""
    top = top_level(n)
    return sum(((2 * (1 - Fraction(1, 2**k)) if k < prefix_from else Fraction(1, 2)) / level_weight(k, top)
                for k in range(1, top + 1)), Fraction(0))


def deviations(counts: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """q_I = Σ_{i∈I} |s_I·x_i − S_I| for every candidate (exact int64): s_I times the L1 deviation of x on I."""
    x = np.asarray(counts, dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(x)])
    sizes = stops - starts
    totals = prefix[stops] - prefix[starts]
    out = np.zeros(starts.size, dtype=np.int64)
    # One level at a time (equal sizes): the cells of a level's intervals form contiguous runs.
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        cells = starts[which][:, None] + np.arange(size)[None, :]
        out[which] = np.abs(size * x[cells] - totals[which][:, None]).sum(axis=1)
    return out


def prefix_deviations(counts: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """p_I = ⌊Σ_{t=1}^{s} |s·P_t − t·S_I| / s⌋ for every candidate (exact int64), P_t the sum of I's first t
    cells and S_I = P_s: the floor of s_I times the mean absolute error of the s prefixes inside I when I's
    count is spread evenly over its cells.  Python integers where s²·S_I could overflow int64."""
    x = np.asarray(counts, dtype=np.int64)
    sizes = stops - starts
    out = np.zeros(starts.size, dtype=np.int64)
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        cells = starts[which][:, None] + np.arange(size)[None, :]
        inner = np.cumsum(x[cells], axis=1)
        if int(size) ** 2 * int(np.abs(x).sum()) >= 1 << 62:
            inner = inner.astype(object)  # exact, slower: only for huge totals
        t = np.arange(1, size + 1, dtype=np.int64)[None, :]
        q = np.abs(int(size) * inner - t * inner[:, -1:]).sum(axis=1)
        out[which] = (q // int(size)).astype(np.int64)
    return out


def prefix_levels(n: int, starts: np.ndarray, stops: np.ndarray, prefix_from: int = PREFIX_LEVEL) -> np.ndarray:
    """Boolean per candidate: its level ⌈log₂ s_I⌉ is at least ``prefix_from`` (its cost is the prefix
    deviation).  Public: a function of n only."""
    return (stops - starts) > (1 << (prefix_from - 1))


def candidate_costs(counts: np.ndarray, starts: np.ndarray, stops: np.ndarray,
                    prefix_from: int = PREFIX_LEVEL) -> np.ndarray:
    """The integer vector the partition measures: :func:`prefix_deviations` on the candidates of level ≥
    ``prefix_from``, :func:`deviations` below.  Divided by s_I, each is a cost in records: the L1 deviation
    dev(I), or the mean absolute prefix error inside I under even spread (up to the floor, < 1/s_I)."""
    pre = prefix_levels(int(stops.max(initial=0)), starts, stops, prefix_from)
    out = np.zeros(starts.size, dtype=np.int64)
    out[~pre] = deviations(counts, starts[~pre], stops[~pre])
    out[pre] = prefix_deviations(counts, starts[pre], stops[pre])
    return out


def best_partition(n: int, starts: np.ndarray, stops: np.ndarray, costs: np.ndarray, penalty: float) -> np.ndarray:
    """The bucket edges 0 = e_0 < … < e_k = n minimising Σ_B (cost_B + penalty) over partitions into candidate
    intervals (cost ``costs[I]``) and single cells (cost 0).  A shortest path over the cut points; ties go to
    fewer, larger buckets (the candidates are tried after the single cell, and only a strictly smaller total
    replaces the incumbent)."""
    best = np.full(n + 1, np.inf)
    back = np.zeros(n + 1, dtype=np.int64)
    best[0] = 0.0
    incoming: list[list[int]] = [[] for _ in range(n + 1)]
    for index, stop in enumerate(stops.tolist()):
        incoming[stop].append(index)
    start_list, cost_list = starts.tolist(), (np.asarray(costs, dtype=np.float64) + penalty).tolist()
    for end in range(1, n + 1):
        value, origin = best[end - 1] + penalty, end - 1
        for index in incoming[end]:
            candidate = best[start_list[index]] + cost_list[index]
            if candidate <= value:  # a larger bucket wins a tie
                value, origin = candidate, start_list[index]
        best[end], back[end] = value, origin
    edges = [n]
    while edges[-1] > 0:
        edges.append(int(back[edges[-1]]))
    return np.array(edges[::-1], dtype=np.int64)


def _positive_number(value) -> Fraction:
    """An exact positive number of sane size ('1', '0.5', '3/2'), at most 1000."""
    text = str(value).strip()
    try:
        number = None if isinstance(value, (bool, np.bool_)) or len(text) > 64 else Fraction(text)
    except (ValueError, ZeroDivisionError):
        number = None
    if number is None or not 0 < number <= 1000:
        raise ValueError("must be a number above 0 and at most 1000")
    return number


def split_partition(n: int, starts: np.ndarray, stops: np.ndarray, costs: np.ndarray, threshold) -> np.ndarray:
    """Bucket edges by top-down splitting of the dyadic tree: from [0, n), an interval whose cost exceeds its
    ``threshold`` (a number, or one per candidate) is replaced by its two halves (those that are candidates are
    tested in turn; a single cell stays).  Post-processing of ``costs``; depends on no other data."""
    index = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(starts.tolist(), stops.tolist()))}
    thresholds = np.broadcast_to(np.asarray(threshold, dtype=np.float64), costs.shape)
    size = 1
    while size < n:
        size *= 2
    stack, edges = [(0, size)], []
    while stack:
        lo, width = stack.pop()
        hi = min(lo + width, n)
        if lo >= n:
            continue
        if hi - lo == 1:
            edges.append(lo)
            continue
        i = index.get((lo, hi))
        if i is None:  # a node equal to its left half (the right half lies past n)
            stack.append((lo, width // 2))
            continue
        if costs[i] > thresholds[i]:
            stack.append((lo + width // 2, width // 2))
            stack.append((lo, width // 2))
        else:
            edges.append(lo)
    return np.array(sorted(edges) + [n], dtype=np.int64)


@lru_cache(maxsize=1024)
def prefix_error(k: int, b: int, noise: str = "laplace") -> float:
    """The exact average variance of the k prefix sums of the GLS estimate from a b-ary range tree over k values,
    root not measured, the budget split evenly over the h measured levels, per unit of one level's noise at
    the whole budget: a node's variance is h² (Laplace: scale h/ε) or h (Gaussian: ρ/h).  Σ over measured nodes
    of v·‖P L e_node‖², P the prefix sums and L the (linear) tree least squares.  O(k · nodes) time."""
    tree = range_tree(k, b)
    levels = tree.levels
    measured = list(range(1 if levels > 1 else 0, levels))
    h = len(measured)
    v = float(h * h if noise == "laplace" else h)
    variances = [math.inf] * levels
    for level in measured:
        variances[level] = v
    total = 0.0
    chunk = max(1, 2**21 // k)  # about 16 MiB of float64 per batch of unit vectors
    for level in measured:
        for start in range(0, tree.sizes[level], chunk):
            m = min(chunk, tree.sizes[level] - start)
            noisy: list[np.ndarray | None] = [None] * levels
            for other in measured:
                noisy[other] = np.zeros((m, tree.sizes[other]))
            noisy[level][np.arange(m), start + np.arange(m)] = 1.0
            leaves = tree_least_squares(tree, noisy, variances).values[-1]
            total += v * float(np.square(np.cumsum(leaves, axis=1)).sum())
    return total / k


def bucket_branching(k: int, noise: str = "laplace") -> int:
    """The branching of the tree over k buckets with the least exact average prefix variance among
    BRANCHINGS and the flat tree (b = k), for k ≤ EXACT_BUCKETS; LARGE_BRANCHING beyond.  Depends on k and the
    noise only.  (Qardaji et al.'s closed form picks the flat tree up to k = 255, whose prefix variance is 2.5
    times the best at k = 178: their cost is for all ranges with a measured root.)"""
    if k < 2:
        return 2
    if k > EXACT_BUCKETS:
        return LARGE_BRANCHING
    candidates = sorted({b for b in BRANCHINGS if b < k} | {k})
    errors = {b: prefix_error(k, b, noise) for b in candidates}
    return min(candidates, key=lambda b: (round(errors[b], 9), b))


def cell_prefix_matrix(sizes) -> np.ndarray:
    """M = WᵀW (k × k, float) for the CELL prefix workload in bucket space: W has one row per cell prefix, the
    prefix ending at offset t (1 … s_j) of bucket j being Σ_{i<j} B_i + (t/s_j)·B_j (uniform spread), so that
    the workload's total variance for an estimate B̂ of covariance C is tr(M C).

    Summing the rows in closed form: M_ij = R_{max(i,j)} for i ≠ j with R_j = Σ_{m>j} s_m + (s_j + 1)/2 (the
    rows past bucket max(i, j) give 1 each, bucket max(i, j)'s own rows give Σ_t t/s = (s + 1)/2), and
    M_jj = Σ_{m>j} s_m + Σ_t (t/s_j)² = Σ_{m>j} s_m + (s_j + 1)(2s_j + 1)/(6s_j).  (Per node c = L e_node this is
    Σ_j [s_j a_j² + a_j c_j (s_j + 1) + c_j² (s_j + 1)(2s_j + 1)/(6s_j)], a_j = c_1 + … + c_{j−1}.)"""
    s = np.asarray(sizes, dtype=np.float64)
    after = np.concatenate([np.cumsum(s[::-1])[::-1][1:], [0.0]])  # Σ_{m>j} s_m
    r = after + (s + 1) / 2
    index = np.arange(s.size)
    m = r[np.maximum.outer(index, index)]
    m[index, index] = after + (s + 1) * (2 * s + 1) / (6 * s)
    return m


def _noise_power(share, noise: str) -> float:
    """A level's precision 1/variance per unit of the whole budget, up to a common constant: Laplace of scale
    1/ε_l has variance ∝ 1/ε_l², so precision ∝ share²; the Gaussian's variance ∝ 1/ρ_l, precision ∝ share.
    (The continuous proportionalities: the exact discrete variances differ by well under 1 % at these scales
    and do not enter the choice.)"""
    return float(share) ** 2 if noise == "laplace" else float(share)


def prefix_quadratic(c: np.ndarray, sizes) -> np.ndarray:
    """cᵀ M c for each row c of ``c`` (bucket-space vectors, last axis k), M = :func:`cell_prefix_matrix`, in
    O(k) per row: Σ_j [s_j a_j² + a_j c_j (s_j + 1) + c_j² (s_j + 1)(2s_j + 1)/(6s_j)], a_j = c_1 + … + c_{j−1}
    (the sum over t = 1 … s_j of (a_j + (t/s_j) c_j)²)."""
    s = np.asarray(sizes, dtype=np.float64)
    a = np.cumsum(c, axis=-1) - c
    return (s * a * a + a * c * (s + 1) + c * c * ((s + 1) * (2 * s + 1) / (6 * s))).sum(axis=-1)


def range_quadratic(c: np.ndarray, sizes) -> np.ndarray:
    """cᵀ M c for each row c of ``c`` (bucket-space vectors, last axis k), M = WᵀW for the workload of ALL cell
    ranges [t₁, t₂) (0 ≤ t₁ < t₂ ≤ n, n = Σ s_j) with each bucket spread evenly, in O(k) per row.  A cell range
    is F(t₂) − F(t₁), F(t) the estimated prefix up to cell t (F(0) = 0), so Σ_{t₁<t₂} (F(t₂) − F(t₁))² =
    (n + 1)·ΣF² − (ΣF)² over the n + 1 points; ΣF² is :func:`prefix_quadratic` and ΣF = Σ_j [s_j a_j +
    c_j (s_j + 1)/2], a_j = c_1 + … + c_{j−1}.  (The workload of 2-D rectangles read along a Hilbert curve is a
    union of a few such runs.)"""
    s = np.asarray(sizes, dtype=np.float64)
    a = np.cumsum(c, axis=-1) - c
    linear = (s * a + c * (s + 1) / 2).sum(axis=-1)
    return (s.sum() + 1) * prefix_quadratic(c, s) - linear * linear


WORKLOAD_QUADRATICS = {"prefix": prefix_quadratic, "ranges": range_quadratic}


def strategy_errors(sizes, b: int, noise: str = "laplace", workload: str = "prefix") -> dict:
    """The exact expected total squared error of the cell prefix workload (:func:`cell_prefix_matrix`) for a
    b-ary range tree over the k = len(sizes) buckets, GLS, per root share: {r: error} for r = 0 (root not
    measured, the rest even), r = 1/(h + 1) (even over every level) and r ∈ ROOT_SHARES (the other h levels
    share 1 − r evenly), in units where one node measured with the whole budget has variance 1 (Laplace:
    variance ∝ 1/ε_l², Gaussian: ∝ 1/ρ_l, see :func:`_noise_power`).

    With the non-root levels at unit variance, G = Σ_{non-root levels} A_lᵀA_l (A_l the level's node–bucket
    incidence; it holds the leaves, so G is invertible) has G⁻¹ = Σ_nodes c cᵀ, c = L e_node the tree least
    squares' response to one node (found with the linear-time tree GLS, one batch of unit vectors).  A
    profile's information matrix is α G + β 11ᵀ, α = power((1 − r)/h), β = power(r), and by Sherman–Morrison
    tr(M C) = [tr(M G⁻¹) − (β/α) uᵀMu / (1 + (β/α) 1ᵀu)]/α with u = G⁻¹1 = Σ_nodes c (1ᵀc) and
    tr(M G⁻¹) = Σ_nodes cᵀMc (:func:`prefix_quadratic`): O(k · nodes) per branching, then O(1) per share.
    ``workload="ranges"``: the same with M the all-cell-ranges matrix (:func:`range_quadratic`).  Needs k ≥ 2."""
    k = len(sizes)
    tree = range_tree(k, b)
    h = tree.levels - 1
    variances = [math.inf] + [1.0] * h
    offsets = np.cumsum([0] + [tree.sizes[level] for level in range(1, tree.levels)])
    nodes = int(offsets[-1])
    noisy: list[np.ndarray | None] = [None] + [np.zeros((nodes, tree.sizes[level])) for level in range(1, tree.levels)]
    for level in range(1, tree.levels):
        here = np.arange(tree.sizes[level])
        noisy[level][offsets[level - 1] + here, here] = 1.0
    c = tree_least_squares(tree, noisy, variances).values[-1]  # one row per measured node: L e_node
    quadratic = WORKLOAD_QUADRATICS[workload]
    trace = float(quadratic(c, sizes).sum())
    u = c.sum(axis=1) @ c
    quad, ones = float(quadratic(u, sizes)), float(u.sum())
    out = {}
    for r in (Fraction(0), Fraction(1, h + 1), *ROOT_SHARES):
        alpha, beta = _noise_power((1 - r) / h, noise), _noise_power(r, noise)
        out[r] = (trace - (beta / alpha) * quad / (1 + (beta / alpha) * ones)) / alpha
    return out


def bucket_strategy(sizes, noise: str = "laplace", workload: str = "prefix") -> tuple[int, Fraction]:
    """(b, r): the branching of the range tree over the buckets and the root's share of the bucket budget (0: root
    not measured) with the least :func:`strategy_errors`, over the root shares listed there and, for k ≤
    SEARCH_BUCKETS, the branchings of :func:`bucket_branching` and the flat tree (b = k); for SEARCH_BUCKETS < k ≤
    EXACT_BUCKETS only b = bucket_branching(k).  Ties go to the first candidate in (b, r) order.  A function of
    the bucket sizes (a DP output) and the noise kind only.  One bucket: (2, 1), the root alone.  Beyond
    EXACT_BUCKETS buckets: the data-blind rule, (bucket_branching(k), 0), to keep the cost down.
    ``workload``: "prefix" (the cell prefixes, 1-D) or "ranges" (all cell ranges, :func:`range_quadratic`);
    "identity": (k, 0), each bucket measured once with the whole budget (no search)."""
    k = len(sizes)
    if k < 2:
        return 2, Fraction(1)
    if workload == "identity":
        return k, Fraction(0)
    if k > EXACT_BUCKETS:
        return bucket_branching(k, noise), Fraction(0)
    branchings = sorted({b for b in BRANCHINGS if b < k} | {k}) if k <= SEARCH_BUCKETS else [bucket_branching(k, noise)]
    best = None
    for b in branchings:
        for r, error in strategy_errors(sizes, b, noise, workload).items():
            if best is None or error < best[0] * (1 - 1e-12):
                best = (error, b, r)
    return best[1], best[2]


def level_shares(levels: int, root_share: Fraction) -> list[Fraction]:
    """The budget shares of the tree's measured levels, top down (exact, adding up to 1): with one level the root
    takes everything; root_share 0 leaves the root unmeasured and splits evenly over the other levels; otherwise
    the root takes root_share and the levels − 1 others (1 − root_share)/(levels − 1) each."""
    if levels == 1:
        return [Fraction(1)]
    rest = levels - 1
    if root_share == 0:
        return [Fraction(1, rest)] * rest
    return [Fraction(root_share)] + [(1 - Fraction(root_share)) / rest] * rest


class DAWA(Algorithm):
    data_adaptive = True  # the buckets are chosen from noisy deviations, the measured tree follows them
    name = "dawa"
    total_refit = "one more measurement of the bucket tree's root (least squares)"
    summary = ("a private partition into near-uniform buckets, then a tree over the bucket counts (Li et al. "
               "2014); one column, range queries at low signal")
    options = {"ratio": (Fraction(2, 5), option.fraction_between_0_and_1),  # 2-D defaults: DEFAULTS_2D
               "penalty": (Fraction(1), _positive_number),
               "select": ("split", option.choice("split", "optimal")),
               "threshold": (Fraction(4, 5), _positive_number),
               "prefix_threshold": (Fraction(3, 10), _positive_number),
               "stage2": ("auto", option.choice("auto", "prefix", "ranges", "identity")),
               "fit": ("lsq", option.choice("lsq", "nnls"))}
    option_help = {"ratio": "share of ε spent choosing the buckets (paper: 1/4; 2/5 measured better here in 1-D, "
                            "3/5 in 2-D)",
                   "penalty": "cost of one more bucket, in units of one bucket count's noise scale",
                   "select": "split: halve an interval while its noisy deviation exceeds the threshold; "
                             "optimal: the partition of least total noisy cost (the paper's rule)",
                   "threshold": "for select=split: the penalty plus this many noise scales of the deviation "
                                "(2-D default 2/5)",
                   "prefix_threshold": "the same for the intervals above 16 cells, whose cost is the prefix "
                                       "deviation (2-D default 1/10)",
                   "stage2": "the tree over the buckets: prefix (tuned for cell prefixes), ranges (tuned for all "
                             "cell ranges of the linear order), identity (each bucket once); auto: "
                             f"prefix in 1-D, {STAGE2_2D} in 2-D",
                   "fit": "the bucket counts from the tree's noisy sums: lsq (least squares) or nnls (least squares "
                          f"with counts of at least 0, up to {NNLS_MAX_LEAVES} buckets; auto's choice at low "
                          "signal)"}

    def __init__(self, **options):
        super().__init__(**options)
        self._given = frozenset(options)  # options the user set: the 2-D defaults never override them

    def setting(self, key: str, dims: int):
        """The value of option ``key`` for a table of ``dims`` axes: the user's value if given, else
        DEFAULTS_2D[key] on a 2-D grid, else the option's default (public: options and shape)."""
        if dims == 2 and key not in self._given and key in DEFAULTS_2D:
            return DEFAULTS_2D[key]
        return self.params[key]

    def in_force(self, dims: int) -> DAWA:
        """This algorithm with the options in force on a table of ``dims`` axes (:meth:`setting` of each) as its
        options: a new object, so a run reads every option from its own and leaves ``self`` as it was."""
        resolved = copy.copy(self)
        resolved.params = {key: self.setting(key, dims) for key in self.params}
        resolved._given = frozenset(self.params)
        return resolved

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) not in (1, 2):
            raise UsageError(f"algorithm 'dawa' works on one-column tables and two-column grids (here "
                             f"{len(shape)} columns)")
        cells = math.prod(int(n) for n in shape)
        if cells < 2:
            raise UsageError("algorithm 'dawa' needs at least 2 cells")
        if cells > MAX_CELLS:
            raise UsageError(f"algorithm 'dawa' works on at most {MAX_CELLS:,} cells (here {cells:,})")

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """The deviations (one weighted Laplace call at ``ratio``), then the bucket tree's levels on the rest: at
        their smallest, a level below a root of the largest share in a binary tree over as many buckets as cells."""
        n = math.prod(shape)
        ratio = self.setting("ratio", len(shape))
        starts, stops = dyadic_candidates(n)
        relative = int(((stops - starts) * candidate_weights(n, starts, stops)).max())
        below_root = max(1, math.ceil(math.log2(n)))
        level = min(min(ROOT_SHARES), (1 - max(ROOT_SHARES)) / below_root, Fraction(1, below_root))
        return [Step("bucket deviations", "laplace", ratio, self.partition_sensitivity(n), relative=relative),
                Step("a level of the bucket tree", "measure", (1 - ratio) * level)]

    def stage2(self, dims: int) -> str:
        """The bucket tree's target workload: the ``stage2`` option, or for "auto" "prefix" in 1-D and
        STAGE2_2D in 2-D (public: the shape and the options)."""
        chosen = self.params["stage2"]
        return chosen if chosen != "auto" else ("prefix" if dims == 1 else STAGE2_2D)

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        """Order the cells (the Hilbert curve in 2-D), select a partition into buckets (ε₁ = ratio·ε), measure the
        bucket counts through a tree over the buckets (the rest), infer the cells (module docstring)."""
        self.check_shape(counts.shape)
        algorithm = self.in_force(counts.ndim)  # the options with the 2-D defaults resolved (self stays as it is)
        ratio = algorithm.params["ratio"]
        part_budget, count_budget = budget.split([ratio, 1 - ratio])
        # order: the cells as one sequence (a 2-D grid along the Hilbert curve)
        order, x = linear_order(counts)
        check_exact_deviations(x)
        # select (private, ε₁): buckets from the noisy deviations of the dyadic candidates
        edges, partition = algorithm.select_buckets(x, part_budget, count_budget)
        # measure (ε₂): the bucket counts through a tree over the buckets, tuned to the workload
        sizes, workload = np.diff(edges), algorithm.stage2(counts.ndim)
        tree, measurements, strategy = algorithm.measure_bucket_tree(np.add.reduceat(x, edges[:-1]), count_budget,
                                                                     sizes, workload)
        # infer: least squares over the bucket tree, each bucket spread evenly over its cells
        nonnegative, fit = fit_in_force(algorithm.params["fit"], sizes.size)
        plan = BucketPlan(counts.shape, order, tree, sizes, nonnegative,
                          structure={**partition, **linearisation_report(order, workload)},
                          choices={"buckets": int(sizes.size), **strategy, "fit": fit})
        return algorithm.infer(plan, measurements)

    def select_buckets(self, x: np.ndarray, part_budget: PrivacyBudget,
                       count_budget: PrivacyBudget) -> tuple[np.ndarray, dict]:
        """The private partition of the cells ``x`` (int64, in their linear order) into buckets, spending all of
        ``part_budget`` on one weighted measurement of the candidates' deviations; ``count_budget`` (what will
        measure the bucket counts) sets the penalty of a bucket.  Returns (the bucket edges 0 = e_0 < … < e_k = n,
        the partition's public entries for the report)."""
        n = x.size
        # measure: every candidate's deviation, one weighted Laplace call (Δ = candidate_sensitivity(n))
        starts, stops = dyadic_candidates(n)
        sizes = stops - starts
        weights = candidate_weights(n, starts, stops)
        delta = self.partition_sensitivity(n)
        noisy_q, record = part_budget.laplace_weighted(
            candidate_costs(x, starts, stops), sizes * weights, delta, part_budget.amount,
            f"bucket deviations ({starts.size} aligned dyadic intervals, noise scale × size × level weight)",
            composition="one vector: over the intervals holding a cell, Σ (2(1 − 1/size) for L1, 1/2 for prefix)"
                        "/weight is at most Δ")
        # select: the best partition of the noisy costs (post-processing)
        penalty = float(count_budget.scale(self.params["penalty"], count_budget.amount))  # penalty × the count scale
        edges = self.partition(n, starts, stops, noisy_q / sizes, penalty, float(record.scale) * weights)
        return edges, partition_report(starts.size, delta, self.params["ratio"], record.scale)

    def infer(self, plan: BucketPlan, measurements: tuple[Measurement, ...]) -> Estimate:
        """Tree least squares over the buckets (``fit=nnls``: with counts of at least 0; a total measured
        elsewhere: one more measurement of the bucket tree's root, under which every bucket lies), each bucket
        spread evenly over its cells, then back from the curve to the grid.  Post-processing."""
        noisy, variances, refitted = level_inputs(plan.tree.levels, measurements)
        interval: dict = {"no_interval": NNLS_NO_INTERVAL}
        if plan.nonnegative:
            fitted = tree_nonnegative_least_squares(plan.tree, noisy, variances)
        else:
            # Given the partition (chosen with ε₁ from noise independent of the bucket tree's), each bucket's
            # count is a linear least-squares estimate from the tree's sums (and any total): its variance is
            # the fit's exact one, and a cell's value is its bucket's count ÷ the bucket's cells.
            fit = tree_least_squares(plan.tree, noisy, variances)
            fitted, buckets = fit.values[-1], np.arange(plan.sizes.size, dtype=np.int64)
            interval = {"variance": plan.cells(np.repeat(fit.variances[-1] / plan.sizes**2, plan.sizes)),
                        "groups": plan.cells(np.repeat(buckets, plan.sizes))}
        values = plan.cells(np.repeat(fitted / plan.sizes, plan.sizes, axis=-1))  # leading axes: replicated runs
        structure = plan.structure
        if refitted:
            structure = {**structure, "bucket_root_also_from": "an earlier noisy total (least squares)"}
        return Estimate(values=values, structure=structure, choices=dict(plan.choices), plan=plan,
                        measurements=measurements, **interval)

    def partition_sensitivity(self, n: int) -> Fraction:
        """Δ of the deviations' vector, :func:`candidate_sensitivity` (a method so the audit's mutant can lie)."""
        return candidate_sensitivity(n)

    def partition(self, n: int, starts: np.ndarray, stops: np.ndarray, noisy_costs: np.ndarray,
                  penalty: float, noise_scale: float) -> np.ndarray:
        """Bucket edges from the noisy deviations (post-processing; the audit's mutant overrides this).

        ``penalty`` is λ (one bucket count's noise scale times the ``penalty`` option) and ``noise_scale`` the
        scale b·g_I of the noise on each deviation (an array); both are public (n, ε and the options)."""
        if self.params["select"] == "split":
            ratios = np.where(prefix_levels(n, starts, stops), float(self.params["prefix_threshold"]),
                              float(self.params["threshold"]))
            threshold = penalty + ratios * noise_scale
            return split_partition(n, starts, stops, noisy_costs, threshold)
        return best_partition(n, starts, stops, noisy_costs, penalty)

    @staticmethod
    def measure_buckets(bucket_counts: np.ndarray, budget: PrivacyBudget, bucket_sizes=None,
                        workload: str = "prefix") -> tuple[np.ndarray, dict]:
        """The k bucket counts estimated from a range tree over them, spending all of ``budget``: (estimates of the
        k counts, float; the tree's shape and budget profile).  The tree and the per-level shares come from
        :func:`bucket_strategy` on ``bucket_sizes`` (cells per bucket; default all 1) and ``workload``, a DP output: free
        post-processing, they never read the counts.  Every measured level partitions the buckets:
        Δ₁ = Δ₂² = 1 per level, and the levels' shares add up to the budget exactly (sequential composition)."""
        tree, measurements, structure = DAWA.measure_bucket_tree(bucket_counts, budget, bucket_sizes, workload)
        noisy, variances, _ = level_inputs(tree.levels, measurements)
        return tree_least_squares(tree, noisy, variances).values[-1], structure

    @staticmethod
    def measure_bucket_tree(bucket_counts: np.ndarray, budget: PrivacyBudget, bucket_sizes=None,
                            workload: str = "prefix") -> tuple:
        """:meth:`measure_buckets` before its least squares: (the range tree over the k buckets, the measurements
        of its measured levels (queries :func:`~dphist.algorithms.hierarchical.level_query`), the structure)."""
        k = bucket_counts.size
        sizes = np.ones(k, dtype=np.int64) if bucket_sizes is None else np.asarray(bucket_sizes, dtype=np.int64)
        b, root_share = bucket_strategy(sizes, budget.noise, workload)
        tree = range_tree(k, b)
        shares = level_shares(tree.levels, root_share)
        measured = list(range(tree.levels - len(shares), tree.levels))
        parts = budget.split(shares)
        sums = tree.level_sums(bucket_counts)
        measurements = []
        for level, part in zip(measured, parts):
            noisy, rec = part.measure(
                sums[level], LEVEL_L1, LEVEL_L2_SQUARED, part.amount,
                f"bucket tree level {level} ({tree.sizes[level]} nodes over {k} buckets)",
                composition="parallel over the level's disjoint nodes; levels add up sequentially")
            measurements.append(Measurement(level_query(level), noisy, rec.noise_variance))
        return tree, tuple(measurements), {"bucket_tree_branching": int(b), "bucket_tree_levels": int(tree.levels),
                                           "bucket_tree_root_share": str(root_share if tree.levels > 1 else 1)}


@dataclass(frozen=True, eq=False)
class BucketPlan:
    """What a DAWA run selected: the table's ``shape``, the ``order`` of its cells (the C-order index of each
    position along the Hilbert curve; None in 1-D), the range ``tree`` over the buckets, the cells per bucket
    (``sizes``, from the private partition), whether the fit keeps the bucket counts non-negative, and the
    report's ``structure`` and ``choices``.  Public or a function of the ε₁-DP partition only."""

    shape: tuple[int, ...]
    order: np.ndarray | None
    tree: Tree
    sizes: np.ndarray
    nonnegative: bool
    structure: dict
    choices: dict

    def cells(self, sequence: np.ndarray) -> np.ndarray:
        """Per-position values along the cells' linear order (last axis; leading axes of replicated runs kept)
        as the table's shape: in 2-D each put back from the Hilbert curve to its cell of the grid."""
        if self.order is None:
            return sequence
        grid = np.empty(sequence.shape[:-1] + (math.prod(self.shape),), dtype=sequence.dtype)
        grid[..., self.order] = sequence
        return grid.reshape(sequence.shape[:-1] + self.shape)


def linear_order(counts: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(order, x): the cells of ``counts`` as int64 in the one sequence DAWA reads, a 1-D table as it is (order
    None) and a 2-D grid along the Hilbert curve (``order``: the C-order index of each position).  The order is a
    public bijection of the cells: one record still moves one cell of the sequence by 1."""
    order = hilbert_order(counts.shape) if counts.ndim == 2 else None
    x = np.asarray(counts, dtype=np.int64)
    if order is not None:
        x = x.ravel()[order]
    return order, x


def check_exact_deviations(x: np.ndarray) -> None:
    """UsageError unless every candidate's integer deviation of the cells ``x`` fits int64 exactly (each is at
    most 2·n times the table's absolute total)."""
    if int(np.abs(x).sum()) >= (1 << 62) // (2 * x.size):
        raise UsageError("algorithm 'dawa': the table's total is too large for its exact integer deviations")


def partition_report(candidates: int, sensitivity: Fraction, ratio: Fraction, noise_scale) -> dict:
    """The report's entries for the private partition: the number of candidate intervals, the sensitivity Δ of
    their deviations' vector, the share of the budget spent on it and the base scale of its noise."""
    return {"candidates": int(candidates), "partition_sensitivity": str(sensitivity), "ratio": str(ratio),
            "partition_noise_scale": float(noise_scale)}


def linearisation_report(order: np.ndarray | None, workload: str) -> dict:
    """The report's entries for the order of the cells: none in 1-D; in 2-D the curve and the bucket tree's
    workload along it."""
    return {} if order is None else {"linearisation": "hilbert", "bucket_workload": workload}


def fit_in_force(option: str, buckets: int) -> tuple[bool, str]:
    """(whether the bucket counts are fitted non-negative, the fit's name for the report) for the ``fit`` option
    on ``buckets`` buckets: nnls takes at most NNLS_MAX_LEAVES, beyond which the fit is the plain least squares."""
    nonnegative = option == "nnls" and buckets <= NNLS_MAX_LEAVES
    if option == "nnls" and not nonnegative:
        return False, f"lsq (nnls takes at most {NNLS_MAX_LEAVES} buckets)"
    return nonnegative, "nnls" if nonnegative else "lsq"
