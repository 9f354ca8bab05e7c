"""The residual-marginal benches (bench/marginals.py --optimum, --coverage) on tiny workloads: each Monte Carlo
figure agrees with the formula it is set against, and the intervals cover about 95 %."""

from __future__ import annotations

import math

import numpy as np
import pytest

import bench_scripts


@pytest.fixture(scope="module")
def bench():
    return bench_scripts.load("marginals.py")


@pytest.fixture(scope="module")
def tiny(bench):
    """All 2-way marginals of 4 attributes of 3 values (6 marginals, 54 cells) over 500 random records."""
    sizes = [3, 3, 3, 3]
    marginals = bench.all_k_way(4, 2)
    codes = bench.random_codes(500, sizes, seed=3)
    truth = {m: bench.true_marginal(codes, m, sizes) for m in marginals}
    return sizes, marginals, codes, truth


def test_true_marginal_counts_every_record(bench, tiny):
    sizes, marginals, codes, truth = tiny
    assert all(t.sum() == 500 for t in truth.values())
    assert truth[(0, 1)][2, 1] == int(np.sum((codes[:, 0] == 2) & (codes[:, 1] == 1)))


def test_separate_without_and_with_least_squares_match_their_formulas(bench, tiny):
    """100 releases of 54 cells: the variance's relative standard error is about √(2/5400) ≈ 2 %, so 8 % on the
    mean squared error is over four of them.  Least squares must also beat the raw measurement."""
    sizes, marginals, _, truth = tiny
    runs = [bench.separate_errors(marginals, truth, 1, seed=s) for s in range(100)]
    raw = float(np.mean([a for a, _ in runs]))
    fitted = float(np.mean([b for _, b in runs]))
    assert raw == pytest.approx(bench.separate_variance(len(marginals), 1), rel=0.08)
    assert bench.separate_variance(len(marginals), 1) == pytest.approx(len(marginals) / 2, rel=1e-6)
    assert fitted == pytest.approx(bench.separate_ls_rmse(marginals, sizes, 1) ** 2, rel=0.08)
    assert bench.separate_ls_rmse(marginals, sizes, 1) ** 2 < bench.separate_variance(len(marginals), 1)


def test_residual_monte_carlo_matches_the_closed_form(bench, tiny):
    sizes, marginals, codes, truth = tiny
    plan = bench.plan_residuals(marginals, sizes)
    mse = [bench.residual_errors(plan, codes, truth, 1, seed=s) for s in range(100)]
    root, se = bench.monte_carlo(mse)
    assert root == pytest.approx(plan.rmse(1), rel=0.05)
    assert 0 < se < 0.02 * root


def test_monte_carlo_standard_error_is_the_delta_method(bench):
    root, se = bench.monte_carlo([3.0, 5.0])
    assert root == pytest.approx(2.0)
    assert se == pytest.approx((math.sqrt(2) / math.sqrt(2)) / 4)


def test_coverage_is_near_95_percent(bench):
    """40 releases of 3-way marginals of 5 binary attributes (80 cells each): the mean's standard error is about
    1 %, so 91–99 % is a safe band for exact intervals."""
    runs = bench.coverage_runs(5, 2, 3, 400, 40)
    assert len(runs) == 40 and all(0 <= r <= 1 for r in runs)
    assert 0.91 <= float(np.mean(runs)) <= 0.99


def test_range_section_rows_lie_between_the_bound_and_identity():
    """The optimised ranges bench at n = 64: every strategy is at least the SVD bound, the optimised one below
    identity, and the section names each case and its optimisation time."""
    ranges = bench_scripts.load("optimized_ranges.py")
    case, seconds, rows = ranges.one_d("all_ranges", 64, "l2", [16], 200)
    figures = {name: (r, ratio) for name, r, ratio in rows}
    assert all(ratio >= 1 - 1e-9 for _, ratio in figures.values())
    optimised = next(r for name, (r, _) in figures.items() if name.startswith("optimised"))
    assert optimised < figures["identity"][0]
    assert "HDMM (published)" not in figures
    text = ranges.section([(case, seconds, rows)], "cmd", 0.1)
    assert case in text and f"{seconds:.1f}" in text
