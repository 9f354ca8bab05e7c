"""Privelet (dphist/algorithms/privelet.py): exact transform, sensitivity (bound and equality), the closed-form
range variance of docs/algorithms.md §2.2 checked by Monte Carlo (5-standard-error band, fixed seeds), and the per-cell
variances; under a zCDP budget the L2 sensitivity of either weighting and the exact cell variances."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.algorithms import get_algorithm
from dphist.algorithms.privelet import HaarAxis
from dphist_audit.replication import ReplicatedBudget
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance

from replicated import Replicated


def run(algo, counts, epsilon, bits, columns=None):
    """One run of ``algo`` on a fresh budget: the estimate and its one measurement (Privelet measures once)."""
    budget = PrivacyBudget(epsilon, bits=bits)
    estimate = algo.run(counts, budget, columns=columns)
    record, = budget.measurements
    return estimate, record


def runs(algo, counts, epsilon, bits, reps, columns=None):
    """``reps`` independent runs at once (a replicated budget): values with a leading axis of runs."""
    return algo.run(counts, ReplicatedBudget(epsilon, bits, reps, []), columns=columns)


def haar_matrix(n: int) -> np.ndarray:
    """Row c of the result is coefficient c as a linear query over the n cells."""
    return HaarAxis(n).forward(np.eye(n, dtype=np.int64), 1).T


@given(st.integers(1, 70), st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_transform_is_exact_and_invertible(n, seed):
    axis = HaarAxis(n)
    x = np.random.default_rng(seed).integers(0, 1000, (2, n))
    c = axis.forward(x, 1)
    assert c.dtype.kind == "i" and c.shape == (2, n)
    assert np.array_equal(axis.inverse(c, 1), x)
    assert c[0, 0] == x[0].sum()  # the first coefficient is the total


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 100, 1000])
def test_sensitivity_bound_is_reached_and_never_exceeded(n):
    axis = HaarAxis(n)
    per_cell = np.abs(haar_matrix(n)).sum(axis=0)  # L1 change of the coefficients when cell i gains a record
    assert per_cell.max() == axis.sensitivity == 1 + int(np.ceil(np.log2(n)))


@given(shape=st.sampled_from([(20,), (17, 40), (18, 3, 19)]), data=st.data())
@settings(max_examples=30, deadline=None)
def test_random_neighbours_change_coefficients_by_at_most_rho(shape, data):
    algo = get_algorithm("privelet")
    axes = algo.axes_for(shape)
    rho = int(np.prod([a.sensitivity for a in axes]))
    x = np.random.default_rng(data.draw(st.integers(0, 2**31))).integers(0, 5, shape)
    y = x.copy()
    y.flat[data.draw(st.integers(0, x.size - 1))] += data.draw(st.sampled_from([-1, 1]))

    def coefficients(t):
        for k, a in enumerate(axes):
            t = a.forward(t, k)
        return t
    assert np.abs(coefficients(x) - coefficients(y)).sum() <= rho


def test_multidimensional_sensitivity_is_the_product_and_is_reached():
    algo = get_algorithm("privelet")
    shape = (17, 20)
    axes = algo.axes_for(shape)
    worst = 0
    for i in range(shape[0]):
        for j in range(shape[1]):
            e = np.zeros(shape, dtype=np.int64)
            e[i, j] = 1
            c = axes[1].forward(axes[0].forward(e, 0), 1)
            worst = max(worst, int(np.abs(c).sum()))
    assert worst == axes[0].sensitivity * axes[1].sensitivity == 6 * 6


def range_variance(n: int, lo: int, hi: int, coefficient_variance: float) -> float:
    inverse = np.linalg.inv(haar_matrix(n).astype(float))
    q = np.zeros(n)
    q[lo:hi] = 1
    return coefficient_variance * float(np.sum((q @ inverse) ** 2))


def test_range_variance_oracle_values():
    # docs/algorithms.md §2.2: n = 16, ε = 1, λ = 5 (continuous Laplace, variance 2λ² per coefficient).
    for (lo, hi), expected in {(0, 1): 16.797, (0, 8): 25.0, (3, 11): 58.594, (0, 16): 50.0}.items():
        assert range_variance(16, lo, hi, 2 * 25) == pytest.approx(expected, abs=1e-3)


def test_monte_carlo_range_variance_matches_closed_form():
    eps = Fraction(1)
    algo = get_algorithm("privelet", small_axis=0)
    x = np.random.default_rng(0).integers(0, 20, 16)
    _, record = run(algo, x, eps, SeededBits(5))  # one run to read the plan
    assert record.sensitivity == 5 and record.scale == 5
    batch = runs(algo, x, eps, SeededBits(6), 200_000).values
    errors = batch[:, 3:11].sum(axis=1) - x[3:11].sum()
    expected = range_variance(16, 3, 11, discrete_laplace_variance(5))
    se = expected * np.sqrt(2 / errors.size) * 2  # sd of a sample variance, with room for Laplace kurtosis
    assert abs(errors.var() - expected) < 5 * se
    assert abs(errors.var() - 58.594 * discrete_laplace_variance(5) / 50) < 5 * se
    assert abs(errors.mean()) < 5 * np.sqrt(expected / errors.size)


def test_reported_cell_variances_are_exact():
    algo = get_algorithm("privelet", small_axis=0)
    est, record = run(algo, np.zeros((13, 6), dtype=np.int64), Fraction(1, 2), SeededBits(1))
    axes = algo.axes_for((13, 6))
    Hinv = [np.linalg.inv(haar_matrix(a.n).astype(float)) for a in axes]
    dense = np.outer((Hinv[0] ** 2).sum(axis=1), (Hinv[1] ** 2).sum(axis=1))
    sigma2 = discrete_laplace_variance(record.scale)
    assert np.allclose(est.variance, sigma2 * dense)


def test_small_axes_are_left_untransformed_and_structure_is_public():
    algo = get_algorithm("privelet")
    a, record = run(algo, np.zeros((2, 64), dtype=np.int64), Fraction(1), SeededBits(1))
    b, _ = run(algo, np.full((2, 64), 1000, dtype=np.int64), Fraction(1), SeededBits(2))
    assert a.structure == b.structure == {"transforms": ["identity", "haar"], "sensitivity_factors": [1, 7]}
    assert record.sensitivity == 7 and record.epsilon == 1


# ---- the nominal wavelet -----------------------------------------------------------------------------------------

from dphist.algorithms.privelet import NominalAxis  # noqa: E402
from dphist.errors import UsageError  # noqa: E402
from dphist.declare.schema import parse_schema  # noqa: E402

STATES = {"type": "categorical", "values": ["CA", "OR", "NY", "TX", "FL", "AK", "WA", "NJ"], "nulls": "category",
          "hierarchy": {"West": {"Pacific": ["CA", "OR", "WA"], "Alaska": ["AK"]},
                        "East": ["NY", "FL", "NJ"], "South": ["TX"]}}


def states():
    return parse_schema({"columns": {"st": STATES}})["st"]


def test_nominal_transform_is_exact_and_its_weighted_sensitivity_is_reached():
    column = states()
    axis = NominalAxis(column.hierarchy, column.n_cells)
    x = np.random.default_rng(1).integers(0, 50, (3, column.n_cells))
    c = axis.forward(x, 1)
    assert c.dtype.kind == "i" and np.allclose(axis.inverse(c, 1), x)
    unit = axis.forward(np.eye(column.n_cells, dtype=np.int64), 1)
    weighted = (np.abs(unit) / axis.relative_scales).sum(axis=1)
    # Root total + groups with >= 2 children on the deepest path (root -> West -> Pacific -> CA).
    assert weighted.max() == axis.sensitivity == 4


def test_nominal_variance_factors_match_the_linear_reconstruction():
    column = states()
    n = column.n_cells
    axis = NominalAxis(column.hierarchy, n)
    m = axis.forward(np.zeros((1, n), dtype=np.int64), 1).shape[1]
    reconstruction = np.stack([axis.inverse(np.eye(m)[i][None, :], 1)[0] for i in range(m)])  # (m, n)
    dense = ((reconstruction * axis.relative_scales[:, None]) ** 2).sum(axis=0)
    assert np.allclose(axis.variance_factors(), dense)


def test_nominal_release_monte_carlo_variance_is_within_the_reported_bound():
    column = states()
    algo = get_algorithm("privelet")
    x = np.random.default_rng(2).integers(0, 30, column.n_cells)
    batch = runs(algo, x, Fraction(1), SeededBits(3), 100_000, columns=(column,))
    est, record = run(algo, x, Fraction(1), SeededBits(4), columns=(column,))
    assert est.structure["transforms"] == ["nominal"] and record.sensitivity == 4
    empirical = batch.values.var(axis=0)
    # The report uses continuous-Laplace variances, an upper bound; the discrete noise is a little smaller.
    assert np.all(empirical < est.variance * 1.03) and np.all(empirical > est.variance * 0.85)
    assert np.allclose(batch.values.mean(axis=0), x, atol=5 * np.sqrt(est.variance / 100_000))


@pytest.mark.parametrize("hierarchy, message", [
    ({"A": ["CA", "OR"], "B": ["NY"]}, "does not place"),
    ({"A": ["CA", "OR", "XX"], "B": ["NY", "TX", "FL", "AK", "WA", "NJ"]}, "not in 'values'"),
    ({"A": ["CA", "OR", "NY"], "B": ["NY", "TX", "FL", "AK", "WA", "NJ"]}, "two groups"),
    ({"A": [], "B": ["CA", "OR", "NY", "TX", "FL", "AK", "WA", "NJ"]}, "empty"),
    (["CA"], "mapping"),
])
def test_bad_hierarchies_are_refused(hierarchy, message):
    with pytest.raises(UsageError, match=message):
        parse_schema({"columns": {"st": {**STATES, "hierarchy": hierarchy}}})


def test_privelet_with_a_hierarchy_through_the_pipeline():
    import pandas as pd
    import dphist
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"st": rng.choice(STATES["values"], 3000), "v": rng.integers(0, 64, 3000)})
    schema = {"columns": {"st": STATES, "v": {"type": "numeric", "lower": 0, "upper": 64, "bins": 64}}}
    result = dphist.release(frame, epsilon="1", schema=schema, columns="st,v", algorithm="privelet", seed=6)
    table = result.tables["st_v"]
    assert len(table) == 9 * 64 and (table["count"] >= 0).all()
    report = result.report["tables"][0]
    assert report["structure"]["transforms"] == ["nominal", "haar"]
    assert report["steps"][0]["sensitivity"] == 4 * 7
    assert report["domain"]["st"]["hierarchy_levels"][0] == ["West", "East", "South", "null"]


@pytest.mark.parametrize("n", [64, 48, 4096])
def test_levels_of_pairs_take_strided_views_with_the_same_result(n, monkeypatch):
    """Where every range of a level splits in two, the transform uses strided views; forced onto the general
    index arrays, it must give the same coefficients and the same inverse."""
    from dphist.algorithms import privelet

    x = np.random.default_rng(n).integers(0, 50, (3, n))
    axis = HaarAxis(n)
    fast_c = axis.forward(x, 1)
    fast_inverse = axis.inverse(fast_c + 0.5, 1)
    assert any(privelet._all_pairs(*level) for level in axis._levels)
    monkeypatch.setattr(privelet, "_all_pairs", lambda *level: False)
    assert np.array_equal(axis.forward(x, 1), fast_c)
    assert np.allclose(axis.inverse(fast_c + 0.5, 1), fast_inverse, rtol=0, atol=1e-9)


# ---- under a zCDP budget --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(40,), (20, 33), (17, 5, 18)])
@pytest.mark.parametrize("weights", ["uniform", "l2"])
def test_privelet_l2_sensitivity_is_the_formula_and_reached(shape, weights):
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(2))
    algo = get_algorithm("privelet", weights=weights)
    est = algo.run(np.zeros(shape, dtype=np.int64), budget)
    (m,) = budget.measurements
    axes = algo.axes_for(shape)
    if weights == "uniform":
        assert m.l2_squared == np.prod([a.sensitivity for a in axes])  # Π(L_k + 1)
    # brute force: the weighted squared change of the coefficients for every cell that gains a record
    scales = [np.asarray(s) if s is not None else None for s in est.structure["level_scales"]]
    for axis, s in zip(axes, scales):
        if s is not None:
            axis.use_weights(s)
    relative = np.ones(())
    for a in axes:
        relative = np.multiply.outer(relative, a.relative_scales)
    worst = Fraction(0)
    n = int(np.prod(shape))
    for cell in range(n):
        unit = np.zeros(n, dtype=np.int64)
        unit[cell] = 1
        c = unit.reshape(shape)
        for k, a in enumerate(axes):
            c = a.forward(c, k)
        nz = np.flatnonzero(c)
        worst = max(worst, sum((Fraction(int(c.flat[i])) / Fraction(float(relative.flat[i]))) ** 2 for i in nz))
    assert worst == m.l2_squared


@pytest.mark.parametrize("runs", [3000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_privelet_cell_variances_are_exact(runs):
    """The per-cell variances the estimate states against the mean squared error of ``runs`` replicated runs.
    Per cell the relative SE is sqrt(2/runs) (Gaussian noise): 2.6 % at 3,000 runs, 1 % at 20,000, and 6 SE are
    allowed (false alarm ~2e-9 per cell, 480 cells); a cell's stated variance off by 22 % (8.3 % at 20,000) fails
    with probability above 0.99.  Over all cells the runs' mean squared error has a relative sd of 8.3 % per run:
    the ±1 % band is 6.6 SE at 3,000 runs (17 at 20,000), and stated variances off by 1.35 % on average (1.15 %)
    fail with probability above 0.99."""
    rho = Fraction(1, 8)  # σ² small enough that the discrete Gaussian's variance differs from σ²g²
    x = np.random.default_rng(1).integers(0, 9, (20, 24))
    budget = Replicated(rho, SeededBits(5), runs)
    est = get_algorithm("privelet", small_axis=0).run(x, budget)
    emp = ((est.values - x) ** 2).mean(axis=0)
    assert np.all(np.abs(emp / est.variance - 1) < 6 * np.sqrt(2 / runs))
    assert abs(emp.mean() / est.variance.mean() - 1) < 0.01


def test_privelet_laplace_path_refuses_l2_weights():
    from dphist.errors import UsageError
    with pytest.raises(UsageError):
        get_algorithm("privelet", weights="l2").run(np.zeros(64, dtype=np.int64), PrivacyBudget(1, bits=SeededBits(0)))
