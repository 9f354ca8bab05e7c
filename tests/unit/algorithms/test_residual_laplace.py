"""The pure-ε residual plans (docs/algorithms.md §11.1): exact variances against an explicit GLS over the full
domain, plan "marginals" at equal shares against strategy separate's least squares, the closed form of plan
"bases" and the share search against numerical optimisers, the attribute matrices' factors, the L1 sensitivity of
every measured table, the kernel's records, and Monte Carlo through the kernel (per basis and per cell)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
import itertools
import math

import numpy as np
import pytest
from scipy import optimize

from dphist.algorithms.residual_laplace import (METHODS, attribute_factor, best_plan, check_scales, describe_table,
                                                measure_laplace, plan_laplace)
from dphist.algorithms.residual_planner import exact_variances, plan_residuals, reconstruct
from dphist.errors import DataError
from dphist.inference.marginals import expected_errors
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist_audit.replication import ReplicatedBudget

#: A small mixed workload: binary and wider attributes, a marginal inside another, shared sub-tables.
SIZES = (3, 2, 4, 2)
WORKLOAD = [(0, 1), (1, 2), (0, 2), (2, 3), (1,)]


def _kron(factors) -> np.ndarray:
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def table_matrix(sizes, attrs, differenced) -> np.ndarray:
    """A measured table over the full domain (C order): identity on its kept attributes, the ±1 row on the
    differenced ones, a row of ones (summed out) elsewhere."""
    return _kron([np.array([[1.0, -1.0]]) if i in differenced else np.eye(n) if i in attrs else np.ones((1, n))
                  for i, n in enumerate(sizes)])


def marginal_matrix(sizes, s) -> np.ndarray:
    return _kron([np.eye(n) if i in s else np.ones((1, n)) for i, n in enumerate(sizes)])


def oracle_variances(plan, epsilon) -> dict:
    """Var of each cell of each marginal under GLS on every measured table over the full domain, each with iid
    noise of its exact discrete Laplace variance; every cell of a marginal must agree."""
    sizes = plan.structure.sizes
    variances = plan.table_variances(epsilon)
    info = sum(table_matrix(sizes, t, d).T @ table_matrix(sizes, t, d) / v
               for t, d, v in zip(plan.tables, plan.differenced, variances))
    cov = np.linalg.pinv(info, rcond=1e-12, hermitian=True)
    out = {}
    for s in plan.structure.marginals:
        q = marginal_matrix(sizes, s)
        cells = np.einsum("ij,jk,ik->i", q, cov, q)
        assert np.allclose(cells, cells[0], rtol=1e-8)
        out[s] = float(cells[0])
    return out


def random_counts(sizes, rows: int, seed: int) -> tuple[np.ndarray, dict]:
    """Codes of ``rows`` random records and the counted table of every workload marginal."""
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, n, rows) for n in sizes], axis=1)
    return codes, counted(codes, sizes)


def counted(codes, sizes, workload=WORKLOAD) -> dict:
    out = {}
    for s in workload:
        s = tuple(sorted(s))
        dims = tuple(sizes[i] for i in s)
        flat = np.ravel_multi_index([codes[:, i] for i in s], dims) if s else np.zeros(len(codes), dtype=np.intp)
        out[s] = np.bincount(flat, minlength=math.prod(dims)).reshape(dims)
    return out


def true_residual(tables: dict, basis: tuple[int, ...]) -> np.ndarray:
    """P_B m_B from any counted workload marginal containing B: summed down to B, the mean taken out along each
    axis."""
    s = next(s for s in tables if set(basis) <= set(s))
    table = tables[s].sum(axis=tuple(k for k, i in enumerate(s) if i not in basis)).astype(np.float64)
    for axis in range(table.ndim):
        table = table - table.mean(axis=axis, keepdims=True)
    return table


# -- exact figures ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_variances_are_the_gls_variances_of_the_measured_tables(method):
    plan = plan_laplace(WORKLOAD, SIZES, method)
    mine = plan.variance_per_cell(Fraction(1, 2))
    for s, v in oracle_variances(plan, Fraction(1, 2)).items():
        assert mine[s] == pytest.approx(v, rel=1e-9), (method, s)


def test_equal_shares_are_separate_with_its_least_squares():
    """Plan "marginals" at ε/k each is strategy separate + its exact least squares (§6.4), marginal by marginal."""
    plan = plan_laplace(WORKLOAD, SIZES, "marginals", equal_shares=True)
    epsilon = Fraction(7, 10)
    k = len(WORKLOAD)
    assert set(plan.shares) == {Fraction(1, k)}
    names = {i: n for i, n in enumerate(SIZES)}
    separate = expected_errors([tuple(m) for m in WORKLOAD], names,
                               [discrete_laplace_variance(Fraction(k) / epsilon)] * k)
    mine = plan.variance_per_cell(epsilon)
    for m, total in zip(WORKLOAD, separate):
        assert mine[tuple(sorted(m))] * math.prod(SIZES[i] for i in m) == pytest.approx(total, rel=1e-12)


def test_the_bases_closed_form_is_the_optimum():
    """Plan "bases", each basis from its own table alone: ε_A ∝ (c_A/2^{b_A})^{1/3} and the total
    2(Σ (c_A/2^{b_A})^{1/3})³/ε² (continuous Laplace), against SLSQP on the simplex from equal shares.  The plan's
    least squares also uses the residuals a table with a kept attribute gives of smaller bases: at most that."""
    plan = plan_laplace(WORKLOAD, SIZES, "bases")
    weight = plan.coefficient / np.array([2.0 ** len(d) for d in plan.differenced])
    closed = 2 * np.cbrt(weight).sum() ** 3
    shares = np.array([float(x) for x in plan.shares])
    assert shares == pytest.approx(np.cbrt(weight) / np.cbrt(weight).sum(), rel=1e-5)  # rounded to 10⁻⁶ units
    assert float(np.sum(2 * weight / shares ** 2)) == pytest.approx(closed, rel=1e-9)
    assert plan.continuous_total(1) < closed  # (0, 2) and (2, 3) keep attribute 2 whole: more than their own B

    def total(e):
        return float(np.sum(2 * weight / np.maximum(e, 1e-12) ** 2))
    count = len(weight)
    found = optimize.minimize(total, np.full(count, 1 / count), method="SLSQP", bounds=[(1e-9, 1)] * count,
                              constraints=[{"type": "eq", "fun": lambda e: e.sum() - 1}],
                              options={"maxiter": 1000, "ftol": 1e-14})
    assert found.fun >= closed * (1 - 1e-9)
    assert found.fun == pytest.approx(closed, rel=1e-6)


def test_marginal_shares_against_brute_force():
    """Three marginals of unequal sizes: the searched shares are at the minimum over a grid of the simplex (step
    1/2000), and well below equal shares."""
    sizes, workload = (2, 8, 3), [(0, 1), (1, 2), (0, 2)]
    plan = plan_laplace(workload, sizes, "marginals")
    equal = plan_laplace(workload, sizes, "marginals", equal_shares=True)
    assert list(plan.tables) == [(0, 1), (0, 2), (1, 2)]
    # Λ_B = Σ_T g_{T,B}·e_T²/2 over the grid at once: (points × tables) @ (tables × bases)
    gains = np.zeros((3, len(plan.structure.bases)))
    np.add.at(gains, (plan.pair_table, plan.pair_basis), plan.pair_gain / 2)
    step = 2000
    i, j = np.meshgrid(np.arange(1, step), np.arange(1, step), indexing="ij")
    inside = i + j < step
    e = np.stack([i[inside], j[inside], step - i[inside] - j[inside]], axis=1) / step
    grid = (plan.coefficient / ((e ** 2) @ gains)).sum(axis=1).min()
    found = plan.continuous_total(1)
    assert found <= grid * (1 + 1e-9)
    assert found >= grid * (1 - 1e-4)
    assert found < equal.continuous_total(1) * 0.97


@pytest.mark.parametrize("workload,sizes", [
    (WORKLOAD, SIZES),
    (list(itertools.combinations(range(6), 3)), (2,) * 6),
    (list(itertools.combinations(range(5), 2)), (4, 3, 5, 2, 6)),
    ([(0, 1), (1, 2), (0, 2), (0, 1, 2)], (3, 3, 3)),
])
def test_best_plan_is_the_lowest_and_never_above_separate(workload, sizes):
    epsilon = Fraction(1)
    plan, totals = best_plan(workload, sizes, epsilon)
    assert plan.total(epsilon) == min(totals.values()) == totals[plan.method]
    k = len(workload)
    separate = sum(expected_errors([tuple(m) for m in workload], dict(enumerate(sizes)),
                                   [discrete_laplace_variance(Fraction(k) / epsilon)] * k))
    assert plan.total(epsilon) <= separate * (1 + 1e-12)
    assert sum(plan.shares) == 1 and all(s > 0 for s in plan.shares)


def test_all_three_way_of_binary_attributes_prefers_the_bases():
    """The Fourier plan's ±1 rows halve a binary residual's variance per unit of ε²: on all 3-way marginals of 10
    binary attributes it beats the measured marginals, and the combined search beats both."""
    _, totals = best_plan(list(itertools.combinations(range(10), 3)), (2,) * 10, 1)
    assert totals["bases"] < totals["marginals"]
    assert totals["combined"] < totals["bases"]


@pytest.mark.parametrize("n", range(3, 13))
def test_the_whole_axis_beats_every_integer_basis_tried(n):
    """s²·g (variance per coordinate per unit of ε², up to the Laplace constant) of each attribute matrix: the
    closed forms of docs/algorithms.md §11.1, and the whole axis (1) below all of them for n >= 3."""
    assert attribute_factor(n, "identity") == (1, 1.0)
    s, g = attribute_factor(n, "helmert")
    assert s == n - 1 and g == pytest.approx(1 / n)
    s, g = attribute_factor(n, "steps")
    assert s == 2 and g == pytest.approx((n + 1) / 6)
    factors = [s * s * g for s, g in (attribute_factor(n, k) for k in ("helmert", "steps"))]
    if n & (n - 1) == 0:
        s, g = attribute_factor(n, "hadamard")
        assert s == n - 1 and g == pytest.approx(1 / n)
        factors.append(s * s * g)
    assert min(factors) > 1


def test_binary_attributes_take_the_difference():
    assert attribute_factor(2, "difference") == (1, 0.5)
    assert attribute_factor(2, "helmert") == pytest.approx((1, 0.5))  # the same row
    assert attribute_factor(2, "hadamard") == pytest.approx((1, 0.5))


# -- measurement through the kernel ----------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_every_measured_table_has_l1_sensitivity_one(method):
    """At ε = 1000 the noise is 0 with probability 1 − 10⁻¹⁰⁰ or so, so the traced draws are the tables' true
    counts: adding one record anywhere in the domain moves each table by exactly 1 in L1 norm, and the bases rebuild
    the true marginals."""
    plan = plan_laplace(WORKLOAD, SIZES, method)
    codes, tables = random_counts(SIZES, 60, seed=2)

    def draws(tables):
        trace: list = []
        measured = measure_laplace(plan, tables, PrivacyBudget(1000, bits=SeededBits(1), trace=trace))
        return measured, [d.values for d in trace]
    measured, base = draws(tables)
    rebuilt = reconstruct(plan.structure, measured)
    for s, table in tables.items():
        assert np.allclose(rebuilt[s], table, atol=1e-9)
    for cell in itertools.product(*[range(n) for n in SIZES]):
        _, moved = draws(counted(np.vstack([codes, cell]), SIZES))
        assert [float(np.abs(a - b).sum()) for a, b in zip(moved, base)] == [1.0] * len(plan.tables)


@pytest.mark.parametrize("factor", [1, 3])
def test_records_add_up_to_the_budget_with_the_stated_sensitivity_and_scale(factor):
    """Sequential composition in the kernel: the tables' ε add up to the set's exactly; each record states Δ₁ =
    factor (a unit of K rows) and the scale the plan computed at ε/K; the measured variances are the plan's."""
    plan, _ = best_plan(WORKLOAD, SIZES, Fraction(3, 4) / factor)
    _, tables = random_counts(SIZES, 200, seed=4)
    budget = PrivacyBudget(Fraction(3, 4), bits=SeededBits(9), factor=factor)
    measured = measure_laplace(plan, tables, budget, names=["a", "b", "c", "d"])
    records = budget.measurements
    assert sum(r.epsilon for r in records) == Fraction(3, 4) == budget.spent
    assert [r.sensitivity for r in records] == [factor] * len(plan.tables)
    assert [r.scale for r in records] == plan.scales(Fraction(3, 4) / factor)
    assert records[0].what == describe_table(plan.tables[0], plan.differenced[0], ["a", "b", "c", "d"])
    planned = plan.variance_per_cell(Fraction(3, 4) / factor)
    for s, v in exact_variances(plan.structure, measured).items():
        assert v == pytest.approx(planned[s], rel=1e-12)


