"""PrivTree (Zhang, Xiao, Xie; SIGMOD 2016): a hierarchical decomposition with no height parameter.

A table of d axes (1 to 3) is cut top-down like a quadtree: a box that is split has its every axis of two or
more cells cut in two (the first half gets the extra cell of an odd length), so a node has at most β = 2^d
children.  Single-cell boxes are never split.

    select:   one paid call draws an independent discrete Laplace noise Z(v) of scale λ for every node v of the
              full tree (a public set: it depends on the shape only), with
                  λ = factor·(2β − 1)/(β − 1)/ε₁      (budget.scale of the sensitivity (2β − 1)/(β − 1))
              then, from the root down, a visited node v of depth k (the root has depth 0) with true count c(v)
              is split when
                  b̂(v) = max(θ − δ, c(v) − k·δ) + Z(v) > θ,
              and its children are visited; otherwise it is a leaf.  θ is public (0 by default) and δ is the
              bias per level (below); the test is evaluated exactly (integers and rationals, no floating point).
    measure:  every leaf's count + noise of the leaf budget ε₂ (disjoint leaves: Δ₁ = Δ₂ = 1, parallel);
              discrete Laplace (pure ε) or discrete Gaussian (zCDP) through ``budget.measure``
    infer:    each leaf's noisy count spread evenly over its cells.
    interval: a cell's 95 % interval covers its leaf's true count ÷ the leaf's cells (its share): the leaf's
              noisy count ± the exact 95 % half-width of its noise, over the leaf's cells (exact given the tree,
              whose split-test noise is independent of the leaves').

Budget: ε₁ = structure_share·ε for the structure (all of it, whatever the tree's height), ε₂ = the rest for the
leaves; structure_share = 1/2 by default (the split used in the paper's experiments as we recall them; it is
not checked against the text, and the reference implementation dpcomp_core has no PrivTree).

Privacy of the structure (the paper's Theorem, re-proved here for integer noise, which changes δ slightly).
Let D′ = D plus one record (factor = 1; a unit of K records follows by group privacy, since λ is K times the
single-record λ).  The record lies in one node per level: the path v_0 (root), v_1, … down to the leaf v_t of the
released tree T that holds it.  Nodes off the path have the same count in D and D′, hence the same split
probability; forced leaves (single cells) involve no noise.  So ln P[T | D′]/P[T | D] is the sum over the path of
the per-node log-ratios, with x_i = c_i − iδ the unclamped biased count in D, b_i = max(θ − δ, x_i) and
b′_i ∈ [b_i, b_i + 1] in D′.  Write α = e^(−1/λ), so P(Z = z) = (1 − α)/(1 + α)·α^|z|.
* Splits, direction D′ over D.  With m = ⌊θ − b_i⌋ + 1 the least noise that splits, the ratio is at most
  P(Z ≥ m − 1)/P(Z ≥ m): = 1/α (loss 1/λ) when m ≥ 1; when m ≤ 0 (b_i > θ), with q = α^(1 − m) ≤ α it is
  1 + (1 − α)q/(1 + α − q), so the loss is at most (1 − α)q ≤ (1/λ)·e^(−(b_i − θ)/λ).  So
  loss_i ≤ (1/λ)·min(1, e^(−(x_i − θ)/λ)), and loss_i = 0 unless x_i + 1 > θ − δ (else b′_i = b_i = θ − δ).
* Counts only shrink down a path, so x_(i+1) ≤ x_i − δ.  The nodes with a loss are v_0 … v_j, with
  x_j > θ − δ − 1, hence x_(j−r) − θ > (r − 1)δ − 1: v_j and v_(j−1) lose at most 1/λ each, v_(j−r) (r ≥ 2) at most
  (1/λ)·e^(1/λ)·e^(−(r−1)δ/λ).  The sum is at most (1/λ)·(2 + e^(1/λ)/(e^(δ/λ) − 1)).
* The leaf v_t, direction D′ over D, has ratio ≤ 1; direction D over D′ every split has ratio ≤ 1 and the leaf
  P(Z ≤ θ − b_t)/P(Z ≤ θ − b′_t) ≤ 1/α (the shift moves the integer cut by at most one): loss ≤ 1/λ.
Choosing δ with e^(δ/λ) − 1 ≥ (β − 1)·e^(1/λ), i.e. δ ≥ λ·ln(1 + (β − 1)·e^(1/λ)), bounds both directions by
(1/λ)·(2 + 1/(β − 1)) = (1/λ)·(2β − 1)/(β − 1) = ε₁.  The paper's δ = λ·ln β is the continuous limit; the integer
version needs this slightly larger bias (by less than one count: λ ln(1 + (β − 1)e^(1/λ)) − λ ln β < 1), which
we take as a rational rounded UP (:func:`bias`).  The fan-out enters only through δ, so boxes with fewer than β
children (axes of one cell) are covered as well.  The noise values themselves are never released (the paid
call measures zeros: its record holds the scale λ and the cost ε₁ once; only the split decisions are used).
The leaves then cost ε₂ (parallel), and the two steps compose sequentially: ε₁ + ε₂ = ε.
"""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Estimate, Step

