"""NoiseFirst and DPCube: exact dynamic program, bias-corrected bucket choice, partition recovery, the
inverse-variance combination, and that every choice reads only noisy values."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist.algorithms import get_algorithm
from dphist.algorithms.partitioning import _kd_partition, _median_cut, v_optimal_costs
from dphist_audit.replication import NoisePool, PooledBudget
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits, discrete_laplace_variance
from dphist.inference.measurements import total_measurement

from conftest import SHARED


def traced_run(algo, counts, epsilon, seed):
    """One run on a fresh budget that keeps a trace: the estimate, the budget (its measurements) and the noisy
    answers of each measurement in the order drawn."""
    trace: list = []
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    estimate = algo.run(counts, budget)
    return estimate, budget, [d.values for d in trace]


def sse(v):
    return float(((v - v.mean()) ** 2).sum()) if v.size else 0.0


@pytest.mark.parametrize("seed", range(8))
def test_v_optimal_dp_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    values = rng.normal(0, 5, n)
    cuts = np.arange(n + 1)
    cost, back = v_optimal_costs(values, cuts, 4)
    for k in range(1, min(4, n) + 1):
        best = min(sum(sse(values[a:b]) for a, b in zip((0, *inner), (*inner, n)))
                   for inner in itertools.combinations(range(1, n), k - 1))
        assert cost[k - 1, -1] == pytest.approx(best, abs=1e-9)


def reference_dp(values, cuts, K):
    """The textbook O(K g²) recurrence over the candidate cuts, for whole-number values: each interval's SSE
    exactly from integer prefix sums, (m·Σv² − (Σv)²)/m, and for each right end j the minimum over every left
    cut i at once."""
    assert np.array_equal(values, np.round(values))
    whole = values.astype(np.int64)
    s1 = np.concatenate([[0], np.cumsum(whole)])[cuts]
    s2 = np.concatenate([[0], np.cumsum(whole * whole)])[cuts]
    g = cuts.size - 1

    def sse_to(j, i):  # the SSE of [cuts[i], cuts[j]) for each i in the array i
        m, t = cuts[j] - cuts[i], s1[j] - s1[i]
        return (m * (s2[j] - s2[i]) - t * t) / m

    cost = np.full((K, g + 1), np.inf)
    cost[0, 1:] = [sse_to(j, np.array([0]))[0] for j in range(1, g + 1)]
    for k in range(1, K):
        for j in range(k + 1, g + 1):
            i = np.arange(k, j)
            cost[k, j] = np.min(cost[k - 1, i] + sse_to(j, i))
    return cost


def test_v_optimal_dp_matches_the_textbook_recurrence_across_blocks():
    # 700 candidate cuts span three of the DP's 256-row blocks, with uneven bucket widths.
    rng = np.random.default_rng(11)
    values = rng.integers(0, 50, 1500).astype(np.float64) * (rng.random(1500) < 0.3)
    cuts = np.unique(np.concatenate([[0, 1500], rng.choice(np.arange(1, 1500), 698, replace=False)]))
    cost, back = v_optimal_costs(values, cuts, 3)
    expected = reference_dp(values, cuts, 3)
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(cost))
    assert np.allclose(cost[finite], expected[finite], rtol=1e-9, atol=1e-6)


def test_noisefirst_releases_bucket_means_and_keeps_the_noisy_total():
    x = np.concatenate([np.zeros(300, dtype=np.int64), np.full(200, 40), np.zeros(500, dtype=np.int64)])
    est, _, (noisy,) = traced_run(get_algorithm("noisefirst"), x, Fraction(1, 2), 1)
    assert est.values.sum() == pytest.approx(noisy.sum())  # bucket means keep bucket sums
    # Far fewer buckets than cells (the DP on noisy data is optimistic, so more than the 3 true ones).
    assert 2 <= est.choices["buckets"] < 150
    assert len(np.unique(np.round(est.values, 9))) <= est.choices["buckets"]
    assert abs(est.values[300:500].mean() - 40) < 2


def test_noisefirst_picks_the_noisy_cells_when_data_is_rough():
    x = np.random.default_rng(2).integers(0, 10_000, 200)
    est, _, (noisy,) = traced_run(get_algorithm("noisefirst"), x, Fraction(10), 3)
    assert est.choices["buckets"] == 200 and np.array_equal(est.values, noisy)


def test_noisefirst_is_one_column_only_and_says_so_before_reading_data():
    frame = pd.DataFrame({"a": [1, 2], "b": [0, 1]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4},
                          "b": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2}}}
    with pytest.raises(UsageError, match="one-column"):
        dphist.api.plan_release(frame, "1", schema, columns="a,b", algorithm="noisefirst")


def test_kd_partition_recovers_blocks_without_noise():
    # Phase-1 noise off (variance 0): piecewise-constant blocks aligned to cuts are found exactly.
    x = np.zeros((8, 8))
    x[:4, :] = 10
    x[4:, :3] = 50
    leaves = _kd_partition(x, 0.0, 1.0, 64)
    assert 3 <= len(leaves) <= 4  # greedy k-d cuts: the three blocks, the first cut may halve one of them
    for lo, hi in leaves:
        block = x[lo[0]:hi[0], lo[1]:hi[1]]
        assert block.min() == block.max()  # every leaf is uniform
    line = np.array([5, 5, 5, 9, 9, 9, 9, 0])
    assert sorted(_kd_partition(line, 0.0, 0.5, 64)) == [((0,), (3,)), ((3,), (7,)), ((7,), (8,))]


def test_median_cut_splits_the_noisy_mass_in_half_along_the_longest_axis():
    line = np.array([0, 0, 10, 0, -3, 0, 0, 10, 0, 0])
    # Mass (negatives as 0) 10 at cell 2 and 10 at cell 7: the first half of it is in cells [0, 3).
    assert _median_cut(line, (0,), (10,), 0) == (0, 3)
    assert _median_cut(np.zeros(6), (0,), (6,), 0) == (0, 3)  # no mass: the middle
    assert _median_cut(line, (4,), (5,), 0) is None  # one cell: nothing to cut
    grid = np.zeros((4, 8))
    grid[:, 6] = 5
    assert _median_cut(grid, (0, 0), (4, 8), 0) == (1, 7)  # the longer axis, at the mass
    assert _median_cut(np.ones((4, 4)), (0, 0), (4, 4), 1) == (1, 2)  # a square: the axis after the last cut


def test_kd_tree_partition_without_noise_ends_in_uniform_leaves():
    x = np.zeros((8, 8))
    x[:4, :] = 10
    x[4:, :3] = 50
    leaves = _kd_partition(x, 0.0, 1.0, 64, rule="median")
    assert sum((hi[0] - lo[0]) * (hi[1] - lo[1]) for lo, hi in leaves) == 64
    for lo, hi in leaves:
        block = x[lo[0]:hi[0], lo[1]:hi[1]]
        assert block.min() == block.max()


def test_dpcube_combination_weights_and_totals():
    x = np.concatenate([np.full(32, 20), np.zeros(32, dtype=np.int64)])
    algo = get_algorithm("dpcube", alpha="1/2", release="uniform", block=1)
    est, budget, (cells, totals) = traced_run(algo, x, Fraction(1), 4)
    first, second = budget.measurements
    s1, s2 = first.noise_variance, second.noise_variance
    assert first.epsilon + second.epsilon == 1 == budget.spent
    assert first.scale == second.scale == 2  # α = 1/2
    # The partition the run used: its noisy cells' partition (one noisy total per part, in the parts' order).
    leaves = algo.partition(cells, s1, s2)
    assert len(leaves) == est.choices["partitions"] == totals.size
    # Uniform release: every partition holds the combined estimate w·y + (1-w)·S̃, spread evenly.
    values = est.values
    for (lo, hi), total in zip(leaves, totals):
        part = slice(lo[0], hi[0])
        m = hi[0] - lo[0]
        w = m * s1 / (m * s1 + s2)
        combined = w * total + (1 - w) * cells[part].sum()
        assert np.allclose(values[part], combined / m)
    assert values.sum() == pytest.approx(sum(
        (m * s1 / (m * s1 + s2)) * total + (1 - m * s1 / (m * s1 + s2)) * cells[lo[0]:hi[0]].sum()
        for (lo, hi), total in zip(leaves, totals) for m in [hi[0] - lo[0]]))


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_dpcube_choices_come_from_noisy_values_and_plan_is_public(name):
    algo = get_algorithm(name)
    a, spent_a, _ = traced_run(algo, np.zeros(64, dtype=np.int64), Fraction(1, 2), 5)
    b, spent_b, _ = traced_run(algo, np.random.default_rng(6).integers(0, 1000, 64), Fraction(1, 2), 5)
    assert a.structure == b.structure
    assert [(m.what, m.scale, m.epsilon) for m in spent_a.measurements] == [(m.what, m.scale, m.epsilon)
                                                                           for m in spent_b.measurements]
    # Same phase-1 noise, different data: the partition follows the noisy cells, not a fixed plan.
    assert a.choices != b.choices


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_dpcube_release_through_the_pipeline(name):
    frame = pd.DataFrame({"v": np.random.default_rng(7).integers(0, 16, 2000)})
    schema = {"columns": {"v": {"type": "numeric", "lower": 0, "upper": 64, "bins": 64}}}
    result = dphist.release(frame, epsilon="1", schema=schema, columns="v", algorithm=name, seed=8)
    table = result.tables["v"]
    assert (table["count"] >= 0).all() and abs(table["count"].sum() - 2000) < 100
    report = result.report["tables"][0]
    # 2000 records over 64 cells at ε = 1: the noisy total picks blocks of 3 cells; α = 9/10 of the rest.
    assert [s["epsilon"] for s in report["steps"]] == ["0.05", "0.855", "0.095"]
    assert report["chosen_from_noisy_values"]["block"] == [3]
    assert "partitions" in report["chosen_from_noisy_values"]


def test_the_three_releases_agree_on_every_partition_total_and_gls_keeps_the_cell_deviations():
    x = np.concatenate([np.full(40, 30), np.random.default_rng(3).integers(0, 200, 24)])
    runs = {r: traced_run(get_algorithm("dpcube", release=r, block=1), x, Fraction(1, 2), 6)
            for r in ("uniform", "gls", "shrink")}
    est, budget, (cells, _) = runs["gls"]
    first, second = budget.measurements
    parts = get_algorithm("dpcube", block=1).partition(cells, first.noise_variance, second.noise_variance)
    for _, _, (other_cells, totals) in runs.values():  # same noise, same partition
        assert np.array_equal(other_cells, cells) and totals.size == len(parts)
    values = {r: run[0].values for r, run in runs.items()}
    for lo, hi in parts:
        part = slice(lo[0], hi[0])
        totals = {r: v[part].sum() for r, v in values.items()}
        assert totals["gls"] == pytest.approx(totals["uniform"]) == pytest.approx(totals["shrink"])
        # GLS moves every cell of a partition by the same amount; uniform flattens it; shrink lies between.
        assert np.ptp(values["gls"][part] - cells[part]) < 1e-9
        assert np.ptp(values["uniform"][part]) < 1e-9
        dev_gls = values["gls"][part] - values["uniform"][part]
        dev_shrink = values["shrink"][part] - values["uniform"][part]
        assert np.all(np.abs(dev_shrink) <= np.abs(dev_gls) + 1e-9)


def test_auto_block_follows_the_noisy_total_only():
    algo = get_algorithm("dpcube")
    eps = Fraction(1, 10)
    one = [algo.auto_block(total, (4096,), eps)[0] for total in (1e3, 1e5, 1e7)]
    assert one[0] >= 128 and 8 <= one[1] <= 32 and one[2] == 1
    # 2-D: the rule's 16 × 16 at 1,000 records is capped at 9 (max_side); the k-d tree and a larger max_side
    # keep the rule's blocks.
    assert algo.auto_block(1e3, (256, 256), eps) == (9, 9) and algo.auto_block(1e7, (256, 256), eps) == (1, 1)
    assert get_algorithm("dpcube", max_side=64).auto_block(1e3, (256, 256), eps) == (16, 16)
    assert get_algorithm("kdtree").auto_block(1e3, (256, 256), eps) == (16, 16)
    assert algo.auto_block(1e5, (256, 256), eps) == get_algorithm("dpcube", max_side=64).auto_block(
        1e5, (256, 256), eps)
    # A noisy total near or below 0 gives the largest blocks that still leave 8 per axis for phase 1 to split.
    assert get_algorithm("kdtree").auto_block(-50, (256, 256), eps) == (32, 32)
    assert algo.auto_block(-50, (256, 256), eps) == (9, 9) and algo.auto_block(1, (4096,), eps) == (512,)
    assert algo.auto_block(-50, (8,), eps) == (1,) and algo.auto_block(-50, (20, 3), eps) == (3, 1)
    # More signal never means bigger blocks.
    sizes = [algo.auto_block(t, (4096,), eps)[0] for t in np.geomspace(1, 1e9, 40)]
    assert sizes == sorted(sizes, reverse=True)


def test_auto_penalty_rises_at_low_signal_only():
    """The refined release's split penalty (units of σ₂²) is 3 at r = N̂·ε/n ≥ 0.015, 4.5 at r ≤ 0.0015 and
    log-linear between (DPCube); the k-d tree keeps 3; an explicit ``penalty`` wins over both."""
    algo = get_algorithm("dpcube")
    eps = Fraction(1, 10)
    shape = (256, 256)  # n = 65,536: r = 0.0015 at N̂ ≈ 983, 0.015 at N̂ ≈ 9,830
    assert algo.auto_penalty(900, shape, eps) == 4.5 and algo.auto_penalty(-5, shape, eps) == 4.5
    assert algo.auto_penalty(1e4, shape, eps) == 3.0 and algo.auto_penalty(1e7, shape, eps) == 3.0
    between = [algo.auto_penalty(t, shape, eps) for t in np.geomspace(983.04, 9830.4, 9)]
    assert np.allclose(between, np.linspace(4.5, 3.0, 9))
    assert all(get_algorithm("kdtree").auto_penalty(t, shape, eps) == 3.0 for t in (1, 1e3, 1e5))
    assert get_algorithm("dpcube", penalty=4)._penalty(4.5) == 4
    assert get_algorithm("dpcube")._penalty() == 3.0  # a fixed block measures no total: the fixed penalty
    assert get_algorithm("dpcube")._significance(True) and not get_algorithm("dpcube")._significance()
    assert not get_algorithm("kdtree")._significance(True) and not get_algorithm("kdtree", significance="on")._significance()


@pytest.mark.parametrize("total, penalty, significance", [(1_000, 4.5, True), (100_000, 3.0, False)])
def test_a_run_partitions_with_the_penalty_of_its_noisy_total(total, penalty, significance):
    """block=auto: the partition gets auto_penalty(N̂) (N̂ = the run's first measurement) and the significance
    cut at low signal only, and the report records both; given options are used as given."""
    x = np.zeros((256, 256), dtype=np.int64)
    x[100:110, 40:60] = total // 200
    seen, cuts = [], []

    class Spy(type(get_algorithm("dpcube"))):
        def partition(self, cells, sigma1, sigma2, penalty=None, significance=False):
            seen.append(penalty)
            cuts.append(significance)
            return super().partition(cells, sigma1, sigma2, penalty, significance)

    eps = Fraction(1, 10)
    est, budget, answers = traced_run(Spy(), x, eps, 5)
    per_record = 1 / budget.scale(1, budget.amount)
    expected = Spy().auto_penalty(float(answers[0]), x.shape, per_record)  # answers[0]: N̂
    assert seen == [pytest.approx(expected)] and expected == pytest.approx(penalty, abs=0.3)
    assert est.choices["penalty"] == pytest.approx(seen[0], abs=1e-4)
    assert cuts == [significance] and est.choices["significance_cut"] is significance
    assert significance == (Spy().low_signal(float(answers[0]), x.shape, per_record) > 0)
    seen.clear()
    cuts.clear()
    Spy(penalty=2.5, significance="off" if significance else "on").run(x, PrivacyBudget(eps, bits=SeededBits(5)))
    assert cuts == [not significance]
    assert seen == [2.5]


def _cluster(value=250.0):
    """24 × 24 noisy blocks, 4 × value records in the 2 × 2 blocks at the centre and nothing else: no single
    straight cut gains much (the best, 1000²/312 − 1000²/576 ≈ 1469 for value 250), isolating them gains a lot."""
    cells = np.zeros((24, 24))
    cells[11:13, 11:13] = value
    return cells


def test_significance_cut_splits_what_the_cost_rule_alone_leaves_whole():
    """significant = (σ², z): a box is cut at its best cut when SSE − (k − 1)σ² > z·√(5k)·σ², whether or not that
    cut pays the penalty; on the cluster the cost rule alone keeps one box, with the cut the 2 × 2 cluster ends
    in a box of its own."""
    kappa = 4.5 * 886.0
    cells = _cluster()
    assert _kd_partition(cells, 0.0, kappa, 64, "best") == [((0, 0), (24, 24))]
    leaves = _kd_partition(cells, 0.0, kappa, 64, "best", significant=(100.0, 3.0))
    assert ((11, 11), (13, 13)) in leaves and len(leaves) > 1
    # SSE − 575σ² is below the bound: not cut (σ² = 886, the noise of ε₂ = 0.0475, cancels the cluster's SSE)
    assert _kd_partition(cells, 0.0, kappa, 64, "best", significant=(886.0, 3.0)) == [((0, 0), (24, 24))]
    # and DPCube's refined release passes its phase-1 variance and SIGNIFICANT_Z
    algo = get_algorithm("dpcube")
    assert ((11, 11), (13, 13)) in algo.partition(cells, 100.0, 886.0, 4.5, significance=True)
    assert algo.partition(cells, 100.0, 886.0, 4.5) == [((0, 0), (24, 24))]  # off unless asked for
    try:
        type(algo).SIGNIFICANT_Z = math.inf
        assert algo.partition(cells, 100.0, 886.0, 4.5, significance=True) == [((0, 0), (24, 24))]
    finally:
        type(algo).SIGNIFICANT_Z = 3.0


def test_significance_cut_rarely_fires_on_noise_alone():
    """400 tables of 24 × 24 blocks of pure discrete Laplace noise (scale 1/0.0475, σ² ≈ 886), no penalty-paid
    split possible (κ = 10¹²): the significance cut alone splits the root in at most 2 % of them (z = 3 on a
    Gaussian approximation would be 0.13 %; this seed gives 2 of 400, z = 1.5 gives 30).  False alarm of this
    test: P(Binomial(400, 0.005) > 8) < 0.1 % at a true rate of 0.5 %."""
    p = 1 - math.exp(-0.0475)
    rng = np.random.default_rng(2026)
    variance = discrete_laplace_variance(Fraction(400, 19))  # scale 1/0.0475
    fired = 0
    for _ in range(400):
        noise = rng.geometric(p, (24, 24)) - rng.geometric(p, (24, 24))  # exactly discrete Laplace
        fired += len(_kd_partition(noise, 0.0, 1e12, 64, "best", significant=(variance, 3.0))) > 1
    assert fired <= 8


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "inf", True, "1e9"])
def test_penalty_option_refuses_what_is_not_a_positive_number(bad):
    with pytest.raises(UsageError, match="penalty"):
        get_algorithm("dpcube", penalty=bad)


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_partition_is_a_function_of_the_noisy_blocks_alone(name):
    algo = get_algorithm(name, release="gls")  # one phase-2 total per partition (refine measures sub-blocks)
    noisy = np.random.default_rng(9).integers(-20, 60, (12, 10))
    truth = np.random.default_rng(10).integers(0, 40, (12, 10))
    s1, s2 = 8.0, 50.0
    # The partition takes the noisy blocks and the two public noise variances, nothing else; it depends on them.
    assert algo.partition(noisy, s1, s2) == algo.partition(noisy.copy(), s1, s2)
    assert algo.partition(noisy, s1, s2) != algo.partition(truth, s1, s2)

    # And a run hands it exactly its phase-1 noisy blocks and the variances of its two measurements.
    seen = []

    class Spy(type(algo)):
        def partition(self, cells, sigma1, sigma2, penalty=None, significance=False):
            seen.append((np.array(cells), sigma1, sigma2))
            return super().partition(cells, sigma1, sigma2, penalty, significance)

    counts = np.random.default_rng(11).integers(0, 40, (12, 10))
    est, budget, answers = traced_run(Spy(block=1, release="gls"), counts, Fraction(1, 2), 12)
    (cells, sigma1, sigma2), = seen
    first, second = budget.measurements
    assert np.array_equal(cells, answers[0]) and not np.array_equal(cells, counts)
    assert (sigma1, sigma2) == (first.noise_variance, second.noise_variance)
    assert answers[1].size == len(algo.partition(cells, sigma1, sigma2)) == est.choices["partitions"]


# -- the refined release (2-D default, issue 23) ------------------------------------------------------------------


def test_refined_release_is_the_2d_default_and_1d_is_unchanged():
    one = get_algorithm("dpcube").run(np.arange(16), PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert (one.structure["release"], one.structure["alpha"]) == ("gls", "9/10")
    two = get_algorithm("dpcube").run(np.ones((8, 8), dtype=np.int64), PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert (two.structure["release"], two.structure["alpha"]) == ("refine", "1/2")


def test_refined_release_budget_split_and_sub_blocks_cover_the_table():
    counts = np.random.default_rng(3).integers(0, 30, (16, 12))
    algo = get_algorithm("dpcube")
    est, budget, answers = traced_run(algo, counts, Fraction(1), 5)
    assert budget.spent == budget.amount == 1
    total, first, second = budget.measurements
    # total ε/20, then α = 1/2 of the rest each
    assert [m.epsilon for m in (total, first, second)] == [Fraction(1, 20), Fraction(19, 40), Fraction(19, 40)]
    assert answers[2].size == est.choices["subblocks"] >= est.choices["partitions"]
    assert est.values.shape == counts.shape
    # each partition's combined total is the released sum: the release sums to a finite number near N
    assert abs(est.values.sum() - counts.sum()) < 20 * np.sqrt(second.noise_variance * answers[2].size)


def test_refined_release_phase2_noise_is_the_stated_laplace():
    # Zero table: the phase-2 answers are pure noise of scale 1/ε₂ (Δ = 1: the sub-blocks are disjoint).
    # 400 runs; the sample variance over all answers vs the exact discrete Laplace variance, 5 standard errors
    # (false alarm well below 1e-4 for the nearly normal sample variance of thousands of draws).
    from dphist.privacy import discrete_laplace_variance
    algo = get_algorithm("dpcube", block=2)
    draws = []
    for seed in range(400):
        _, budget, answers = traced_run(algo, np.zeros((8, 8), dtype=np.int64), Fraction(1), seed)
        draws.append(answers[1])
        sigma2 = budget.measurements[1].noise_variance
    x = np.concatenate(draws).astype(float)
    eps2 = Fraction(1, 2)
    assert sigma2 == discrete_laplace_variance(1 / eps2)
    # Laplace kurtosis 6: var(s²) ≈ (κ + 2)σ⁴/n = 8σ⁴/n
    assert abs(x.var() - sigma2) < 5 * sigma2 * np.sqrt(8 / x.size)


def test_refined_release_sub_block_count_follows_the_noisy_phase1_total():
    # Strong signal: many sub-blocks (a cell each, m = N·ε₂/10 ≥ cells); no signal: one per partition.
    algo = get_algorithm("dpcube", block=4)
    big = traced_run(algo, np.full((8, 8), 1000, dtype=np.int64), Fraction(1), 1)[0]
    small = traced_run(algo, np.zeros((8, 8), dtype=np.int64), Fraction(1), 1)[0]
    assert big.choices["subblocks"] == 64
    assert small.choices["subblocks"] == small.choices["partitions"]


def test_refined_release_runs_on_zcdp():
    from dphist.privacy import ZCDPBudget
    budget = ZCDPBudget(Fraction(1, 10), bits=SeededBits(2))
    est = get_algorithm("dpcube").run(np.random.default_rng(1).integers(0, 9, (8, 8)), budget)
    assert budget.spent == budget.amount and np.isfinite(est.values).all()


def _best_partition_box_by_box(noisy, sigma2, kappa, max_depth):
    """Oracle: DPCube's greedy split one box at a time (the former implementation), left child first."""
    from dphist.algorithms.partitioning import _NoisyTable
    table = _NoisyTable(noisy)
    d = noisy.ndim
    stack, leaves = [((0,) * d, tuple(noisy.shape), 0)], []
    while stack:
        lo, hi, depth = stack.pop()
        whole = float(table.heterogeneity([np.array(v) for v in lo], [np.array(v) for v in hi], sigma2)) + kappa
        best = None
        for axis in range(d) if depth < max_depth else ():
            if hi[axis] - lo[axis] < 2:
                continue
            cut = np.arange(lo[axis] + 1, hi[axis])
            left_hi = [np.full(cut.size, v) for v in hi]
            left_hi[axis] = cut
            right_lo = [np.full(cut.size, v) for v in lo]
            right_lo[axis] = cut
            cost = (table.heterogeneity([np.full(cut.size, v) for v in lo], left_hi, sigma2)
                    + table.heterogeneity(right_lo, [np.full(cut.size, v) for v in hi], sigma2) + 2 * kappa)
            i = int(np.argmin(cost))
            if best is None or cost[i] < best[0]:
                best = (float(cost[i]), axis, int(cut[i]))
        if best is None or best[0] >= whole:
            leaves.append((lo, hi))
            continue
        _, axis, c = best
        stack.append((tuple(c if a == axis else v for a, v in enumerate(lo)), hi, depth + 1))
        stack.append((lo, tuple(c if a == axis else v for a, v in enumerate(hi)), depth + 1))
    return leaves


def _partition_cases():
    """200 seeded random cases (trial, noisy table, σ², κ, max depth): 1-, 2- and 3-D in turn."""
    rng = np.random.default_rng(11)
    for trial in range(200):
        d = 1 + trial % 3
        shape = tuple(int(v) for v in rng.integers(1, {1: 300, 2: 40, 3: 9}[d], d))
        noisy = rng.laplace(0, float(rng.choice([0.5, 3.0, 20.0])), shape).round()
        noisy += (rng.random(shape) < 0.1) * rng.integers(0, 300, shape)
        if trial % 10 == 0:
            noisy = np.round(noisy / 50)  # many equal costs: ties must go as box by box
        sigma2, kappa = float(rng.choice([0.0, 2.0])), float(rng.choice([1.0, 50.0, 500.0]))
        max_depth = int(rng.choice([0, 1, 3, 64]))
        yield trial, noisy, sigma2, kappa, max_depth


@pytest.mark.parametrize("d", [1, 2, 3])
def test_depth_at_a_time_partition_equals_the_box_by_box_one(d):
    """The 200 random cases, those of ``d`` dimensions (a test per dimension, so that each stays short)."""
    sizes = []
    for trial, noisy, sigma2, kappa, max_depth in _partition_cases():
        if noisy.ndim != d:
            continue
        got = _kd_partition(noisy, sigma2, kappa, max_depth, "best")
        assert got == _best_partition_box_by_box(noisy, sigma2, kappa, max_depth), (trial, noisy.shape)
        sizes.append(len(got))
    assert len(sizes) >= 66
    assert max(sizes) > 20 and sizes.count(1) < len(sizes) / 2  # the cases do split, often deeply


@pytest.mark.parametrize("runs", [1000, pytest.param(2000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("shape, block, alpha", [((16,), 16, Fraction(9, 10)), ((8, 8), 8, Fraction(1, 2))])
def test_a_total_measured_elsewhere_joins_the_partition_totals(shape, block, alpha, runs):
    """``Algorithm.refit`` with a total (what auto does with its N̂), the noise measured on a table of one block, so one
    partition (1-D: the gls release; 2-D: refine, one sub-block on the empty table): the partition's estimate
    combines its phase-1 block (σ₁², at αε) and its phase-2 total (σ₂², at (1 − α)ε) into v = σ₁²σ₂²/(σ₁² + σ₂²);
    a total of variance V = v refits it to v/2 (and one of 3v to (3z + T)/4, exactly).  Sample variances over
    ``runs`` runs within 5 standard errors (excess kurtosis at most 3: SE ≤ σ²·sqrt(5/runs), 7.1 % of σ² at 1,000
    runs, 5.0 % at 2,000; false alarm below 1e-6), and the refit more than 5 away from v (v is 14 SE from v/2 at
    1,000 runs, 20 at 2,000); a variance off by 52 % at 1,000 runs (37 % at 2,000) fails with probability above
    0.99.  A total of huge variance leaves the estimate as it was; the report says where the total went.  The
    runs draw from one pool of exact discrete Laplace noise (the audit's: a plain budget's distribution, drawn in
    bulk)."""
    from dphist.privacy import discrete_laplace_variance
    eps = Fraction(1)
    s1, s2 = (float(discrete_laplace_variance(1 / (eps * a))) for a in (alpha, 1 - alpha))
    v = s1 * s2 / (s1 + s2)
    algo = get_algorithm("dpcube", block=block)
    rng, pool = np.random.default_rng(3), NoisePool(SeededBits(71))
    plain, refit = [], []
    for r in range(runs):
        estimate = algo.run(np.zeros(shape, dtype=np.int64), PooledBudget(eps, pool=pool))
        assert estimate.choices["partitions"] == 1 and estimate.choices.get("subblocks", 1) == 1
        refitted = algo.refit(estimate, total_measurement(float(rng.laplace(0, np.sqrt(v / 2))), v))
        plain.append(estimate.values.sum())
        refit.append(refitted.values.sum())
        if r < 20:
            assert np.allclose(algo.refit(estimate, total_measurement(1e9, 1e30)).values, estimate.values, rtol=0, atol=1e-9)
            # the weights exactly: one partition of variance v and a total T of variance 3v → (3z + T)/4
            z = estimate.values.sum()
            assert np.isclose(algo.refit(estimate, total_measurement(100.0, 3 * v)).values.sum(), (3 * z + 100) / 4, rtol=0, atol=1e-9)
    plain, refit = np.array(plain), np.array(refit)
    assert abs(plain.var() - v) < 5 * v * np.sqrt(5 / plain.size)
    se = (v / 2) * np.sqrt(5 / refit.size)
    assert abs(refit.var() - v / 2) < 5 * se
    assert abs(refit.var() - v) > 5 * se
    assert "earlier noisy total" in refitted.structure["partition_totals_also_from"]


@pytest.mark.parametrize("shape", [(256,), (32, 32)])
def test_the_total_measured_for_the_block_size_joins_the_least_squares(shape):
    """With block=auto, DPCube's own noisy total (paid for choosing the block size) is then one more measurement
    of the sum of its partitions' totals: the release is exactly the two phases on the rest of ε, on the same
    noise, refitted with that total; nothing else is measured and ε is spent exactly."""
    x = np.random.default_rng(4).poisson(0.3, shape).astype(np.int64)
    eps = Fraction(1, 2)
    algo = get_algorithm("dpcube")
    estimate, budget, answers = traced_run(algo, x, eps, 9)
    assert budget.spent == eps and budget.measurements[0].what.startswith("the grand total")
    again = PrivacyBudget(eps, bits=SeededBits(9))
    share = algo.params["total_share"]
    for_total, rest = again.split([share, 1 - share])
    total, record = for_total.laplace(np.asarray(x.sum()), 1, for_total.amount, "total", composition="one query")
    assert float(total) == float(answers[0])
    plain = algo._two_phases(x, rest, tuple(estimate.choices["block"]), estimate.choices.get("penalty", 3.0))
    assert np.array_equal(estimate.values, algo.refit(plain, total_measurement(float(total), record.noise_variance)).values)
    assert not np.allclose(estimate.values, plain.values)
    assert len(again.measurements) == len(budget.measurements)
    assert "grand total measured for the block size" in estimate.structure["partition_totals_also_from"]


# ----- intervals -------------------------------------------------------------------------------------------------


def dpbench_like(shape, records: int, seed: int) -> np.ndarray:
    """A table shaped as DPBench's are: most cells empty, a few spikes, smooth stretches (1-D) or blobs (2-D)
    between, with ``records`` records drawn by the DPBench protocol (a multinomial on the shape)."""
    from dphist.evaluation.benchmark import sample_from_shape

    rng = np.random.default_rng(seed)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    base = np.zeros(shape)
    for _ in range(4):  # smooth stretches (a product of windows on each axis)
        bump = np.ones(())
        for n in shape:
            w = max(n // 8, 2)
            axis = np.zeros(n)
            a = int(rng.integers(0, n - w))
            axis[a:a + w] = np.hanning(w)
            bump = np.multiply.outer(bump, axis)
        base += rng.uniform(0.5, 2) * bump
    spikes = rng.choice(base.size, 6, replace=False)
    base.ravel()[spikes] += rng.uniform(2, 20, 6) * (base.size / 64) ** 0.5
    return sample_from_shape(base, records, seed)


def shares_of(counts, groups) -> np.ndarray:
    """What an interval claims to cover: each cell's count, or with groups its group's true total ÷ its cells."""
    if groups is None:
        return counts.astype(np.float64)
    g = groups.ravel()
    return (np.bincount(g, weights=counts.ravel().astype(np.float64)) / np.bincount(g))[g].reshape(counts.shape)


def test_noisefirst_gives_no_interval_because_its_buckets_follow_their_own_noise():
    """NoiseFirst states no interval, with the reason.  The reason holds: the interval it would have given its
    buckets' means for fixed buckets (variance σ²/|B| around the mean of the bucket's noisy cells, for the bucket's
    share) covers under 90 % over 200 runs at low signal, where the merge sets apart the cells of extreme noise
    (on this table it covers about 86 %, and its single-cell buckets about a third; the runs' standard error is
    asserted below 1 %, so a merge whose noise did not steer it, at 93.7–95 %, would pass with probability below
    1e-4)."""
    counts = dpbench_like(128, 1_000, 2)
    algo, pool = get_algorithm("noisefirst"), NoisePool(SeededBits(13))
    shares = []
    for _ in range(200):
        budget = PooledBudget(Fraction(1, 10), pool=pool)
        est = algo.run(counts, budget)
        assert est.variance is None and est.halfwidth is None and est.groups is None
        assert "same noisy cells" in est.no_interval
        # the fixed-structure interval: buckets are the runs of equal values of the bucket means
        edges = np.flatnonzero(np.r_[True, np.diff(est.values) != 0, True])
        sizes = np.diff(edges)
        groups = np.repeat(np.arange(sizes.size), sizes)
        half = 1.959964 * np.sqrt(budget.measurements[0].noise_variance / sizes[groups])
        shares.append(np.mean(np.abs(est.values - shares_of(counts, groups)) <= half))
    assert np.std(shares) / np.sqrt(len(shares)) < 0.01
    assert np.mean(shares) < 0.90, np.mean(shares)


def linear_variance(algo, estimate) -> np.ndarray:
    """The exact variance of a linear inference's values, from the inference itself: given the plan, moving one
    noisy answer by 1 moves each value by its coefficient c, so Var = Σ c²·(the answer's noise variance) over
    every noisy answer (the answers' noises are independent).  Independent of any closed form."""
    from dphist.inference.measurements import Measurement

    base = algo.infer(estimate.plan, estimate.measurements).values
    variance = np.zeros(base.shape)
    measurements = list(estimate.measurements)
    for i, m in enumerate(measurements):
        answers = np.asarray(m.values, dtype=np.float64)
        for j in range(answers.size):
            moved = answers.copy().ravel()
            moved[j] += 1
            one = Measurement(m.query, moved.reshape(answers.shape) if answers.ndim else float(moved[0]), m.variance)
            values = algo.infer(estimate.plan, tuple(measurements[:i] + [one] + measurements[i + 1:])).values
            variance += (values - base) ** 2 * float(m.variance)
    return variance


@pytest.mark.parametrize("name, options, shape", [
    ("dpcube", {"block": 1}, (40,)), ("dpcube", {"block": 3}, (40,)), ("dpcube", {}, (64,)),
    ("dpcube", {"block": 2, "release": "uniform"}, (40,)), ("kdtree", {}, (64,)), ("kdtree", {"block": 1}, (40,))])
def test_variance_is_that_of_the_linear_release_given_the_partition(name, options, shape):
    """Given the partition a seeded run chose, the stated variance of every cell is that of the release as a
    linear function of the noisy answers (:func:`linear_variance`, from unit moves of each answer through
    ``infer``), with and without a total measured elsewhere (the variance comes out of ``infer``).  Groups: None
    where every block is one cell, else each cell's block (gls: its values are the block's value spread evenly)
    or partition (uniform).  Deterministic: a variance off by 1e-9 relative fails."""
    counts = dpbench_like(shape, 2_000, 3)
    algo = get_algorithm(name, **options)
    estimate = algo.run(counts, PrivacyBudget(Fraction(1, 2), bits=SeededBits(5)))
    refit = algo.refit(estimate, total_measurement(float(counts.sum()) + 9, 50.0))
    for e in (estimate, refit):
        assert e.no_interval is None and e.variance.shape == counts.shape
        assert np.allclose(e.variance, linear_variance(algo, e), rtol=1e-9, atol=1e-12)
        if e.groups is not None:
            assert e.groups.shape == counts.shape
            for g in np.unique(e.groups):
                assert np.ptp(e.values[e.groups == g]) < 1e-9
    assert np.all(refit.variance <= estimate.variance + 1e-12) and not np.allclose(refit.variance, estimate.variance)
    one_cell_blocks = max(estimate.choices["block"]) == 1
    assert (estimate.groups is None) == (options.get("release") != "uniform" and one_cell_blocks)


@pytest.mark.parametrize("name, options, shape", [("dpcube", {}, (12, 10)), ("kdtree", {}, (12, 10)),
                                                  ("dpcube", {"release": "refine", "block": 1}, (40,))])
def test_the_refined_release_has_no_interval_and_its_fixed_partition_variance_is_exact(name, options, shape):
    """The refined release (2-D default) states no interval, with the reason: its partition and sub-blocks follow
    the phase-1 noise it averages in, and whole runs covered 92.4–93.9 % on DPBench 2-D (docs/algorithms.md §4).
    The fixed-partition variance that was measured (:func:`refined_interval`) is that of the release as a linear
    function of the noisy answers, with and without a total (deterministic: off by 1e-9 relative fails), and its
    groups are the sub-blocks."""
    from dphist.algorithms.partitioning import PHASE1, SUB_BLOCKS, refined_interval
    from dphist.inference.measurements import by_query, pooled_total

    counts = dpbench_like(shape, 2_000, 3)
    algo = get_algorithm(name, **options)
    estimate = algo.run(counts, PrivacyBudget(Fraction(1, 2), bits=SeededBits(5)))
    assert estimate.choices["subblocks"] > 1 and estimate.variance is None and estimate.groups is None
    assert "phase-1 noisy blocks" in estimate.no_interval
    for e in (estimate, algo.refit(estimate, total_measurement(float(counts.sum()) + 9, 50.0))):
        own, total = by_query(e.measurements), pooled_total(e.measurements)
        interval = refined_interval(e.plan, own[PHASE1].variance, own[SUB_BLOCKS].variance,
                                    None if total is None else total.variance)
        assert np.allclose(interval["variance"], linear_variance(algo, e), rtol=1e-9, atol=1e-12)
        assert np.array_equal(interval["groups"].ravel(), e.plan.labels)


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_the_releases_that_are_not_linear_or_not_even_have_no_interval(name):
    """shrink reads its pull from the noisy blocks: no interval.  uniform gives each block of a partition an equal
    part of its total: over blocks of 2, 2, 2 and 1 cells in one partition no cell gets the partition's share, so no
    interval; over blocks of equal size it has one, for the partition's share.  Each says why."""
    from dphist.algorithms.partitioning import PARTITION_TOTALS, PHASE1, PartitionPlan
    from dphist.inference.measurements import Measurement

    counts = dpbench_like(40, 2_000, 3)
    shrink = get_algorithm(name, block=2, release="shrink").run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(1)))
    assert shrink.variance is None and shrink.groups is None and "not linear" in shrink.no_interval
    algo = get_algorithm(name, release="uniform")
    measured = (Measurement(PHASE1, np.array([3.0, 5.0, 4.0, 1.0]), 2.0), Measurement(PARTITION_TOTALS, np.array([12.0]), 8.0))
    for edges, interval in (([0, 2, 4, 6, 7], False), ([0, 2, 4, 6, 8], True)):
        plan = PartitionPlan((4,), (np.array(edges),), np.zeros(4, dtype=np.int64), 1, {}, {})
        estimate = algo.infer(plan, measured)
        assert (estimate.variance is not None) == interval
        if interval:  # (the combined total: 2·4·8/(2·4 + 8) = 4) / 8 cells, squared
            assert np.allclose(estimate.variance, 4 / 64) and np.array_equal(estimate.groups, np.zeros(8))
        else:
            assert "unequal numbers of cells" in estimate.no_interval and estimate.groups is None


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_intervals_cover_what_they_claim_over_whole_runs(name):
    """The partition is chosen from the phase-1 noise that the release reuses, so the fixed-partition variance is
    checked by its coverage over whole runs (partition and all drawn afresh): 200 seeded runs on a DPBench-like
    table of 128 cells, 10,000 records, ε = 1; the normal 95 % intervals cover each cell's count (or its block's
    share) in 93–97.5 % of (cell, run) pairs.  The pooled share's standard error, from the runs' spread, is
    asserted below 0.3 % (it is 0.2 %), and the share is 94.5 % here, so the band is 7 standard errors away (false
    alarm below 1e-6); an interval 15 % too narrow (coverage about 91 %) fails with probability above 0.99.  At
    low signal the coverage is lower (docs/algorithms.md §4; :func:`test_low_signal_coverage_on_dpbench`)."""
    counts = dpbench_like(128, 10_000, 7)
    algo, pool = get_algorithm(name), NoisePool(SeededBits(17))
    shares = []
    for _ in range(200):
        est = algo.run(counts, PooledBudget(Fraction(1), pool=pool))
        hit = np.abs(est.values - shares_of(counts, est.groups)) <= 1.959964 * np.sqrt(est.variance)
        shares.append(hit.mean())
    assert np.std(shares) / np.sqrt(len(shares)) < 0.003
    assert 0.93 <= np.mean(shares) <= 0.975, np.mean(shares)


DPBENCH = SHARED / "data" / "dpbench"


@pytest.mark.slow
@pytest.mark.skipif(not (DPBENCH / "MANIFEST.txt").exists(), reason="DPBench data not present")
@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_low_signal_coverage_on_dpbench(name):
    """At 1,000 records and ε = 0.1 (blocks of 16 cells, 16 of them on 256 cells: few independent blocks a run),
    pooled over the 18 DPBench 1-D data sets summed to 256 cells, 60 runs each: coverage in 93–97.5 % (93.7 %
    here, 93.6–93.8 % over 200 runs each).  The pooled standard error, from the runs' spread, is asserted below
    0.3 % (it is 0.26 %); at the measured coverage the band's lower end is 2.8 standard errors away (false alarm
    about 3 %: this is the algorithm's weakest setting, kept as a record of it rather than a sharp test)."""
    from dphist.evaluation.benchmark import load_histogram, sample_from_shape

    algo, shares = get_algorithm(name), []
    lines = [line.split("|") for line in (DPBENCH / "MANIFEST.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    files = [DPBENCH / f[7].strip() for f in lines if f[1].strip() == "1D"]
    for i, path in enumerate(files):
        counts = sample_from_shape(load_histogram(path).reshape(256, -1).sum(axis=1), 1_000, 1000 + i)
        pool = NoisePool(SeededBits(200 + i))
        for _ in range(60):
            est = algo.run(counts, PooledBudget(Fraction(1, 10), pool=pool))
            shares.append(np.mean(np.abs(est.values - shares_of(counts, est.groups))
                                  <= 1.959964 * np.sqrt(est.variance)))
    assert len(files) == 18 and np.std(shares) / np.sqrt(len(shares)) < 0.003
    assert 0.93 <= np.mean(shares) <= 0.975, np.mean(shares)
