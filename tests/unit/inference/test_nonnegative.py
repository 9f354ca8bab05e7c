"""Post-processing: projection onto non-negative tables with a fixed total, and sum-preserving rounding (one
group here; many groups at once in test_trees.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize

from dphist.inference.nonnegative import NNLS_MAX_LEAVES, grouped_rounding, grouped_simplex_projection, nonnegative_integer_table, tree_least_squares, tree_nonnegative_least_squares, with_sum_measurement
from dphist.algorithms.strategies.trees import range_tree

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False)


def project_to_simplex(values: np.ndarray, total: float) -> np.ndarray:
    """The projection of all of ``values`` as one group."""
    return grouped_simplex_projection(values, np.zeros(len(values), dtype=np.int64), np.array([float(total)]))


def round_preserving_sum(values: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of all of ``values`` as one group."""
    return grouped_rounding(values, np.zeros(len(values), dtype=np.int64), np.array([int(total)]))


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 60), elements=finite), st.floats(0, 1e5))
def test_projection_is_feasible_and_optimal(v, total):
    x = project_to_simplex(v, total)
    assert np.all(x >= 0)
    assert np.isclose(x.sum(), total, rtol=1e-9, atol=1e-6)
    # KKT conditions of min ||x - v||^2 s.t. x >= 0, sum x = total: x = max(v - θ, 0) for one θ,
    # with v_i - θ <= 0 wherever x_i = 0.
    positive = x > 0
    if positive.any():
        theta = np.mean(v[positive] - x[positive])
        assert np.allclose(x[positive], v[positive] - theta, atol=1e-6 * max(1, np.abs(v).max()))
        assert np.all(v[~positive] - theta <= 1e-6 * max(1, np.abs(v).max()))


def test_projection_matches_a_generic_solver():
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(0, 5, 12)
        total = float(rng.uniform(0, 30))
        x = project_to_simplex(v, total)
        res = minimize(lambda y: np.sum((y - v) ** 2), np.full(12, total / 12), method="SLSQP",
                       bounds=[(0, None)] * 12, constraints=[{"type": "eq", "fun": lambda y: y.sum() - total}],
                       options={"ftol": 1e-12, "maxiter": 500})
        assert np.allclose(x, res.x, atol=1e-4)


def test_projection_leaves_feasible_input_alone_and_does_not_inflate_sparse_totals():
    v = np.array([3.0, 0.0, 2.0, 5.0])
    assert np.allclose(project_to_simplex(v, 10.0), v)
    # Sparse table: 1 real cell of 100, 999 empty cells with noise. Clamping would inflate the total by ~b/2
    # per empty cell; the projection keeps the total.
    rng = np.random.default_rng(1)
    noisy = np.concatenate([[100.0], rng.laplace(0, 10, 999)])
    total = max(noisy.sum(), 0)
    assert np.isclose(project_to_simplex(noisy, total).sum(), total)
    assert np.maximum(noisy, 0).sum() > total + 1000


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=st.floats(0, 1e4)))
def test_rounding_keeps_total_and_moves_each_entry_less_than_one(x):
    for total in {int(np.floor(x.sum())), int(np.ceil(x.sum()))}:
        if not (np.floor(x).sum() <= total <= np.ceil(x).sum()):
            continue
        r = round_preserving_sum(x, total)
        assert r.dtype == np.int64 and r.sum() == total
        assert np.all(np.abs(r - x) <= 1)  # < 1 exactly; float can round 1 - 1e-53 to 1


def test_nonnegative_integer_table_keeps_rounded_noisy_total_and_shape():
    est = np.array([[4.0, -3.0], [10.0, -1.0]])
    out = nonnegative_integer_table(est)
    assert out.shape == (2, 2) and out.dtype == np.int64
    assert out.sum() == 10 and np.all(out >= 0)
    # A negative noisy total becomes an all-zero table.
    assert nonnegative_integer_table(np.array([-5.0, 1.0])).tolist() == [0, 0]


def test_blockwise_non_negativity_absorbs_negative_noise_locally():
    # Three quarters of the table are clearly positive; the last quarter has negative cells but a positive sum.
    # The block-wise fix leaves the sums of the positive quarters alone; one projection of the whole table
    # would shift every positive cell down by the same amount, moving mass between distant parts.
    rng = np.random.default_rng(7)
    noisy = np.concatenate([rng.uniform(5, 50, 768), rng.normal(2, 10, 256)])
    blockwise = nonnegative_integer_table(noisy)
    whole = round_preserving_sum(project_to_simplex(noisy, round(noisy.sum())), round(noisy.sum()))
    assert blockwise.sum() == whole.sum() == round(noisy.sum()) and np.all(blockwise >= 0)
    quarters = lambda v: v.reshape(4, 256).sum(axis=1)  # noqa: E731  (the first split of the public tree)
    assert np.all(np.abs(quarters(blockwise)[:3] - quarters(noisy)[:3]) <= 1)
    assert np.all(quarters(whole)[:3] < quarters(noisy)[:3] - 10)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(0, 10**6))
