"""The residual planner (docs/algorithms.md §11): closed-form figures, exact variances against an explicit GLS
computation, optimality, the max-variance plan, consistency of the reconstruction, and Monte Carlo through the
kernel."""

from __future__ import annotations

from fractions import Fraction
import itertools
import math

import numpy as np
import pytest
from scipy import optimize

from dphist.algorithms.residual_planner import (ResidualMeasurement, check_sampler, discrete_variance_per_cell,
                                                exact_variances, measure_from_marginals, measure_residuals,
                                                plan_residuals, reconstruct, source_marginals)
from dphist.errors import DataError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget


def all_way(attributes: int, k: int) -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(attributes), k))


# -- independent oracles: everything over the full domain, small cases only ------------------------------------

def _factor(n: int, kind: str) -> np.ndarray:
    if kind == "residual":
        return np.eye(n) - np.ones((n, n)) / n
    if kind == "keep":
        return np.eye(n)
    return np.ones((1, n))  # summed out


def _kron(factors) -> np.ndarray:
    out = np.ones((1, 1))
    for f in factors:
        out = np.kron(out, f)
    return out


def marginal_query(sizes, s) -> np.ndarray:
    """The matrix of marginal S over the full domain (C order)."""
    return _kron([_factor(n, "keep" if i in s else "sum") for i, n in enumerate(sizes)])


def residual_query(sizes, a) -> np.ndarray:
    """P_A M_A over the full domain: the residual queries of basis A."""
    return _kron([_factor(n, "residual" if i in a else "sum") for i, n in enumerate(sizes)])


def gls_variances(sizes, marginals, bases, variances) -> dict:
    """Var of each cell of each marginal under GLS on the residual queries of each basis with iid noise of
    ``variances[A]`` per row (rows scaled by 1/σ_A); a marginal's cells must all agree."""
    info = sum(residual_query(sizes, a).T @ residual_query(sizes, a) / variances[a] for a in bases)
    cov = np.linalg.pinv(info, rcond=1e-12, hermitian=True)
    out = {}
    for s in marginals:
        q = marginal_query(sizes, s)
        cells = np.einsum("ij,jk,ik->i", q, cov, q)
        assert np.allclose(cells, cells[0], rtol=1e-9)
        out[s] = float(cells[0])
    return out


def direct_objective(sizes, marginals, weights, bases, shares, rho=1.0) -> float:
    """Σ_S w_S N_S Var_S, Var_S = Σ_{A⊆S} σ_A² p_A / ∏_{S∖A} n², σ_A² = p_A/(2 share_A ρ), by loops."""
    total = 0.0
    index = {a: i for i, a in enumerate(bases)}
    for s, w in zip(marginals, weights):
        var = 0.0
        for r in range(len(s) + 1):
            for a in itertools.combinations(s, r):
                p = math.prod((sizes[i] - 1) / sizes[i] for i in a)
                rest = math.prod(sizes[i] for i in s if i not in a)
                var += p / (2 * shares[index[a]] * rho) * p / rest ** 2
        total += w * math.prod(sizes[i] for i in s) * var
    return total


# -- closed form ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attributes, values, k, expected", [(20, 2, 3, 5.8676), (20, 10, 3, 18.822),
                                                             (10, 10, 2, 4.1338)])
def test_closed_form_rmse_figures(attributes, values, k, expected):
    plan = plan_residuals(all_way(attributes, k), [values] * attributes)
    assert plan.rmse(1) == pytest.approx(expected, abs=1e-3)
    assert math.isclose(plan.shares.sum(), 1.0) and np.all(plan.shares > 0)


def test_plans_all_three_way_marginals_of_100_attributes():
    """(Its time is measured in bench/marginals.py --scale, not here.)"""
    plan = plan_residuals(all_way(100, 3), [10] * 100)
    assert len(plan.marginals) == 161_700
    assert len(plan.bases) == 1 + 100 + 4_950 + 161_700  # ∅, singles, pairs, triples
    assert plan.rmse(1) == pytest.approx(214.375, abs=1e-3)


def test_bases_are_sorted_subsets_and_skip_one_valued_attributes():
    plan = plan_residuals([(2, 0), (1, 2)], [3, 1, 2])
    assert plan.marginals == ((0, 2), (1, 2))
    assert plan.bases == ((), (0,), (0, 2), (2,))  # every subset without attribute 1 (one value)
    assert list(plan.bases) == sorted(plan.bases)


