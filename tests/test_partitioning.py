"""NoiseFirst and DPCube: exact dynamic program, bias-corrected bucket choice, partition recovery, the
inverse-variance combination, and that every choice reads only noisy values."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist.algorithms import get_algorithm
from dphist.algorithms.partitioning import _kd_partition, _median_cut, v_optimal_costs
from dphist.errors import UsageError
from dphist.noise import Replicated, SeededBits, discrete_laplace_variance


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
    """The textbook O(K g²) recurrence with plain loops over the candidate cuts."""
    g = cuts.size - 1
    cost = np.full((K, g + 1), np.inf)
    for j in range(1, g + 1):
        cost[0, j] = sse(values[cuts[0]:cuts[j]])
    for k in range(1, K):
        for j in range(k + 1, g + 1):
            cost[k, j] = min(cost[k - 1, i] + sse(values[cuts[i]:cuts[j]]) for i in range(k, j))
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
    est = get_algorithm("noisefirst").run(x, Fraction(1, 2), SeededBits(1))
    assert est.values.sum() == pytest.approx(est.noisy[0].sum())  # bucket means keep bucket sums
    # Far fewer buckets than cells (the DP on noisy data is optimistic, so more than the 3 true ones).
    assert 2 <= est.choices["buckets"] < 150
    assert len(np.unique(np.round(est.values, 9))) <= est.choices["buckets"]
    assert abs(est.values[300:500].mean() - 40) < 2


def test_noisefirst_picks_the_noisy_cells_when_data_is_rough():
    x = np.random.default_rng(2).integers(0, 10_000, 200)
    est = get_algorithm("noisefirst").run(x, Fraction(10), SeededBits(3))
    assert est.choices["buckets"] == 200 and np.array_equal(est.values, est.noisy[0])


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
    est = algo.run(x, Fraction(1), Replicated(SeededBits(4), 1))  # one run, with its partition exposed
    s1 = discrete_laplace_variance(est.measurements[0].scale)
    s2 = discrete_laplace_variance(est.measurements[1].scale)
    assert est.measurements[0].epsilon + est.measurements[1].epsilon == 1
    assert est.measurements[0].scale == est.measurements[1].scale == 2  # α = 1/2
    # Uniform release: every partition holds the combined estimate w·y + (1-w)·S̃, spread evenly.
    cells, view, values = est.noisy[0][0], est.noisy[1][0], est.values[0]
    for lo, hi in est.choices["structure"][0][1]:
        part = slice(lo[0], hi[0])
        m = hi[0] - lo[0]
        w = m * s1 / (m * s1 + s2)
        combined = w * view[part][0] * m + (1 - w) * cells[part].sum()
        assert np.allclose(values[part], combined / m)
    assert values.sum() == pytest.approx(sum(
        (m * s1 / (m * s1 + s2)) * view[lo[0]] * m + (1 - m * s1 / (m * s1 + s2)) * cells[lo[0]:hi[0]].sum()
        for (lo, hi) in est.choices["structure"][0][1] for m in [hi[0] - lo[0]]))


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_dpcube_choices_come_from_noisy_values_and_plan_is_public(name):
    algo = get_algorithm(name)
    a = algo.run(np.zeros(64, dtype=np.int64), Fraction(1, 2), SeededBits(5))
    b = algo.run(np.random.default_rng(6).integers(0, 1000, 64), Fraction(1, 2), SeededBits(5))
    assert a.structure == b.structure
    assert [(m.what, m.scale, m.epsilon) for m in a.measurements] == [(m.what, m.scale, m.epsilon)
                                                                     for m in b.measurements]
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
    runs = {r: get_algorithm("dpcube", release=r, block=1).run(x, Fraction(1, 2), Replicated(SeededBits(6), 1))
            for r in ("uniform", "gls", "shrink")}
    parts = runs["gls"].choices["structure"][0][1]
    assert all(est.choices["structure"][0][1] == parts for est in runs.values())  # same noise, same partition
    cells = runs["gls"].noisy[0][0]
    for lo, hi in parts:
        part = slice(lo[0], hi[0])
        totals = {r: est.values[0][part].sum() for r, est in runs.items()}
        assert totals["gls"] == pytest.approx(totals["uniform"]) == pytest.approx(totals["shrink"])
        # GLS moves every cell of a partition by the same amount; uniform flattens it; shrink lies between.
        assert np.ptp(runs["gls"].values[0][part] - cells[part]) < 1e-9
        assert np.ptp(runs["uniform"].values[0][part]) < 1e-9
        dev_gls = runs["gls"].values[0][part] - runs["uniform"].values[0][part]
        dev_shrink = runs["shrink"].values[0][part] - runs["uniform"].values[0][part]
        assert np.all(np.abs(dev_shrink) <= np.abs(dev_gls) + 1e-9)


def test_auto_block_follows_the_noisy_total_only():
    algo = get_algorithm("dpcube")
    eps = Fraction(1, 10)
    one = [algo.auto_block(total, (4096,), eps)[0] for total in (1e3, 1e5, 1e7)]
    assert one[0] >= 128 and 8 <= one[1] <= 32 and one[2] == 1
    assert algo.auto_block(1e3, (256, 256), eps) == (16, 16) and algo.auto_block(1e7, (256, 256), eps) == (1, 1)
    assert algo.auto_block(-50, (8,), eps) == (8,)  # a negative noisy total counts as 1: one block
    # More signal never means bigger blocks.
    sizes = [algo.auto_block(t, (4096,), eps)[0] for t in np.geomspace(1, 1e9, 40)]
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("name", ["dpcube", "kdtree"])
def test_partition_is_a_function_of_the_noisy_blocks_alone(name):
    algo = get_algorithm(name)
    noisy = np.random.default_rng(9).integers(-20, 60, (12, 10))
    truth = np.random.default_rng(10).integers(0, 40, (12, 10))
    s1, s2 = 8.0, 50.0
    # The true counts are passed along (the mutants read them); the real partition ignores them entirely.
    assert algo.partition(noisy, truth, s1, s2) == algo.partition(noisy, np.zeros_like(truth), s1, s2)
    assert algo.partition(noisy, truth, s1, s2) != algo.partition(truth, truth, s1, s2)
