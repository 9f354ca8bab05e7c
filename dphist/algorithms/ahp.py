"""AHP (Zhang, Chen, Xu, Meng, Xie: "Towards accurate histogram publication under differential privacy", SDM
2014), docs/algorithms.md §7: noisy cells, a threshold, a clustering of the sorted noisy values, one noisy total per
cluster.

The table is flattened to its n cells (any number of axes); ε₁ = ρε, ε₂ = (1 − ρ)ε.

    measure: x̃ = x + DLap(b₁) on every cell, b₁ = 1/ε₁                                (Δ = 1, ε₁)
    infer:   x̃_i ← 0 where x̃_i ≤ η·ln(n)·b₁                  (public threshold: n, η, ε₁ only)
             sort the cells by x̃ (ties by cell index)
             greedy clustering of the sorted values (below), with c = 2b₂², b₂ = 1/ε₂,
             the variance of one noisy cluster total
    measure: every cluster's total + DLap(b₂)                                           (Δ = 1, ε₂)
    infer:   each cluster's noisy total spread evenly over its cells
    interval: a cell's 95 % interval covers its cluster's true total ÷ the cluster's cells (its share): the
             noisy total ± the exact 95 % half-width of its noise, over the cluster's cells.  Exact given the
             clusters, as the totals' noise is independent of the cell noise that chose them.

Greedy clustering (the reference's rule, dpcomp_core's ahp_fast.pyx).  Values v_1 ≤ … ≤ v_m (1-based);
err(i, j) = SSE(v_i..v_j) + c/L with L = j − i + 1 (the squared error of spreading the cluster's noisy total
evenly: its deviation plus the noise c/L² on each of L cells); err*(j) = min over l ≥ j of
(v_j − mean(v_j..v_l))² + c/(l − j + 1)², scanning l = j, j+1, … and stopping at the first l where the rise of
the first term reaches the fall of the second one measured against c/(m − j + 2)² (the paper's early
termination, p. 6).  Start a cluster at i = 1 with e = err(1, 1); for j = 2 … m: if err(i, j) ≥ e + err*(j),
close the cluster before j, start one at j and set e = err(j, j); otherwise e = err(i, j).

Privacy (add/remove of one record, which changes one cell by 1):
* the cell measurement has L1 sensitivity 1: ε₁-DP;
* the threshold, the order and the clusters are functions of x̃ and public numbers only: post-processing;
* the clusters are disjoint sets of cells, chosen before the second measurement, so one record changes exactly
  one cluster total by 1: L1 sensitivity 1, ε₂-DP (parallel composition over the clusters; the queries depend
  on x̃, which is adaptive sequential composition);
* the release is a function of the two noisy measurements: ε₁ + ε₂ = ε in all.
On a zCDP budget both steps are Laplace steps, each ρ-part buying ε = √(2ρ) (the kernel converts).
Where the reference's AHP* variants read the true total N to pick ρ and η, this plan takes them as public options.
The scales above are the budget's (factor·Δ/ε for a protected unit of several rows); the threshold and c follow
them, so a coarser unit gets a proportionally higher threshold and costlier clusters.
"""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Estimate, Step

__all__ = ["AHP", "greedy_clusters", "err_star", "cluster_intervals"]

_SCALAR_STEPS = 24  # err* scans this many l one at a time before switching to numpy chunks
L1 = 1  # one record changes one cell, hence one cluster total, by 1


def _eta(value) -> Fraction:
    """A non-negative number of sane size (the threshold's multiplier)."""
    number = option.exact(value)
    if number is None or not 0 <= number <= 1000:
        raise ValueError("must be a number between 0 and 1000")
    return number


def err_star(values: np.ndarray, prefix: np.ndarray, j: int, c: float, prefix_list: list | None = None) -> float:
    """err*(j) of the module docstring for the sorted values ``values`` (1-based: ``values[0]`` is a 0 pad,
    ``prefix`` its cumulative sums) and the cost c of one noisy total.  The first few l one at a time (most scans
    stop there), then in growing numpy chunks (long runs of equal values scan to the end).  ``prefix_list``:
    ``prefix`` as a list (faster scalar reads), if the caller has it."""
    scalar = prefix.tolist() if prefix_list is None else prefix_list
    m = values.size - 1
    x_j = float(values[j])
    base = scalar[j - 1]
    bound = c / float((m - j + 2) ** 2)
    best = c  # l = j: no deviation, the whole noise c
    last1, last2 = 0.0, c
    l = j + 1
    while l <= min(m, j + _SCALAR_STEPS):
        length = l - j + 1
        mean = (scalar[l] - base) / length
        e1, e2 = (x_j - mean) ** 2, c / (length * length)
        if e1 - last1 >= last2 - bound:  # early termination
            return best
        best = min(best, e1 + e2)
        last1, last2 = e1, e2
        l += 1
    start, chunk = l, 64
    while start <= m:
        stop = min(m, start + chunk - 1)
        ls = np.arange(start, stop + 1)
        length = (ls - j + 1).astype(np.float64)
        e1 = (x_j - (prefix[ls] - base) / length) ** 2
        e2 = c / (length * length)
        prev1 = np.concatenate(([last1], e1[:-1]))
        prev2 = np.concatenate(([last2], e2[:-1]))
        stops = np.flatnonzero(e1 - prev1 >= prev2 - bound)
        end = int(stops[0]) if stops.size else ls.size
        if end:
            best = min(best, float(np.min(e1[:end] + e2[:end])))
        if stops.size:
            return best
        last1, last2 = float(e1[-1]), float(e2[-1])
        start, chunk = stop + 1, chunk * 2
    return best