@pytest.mark.parametrize("sizes, marginals, weights", [
    ((2, 3, 2, 4), all_way(4, 2), None),
    ((3, 3, 3), all_way(3, 1) + all_way(3, 2), [1, 2, 3, 0.5, 4, 1]),
])
def test_variances_match_explicit_gls(sizes, marginals, weights):
    plan = plan_residuals(marginals, sizes, weights=weights)
    rho = 0.7
    sigma2 = dict(zip(plan.bases, plan.sigma2(rho)))
    expected = gls_variances(sizes, plan.marginals, plan.bases, sigma2)
    got = plan.variance_per_cell(rho)
    for s in plan.marginals:
        assert got[s] == pytest.approx(expected[s], rel=1e-9)
    # the whole budget is spent: Σ p_A/(2σ_A²) = ρ
    assert sum(plan.kept / (2 * plan.sigma2(rho))) == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("sizes, marginals, weights", [
    ((2, 3, 2, 4), all_way(4, 2), None),
    ((3, 3, 3), all_way(3, 1) + all_way(3, 2), [1, 2, 3, 0.5, 4, 1]),
])
def test_no_numerical_minimisation_beats_the_closed_form(sizes, marginals, weights):
    plan = plan_residuals(marginals, sizes, weights=weights)
    weights = plan.weights
    ours = direct_objective(sizes, plan.marginals, weights, plan.bases, plan.shares)
    # the plan's variances give the same objective
    cells = plan.marginal_cells()
    variances = plan.variance_per_cell(1.0)
    assert ours == pytest.approx(sum(w * c * variances[s] for s, w, c in zip(plan.marginals, weights, cells)),
                                 rel=1e-12)

    def objective(logits):
        shares = np.exp(logits - logits.max())
        return direct_objective(sizes, plan.marginals, weights, plan.bases, shares / shares.sum())

    start = np.zeros(len(plan.bases))  # equal shares, far from the plan
    found = optimize.minimize(objective, start, method="BFGS", options={"gtol": 1e-10, "maxiter": 2000})
    assert objective(start) > ours * 1.01  # the start is not already optimal
    assert found.fun >= ours * (1 - 1e-6)
    assert found.fun <= ours * (1 + 1e-3)  # the minimiser found the optimum too


# -- the max-variance objective ---------------------------------------------------------------------------------

def test_max_objective_beats_sum_plan_and_matches_a_direct_solve():
    sizes = (2, 3, 5)
    marginals = [(0, 1), (0, 2), (1, 2), (0, 1, 2), (2,)]
    best = plan_residuals(marginals, sizes, objective="max")
    summed = plan_residuals(marginals, sizes)
    ours = max(best.variance_per_cell(1).values())
    assert ours <= max(summed.variance_per_cell(1).values())

    # direct: minimise t over (x_A = 1/σ_A², t) with Var_S(x) <= t and Σ p_A x_A / 2 = 1 (ρ = 1)
    bases, kept = best.bases, best.kept
    coefficients = np.zeros((len(best.marginals), len(bases)))
    for row, s in enumerate(best.marginals):
        for col, a in enumerate(bases):
            if set(a) <= set(s):
                rest = math.prod(sizes[i] for i in s if i not in a)
                coefficients[row, col] = kept[col] / rest ** 2
    # in y = log x, with the constraint Var_S/t <= 1 (scaled so SLSQP's line search behaves)
    start = np.append(np.log(2 * summed.shares / kept), max(summed.variance_per_cell(1).values()))
    constraints = [{"type": "ineq", "fun": lambda z: 1 - coefficients @ np.exp(-z[:-1]) / z[-1]},
                   {"type": "eq", "fun": lambda z: kept @ np.exp(z[:-1]) / 2 - 1}]
    direct = optimize.minimize(lambda z: z[-1], start, method="SLSQP", constraints=constraints,
                               options={"ftol": 1e-15, "maxiter": 2000})
    assert direct.success
    assert direct.fun < max(summed.variance_per_cell(1).values()) * 0.9  # the case is not symmetric
    assert ours == pytest.approx(direct.fun, rel=1e-4)


