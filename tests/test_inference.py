"""Post-processing: projection onto non-negative tables with a fixed total, and sum-preserving rounding (one
group here; many groups at once in test_trees.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize

from dphist.inference import (grouped_rounding, grouped_simplex_projection, nonnegative_integer_table,
                              with_sum_measurement)

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