def greedy_clusters(sorted_values: np.ndarray, c: float) -> np.ndarray:
    """Edges 0 = e_0 < e_1 < … < e_k = m of the contiguous clusters [e_t, e_{t+1}) of ``sorted_values`` (m
    floats in ascending order) chosen by the greedy rule of the module docstring, c the variance of one noisy
    cluster total.  Post-processing: reads only its arguments."""
    m = int(sorted_values.size)
    v = np.concatenate(([0.0], np.asarray(sorted_values, dtype=np.float64)))
    P = np.cumsum(v)
    PP = np.cumsum(v * v)
    Pl, PPl = P.tolist(), PP.tolist()

    def err(i: int, j: int) -> float:
        length = j - i + 1
        mean = (Pl[j] - Pl[i - 1]) / length
        return (PPl[j] - PPl[i - 1]) - length * mean * mean + c / length

    edges = [0]
    i = 1
    last = err(1, 1)
    for j in range(2, m + 1):
        now = err(i, j)
        if now >= last + err_star(v, P, j, c, Pl):
            edges.append(j - 1)
            i = j
            last = err(j, j)
        else:
            last = now
    edges.append(m)
    return np.asarray(edges, dtype=np.int64)


def cluster_intervals(order: np.ndarray, sizes: np.ndarray, record, shape: tuple[int, ...]) -> dict:
    """The interval fields of an Estimate whose clusters (``order`` and cluster ``sizes``, as :meth:`AHP.clusters`
    gives them) each spread one noisy total of the measurement ``record`` evenly: ``groups`` (each cell's
    cluster), and per cell the variance v/k² and the exact half-width q/k of its share, with v and q the noise
    variance and exact 95 % half-width of one noisy total and k the cluster's cells.

    The totals are measured afresh, with noise independent of the cell noise that chose the clusters, so given
    the clusters (public) a cell's interval covers its cluster's true total ÷ k with probability at least 95 %."""
    cluster = np.empty(order.size, dtype=np.int64)
    cluster[order] = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    k = sizes.astype(np.float64)[cluster]
    return {"groups": cluster.reshape(shape),
            "variance": (record.noise_variance / (k * k)).reshape(shape),
            "halfwidth": (record.halfwidth() / k).reshape(shape)}


class AHP(Algorithm):
    data_adaptive = True
    name = "ahp"
    summary = ("noisy cells thresholded, sorted and clustered, one noisy total per cluster (Zhang et al. 2014); "
               "sparse or skewed data, any number of columns")
    # dpcomp_core's AHP defaults (ahp/__init__.py: ratio = 0.85, eta = 0.35).
    options = {"ratio": (Fraction(17, 20), option.fraction_between_0_and_1), "eta": (Fraction(7, 20), _eta)}
    option_help = {"ratio": "share of ε for the noisy cells that choose the clusters; the rest measures the "
                            "cluster totals",
                   "eta": "noisy cells at or below eta·ln(cells)/ε₁ count as zero before clustering"}

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if int(np.prod(shape, dtype=np.int64)) < 1:
            raise UsageError("algorithm 'ahp' needs a table with at least one cell")

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        ratio = self.params["ratio"]
        return [Step("every cell", "laplace", ratio), Step("every cluster's total", "laplace", 1 - ratio)]

    def threshold(self, n: int, scale1) -> float:
        """The public cutoff η·ln(n)·b₁ (noisy cells at or below it count as 0): n cells, b₁ the cell noise
        scale.  Depends on the shape, the options and the budget only."""
        return float(self.params["eta"]) * math.log(n) * float(scale1)

    def clusters(self, noisy: np.ndarray, cutoff: float, c: float) -> tuple[np.ndarray, np.ndarray]:
        """From the flat noisy cells: ``order`` (the cells sorted by thresholded noisy value, ties by index) and
        the cluster ``edges`` into that order (:func:`greedy_clusters`).  Post-processing of ``noisy``."""
        values = np.where(noisy <= cutoff, 0, noisy).astype(np.float64)
        order = np.argsort(values, kind="stable")
        return order, greedy_clusters(values[order], c)

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        flat = np.asarray(counts).reshape(-1)
        n = flat.size
        ratio = self.params["ratio"]
        first, second = budget.split([ratio, 1 - ratio])
        scale1, scale2 = first.scale(L1, first.amount), second.scale(L1, second.amount)

        # measure: every cell
        noisy, _ = first.laplace(flat, L1, first.amount, "every cell (to choose the clusters)")

        # infer (select): threshold, sort and cluster the noisy cells: post-processing
        cutoff = self.threshold(n, scale1)
        c = 2 * float(scale2) ** 2  # the reference's variance of one noisy cluster total (Laplace, 2b²)
        order, edges = self.clusters(noisy, cutoff, c)

        # measure: every cluster's total (disjoint clusters: one record moves one total by 1)
        totals = np.add.reduceat(flat[order], edges[:-1]).astype(np.int64)
        noisy_totals, record = second.laplace(totals, L1, second.amount,
                                              "the total of every cluster (chosen from the noisy cells)",
                                              composition="parallel over disjoint clusters")

        # infer: spread each noisy total evenly over its cluster's cells
        sizes = np.diff(edges)
        values = np.empty(n, dtype=np.float64)
        values[order] = np.repeat(noisy_totals.astype(np.float64) / sizes, sizes)
        return Estimate(values=values.reshape(counts.shape),
                        structure={"ratio": str(ratio), "eta": str(self.params["eta"]), "threshold": cutoff},
                        choices={"clusters": int(sizes.size)},
                        **cluster_intervals(order, sizes, record, counts.shape))