def test_max_objective_on_a_symmetric_workload_is_the_sum_plan():
    best = plan_residuals(all_way(5, 2), [3] * 5, objective="max")
    summed = plan_residuals(all_way(5, 2), [3] * 5)
    assert np.allclose(best.shares, summed.shares, rtol=1e-9)


# -- reconstruction ---------------------------------------------------------------------------------------------

def _codes(sizes, rows, seed):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, n, rows) for n in sizes], axis=1)


def _true_marginal(codes, sizes, s):
    dims = tuple(sizes[i] for i in s)
    if not s:
        return np.array(float(len(codes)))
    flat = np.ravel_multi_index([codes[:, i] for i in s], dims)
    return np.bincount(flat, minlength=math.prod(dims)).reshape(dims).astype(float)


def _residual(table):
    out = np.asarray(table, dtype=float).copy()
    for axis in range(out.ndim):
        out -= out.mean(axis=axis, keepdims=True)
    return out


def test_noiseless_residuals_reconstruct_the_true_marginals():
    sizes = (3, 1, 4, 2)
    marginals = [(0, 1), (0, 2, 3), (1, 3), (2,)]
    plan = plan_residuals(marginals, sizes)
    codes = _codes(sizes, 500, 1)
    exact = [ResidualMeasurement(a, _residual(_true_marginal(codes, sizes, a)), 0.0, None) for a in plan.bases]
    got = reconstruct(plan, exact)
    for s in plan.marginals:
        assert np.allclose(got[s], _true_marginal(codes, sizes, s), atol=1e-9)


def test_reconstructed_marginals_agree_on_shared_sub_marginals():
    sizes = (3, 2, 4)
    marginals = [(0, 1, 2), (0, 1), (1, 2), (2,), ()]
    plan = plan_residuals(marginals, sizes)
    out = reconstruct(plan, measure_residuals(plan, _codes(sizes, 300, 2), ZCDPBudget(Fraction(1, 2),
                                                                                     bits=SeededBits(3))))
    assert np.allclose(out[(0, 1, 2)].sum(axis=2), out[(0, 1)], rtol=0, atol=1e-9)
    assert np.allclose(out[(0, 1, 2)].sum(axis=0), out[(1, 2)], rtol=0, atol=1e-9)
    assert np.allclose(out[(1, 2)].sum(axis=0), out[(2,)], rtol=0, atol=1e-9)
    assert out[(2,)].sum() == pytest.approx(float(out[()]), abs=1e-9)


def test_measurement_spends_the_budget_exactly_one_record_per_basis():
    sizes = (2, 3, 4)
    plan = plan_residuals(all_way(3, 2), sizes)
    budget = ZCDPBudget(Fraction(3, 7), bits=SeededBits(5))
    out = measure_residuals(plan, _codes(sizes, 50, 3), budget)
    assert [m.basis for m in out] == list(plan.bases)
    assert budget.spent == Fraction(3, 7) and budget.remaining == 0
    rhos = [m.record.rho for m in out]
    assert np.allclose([float(r) for r in rhos], plan.shares * 3 / 7, rtol=1e-12)
    for m in out:
        # the record's cost is the basis's p_A/(2σ²) in marginal units
        assert m.record.l2_squared / (2 * m.record.sigma2) == m.record.rho
        assert m.residual.shape == tuple(sizes[i] for i in m.basis)


def test_measurement_refuses_bad_codes_and_a_pure_budget_before_drawing():
    plan = plan_residuals([(0, 1)], (2, 3))
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(0))
    with pytest.raises(DataError):
        measure_residuals(plan, np.array([[0, 3]]), budget)
    with pytest.raises(DataError):
        measure_residuals(plan, np.array([[0.0, 1.0]]), budget)
    pure = PrivacyBudget(Fraction(1), bits=SeededBits(0))
    with pytest.raises(ValueError):
        measure_residuals(plan, np.array([[0, 1]]), pure)
    assert budget.spent == 0 and pure.spent == 0


def _marginal_tables(plan, codes):
    """The workload's true marginal tables counted from ``codes`` (axes in each marginal's sorted order)."""
    out = []
    for s in plan.marginals:
        dims = tuple(plan.sizes[i] for i in s)
        flat = np.ravel_multi_index([codes[:, i] for i in s], dims)
        out.append(np.bincount(flat, minlength=math.prod(dims)).reshape(dims))
    return out


