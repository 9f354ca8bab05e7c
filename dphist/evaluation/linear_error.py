"""Exact variances of box queries on the unbiased estimate of a data-independent algorithm that is linear in its
noisy measurements given its public plan: trees (H, Hb, the quadtree) and Privelet.

Such an estimate is x̂ = x + L z, with z the measurements' independent noise (Var z_j = v_j, exact for the
discrete Laplace or Gaussian of each measurement) and L fixed by the plan, which depends on the shape, the
columns and the options only.  A query q (here a box of cells) errs by qᵀL z, of variance

    Var(qᵀx̂) = Σ_j (Lᵀq)_j² v_j = qᵀ Σ q,   Σ = L V Lᵀ the estimate's covariance.

* **Trees** (:func:`tree_noise`).  The fit is generalised least squares, x̂ = Σ AᵀV⁻¹ y with Σ = (AᵀV⁻¹A)⁻¹,
  and the leaves are measured (A holds the identity on them), so Σq is the fit of the measurements y that are
  v_leaf·q on the leaves and 0 elsewhere (then AᵀV⁻¹y = q): one run of the algorithm's own inference per
  query, batched along a leading axis, with no matrix built.  A total measured elsewhere (auto's N̂) is one more
  measurement of the root in that fit, so the same holds with it.  O(queries × nodes).
* **Privelet** (:func:`privelet_noise`).  L is the inverse wavelet transform, a Kronecker product of per-axis
  inverses M_k, and the noise of a coefficient depends only on its per-axis relative scales (its class j_k on
  each axis).  So a box q = ⊗_k q_k has Var = Σ_j V_j Π_k W_k[q_k, j_k], with V_j the exact variance of the
  discrete noise of the combination j and W_k[q_k, j] = Σ over the coefficients c of class j of (M_kᵀ q_k)_c²,
  taken from the columns of M_k in chunks: O(m_k·(n_k + queries)) per axis (m_k coefficients: n_k for Haar, more
  for a nominal axis, whose inverse is a least-squares fit).

Beside the variance, the fourth cumulant of a query's error, κ₄ = Σ_j (Lᵀq)_j⁴ κ₄(z_j) (cumulants of
independent terms add), from the same weights: (Lᵀq)_j = (AΣq)_j / v_j for a tree (the node sums of Σq over the
measurement variances), Σ_j K_j Π_k W4_k[q_k, j_k] with fourth powers for Privelet.  The simulation of the mean
absolute error uses E e² = κ₂ and E e⁴ = κ₄ + 3κ₂² as control variates.

* **An optimised strategy** (hdmm, :func:`strategy_noise`).  x̂ = (AᵀA)⁻¹Aᵀy with A = A₁ ⊗ A₂ ⊗ … and one
  noise variance v on every answer, so L = (AᵀA)⁻¹Aᵀ is the Kronecker product of the per-axis L_k and a box
  q = ⊗_k q_k has Var = v·Π_k q_kᵀ(A_kᵀA_k)⁻¹q_k and κ₄ = κ₄(v)·Π_k Σ_r (L_kᵀq_k)_r⁴ (a Kronecker product of
  vectors has the products of their entries' fourth powers): per axis, prefix sums over the cells,
  O(rows_k·(n_k + intervals)).

Cells are boxes of one cell; their variances come from the algorithms' own exact per-cell variances (the tree
fit's; Privelet's per-class factors), checked against the box formulas in the tests.  Everything here reads only
public facts: the plan, the noise variances, the boxes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from ..algorithms.hierarchical import TreePlan, level_query
from ..algorithms.privelet import outer
from ..algorithms.strategies.integer_strategy import inverse_grams
from ..inference.measurements import TOTAL, Measurement
from ..inference.nonnegative import sum_by_parent
from ..privacy import discrete_gaussian_pmf, discrete_gaussian_variance, discrete_laplace_variance

__all__ = ["LinearNoise", "tree_noise", "privelet_noise", "strategy_noise", "identity_noise", "fourth_cumulant", "box_sums",
           "box_indicators"]

#: Floats held at once by a batch (about 32 MiB): bounds the memory of every computation here.
BATCH_FLOATS = 1 << 22


@dataclass(frozen=True, eq=False)
class LinearNoise:
    """The noise of a linear unbiased estimate over a table of ``shape``: ``cell_variances`` (flat, C order: each
    cell's exact variance) and ``box_cumulants(lo, hi)``, the exact variance and fourth cumulant of the error of
    the sum over each box [lo, hi) (int64 arrays of shape (boxes, d)), computed in bounded memory, whose time
    ``box_work(lo, hi)`` measures (about one unit per float operation of the inner loops)."""

    shape: tuple[int, ...]
    cell_variances: np.ndarray
    box_cumulants: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    box_work: Callable[[np.ndarray, np.ndarray], int]

    def box_variances(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The exact variance of the error of the sum over each box."""
        return self.box_cumulants(lo, hi)[0]


def fourth_cumulant(noise: str, variance: float) -> float:
    """κ₄ of one noise value of ``variance``: discrete Laplace (``noise`` "laplace": a = e^(−1/b) from
    Var = 2a/(1 − a)², then κ₄ = 2a(1 + 4a + a²)/(1 − a)⁴, twice a geometric variable's) or discrete Gaussian
    ("gaussian": σ² from the variance, then Σ k⁴p(k) − 3Var², by direct sums; 0 for Var >= 4, where the
    discrete Gaussian's cumulants beyond the second are below e^(−2π²·4) ≈ 1e-34 of σ⁴)."""
    v = float(variance)
    if noise not in ("laplace", "gaussian"):
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    if v <= 0:  # no noise at all (a scale so small that its variance is 0 in double precision)
        return 0.0
    if noise == "laplace":
        a = v / ((v + 1) + math.sqrt(2 * v + 1))  # the root of v·a² − 2(v + 1)·a + v = 0 below 1, without cancelling
        return 2 * a * (1 + 4 * a + a * a) / (1 - a) ** 4
    if v >= 4:
        return 0.0
    low, high = 0.0, 4.5  # Var is increasing in σ² and equals it within 1e-16 from σ² = 4 on
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if discrete_gaussian_variance(Fraction(mid)) < v else (low, mid)
    sigma2 = (low + high) / 2
    k = np.arange(-int(12 * math.sqrt(sigma2)) - 12, int(12 * math.sqrt(sigma2)) + 13, dtype=np.float64)
    p = discrete_gaussian_pmf(k, Fraction(sigma2))
    p = p / p.sum()
    m2 = float(np.dot(k * k, p))
    return float(np.dot(k ** 4, p)) - 3 * m2 * m2


def identity_noise(shape: tuple[int, ...], variance: float, noise: str) -> LinearNoise:
    """Independent ``noise`` of ``variance`` on every cell: a box of k cells has k times its cumulants."""
    fourth = fourth_cumulant(noise, variance)

    def boxes(lo, hi):
        k = np.prod(np.asarray(hi) - np.asarray(lo), axis=1).astype(np.float64)
        return k * float(variance), k * fourth
    return LinearNoise(tuple(shape), np.full(math.prod(shape), float(variance)), boxes, lambda lo, hi: len(lo))


def tree_noise(algorithm, estimate, noise: str) -> LinearNoise:
    """The noise of a tree method's estimate (``estimate`` from one of its runs or refits, carrying its plan and
    measurements; their values do not matter, only their variances), every measurement's noise of the kind
    ``noise`` (:func:`fourth_cumulant`).  ValueError if the leaves were not measured (the identity AᵀV⁻¹y = q
    needs them)."""
    plan = estimate.plan
    if not isinstance(plan, TreePlan):
        raise ValueError("tree_noise needs the estimate of a tree method (its plan is a TreePlan)")
    leaf = level_query(plan.tree.levels - 1)
    leaves = [m for m in estimate.measurements if m.query == leaf]
    if not leaves:
        raise ValueError("the tree's leaves were not measured")
    leaf_variance = float(leaves[0].variance)
    shape, n = tuple(plan.shape), math.prod(plan.shape)
    tree = plan.tree
    nodes = sum(tree.sizes)
    # per measurement: the tree level it measures (the root for a total), 1/v and κ₄ of its noise (a noise of
    # variance 0 adds nothing)
    weights = [(0 if m.query == TOTAL else m.query[1], 1 / float(m.variance), fourth_cumulant(noise, m.variance))
               for m in estimate.measurements if float(m.variance) > 0]

    def boxes(lo, hi):
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        out, fourth = np.empty(lo.shape[0]), np.zeros(lo.shape[0])
        # the inference holds a few arrays of every level per query: about 8 floats per node and cell
        step = max(1, BATCH_FLOATS // (8 * (nodes + n)))
        for start in range(0, lo.shape[0], step):
            q = box_indicators(shape, lo[start:start + step], hi[start:start + step]).reshape(-1, n)
            k = q.shape[0]
            measured = tuple(Measurement(m.query, leaf_variance * q if m.query == leaf else
                                         (np.zeros((k, np.shape(m.values)[-1])) if np.ndim(m.values) else 0.0),
                                         m.variance)
                             for m in estimate.measurements)
            sigma_q = np.asarray(algorithm.infer(plan, measured).values, dtype=np.float64).reshape(k, n)
            out[start:start + k] = np.einsum("ij,ij->i", sigma_q, q)
            sums = [sigma_q]  # A Σq: the node sums of Σq, level by level from the leaves up
            for level in range(tree.levels - 1, 0, -1):
                sums.insert(0, sum_by_parent(sums[0], tree.parents[level], tree.sizes[level - 1]))
            for level, precision, kappa in weights:
                fourth[start:start + k] += kappa * np.sum((sums[level] * precision) ** 4, axis=1)
        return out, fourth

    return LinearNoise(shape, np.asarray(estimate.variance, dtype=np.float64).ravel().copy(), boxes,
                       lambda lo, hi: len(lo) * (nodes + n))


def privelet_noise(algorithm, shape: tuple[int, ...], columns, record) -> LinearNoise:
    """The noise of Privelet's estimate over ``shape`` from the ``record`` of its one measurement (of the
    coefficients: discrete Laplace of scale b·g_c, b = ``record.scale``, or discrete Gaussian of variance
    parameter σ²·g_c², σ² = ``record.sigma2``, g_c the product of the coefficient's per-axis relative scales)."""
    shape = tuple(int(n) for n in shape)
    gaussian = record.sigma2 is not None
    axes = algorithm.transforms(shape, columns, "gaussian" if gaussian else "laplace")
    classes = [a.variance_factors_by_class() for a in axes]  # per axis: (scales G_k, F_k[cell, class])
    combos = list(np.ndindex(*[scales.size for scales, _ in classes]))
    variances, fourths = {}, {}
    for combo in combos:
        g = math.prod(float(classes[k][0][j]) for k, j in enumerate(combo))
        if gaussian:
            variances[combo] = discrete_gaussian_variance(Fraction(record.sigma2) * Fraction(g) ** 2)
        else:  # whole relative scales (Privelet's Laplace noise is weighted by whole numbers only)
            variances[combo] = discrete_laplace_variance(Fraction(record.scale) * int(round(g)))
        fourths[combo] = fourth_cumulant("gaussian" if gaussian else "laplace", variances[combo])
    cells = 0.0
    for combo, v in variances.items():
        cells = cells + v * outer([classes[k][1][:, j] for k, j in enumerate(combo)])
    cells = np.broadcast_to(np.asarray(cells, dtype=np.float64), shape).ravel().copy()

    def boxes(lo, hi):
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        squares, fourth_powers = [], []  # per axis: W_k and W4_k over the box's interval on it, a row per box
        for k, axis in enumerate(axes):
            intervals, which = np.unique(np.stack([lo[:, k], hi[:, k]], axis=1), axis=0, return_inverse=True)
            w2, w4 = _axis_interval_weights(axis, classes[k][0], intervals)
            squares.append(w2[np.ravel(which)])
            fourth_powers.append(w4[np.ravel(which)])
        out, fourth = np.zeros(lo.shape[0]), np.zeros(lo.shape[0])
        for combo in combos:
            out += variances[combo] * math.prod((squares[k][:, j] for k, j in enumerate(combo)),
                                                start=np.ones(lo.shape[0]))
            fourth += fourths[combo] * math.prod((fourth_powers[k][:, j] for k, j in enumerate(combo)),
                                                 start=np.ones(lo.shape[0]))
        return out, fourth

    def work(lo, hi):
        intervals = [np.unique(np.stack([np.asarray(lo)[:, k], np.asarray(hi)[:, k]], axis=1), axis=0).shape[0]
                     for k in range(len(shape))]
        return sum(a.relative_scales.size * (a.n + t) for a, t in zip(axes, intervals))

    return LinearNoise(shape, cells, boxes, work)


def strategy_noise(plan, variance: float, noise: str, total_variance: float | None = None) -> LinearNoise:
    """The noise of hdmm's estimate from its public ``plan`` (a :class:`~dphist.algorithms.hdmm.StrategyPlan`)
    and the noise ``variance`` of each of its answers (of the kind ``noise``: :func:`fourth_cumulant`).

    ``total_variance``: a total measured elsewhere with discrete Laplace noise of this variance (auto's N̂) was
    refitted into the estimate (hdmm's infer: x̂' = x̂ + u(t − 1ᵀx̂)/D, u = Σ1, D = 1ᵀu + v_t).  A box q then errs
    by qᵀe − c(1ᵀe) + c·z_t with c = qᵀu/D, of variance qᵀΣq − (qᵀu)²/D; on the answers' noise its coefficients
    are x − c·y with x = ⊗_k L_kᵀq_k and y = ⊗_k L_kᵀ1, so Σ_r (x_r − c·y_r)⁴ = Σ_j C(4, j)(−c)^j Π_k Σ_r
    x_k^(4−j) y_k^j factorises per axis, and the total adds κ₄(v_t)·c⁴."""
    strategy = plan.strategy
    shape = tuple(int(n) for n in plan.shape)
    inverses = inverse_grams(strategy)
    maps = [a.astype(np.float64) @ inv for a, inv in zip(strategy.factors, inverses)]  # L_kᵀ = A_k(A_kᵀA_k)⁻¹
    v, kappa = float(variance), fourth_cumulant(noise, variance)
    cells = v * outer([np.diag(inv) for inv in inverses])
    refit = total_variance is not None
    if refit:
        u_axes = [inv.sum(axis=1) for inv in inverses]  # u = v·⊗_k (A_kᵀA_k)⁻¹1
        denominator = v * float(np.prod([w.sum() for w in u_axes])) + float(total_variance)
        kappa_total = fourth_cumulant("laplace", total_variance)
        ones = [m.sum(axis=1) for m in maps]  # y_k = L_kᵀ1
        cells = cells - v * v * outer([w * w for w in u_axes]) / denominator

    def boxes(lo, hi):
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        out = np.full(lo.shape[0], v)
        powers = np.ones((5, lo.shape[0]))  # Π_k Σ_r x_k^(4−j) y_k^j, j = 0..4
        share = np.full(lo.shape[0], v)  # qᵀu
        for k, (inv, m) in enumerate(zip(inverses, maps)):
            n = inv.shape[0]
            square = np.zeros((n + 1, n + 1))  # summed-area table of (A_kᵀA_k)⁻¹
            square[1:, 1:] = inv.cumsum(axis=0).cumsum(axis=1)
            a, b = lo[:, k], hi[:, k]
            out *= square[b, b] - square[a, b] - square[b, a] + square[a, a]
            prefix = np.zeros((m.shape[0], n + 1))
            np.cumsum(m, axis=1, out=prefix[:, 1:])
            x = prefix[:, b] - prefix[:, a]  # (answers, boxes)
            if not refit:
                powers[0] *= np.sum(x ** 4, axis=0)
                continue
            y = ones[k][:, None]
            for j in range(5):
                powers[j] *= np.sum(x ** (4 - j) * y ** j, axis=0)
            u_prefix = np.concatenate(([0.0], np.cumsum(u_axes[k])))
            share *= u_prefix[b] - u_prefix[a]
        if not refit:
            return out, kappa * powers[0]
        c = share / denominator
        fourth = sum(math.comb(4, j) * (-c) ** j * powers[j] for j in range(5))
        return out - share * share / denominator, kappa * fourth + kappa_total * c ** 4

    return LinearNoise(shape, np.broadcast_to(np.asarray(cells, dtype=np.float64), shape).ravel().copy(), boxes,
                       lambda lo, hi: len(lo) * sum(int(a.shape[0]) for a in strategy.factors) * (5 if refit else 1))


def _axis_interval_weights(axis, scales: np.ndarray, intervals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """W[t, j] = Σ over the coefficients c of class j (relative scale ``scales[j]``) of (Σ_{i in interval t}
    M[i, c])², M the axis's inverse transform, from its columns M e_c in chunks (prefix sums along the cells);
    and W4, the same with fourth powers."""
    n, m = axis.n, axis.relative_scales.size  # cells, coefficients (a nominal axis has more than cells)
    klass = np.searchsorted(scales, axis.relative_scales)
    if np.any(klass >= scales.size) or np.any(scales[np.minimum(klass, scales.size - 1)] != axis.relative_scales):
        raise ValueError("a coefficient's relative scale is not among its axis's classes")
    lo, hi = intervals[:, 0], intervals[:, 1]
    out = np.zeros((intervals.shape[0], scales.size))
    out4 = np.zeros_like(out)
    step = max(1, BATCH_FLOATS // (m + 4 * (n + 1) + 2 * intervals.shape[0]))
    for start in range(0, m, step):
        k = min(step, m - start)
        unit = np.zeros((k, m))
        unit[np.arange(k), start + np.arange(k)] = 1.0
        column = np.asarray(axis.inverse(unit, 1), dtype=np.float64)  # row r: the column M e_(start + r)
        prefix = np.zeros((k, n + 1))
        np.cumsum(column, axis=1, out=prefix[:, 1:])
        answers = prefix[:, hi] - prefix[:, lo]  # (k, intervals)
        squares = answers ** 2
        np.add.at(out.T, klass[start:start + k], squares)
        np.add.at(out4.T, klass[start:start + k], squares ** 2)
    return out, out4


def box_indicators(shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 0/1 float tables of the boxes [lo, hi) over ``shape``: shape (boxes, *shape)."""
    out = np.ones((lo.shape[0],) + (1,) * len(shape))
    for k, n in enumerate(shape):
        cells = np.arange(n)
        inside = (cells >= lo[:, k, None]) & (cells < hi[:, k, None])
        out = out * inside.reshape((lo.shape[0],) + (1,) * k + (n,) + (1,) * (len(shape) - k - 1))
    return out


def box_sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sums over the boxes [lo, hi) of each table along ``values``'s last d = lo.shape[1] axes (leading axes:
    independent tables, carried along): shape (..., boxes), by inclusion-exclusion on the summed-area table."""
    d = lo.shape[1]
    lead = values.ndim - d
    s = np.zeros(values.shape[:lead] + tuple(n + 1 for n in values.shape[lead:]))
    s[(Ellipsis,) + (slice(1, None),) * d] = values
    for k in range(d):
        np.cumsum(s, axis=lead + k, out=s)
    out = np.zeros(values.shape[:lead] + (lo.shape[0],))
    for corner in range(1 << d):
        index = tuple(lo[:, k] if corner >> k & 1 else hi[:, k] for k in range(d))
        sign = -1.0 if bin(corner).count("1") % 2 else 1.0
        out += sign * s[(Ellipsis,) + index]
    return out