def test_refusals_come_before_any_draw():
    plan = plan_laplace(WORKLOAD, SIZES, "bases")
    _, tables = random_counts(SIZES, 50, seed=1)
    zcdp = ZCDPBudget(Fraction(1, 2), bits=SeededBits(1))
    with pytest.raises(ValueError, match="pure-epsilon budget"):
        measure_laplace(plan, tables, zcdp)
    assert zcdp.spent == 0
    budget = PrivacyBudget(1, bits=SeededBits(1))
    wrong = dict(tables)
    wrong[(0, 1)] = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(DataError, match="shape"):
        measure_laplace(plan, wrong, budget)
    missing = {s: t for s, t in tables.items() if s != (1,)}
    with pytest.raises(DataError, match="no counted table"):
        measure_laplace(plan, missing, budget)
    assert budget.spent == 0 and not budget.measurements


def test_scales_beyond_the_sampler_are_refused_at_planning():
    plan = plan_laplace(WORKLOAD, SIZES, "bases")
    with pytest.raises(ValueError, match="2\\^40"):
        check_scales(plan, Fraction(1, 2**38))
    with pytest.raises(ValueError, match="2\\^40"):
        best_plan(WORKLOAD, SIZES, Fraction(1, 2**38))
    check_scales(plan, Fraction(1))