def test_measuring_from_counted_marginals_is_measuring_from_the_rows():
    """Same bits, same noise: the bases' counts summed from the workload's tables are the bases' own marginals."""
    sizes = (3, 2, 4, 2)
    plan = plan_residuals([(0, 1), (1, 2), (2, 3), (0,)], sizes)
    codes = _codes(sizes, 300, 4)
    rows, tables = ZCDPBudget(Fraction(2, 3), bits=SeededBits(8)), ZCDPBudget(Fraction(2, 3), bits=SeededBits(8))
    expected = measure_residuals(plan, codes, rows)
    got = measure_from_marginals(plan, dict(zip(plan.marginals, _marginal_tables(plan, codes))), tables)
    assert [m.basis for m in got] == [m.basis for m in expected]
    assert all(np.array_equal(a.residual, b.residual) for a, b in zip(got, expected))
    assert tables.spent == Fraction(2, 3) and tables.remaining == 0
    # each basis is summed from the smallest workload marginal containing it
    source = source_marginals(plan)
    assert plan.marginals[source[(0,)]] == (0,) and plan.marginals[source[(1,)]] == (0, 1)
    assert all(set(a) <= set(plan.marginals[source[a]]) for a in plan.bases)


def test_measuring_from_counted_marginals_refuses_bad_tables_before_drawing():
    plan = plan_residuals([(0, 1), (1,)], (2, 3))
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(0))
    good = [np.ones((2, 3), dtype=np.int64), np.full(3, 2)]
    for tables in ([good[0]], [good[0], np.ones(4, dtype=np.int64)], [-good[0], good[1]],
                   [good[0] + 0.5, good[1]], {(0, 1): good[0]}):
        with pytest.raises(DataError):
            measure_from_marginals(plan, tables, budget)
    with pytest.raises(ValueError):
        measure_from_marginals(plan, good, PrivacyBudget(Fraction(1), bits=SeededBits(0)))
    assert budget.spent == 0
    assert len(measure_from_marginals(plan, [good[0].astype(float), good[1]], budget)) == len(plan.bases)


@pytest.mark.parametrize("rho", [Fraction(1, 10), Fraction(40)])
def test_discrete_variances_before_measuring_equal_the_records(rho):
    """The planned exact (discrete Gaussian) variances are the records' own, to 1e-9; at a large ρ the bases' noise
    is on a coarse lattice and they fall strictly below the continuous figures."""
    sizes = (2, 3, 2, 2)
    plan = plan_residuals(all_way(4, 2) + [(0, 1, 2)], sizes)
    budget = ZCDPBudget(rho, bits=SeededBits(1))
    records = measure_from_marginals(plan, _marginal_tables(plan, _codes(sizes, 40, 2)), budget)
    planned, measured = discrete_variance_per_cell(plan, rho), exact_variances(plan, records)
    continuous = plan.variance_per_cell(rho)
    for s in plan.marginals:
        assert planned[s] == pytest.approx(measured[s], rel=1e-9, abs=0)
        assert planned[s] <= continuous[s] * (1 + 1e-12)
    if rho > 1:
        assert all(planned[s] < continuous[s] * (1 - 1e-6) for s in plan.marginals)


def test_the_sampler_limit_is_checked_from_the_plan():
    plan = plan_residuals(all_way(3, 2), (4, 4, 4))
    check_sampler(plan, Fraction(1, 10**6))
    with pytest.raises(ValueError, match="above the sampler's 2\\^60") as refused:
        check_sampler(plan, Fraction(1, 10**18))
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError):  # the kernel agrees: the same basis is refused when measured
        measure_from_marginals(plan, [np.ones((4, 4), dtype=np.int64)] * 3, ZCDPBudget(Fraction(1, 10**18),
                                                                                        bits=SeededBits(0)))


# -- Monte Carlo through the kernel -----------------------------------------------------------------------------

RELEASES = 400
Z = 4.5  # standard deviations of a check: P(|N(0,1)| > 4.5) = 6.8e-6