def test_a_sum_measurement_refit_is_the_weighted_least_squares_solution(k, seed):
    """``with_sum_measurement``: the parts z (variances v) and one more measurement T of their sum (variance V)
    refitted equal the weighted least-squares solution of the stacked system [I; 1ᵀ]θ = [z; T], solved
    independently, and the stated variances are the diagonal of its covariance (Aᵀ W A)⁻¹."""
    rng = np.random.default_rng(seed)
    z, v = rng.normal(0, 50, k), rng.uniform(0.1, 100, k)
    total, variance = float(rng.normal(0, 100)), float(rng.uniform(0.1, 100))
    A = np.vstack([np.eye(k), np.ones((1, k))])
    w = 1 / np.append(v, variance)
    information = A.T @ (w[:, None] * A)
    expected = np.linalg.solve(information, A.T @ (w * np.append(z, total)))
    fitted, variances = with_sum_measurement(z, v, total, variance)
    assert np.allclose(fitted, expected, rtol=1e-9, atol=1e-9)
    assert np.allclose(variances, np.diag(np.linalg.inv(information)), rtol=1e-9)


def _tree_system(tree, noisy, variances):
    """The dense weighted system (A, y, w) of the measured nodes, built independently of the code under test."""
    rows, ys, ws = [], [], []
    leaves = tree.sizes[-1]
    for level in range(tree.levels):
        if noisy[level] is None:
            continue
        labels = tree.labels(level)
        for node in range(tree.sizes[level]):
            rows.append((labels == node).astype(float))
            ys.append(float(noisy[level][node]))
            ws.append(1.0 / float(np.broadcast_to(variances[level], (tree.sizes[level],))[node]))
    return np.array(rows).reshape(-1, leaves), np.array(ys), np.array(ws)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(2, 40), b=st.integers(2, 5), seed=st.integers(0, 2**32 - 1))
def test_nonnegative_tree_fit_is_the_constrained_minimum(k, b, seed):
    """``tree_nonnegative_least_squares`` on a range tree with noisy, often negative, node sums: every leaf is at
    least 0, and the Karush-Kuhn-Tucker conditions of min Σ w (y − A x)², x ≥ 0 hold (the gradient is 0 on the
    positive leaves and at least 0 on the zero ones), which makes it THE minimum (the objective is convex).  It
    is never above the unconstrained fit clipped at 0, and it is the unconstrained fit where that has no
    negative leaf."""
    rng = np.random.default_rng(seed)
    tree = range_tree(k, b)
    truth = rng.poisson(0.5, k).astype(float)
    sums = tree.level_sums(truth)
    variances = [float(v) for v in rng.uniform(1, 30, tree.levels)]
    measured = [level for level in range(tree.levels) if level == tree.levels - 1 or rng.random() < 0.6]
    noisy = [sums[l] + rng.laplace(0, np.sqrt(variances[l] / 2), tree.sizes[l]) if l in measured else None
             for l in range(tree.levels)]
    variances = [v if l in measured else math.inf for l, v in enumerate(variances)]
    x = tree_nonnegative_least_squares(tree, noisy, variances)
    A, y, w = _tree_system(tree, noisy, variances)
    unconstrained = tree_least_squares(tree, noisy, variances).values[-1]
    assert x.shape == (k,) and x.min() >= 0
    gradient = A.T @ (w * (A @ x - y))
    scale = np.abs(A.T @ (w * y)).max() + 1
    assert np.all(np.abs(gradient[x > 1e-9]) <= 1e-7 * scale)
    assert np.all(gradient[x <= 1e-9] >= -1e-7 * scale)
    objective = lambda z: float(w @ (y - A @ z) ** 2)  # noqa: E731
    assert objective(x) <= objective(np.clip(unconstrained, 0, None)) + 1e-9 * scale
    if unconstrained.min() >= 0:
        assert np.array_equal(x, unconstrained)


def test_nonnegative_tree_fit_moves_the_total_where_the_unconstrained_goes_negative():
    """A leaf measured at −40 with the rest near 0 and a root measured at 0: least squares keeps a negative leaf
    and the total pays for it elsewhere; the constrained fit puts that leaf at 0 and the others near 0.  Too many
    leaves are refused."""
    tree = range_tree(4, 4)
    noisy = [np.array([0.0]), np.array([-40.0, 10.0, 10.0, 10.0])]
    fitted = tree_nonnegative_least_squares(tree, noisy, [100.0, 100.0])
    unconstrained = tree_least_squares(tree, noisy, [100.0, 100.0]).values[-1]
    assert unconstrained.min() < 0
    # x₀ = 0 and three leaves at t: (3t)² + 3(10 − t)² is least at t = 60/24
    assert fitted[0] == 0 and np.allclose(fitted[1:], 2.5, atol=1e-9)
    with pytest.raises(ValueError, match="at most"):
        big = range_tree(NNLS_MAX_LEAVES + 1, 8)
        tree_nonnegative_least_squares(big, [None] * big.levels, [1.0] * big.levels)


def test_nonnegative_tree_fit_falls_back_when_the_active_set_method_stops(monkeypatch):
    """Should scipy's active-set solver run out of steps, the bounded solver gives the same constrained minimum."""
    import scipy.optimize

    tree = range_tree(4, 4)
    noisy = [np.array([0.0]), np.array([-40.0, 10.0, 10.0, 10.0])]

    def stops(*args, **kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(scipy.optimize, "nnls", stops)
    fitted = tree_nonnegative_least_squares(tree, noisy, [100.0, 100.0])
    assert fitted[0] == 0 and np.allclose(fitted[1:], 2.5, atol=1e-6)