def test_marginals_agree_on_shared_sub_tables_before_rounding():
    plan, _ = best_plan(WORKLOAD, SIZES, 1)
    _, tables = random_counts(SIZES, 300, seed=6)
    rebuilt = reconstruct(plan.structure, measure_laplace(plan, tables, PrivacyBudget(1, bits=SeededBits(2))))
    assert np.allclose(rebuilt[(0, 1)].sum(axis=0), rebuilt[(1,)], atol=1e-9)
    assert np.allclose(rebuilt[(1, 2)].sum(axis=1), rebuilt[(1,)], atol=1e-9)
    assert np.allclose(rebuilt[(0, 1)].sum(axis=1), rebuilt[(0, 2)].sum(axis=1), atol=1e-9)
    assert np.allclose(rebuilt[(1, 2)].sum(axis=0), rebuilt[(2, 3)].sum(axis=1), atol=1e-9)
    totals = [r.sum() for r in rebuilt.values()]
    assert np.allclose(totals, totals[0])


REPS = 20_000
#: 4.5 standard errors per comparison: with the 10 + 5 comparisons per method below the false-alarm rate is under
#: 1e-4 (normal approximation of a mean of 20,000 independent squared errors).
Z = 4.5


def _check(mean_squares: np.ndarray, expected: float, what) -> float:
    """Mean of the per-release squared errors against ``expected``, within Z standard errors; returns the
    smallest relative defect the comparison detects (Z standard errors over the expectation)."""
    mean, se = float(mean_squares.mean()), float(mean_squares.std(ddof=1) / math.sqrt(mean_squares.size))
    assert abs(mean - expected) < Z * se, (what, mean, expected, se)
    return Z * se / expected


