"""StructureFirst (Xu, Zhang, Xiao, Yang, Yu, Winslett: ICDE 2012), docs/algorithms.md §5.3.

The bucket boundaries are chosen first, privately, from the true counts clipped to a public cap F; then every
bucket's total is measured once:

    clip:     c = min(x, F)                                    (F public: an option, never read from the data)
    DP:       T[κ][j], the least SSE of c over the first j candidate cuts in κ buckets  (§5.1)
    select:   r_k = n; for j = k−1 … 1, draw r_j among the cuts b < r_{j+1} by permute-and-flip on the score
              −(T[j][b] + SSE(c over [b, r_{j+1})))            (Δu = 2F + 1, ε₁/(k−1) per draw)
    measure:  every bucket's total + DLap(1/ε₂)                (Δ = 1: buckets are disjoint)
    infer:    each bucket's noisy total spread evenly over its cells

ε₁ + ε₂ = ε.  Score sensitivity: adding or removing one record moves one clipped count by at most 1 inside
[0, F], which moves the SSE of the one bucket holding that cell by at most 2F + 1; every score is a sum of bucket
SSEs (or a minimum of such sums) with exactly one bucket holding the cell, so it moves by at most 2F + 1 too.
The scores are computed in float64; ``score_rounding_bound`` bounds the rounding, and the draws use a
sensitivity of 2F + 1 plus twice that bound, so the stated ε₁ is an upper bound on what is spent.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Estimate, Step
from .partitioning import dp_ceilings, dp_work, v_optimal_costs

__all__ = ["StructureFirst", "score_rounding_bound", "guarded_structure_share"]

MAX_BUCKETS = 64  # the DP costs O(k g²): 64 buckets over 4096 candidate cuts take about a second
MAX_CAP_TIMES_CELLS = 1 << 26  # keeps every prefix sum and square below exactly representable integers


def score_rounding_bound(cells: int, cap: int, buckets: int) -> Fraction:
    """An upper bound on |score computed in float64 − exact score| for counts in [0, cap] over ``cells`` cells.

    With cells·cap <= 2^26 every prefix sum P, prefix sum of squares Q and squared difference (P_j − P_i)² is an
    integer below 2^52, so exact.  A bucket's SSE then rounds twice (a division and a subtraction), each within
    2^-53 of a value at most m·cap², and every score adds at most ``buckets`` such terms, each addition rounding
    within 2^-53 of a value at most cells·cap²/4.  In total: cells·cap²·2^-52·(2 + buckets/8).
    """
    return Fraction(cells * cap * cap * (16 + buckets), 1 << 55)


def guarded_structure_share(buckets: int, cap: int, cells: int, epsilon: Fraction, fallback: Fraction) -> Fraction:
    """ε₁/ε minimising the VLDBJ error proxy V(ε₁) = 8(k−1)²(2F+1)² / (ε₁(8(k−1)(2F+1) − ε₁nF²)) + 2k/(ε−ε₁)²
    over ε₁/ε = 1/20 … 19/20, skipping every ε₁ where the first denominator is not positive (there V is
    meaningless and would "win"); ``fallback`` when no ε₁ qualifies.  Public inputs only."""
    k, F, n = buckets, cap, cells
    best, best_value = None, None
    for step in range(1, 20):
        share = Fraction(step, 20)
        eps1 = share * epsilon
        denominator = 8 * (k - 1) * (2 * F + 1) - eps1 * n * F * F
        if denominator <= 0:
            continue
        value = Fraction(8 * (k - 1) ** 2 * (2 * F + 1) ** 2) / (eps1 * denominator) + 2 * k / (epsilon - eps1) ** 2
        if best_value is None or value < best_value:
            best, best_value = share, value
    return fallback if best is None else best


def _share(value) -> Fraction | str:
    return "auto" if value in (None, "auto") else option.fraction_between_0_and_1(value)


def _sse(P: np.ndarray, Q: np.ndarray, cuts: np.ndarray, lo, hi) -> np.ndarray:
    """SSE of the clipped counts over the buckets [cuts[lo], cuts[hi]), computed as in the DP."""
    d = P[hi] - P[lo]
    return np.maximum((Q[hi] - Q[lo]) - d * d / (cuts[hi] - cuts[lo]).astype(np.float64), 0.0)


class StructureFirst(Algorithm):
    data_adaptive = True
    name = "structurefirst"
    summary = ("bucket boundaries by the exponential mechanism on counts clipped to a public cap, then noisy "
               "bucket totals (Xu et al. 2012); one column; needs --option cap=F")
    options = {"cap": (None, option.positive_int), "buckets": (32, option.positive_int),
               "structure_share": ("auto", _share), "grid": (1024, option.positive_int)}
    example_options = {"cap": 20}
    option_help = {"cap": "public upper bound F on a cell's count, from policy (never the data); "
                          "counts are clipped to F to choose the boundaries only",
                   "buckets": f"number of buckets k (at most {MAX_BUCKETS}; 1 spends all of ε on the total)",
                   "structure_share": "share of ε for the boundaries, or auto (the guarded error proxy, else 1/2)",
                   "grid": "boundaries are restricted to this many equal steps over the domain (4096 cells at "
                           "full resolution take about a second; 1024 about 0.1 s)"}

    ceilings = dp_ceilings("buckets", "buckets − 1")

    def work(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return dp_work(math.prod(shape), self.params["grid"], self.params["buckets"] - 1)

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """k − 1 boundary draws at the structure's share (every share the automatic one can take when it is auto)
        and the bucket totals at the rest (Δ = 1)."""
        n, buckets = math.prod(shape), self.params["buckets"]
        k = min(buckets, min(n, self.params["grid"]))
        share = self.params["structure_share"]
        if k <= 1:
            return [Step("the total of each bucket", "laplace", Fraction(1))]
        shares = [Fraction(j, 20) for j in range(1, 20)] + [Fraction(1, 2)] if share == "auto" else [share]
        return [Step("bucket boundaries", "selection", min(shares), count=k - 1),
                Step("the total of each bucket", "laplace", 1 - max(shares))]

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 1:
            raise UsageError("algorithm 'structurefirst' works on one-column tables")
        cap = self.params["cap"]
        if cap is None:
            raise UsageError("algorithm 'structurefirst' needs a public cap on any cell's count: add --option "
                             "cap=F with F a policy number, never one read from the data")
        if self.params["buckets"] > MAX_BUCKETS:
            raise UsageError(f"algorithm 'structurefirst': option 'buckets' must be at most {MAX_BUCKETS}")
        if cap * shape[0] > MAX_CAP_TIMES_CELLS:
            raise UsageError(f"algorithm 'structurefirst': cap × cells must be at most 2^26 = "
                             f"{MAX_CAP_TIMES_CELLS:,} (here {cap:,} × {shape[0]:,})")

    def plan(self, cells: int, epsilon: Fraction) -> tuple[np.ndarray, int, Fraction]:
        """The public plan: candidate cuts (at most ``grid`` equal steps), the number of buckets k and the share
        ε₁/ε of the boundaries (0 when k = 1)."""
        cuts = np.unique(np.round(np.linspace(0, cells, min(cells, self.params["grid"]) + 1)).astype(np.int64))
        k = min(self.params["buckets"], cuts.size - 1)
        share = self.params["structure_share"]
        if share == "auto":
            share = guarded_structure_share(k, self.params["cap"], cells, epsilon, fallback=Fraction(1, 2))
        return cuts, k, (share if k > 1 else Fraction(0))

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        n, F = counts.shape[0], self.params["cap"]
        cuts, k, share = self.plan(n, budget.epsilon_per_record(budget.amount))  # the proxy reads ε per record

        # select: k − 1 boundaries by the exponential mechanism (none when k = 1: the plan is public)
        if k > 1:
            for_structure, for_totals = budget.split([share, 1 - share])
            draws = for_structure.selection(
                k - 1, for_structure.amount, 2 * F + 1 + 2 * score_rounding_bound(n, F, k),
                f"bucket boundaries: {k - 1} permute-and-flip draws, on counts clipped to [0, {F}] (score "
                f"sensitivity 2F + 1 plus the float64 rounding bound)")
            chosen = self.boundaries(self.scores(counts, cuts, k), cuts.size - 1, k, draws.choose)
        else:
            for_totals, chosen = budget, [0, cuts.size - 1]
        edges = cuts[np.array(chosen)]

        # measure: every bucket's total (buckets are disjoint, so one record moves one total by 1)
        noisy, record = for_totals.laplace(np.add.reduceat(counts, edges[:-1]), 1, for_totals.amount,
                                           f"the total of each of the {k} buckets")

        # infer: spread each bucket's noisy total evenly over its cells.  The boundaries were drawn from the true
        # counts with their own share, so the totals' noise is independent of them: given the boundaries, a
        # bucket's noisy total is its true total plus one draw of discrete Laplace noise, whose exact 95 %
        # half-width (and variance) ÷ the bucket's cells is each cell's, for the bucket's share.
        sizes = np.diff(edges)
        values = np.repeat(noisy / sizes, sizes).astype(np.float64)
        structure = {"cap": F, "buckets": k, "candidate_boundaries": int(cuts.size),
                     "structure_epsilon": str(budget.part(share))}
        return Estimate(values=values, structure=structure,
                        choices={"buckets": k, "boundaries": [int(c) for c in edges[1:-1]]},
                        variance=np.repeat(record.noise_variance / sizes.astype(np.float64) ** 2, sizes),
                        halfwidth=np.repeat(record.halfwidth() / sizes.astype(np.float64), sizes),
                        groups=np.repeat(np.arange(k, dtype=np.int64), sizes))

    def scores(self, counts: np.ndarray, cuts: np.ndarray, k: int):
        """score(j, b, r) = T[j][b] + SSE([b, r)) on the clipped counts, as a function (None when k = 1)."""
        if k == 1:
            return None
        clipped = np.minimum(counts, self.params["cap"]).astype(np.float64)
        cost, _ = v_optimal_costs(clipped, cuts, k - 1)
        P = np.concatenate([[0.0], np.cumsum(clipped)])[cuts]
        Q = np.concatenate([[0.0], np.cumsum(clipped * clipped)])[cuts]
        return lambda j, b, r: cost[j - 1, b] + _sse(P, Q, cuts, b, r)

    def boundaries(self, scores, g: int, k: int, choose) -> list[int]:
        """Indices into the g + 1 candidate cuts of the k + 1 bucket edges, the inner ones drawn right to left:
        ``choose(quality)`` returns the index of one candidate (higher quality likelier)."""
        right = [g]
        for j in range(k - 1, 0, -1):
            candidates = np.arange(j, right[-1])  # bucket j + 1 is [b, r); j buckets must fit left of b
            chosen = choose((-scores(j, candidates, right[-1])).tolist())
            right.append(int(candidates[chosen]))
        return [0] + right[::-1]
