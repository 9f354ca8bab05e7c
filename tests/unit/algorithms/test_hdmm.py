"""The hdmm algorithm (dphist/algorithms/hdmm.py): the optimised range strategy wired into the catalog.  The
strategies' own properties (the optimiser, the integer measurement's unbiasedness and exact variance) are tested
in tests/unit/algorithms/strategies/; here: a run on 1-D and 2-D tables under pure ε and zCDP spends the budget
exactly in one measurement at the integer strategy's sensitivities, its variance is the record's exact one, it is
unbiased (seeded Monte Carlo), the cache is read instead of optimising again, a categorical axis gets the
identity, and the refusals come before any data."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import dphist.algorithms.strategies.strategy_cache as strategy_cache
from dphist.algorithms import get_algorithm
from dphist.algorithms.hdmm import MAX_UNCACHED_CELLS, forget_strategies
from dphist.algorithms.strategies.integer_strategy import cell_variances
from dphist.algorithms.strategies.optimized import optimise_p_identity
from dphist.declare.schema import parse_schema
from dphist.errors import UsageError
from dphist.inference.measurements import total_measurement
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget

from replicated import Replicated

BUDGETS = [("pure", lambda seed: PrivacyBudget(Fraction(1), bits=SeededBits(seed))),
           ("zcdp", lambda seed: ZCDPBudget(Fraction(1, 2), bits=SeededBits(seed)))]


@pytest.mark.parametrize("shape", [(16,), (8, 6)])
@pytest.mark.parametrize("kind, make", BUDGETS)
def test_a_run_spends_the_budget_in_one_measurement_at_the_strategys_exact_sensitivity(shape, kind, make):
    counts = np.random.default_rng(1).integers(0, 40, shape)
    algorithm, budget = get_algorithm("hdmm"), make(4)
    estimate = algorithm.run(counts, budget)
    (record,) = budget.measurements
    assert budget.spent == budget.amount
    strategy = estimate.plan.strategy
    assert strategy.shape == shape and strategy.rows > counts.size  # p extra rows on every optimised axis
    if kind == "pure":
        assert record.sensitivity == strategy.l1 and record.queries == strategy.rows
    else:
        assert record.l2_squared == strategy.l2_squared
    assert np.array_equal(estimate.variance, cell_variances(strategy, record))
    assert estimate.values.shape == shape and np.all(estimate.variance > 0)
    (step,) = algorithm.steps(shape, None, budget.noise)
    assert (step.l1, step.l2_squared) == (strategy.l1, strategy.l2_squared)


@pytest.mark.parametrize("kind, rho", [("pure", None), ("zcdp", Fraction(1, 2))])
def test_unbiased_with_the_stated_variance_over_seeded_runs(kind, rho):
    """200 runs at once (a leading axis) on 16 cells: each cell's mean within 4 standard errors of its count, and
    its sample variance within 25 % of the stated one (the sample variance of 200 normal-ish draws has a relative
    sd of 10 %)."""
    counts = np.random.default_rng(2).integers(0, 50, 16)
    runs = 200
    budget = Replicated(rho, SeededBits(7), runs) if rho is not None else PrivacyBudget(Fraction(1),
                                                                                       bits=SeededBits(7))
    budget.repetitions = (runs,)  # every measurement drawn 200 times at once, along a leading axis
    estimate = get_algorithm("hdmm").run(counts, budget)
    values = estimate.values
    assert values.shape == (runs, 16)
    se = np.sqrt(estimate.variance / runs)
    assert np.all(np.abs(values.mean(axis=0) - counts) < 4 * se)
    ratio = values.var(axis=0, ddof=1) / estimate.variance
    assert 0.75 < ratio.mean() < 1.25


def test_a_second_run_reads_the_cache_and_gives_the_same_strategy(tmp_path, monkeypatch):
    """Optimisation is deterministic (a fixed seed), so the cached strategy is the one a fresh optimisation gives;
    with the in-process memo emptied, the second run reads the file and optimises nothing."""
    monkeypatch.setenv(strategy_cache.CACHE_ENV, str(tmp_path))
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0].n)
        return optimise_p_identity(*args, **kwargs)

    # cached_strategy's optimiser is a keyword default: swap in one that counts its calls
    monkeypatch.setattr(strategy_cache.cached_strategy, "__kwdefaults__",
                        {**strategy_cache.cached_strategy.__kwdefaults__, "optimise": counting})
    counts = np.arange(12)
    forget_strategies()
    first = get_algorithm("hdmm").run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert calls == [12] and len(list(tmp_path.glob("*.npz"))) == 1
    forget_strategies()
    second = get_algorithm("hdmm").run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert calls == [12]  # read, not optimised
    assert all(np.array_equal(a, b) for a, b in zip(first.plan.strategy.factors, second.plan.strategy.factors))
    assert np.array_equal(first.values, second.values)
    for path in tmp_path.glob("*.npz"):
        path.unlink()
    forget_strategies()
    third = get_algorithm("hdmm").run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert calls == [12, 12] and np.array_equal(first.values, third.values)  # a miss gives the same strategy
    forget_strategies()


def test_an_unwritable_cache_warns_and_the_run_goes_on(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(strategy_cache.CACHE_ENV, str(blocked / "strategies"))
    forget_strategies()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimate = get_algorithm("hdmm").run(np.arange(10), PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert estimate.values.shape == (10,)
    assert len(caught) == 1 and "cannot be written" in str(caught[0].message)
    forget_strategies()


def test_the_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(strategy_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert strategy_cache.default_cache_dir() == tmp_path / "dphist" / "strategies"
    monkeypatch.setenv(strategy_cache.CACHE_ENV, str(tmp_path / "mine"))
    assert strategy_cache.default_cache_dir() == tmp_path / "mine"


def test_a_categorical_axis_gets_the_identity():
    schema = parse_schema({"columns": {
        "age": {"type": "numeric", "lower": 0, "upper": 80, "bins": 8},
        "region": {"type": "categorical", "values": ["N", "E", "S", "W", "C"]}}})
    columns = [schema["age"], schema["region"]]
    algorithm = get_algorithm("hdmm")
    plan = algorithm.plan((8, 5), columns, "gaussian")
    assert np.array_equal(plan.strategy.factors[1], np.eye(5, dtype=np.int64))
    assert plan.strategy.factors[0].shape[0] > 8 and plan.structure["optimised_axes"] == [0]
    # the sensitivity is the ordered axis's alone: the identity's columns have norm 1
    assert plan.strategy.l2_squared == algorithm.plan((8,), columns[:1], "gaussian").strategy.l2_squared
    counts = np.random.default_rng(3).integers(0, 30, (8, 5))
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(2))
    estimate = algorithm.run(counts, budget, columns)
    assert budget.spent == Fraction(1, 2) and estimate.values.shape == (8, 5)


def test_prefixes_are_a_workload_of_their_own():
    a, b = get_algorithm("hdmm"), get_algorithm("hdmm", workload="prefixes")
    assert a.plan((16,)).structure["workload"] == "all_ranges" and b.plan((16,)).structure["workload"] == "prefixes"
    assert not np.array_equal(a.plan((16,)).strategy.factors[0], b.plan((16,)).strategy.factors[0])
    with pytest.raises(UsageError, match="workload"):
        get_algorithm("hdmm", workload="boxes")


def test_refusals_come_before_any_data():
    algorithm = get_algorithm("hdmm")
    with pytest.raises(UsageError, match="one or two ordered columns"):
        algorithm.steps((3, 4, 5), None, "laplace")
    with pytest.raises(UsageError, match=f"ceiling is {MAX_UNCACHED_CELLS:,} cells per column") as refused:
        algorithm.steps((MAX_UNCACHED_CELLS + 1,), None, "gaussian")
    assert "\n" not in str(refused.value)


def test_a_total_measured_elsewhere_is_one_more_least_squares_measurement():
    counts = np.random.default_rng(4).integers(0, 40, (6, 5))
    algorithm = get_algorithm("hdmm")
    estimate = algorithm.run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(3)))
    target = float(estimate.values.sum()) + 300
    refit = algorithm.refit(estimate, total_measurement(target, 4.0))
    assert abs(refit.values.sum() - target) < abs(estimate.values.sum() - target) / 2
    assert np.all(refit.variance < estimate.variance) and "total_also_from" in refit.structure
    # the dense least squares of the strategy's answers and the total, as an oracle
    a = np.kron(*[f.astype(float) for f in estimate.plan.strategy.factors])
    (own,) = estimate.measurements
    v = float(own.variance)
    rows = np.vstack([a / np.sqrt(v), np.ones((1, a.shape[1])) / 2.0])
    answers = np.concatenate([np.ravel(own.values) / np.sqrt(v), [target / 2.0]])
    dense = np.linalg.lstsq(rows, answers, rcond=None)[0]
    assert np.allclose(refit.values.ravel(), dense, rtol=1e-7, atol=1e-6)
    assert np.allclose(refit.variance.ravel(), np.diag(np.linalg.inv(rows.T @ rows)), rtol=1e-7)


def test_the_exact_noise_model_of_the_report_matches_the_dense_covariance():
    """strategy_noise (dphist/evaluation/linear_error.py): a box's variance and fourth cumulant from the per-axis
    factors equal v·qᵀ(AᵀA)⁻¹q and κ₄·Σ_r (A(AᵀA)⁻¹q)_r⁴ with the dense Kronecker product."""
    from dphist.evaluation.linear_error import fourth_cumulant, strategy_noise

    algorithm = get_algorithm("hdmm")
    estimate = algorithm.run(np.zeros((6, 5), dtype=np.int64), PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    (own,) = estimate.measurements
    noise = strategy_noise(estimate.plan, float(own.variance), "laplace")
    lo, hi = np.array([[0, 0], [1, 2], [5, 4]]), np.array([[6, 5], [4, 3], [6, 5]])
    a = np.kron(*[f.astype(float) for f in estimate.plan.strategy.factors])
    cov = np.linalg.inv(a.T @ a)
    variances, fourths = noise.box_cumulants(lo, hi)
    for k in range(3):
        q = np.zeros((6, 5))
        q[lo[k, 0]:hi[k, 0], lo[k, 1]:hi[k, 1]] = 1
        q = q.ravel()
        assert np.isclose(variances[k], float(own.variance) * q @ cov @ q, rtol=1e-9)
        assert np.isclose(fourths[k], fourth_cumulant("laplace", own.variance) * np.sum((a @ cov @ q) ** 4), rtol=1e-9)
    assert np.allclose(noise.cell_variances, estimate.variance.ravel(), rtol=1e-12)


def test_the_noise_model_with_a_refitted_total_matches_the_dense_least_squares():
    """strategy_noise with auto's N̂ refitted: a box's variance and fourth cumulant equal those of the dense least
    squares of the answers (variance v each) and the total (v_t): x̂ = Σ'(Aᵀy/v + 1·t/v_t), Σ' = (AᵀA/v + 11ᵀ/v_t)⁻¹,
    so qᵀx̂ errs by (AΣ'q/v)ᵀz + (1ᵀΣ'q/v_t)·z_t; and the report's cell variances are the refitted estimate's."""
    from dphist.evaluation.linear_error import fourth_cumulant, strategy_noise

    algorithm = get_algorithm("hdmm")
    estimate = algorithm.run(np.zeros((6, 5), dtype=np.int64), PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    (own,) = estimate.measurements
    v, v_t = float(own.variance), 37.5
    refit = algorithm.refit(estimate, total_measurement(0.0, v_t))
    noise = strategy_noise(refit.plan, v, "laplace", v_t)
    lo, hi = np.array([[0, 0], [1, 2], [5, 4], [2, 0]]), np.array([[6, 5], [4, 3], [6, 5], [3, 5]])
    a = np.kron(*[f.astype(float) for f in estimate.plan.strategy.factors])
    cov = np.linalg.inv(a.T @ a / v + np.ones((30, 30)) / v_t)
    variances, fourths = noise.box_cumulants(lo, hi)
    for k in range(len(lo)):
        q = np.zeros((6, 5))
        q[lo[k, 0]:hi[k, 0], lo[k, 1]:hi[k, 1]] = 1
        q = q.ravel()
        on_answers, on_total = a @ cov @ q / v, float(np.ones(30) @ cov @ q) / v_t
        assert np.isclose(variances[k], q @ cov @ q, rtol=1e-9)
        assert np.isclose(fourths[k], fourth_cumulant("laplace", v) * np.sum(on_answers ** 4)
                          + fourth_cumulant("laplace", v_t) * on_total ** 4, rtol=1e-8)
    assert np.allclose(noise.cell_variances, refit.variance.ravel(), rtol=1e-10)
    assert np.allclose(noise.cell_variances, np.diag(cov), rtol=1e-9)