def _joint_covariance(plan, sizes, per_basis_variance):
    """The exact covariance of all cells of all reconstructed marginals (stacked in ``plan.marginals`` order): cell
    errors are Σ_{A⊆S} expand_S(P_A z_A)/∏_{S∖A} n, z_A iid of variance v_A, independent across bases."""
    blocks = []
    for a in plan.bases:
        rows = []
        for s in plan.marginals:
            if not set(a) <= set(s):
                rows.append(np.zeros((math.prod(sizes[i] for i in s), math.prod(sizes[i] for i in a))))
                continue
            rest = math.prod(sizes[i] for i in s if i not in a)
            rows.append(_kron([_factor(sizes[i], "residual") if i in a else np.ones((sizes[i], 1)) for i in s])
                        / rest)
        blocks.append(np.vstack(rows))
    return sum(per_basis_variance[a] * b @ b.T for a, b in zip(plan.bases, blocks))


def test_monte_carlo_variance_and_mean_match_the_exact_figures():
    """400 seeded releases of all 2-way and 1-way marginals of sizes (2, 3, 4) at ρ = 1, 80 rows.

    The statistics: per marginal S, T_S = mean over releases and S's cells of (m̂ − m)²/V_S, V_S the exact
    per-cell variance from the records, and T the same mean over all the workload's cells.  Their standard
    deviations under correct variances, sd = √2·‖D^(−1/2) C D^(−1/2)‖_F/(cells·√R) (C the exact joint covariance
    of the cells, D its diagonal; Gaussian fourth moments, as the noise is a sum of many discrete Gaussians), are
    computed here, and each check is |T − 1| <= 4.5·sd: a false-alarm rate of about 7e-6 per check (normal
    approximation), 5e-5 for the seven.  The test asserts (4.5 + 2.4)·sd < 0.15 for T (0.121 here), so a
    variance 15 % off on every cell fails with probability > 0.99; a single marginal's is caught when it is off
    by more than (4.5 + 2.4)·sd_S (0.15 to 0.35 here: its cells are few and correlated).  The mean error per
    cell is checked the same way (|mean| <= 4.5 times its exact sd): an unbiased estimate passes with the same
    false-alarm rate."""
    sizes = (2, 3, 4)
    marginals = all_way(3, 1) + all_way(3, 2)
    plan = plan_residuals(marginals, sizes)
    codes = _codes(sizes, 80, 7)
    truth = {s: _true_marginal(codes, sizes, s) for s in plan.marginals}
    squared = {s: 0.0 for s in plan.marginals}
    errors = {s: 0.0 for s in plan.marginals}
    variances = per_basis = None
    for k in range(RELEASES):
        measured = measure_residuals(plan, codes, ZCDPBudget(Fraction(1), bits=SeededBits(1000 + k)))
        if variances is None:
            variances = exact_variances(plan, measured)
            per_basis = {m.basis: m.noise_variance for m in measured}
        for s, estimate in reconstruct(plan, measured).items():
            error = estimate - truth[s]
            squared[s] += float((error ** 2).sum())
            errors[s] += float(error.sum())
    continuous = plan.variance_per_cell(1)
    cov = _joint_covariance(plan, sizes, per_basis)
    cells = [truth[s].size for s in plan.marginals]
    ends = np.cumsum(cells)
    scale = np.concatenate([np.full(c, variances[s]) for s, c in zip(plan.marginals, cells)])
    assert np.allclose(np.diag(cov), scale, rtol=1e-12)  # the records' variances are the cells' variances
    normalised = cov / np.sqrt(np.outer(scale, scale))
    total_sd = math.sqrt(2) * np.linalg.norm(normalised) / (sum(cells) * math.sqrt(RELEASES))
    assert (Z + 2.4) * total_sd < 0.15
    pooled = sum(squared[s] / variances[s] for s in plan.marginals) / (sum(cells) * RELEASES)
    assert abs(pooled - 1) <= Z * total_sd
    for s, n, end in zip(plan.marginals, cells, ends):
        assert variances[s] <= continuous[s] * (1 + 1e-12)  # the discrete Gaussian's variance is below σ²
        block = cov[end - n:end, end - n:end]
        sd = math.sqrt(2) * np.linalg.norm(normalised[end - n:end, end - n:end]) / (n * math.sqrt(RELEASES))
        assert abs(squared[s] / (n * RELEASES * variances[s]) - 1) <= Z * sd
        mean_sd = math.sqrt(block.sum() / n ** 2 / RELEASES)
        assert abs(errors[s] / (n * RELEASES)) <= Z * mean_sd