@pytest.mark.parametrize("method", METHODS)
def test_monte_carlo_per_basis_and_per_cell_variances(method):
    """20,000 releases at once through the kernel (a replicated budget: every table's exact discrete Laplace noise
    drawn 20,000 times): for every basis B, the squared error of its estimate summed over its cells has mean
    v_B·N_B·p_B; for every marginal, the rebuilt cells' mean squared error is the plan's per-cell variance.  Each
    comparison also states its power: the smallest relative defect of a variance it detects (Z standard errors over
    the expectation) is asserted below 8 % per basis and 5 % per marginal (measured: about 5.5 % and 3.5 %), so a
    plan whose stated noise scale were off by 3 % would fail on every marginal."""
    plan = plan_laplace(WORKLOAD, SIZES, method)
    epsilon = Fraction(1)
    _, tables = random_counts(SIZES, 500, seed=8)
    measured = measure_laplace(plan, tables, ReplicatedBudget(epsilon, SeededBits(77), REPS, []))
    structure = plan.structure
    truth = {b: true_residual(tables, b) for b in structure.bases}
    variances = plan.basis_variances(epsilon)
    worst = 0.0
    for b, m in enumerate(measured):
        error = m.residual - truth[m.basis]
        assert error.shape[0] == REPS
        squares = (error ** 2).reshape(REPS, -1).sum(axis=1)
        expected = variances[b] * structure.cells[b] * structure.kept[b]
        assert m.noise_variance == pytest.approx(variances[b], rel=1e-12)
        worst = max(worst, _check(squares, expected, m.basis))
    assert worst < 0.08
    # the rebuilt marginals of every release at once (reconstruct's sum, on the leading axis; the same as
    # reconstruct on release 0)
    planned = plan.variance_per_cell(epsilon)
    first = reconstruct(structure, [replace(m, residual=m.residual[0]) for m in measured])
    every = reconstruct(structure, measured)
    worst = 0.0
    for s in structure.marginals:
        rebuilt = every[s]
        assert rebuilt.shape[0] == REPS and np.allclose(rebuilt[0], first[s], atol=1e-9)
        squares = ((rebuilt - tables[s]) ** 2).reshape(REPS, -1).mean(axis=1)
        worst = max(worst, _check(squares, planned[s], s))
    assert worst < 0.05