__all__ = ["PrivTree", "bias", "full_tree", "count_halfwidth"]

MAX_AXES = 3
_BIAS_DIGITS = 10**6  # δ is rounded up to a multiple of 1e-6


def _theta(value) -> Fraction:
    number = option.exact(value)
    if number is None:
        raise ValueError("must be a number (a count threshold, e.g. 0 or 5/2)")
    return number


def structure_sensitivity(fanout: int) -> Fraction:
    """(2β − 1)/(β − 1): the 'sensitivity' whose budget scale is PrivTree's λ (the structure costs ε₁ = that/λ)."""
    return Fraction(2 * fanout - 1, fanout - 1)


def bias(scale: Fraction, fanout: int) -> Fraction:
    """A rational δ ≥ λ·ln(1 + (β − 1)·e^(1/λ)) (module docstring), rounded up to a multiple of 1e-6.

    The float evaluation errs by a few ulps (relative 1e-15); the 1e-9 relative margin covers it many times."""
    lam = float(scale)
    value = lam * math.log1p((fanout - 1) * math.exp(1 / lam))
    return Fraction(math.ceil(value * (1 + 1e-9) * _BIAS_DIGITS) + 1, _BIAS_DIGITS)


def full_tree(shape: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every node of the complete decomposition of ``shape``, level by level: (lo, hi, parent) with lo/hi of shape
    (nodes, d) (the box [lo, hi)) and parent the index of each node's parent in the level above (−1 at the root).
    Depends on the shape only."""
    d = len(shape)
    lo, hi = np.zeros((1, d), dtype=np.int64), np.array([shape], dtype=np.int64)
    levels = [(lo, hi, np.array([-1]))]
    while True:
        lo, hi, _ = levels[-1]
        parents = np.flatnonzero(np.any(hi - lo >= 2, axis=1))
        if parents.size == 0:
            return levels
        plo, phi = lo[parents], hi[parents]
        mid = plo + (phi - plo + 1) // 2  # an axis of one cell keeps it in the first half (the second is empty)
        children = []
        for corner in range(1 << d):
            clo, chi = plo.copy(), phi.copy()
            for axis in range(d):
                if corner >> axis & 1:
                    clo[:, axis] = mid[:, axis]
                else:
                    chi[:, axis] = mid[:, axis]
            keep = np.all(chi > clo, axis=1)
            children.append((clo[keep], chi[keep], parents[keep]))
        nlo = np.concatenate([c[0] for c in children])
        nhi = np.concatenate([c[1] for c in children])
        npar = np.concatenate([c[2] for c in children])
        order = np.argsort(npar, kind="stable")  # children of a node next to each other
        levels.append((nlo[order], nhi[order], npar[order]))


def box_counts(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The exact int64 sum of ``counts`` over each box [lo, hi) (rows of lo/hi), by a summed-area table."""
    d = counts.ndim
    table = np.pad(counts.astype(np.int64), [(1, 0)] * d)
    for axis in range(d):
        table = np.cumsum(table, axis=axis)
    total = np.zeros(lo.shape[0], dtype=np.int64)
    for corner in range(1 << d):
        index, sign = [], 1
        for axis in range(d):
            if corner >> axis & 1:
                index.append(hi[:, axis])
            else:
                index.append(lo[:, axis])
                sign = -sign
        total += sign * table[tuple(index)]
    return total


#: Above this σ² the discrete Gaussian's exact 95 % half-width (a tail sum over ~10σ terms) takes long; its
#: normal quantile rounded up is then at least as wide, by at most a count or so (the two differ by about 1/2).
_EXACT_SIGMA2 = 10**8
_Z_95 = 1.959963984540054


def count_halfwidth(record) -> float:
    """The exact 95 % half-width of one noisy count of measurement ``record`` (discrete Laplace, or a discrete
    Gaussian of σ² up to 10⁸); beyond that σ², ⌈1.96·sd⌉, no narrower."""
    if record.sigma2 is not None and record.sigma2 > _EXACT_SIGMA2:
        return float(math.ceil(_Z_95 * math.sqrt(record.noise_variance)))
    return float(record.halfwidth())


class PrivTree(Algorithm):
    data_adaptive = True
    name = "privtree"
    summary = ("quadtree split where biased noisy counts exceed a threshold, no height limit (Zhang et al. 2016); "
               "noisy leaf counts spread evenly; small counts, 1 to 3 columns")
    options = {"structure_share": (Fraction(1, 2), option.fraction_between_0_and_1),
               "theta": (Fraction(0), _theta)}
    option_help = {"structure_share": "share of ε that decides the tree (the rest measures the leaves)",
                   "theta": "split threshold on a node's biased noisy count (a count; 0 by default)"}

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if not 1 <= len(shape) <= MAX_AXES:
            raise UsageError(f"algorithm 'privtree' works on tables of 1 to {MAX_AXES} columns, got {len(shape)}")
        if any(n < 1 for n in shape):
            raise UsageError("algorithm 'privtree' needs at least one cell on every axis")

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        share = self.params["structure_share"]
        return [Step("the tree's split tests", "laplace", share, structure_sensitivity(self.fanout(shape))),
                Step("every leaf's count", "measure", 1 - share)]

    @staticmethod
    def fanout(shape: tuple[int, ...]) -> int:
        """β = 2^d, d the number of axes (public)."""
        return 1 << len(shape)

    def split_tests(self, counts: np.ndarray, noise: np.ndarray, depth: int, delta: Fraction,
                    theta: Fraction) -> np.ndarray:
        """Which nodes split: max(θ − δ, c − depth·δ) + Z > θ, exactly (``counts``, ``noise``: int64 arrays).

        All terms are scaled by a common denominator to Python integers (object arrays: no overflow)."""
        scale = math.lcm(delta.denominator, theta.denominator)
        d_int, t_int = int(delta * scale), int(theta * scale)
        c = counts.astype(object) * scale - depth * d_int
        b = np.maximum(c, t_int - d_int)
        return (b + noise.astype(object) * scale) > t_int

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        share, theta = self.params["structure_share"], self.params["theta"]
        beta = self.fanout(counts.shape)
        first, second = budget.split([share, 1 - share])
        levels = full_tree(counts.shape)
        sizes = [lvl[0].shape[0] for lvl in levels]

        # select: one noise value of scale λ per node of the full tree, paid once (ε₁ for the whole structure,
        # by the PrivTree theorem in the module docstring; the zeros make the draw read no data)
        noise, record = first.laplace(
            np.zeros(sum(sizes), dtype=np.int64), structure_sensitivity(beta), first.amount,
            "the tree's split tests (noise for every node; only the decisions are used)",
            composition=f"PrivTree's biased split tests: epsilon_1 for the whole tree whatever its height "
                        f"(fan-out {beta})")
        lam = record.scale
        delta = bias(lam, beta)
        offsets = np.concatenate([[0], np.cumsum(sizes)])

        leaves_lo, leaves_hi, depth_of = [], [], []
        visited = split = np.ones(1, dtype=bool)  # the root is visited
        for k, (lo, hi, parent) in enumerate(levels):
            if k > 0:
                visited = split[parent]
            node_counts = box_counts(counts, lo, hi)
            splittable = np.any(hi - lo >= 2, axis=1)
            split = np.zeros(lo.shape[0], dtype=bool)
            test = visited & splittable
            if np.any(test):
                z = noise[offsets[k]:offsets[k + 1]][test]
                split[test] = self.split_tests(node_counts[test], z, k, delta, theta)
            leaf = visited & ~split
            leaves_lo.append(lo[leaf])
            leaves_hi.append(hi[leaf])
            depth_of.append(np.full(int(leaf.sum()), k))
            if not np.any(split):
                break
        lo, hi = np.concatenate(leaves_lo), np.concatenate(leaves_hi)
        depths = np.concatenate(depth_of)

        # measure: the leaves are disjoint boxes, so one record moves one leaf count by 1
        leaf_counts = box_counts(counts, lo, hi)
        noisy, leaf_record = second.measure(leaf_counts, 1, 1, second.amount,
                                            "every leaf's count (leaves chosen by the tree)")

        # infer: each leaf's noisy count spread evenly over its cells.  The interval of a cell covers its leaf's
        # share (true count ÷ cells): the leaf counts are measured afresh, with noise independent of the split
        # tests' that chose the leaves, so given the tree (public) the leaf's noisy count ± the exact 95 %
        # half-width of its noise covers the leaf's true count with probability at least 95 %.
        values = np.zeros(counts.shape, dtype=np.float64)
        leaf = np.zeros(counts.shape, dtype=np.int64)
        cells = np.prod(hi - lo, axis=1)
        share_per_cell = noisy.astype(np.float64) / cells
        for i in range(lo.shape[0]):
            box = tuple(slice(a, b) for a, b in zip(lo[i], hi[i]))
            values[box] = share_per_cell[i]
            leaf[box] = i
        k = cells.astype(np.float64)[leaf]
        structure = {"fanout": beta, "theta": str(theta), "structure_share": str(share),
                     "lambda": str(lam), "bias_per_level": str(delta), "nodes_with_noise": int(sum(sizes))}
        return Estimate(values=values, structure=structure,
                        choices={"leaves": int(lo.shape[0]), "depth": int(depths.max(initial=0))},
                        groups=leaf, variance=leaf_record.noise_variance / (k * k),
                        halfwidth=count_halfwidth(leaf_record) / k)
