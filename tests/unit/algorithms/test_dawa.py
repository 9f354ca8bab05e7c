"""DAWA (dphist/algorithms/dawa.py): budget, sensitivities, noise, structure, accuracy, zCDP, bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dphist.evaluation import workloads
from dphist.evaluation.benchmark import sample_from_shape
from dphist.algorithms.dawa import (DAWA, PREFIX_LEVEL, ROOT_SHARES, best_partition, bucket_branching,
                                    bucket_strategy, candidate_costs, candidate_sensitivity, candidate_weights,
                                    cell_prefix_matrix, deviations, dyadic_candidates, level_shares, prefix_deviations,
                                    prefix_error, prefix_levels, range_quadratic, split_partition,
                                    strategy_errors)
from dphist.algorithms.strategies.hilbert import hilbert_order
from dphist.algorithms.identity import Identity
from dphist_audit.dawa_cases import flip_pair, grid_pair, prefix_pair, true_buckets
from dphist_audit.replication import NoisePool, PooledBudget, ReplicatedBudget
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.inference.measurements import total_measurement

from conftest import SHARED
from interval_checks import spiky_histogram

DATA = SHARED / "data" / "dpbench" / "1D"
DATA_2D = DATA.parent / "2D"


def _budget(eps=Fraction(1), seed=0, trace=None):
    return PrivacyBudget(eps, bits=SeededBits(seed), trace=trace)


class OneBucket(DAWA):
    """DAWA with every cell in one bucket, whatever the noisy costs (as the audit's mutants override the
    partition): the deviations' noise is drawn before the partition is chosen, so on the same seed its runs draw
    the very noise DAWA draws, without DAWA's search for the partition and its bucket strategy."""

    def partition(self, n, starts, stops, noisy_costs, penalty, noise_scale):
        return np.array([0, n])


def first_draw(algo, table, eps, seed):
    """The noisy values of a run's first measurement (the deviations), from its trace."""
    trace: list = []
    algo.run(table, _budget(eps, seed, trace))
    assert trace[0].what.startswith("bucket deviations")
    return trace[0].values


def replicated_buckets(bucket_counts, eps, seed, reps, sizes, workload="prefix"):
    """``reps`` runs of :meth:`DAWA.measure_buckets` at once (a replicated budget: the bucket tree is public, so
    the runs differ only in their noise): the budget and its trace (each level's noisy sums, a leading axis of
    runs) and the structure it states.  A plain run and a replicated run of one repetition draw the same noise on
    the same seed (checked), so the replicated runs stand for plain ones."""
    plain: list = []
    DAWA.measure_buckets(bucket_counts, _budget(eps, seed, plain), sizes, workload)
    one: list = []
    DAWA.measure_buckets(bucket_counts, ReplicatedBudget(eps, SeededBits(seed), 1, one), sizes, workload)
    assert [d.what for d in plain] == [d.what for d in one]
    assert all(np.array_equal(a.values, b.values[0]) for a, b in zip(plain, one))
    trace: list = []
    budget = ReplicatedBudget(eps, SeededBits(seed), reps, trace)
    _, structure = DAWA.measure_buckets(bucket_counts, budget, sizes, workload)
    return budget, trace, structure


def test_candidates_are_aligned_dyadic_and_public():
    starts, stops = dyadic_candidates(8)
    assert list(zip(starts.tolist(), stops.tolist())) == [(0, 2), (2, 4), (4, 6), (6, 8), (0, 4), (4, 8), (0, 8)]
    # n = 5: [4, 5) is a single cell (not a candidate) and [0, 8) ∩ [0, 5) = [0, 5) is kept once
    starts, stops = dyadic_candidates(5)
    assert list(zip(starts.tolist(), stops.tolist())) == [(0, 2), (2, 4), (0, 4), (0, 5)]
    for n in (2, 3, 7, 100, 4096):
        starts, stops = dyadic_candidates(n)
        pairs = set(zip(starts.tolist(), stops.tolist()))
        assert len(pairs) == starts.size  # no repeats
        assert np.all(stops - starts >= 2) and stops.max() == n and starts.min() == 0


@pytest.mark.parametrize("n", [2, 5, 8, 13, 16])
def test_candidate_sensitivity_holds_on_unit_changes(n):
    """Add one record to each cell of random tables: Σ_I |Δq_I|/(s_I g_I) ≤ Δ, each |Δq_I| ≤ 2(s_I − 1), and for
    n a power of two the bound is reached (empty table, record in cell 0)."""
    starts, stops = dyadic_candidates(n)
    sizes = stops - starts
    relative = sizes * candidate_weights(n, starts, stops)
    delta = candidate_sensitivity(n)
    rng = np.random.default_rng(n)
    worst = Fraction(0)
    for table in [np.zeros(n, dtype=np.int64)] + [rng.integers(0, 6, n) for _ in range(30)]:
        base = deviations(table, starts, stops)
        for t in range(n):
            moved = table.copy()
            moved[t] += 1
            change = np.abs(deviations(moved, starts, stops) - base)
            assert np.all(change <= 2 * (sizes - 1))
            total = sum((Fraction(int(c), int(r)) for c, r in zip(change, relative)), Fraction(0))
            assert total <= delta
            worst = max(worst, total)
    if n & (n - 1) == 0:
        assert worst == delta
    # and the integer deviation is s·dev exactly
    table = rng.integers(0, 9, n)
    for a, b, q in zip(starts, stops, deviations(table, starts, stops)):
        part = table[a:b].astype(float)
        assert q == pytest.approx((b - a) * np.abs(part - part.mean()).sum())


@pytest.mark.parametrize("n,prefix_from", [(5, 1), (8, 1), (13, 2), (16, 3), (32, PREFIX_LEVEL)])
def test_prefix_cost_sensitivity_holds_on_unit_changes(n, prefix_from):
    """With the prefix deviation from level ``prefix_from`` up: each |Δp_I| ≤ ⌊s_I/2⌋, Σ_I |Δq_I|/(s_I g_I) ≤ Δ
    over every cell of random tables, and the bound is nearly reached (brute force: 0.92 … 1.0 of Δ for n a power
    of two, 0.76 at n = 5), so a Δ
    that left out a level's term would fail; p_I is the floored prefix formula."""
    starts, stops = dyadic_candidates(n)
    sizes = stops - starts
    relative = sizes * candidate_weights(n, starts, stops)
    pre = prefix_levels(n, starts, stops, prefix_from)
    assert pre.tolist() == [int(s) > 2 ** (prefix_from - 1) for s in sizes]
    delta = candidate_sensitivity(n, prefix_from)
    rng = np.random.default_rng(n)
    worst = Fraction(0)
    for table in [np.zeros(n, dtype=np.int64)] + [rng.integers(0, 6, n) for _ in range(30)]:
        base = candidate_costs(table, starts, stops, prefix_from)
        for t in range(n):
            moved = table.copy()
            moved[t] += 1
            change = np.abs(candidate_costs(moved, starts, stops, prefix_from) - base)
            assert np.all(change[pre] <= sizes[pre] // 2)
            total = sum((Fraction(int(c), int(r)) for c, r in zip(change, relative)), Fraction(0))
            assert total <= delta
            worst = max(worst, total)
    # for n not a power of two a truncated interval's ⌊s/2⌋/s is below the level's 1/2
    assert worst >= (Fraction(9, 10) if n & (n - 1) == 0 else Fraction(3, 4)) * delta, (worst, delta)
    table = rng.integers(0, 9, n)
    for a, b, p in zip(starts.tolist(), stops.tolist(), prefix_deviations(table, starts, stops).tolist()):
        s, inner = b - a, np.cumsum(table[a:b])
        assert p == sum(abs(s * int(inner[t - 1]) - t * int(inner[-1])) for t in range(1, s + 1)) // s


def test_prefix_cost_exact_for_huge_totals():
    """s²·S past int64: the Python-integer path gives the exact floor."""
    starts, stops = dyadic_candidates(64)
    table = np.zeros(64, dtype=np.int64)
    table[0] = 1 << 52
    got = prefix_deviations(table, starts, stops)
    for a, b, p in zip(starts.tolist(), stops.tolist(), got.tolist()):
        s = b - a
        assert p == (sum(s - t for t in range(1, s + 1)) * (1 << 52) // s if a == 0 else 0)


def test_sensitivity_and_weights():
    # g_k = 2^⌊(L − k)/2⌋: n = 8 (L = 3) gives levels 3, 2 weight 1 and level 1 weight 2
    starts, stops = dyadic_candidates(8)
    assert candidate_weights(8, starts, stops).tolist() == [2, 2, 2, 2, 1, 1, 1]
    assert candidate_sensitivity(8) == Fraction(2 * 1, 2 * 2) + Fraction(2 * 3, 4) + Fraction(2 * 7, 8)
    assert candidate_sensitivity(2) == 1
    top = 12
    assert candidate_sensitivity(4096, top + 1) == sum(2 * (1 - Fraction(1, 2**k)) / 2 ** ((top - k) // 2)
                                                       for k in range(1, top + 1))
    # from level 5 up the prefix deviation: 1/2 per level instead of 2(1 − 2^−k)
    assert PREFIX_LEVEL == 5
    assert candidate_sensitivity(4096) == (sum(2 * (1 - Fraction(1, 2**k)) / 2 ** ((top - k) // 2) for k in range(1, 5))
                                           + sum(Fraction(1, 2) / 2 ** ((top - k) // 2) for k in range(5, top + 1)))
    assert candidate_sensitivity(16) == candidate_sensitivity(16, 99)  # no candidate reaches level 5
    # a truncated node's weight is its level's (n = 5: [0, 5) is level 3, [0, 4) level 2, pairs level 1)
    starts, stops = dyadic_candidates(5)
    assert candidate_weights(5, starts, stops).tolist() == [2, 2, 1, 1]


def test_budget_spent_exactly_and_split_as_documented():
    counts = np.array([5, 0, 3, 9, 0, 0, 1, 2, 7, 7, 0, 1, 4, 4, 0, 0] * 4, dtype=np.int64)
    for ratio in (Fraction(2, 5), Fraction(1, 2)):
        budget = _budget(Fraction(3, 2))
        DAWA(ratio=ratio).run(counts, budget)
        assert budget.spent == budget.amount
        first, *rest = budget.measurements
        assert first.epsilon == ratio * Fraction(3, 2)
        assert first.sensitivity == candidate_sensitivity(64)
        assert first.scale == candidate_sensitivity(64) / (ratio * Fraction(3, 2))
        assert sum(m.epsilon for m in rest) == (1 - ratio) * Fraction(3, 2)
        assert all(m.sensitivity == 1 for m in rest)


def test_partition_noise_has_the_stated_variance():
    """q̃_I − q_I over 300 seeds, per interval size s: its mean square against the exact discrete Laplace
    variance of scale s·g_s·b.  The relative sd of a Laplace mean square over m independent draws is √(5/m)
    (E X⁴ = 24b⁴, E X² = 2b²); 6 sd are allowed: with m ≥ 1,200 the mean is close to normal, a false alarm
    about 2e-9 per check.  The margins are 0.27 (s = 2, m = 2,400) and 0.39 (s = 4, m = 1,200): a halved scale
    (ratio 0.25) or a scale without the factor s or g (ratio 1/s², 1/g²) fails."""
    counts = np.array([3, 1, 0, 0, 8, 2, 2, 5, 0, 0, 0, 1, 9, 9, 0, 4], dtype=np.int64)
    starts, stops = dyadic_candidates(16)
    sizes = stops - starts
    weights = candidate_weights(16, starts, stops)
    exact = deviations(counts, starts, stops)
    eps = Fraction(1)
    b = candidate_sensitivity(16) / (eps * DAWA().params["ratio"])
    _check_partition_noise(counts, eps, b, sizes, weights, exact)


def _check_partition_noise(table, eps, b, sizes, weights, exact) -> None:
    """300 seeded runs of DAWA on ``table``: the noise on the candidates of 2 and 4 cells has the discrete Laplace
    variance at scale b·size·weight (its sample variance's relative sd is about sqrt(5/m) for m values, kurtosis
    6: the 6-sd bound has a false-alarm rate about 2e-9 per size).  The runs are :class:`OneBucket`'s, which
    draw DAWA's noise on each seed (checked on the first)."""
    assert np.array_equal(first_draw(DAWA(), table, eps, 0), first_draw(OneBucket(), table, eps, 0))
    errors = np.array([first_draw(OneBucket(), table, eps, seed) - exact for seed in range(300)])
    for size in (2, 4):
        which = sizes == size
        m = errors[:, which].size
        expected = discrete_laplace_variance(b * size * int(weights[which][0]))
        observed = float(np.mean(np.square(errors[:, which])))
        assert abs(observed / expected - 1) < 6 * np.sqrt(5 / m), (size, observed, expected)


def test_prefix_level_noise_has_the_stated_variance():
    """The prefix deviations (levels 5 and 6 of 64 cells, g = 1) get noise of scale s·b like the L1 ones: over
    300 seeds, the mean square of q̃ − p at s = 32 (m = 600 draws) against the exact discrete Laplace variance,
    6 sd of √(5/m) allowed (margin 0.55; a false alarm well under 1e-6 per check): a halved scale (ratio 0.25)
    or one without the factor s (ratio 1/1024) fails."""
    counts = np.random.default_rng(3).integers(0, 5, 64)
    starts, stops = dyadic_candidates(64)
    sizes = stops - starts
    exact = candidate_costs(counts, starts, stops)
    b = candidate_sensitivity(64) / DAWA().params["ratio"]
    which = sizes == 32
    assert np.all(prefix_levels(64, starts, stops)[which])
    # OneBucket's runs draw DAWA's noise on each seed (checked on the first).
    assert np.array_equal(first_draw(DAWA(), counts, 1, 0), first_draw(OneBucket(), counts, 1, 0))
    errors = [(first_draw(OneBucket(), counts, 1, seed) - exact)[which] for seed in range(300)]
    errors = np.array(errors)
    expected = discrete_laplace_variance(b * 32)
    observed = float(np.mean(np.square(errors)))
    assert abs(observed / expected - 1) < 6 * np.sqrt(5 / errors.size), (observed, expected)


def test_prefix_cost_splits_a_heavy_half_and_not_sparse_uniform_data():
    """What the prefix deviation is for (issue 22), on noiseless costs with the default thresholds at ε = 0.1:
    1,000 records spread uniformly at random over 4,096 cells stay one bucket (their L1 deviation, ≈ 2,000 at the
    root, would split them), and the same records all in the left half split the root."""
    n = 4096
    starts, stops = dyadic_candidates(n)
    algo = DAWA()
    ratio = algo.params["ratio"]
    eps = Fraction(1, 10)
    penalty = float(1 / ((1 - ratio) * eps))
    scale = float(candidate_sensitivity(n) / (ratio * eps)) * candidate_weights(n, starts, stops)
    rng = np.random.default_rng(5)
    uniform = np.bincount(rng.integers(0, n, 1000), minlength=n)
    left = np.bincount(rng.integers(0, n // 2, 1000), minlength=n)
    for table, buckets in ((uniform, 1), (left, None)):
        costs = candidate_costs(table, starts, stops) / (stops - starts)
        edges = algo.partition(n, starts, stops, costs, penalty, scale)
        if buckets == 1:
            assert edges.tolist() == [0, n]
            assert deviations(table, starts, stops)[-1] / n > penalty + 0.8 * scale[-1]
        else:
            assert n // 2 in edges.tolist()


def test_bucket_tree_noise_has_the_stated_variance():
    """The bucket counts' tree (fixed buckets, left-heavy sizes so that the root is measured with its own share):
    each measured level's noise against the exact discrete Laplace variance of scale 1/ε_l, ε_l its share of the
    budget as :func:`level_shares` states, over 400 runs drawn at once; same statistic and 6-sd margin as above
    (false alarm ~2e-9 per level).  Here the chosen tree is flat (root 5/8, leaves 3/8).  The leaves' m = 6,400
    draws give a margin of 0.17: an even split (the leaves' variance ratio 0.56) fails; the root's m = 400 give
    0.67: a root noise at half or twice its scale (ratio 1/4 or 4) fails."""
    from dphist.algorithms.strategies.trees import range_tree

    bucket_counts = np.array([40, 3, 0, 17, 9, 9, 1, 0, 22, 5, 5, 5, 0, 2, 8, 30], dtype=np.int64)
    sizes = np.array([1] * 15 + [3000])
    b, root_share = bucket_strategy(sizes)
    assert root_share >= Fraction(1, 2)  # the total matters most: the premise of the root check
    tree = range_tree(16, b)
    shares = level_shares(tree.levels, root_share)
    assert len(shares) == tree.levels  # the root is measured
    budget, trace, shape = replicated_buckets(bucket_counts, Fraction(1, 2), 0, 400, sizes)
    assert (shape["bucket_tree_branching"], shape["bucket_tree_root_share"]) == (b, str(root_share))
    records = budget.measurements
    assert [r.epsilon for r in records] == [Fraction(1, 2) * share for share in shares]
    sums = tree.level_sums(bucket_counts)
    errors: dict[int, np.ndarray] = {}
    for draw, record in zip(trace, records):
        level = int(draw.what.split()[3])
        assert draw.values.shape == (400, tree.sizes[level])
        errors[level] = draw.values - sums[level]
        assert record.scale == 1 / record.epsilon
        assert record.noise_variance == pytest.approx(discrete_laplace_variance(record.scale))
    assert sorted(errors) == list(range(tree.levels))
    for level, values in errors.items():
        scale = 1 / (Fraction(1, 2) * shares[level])
        ratio = float(np.mean(np.square(values))) / discrete_laplace_variance(scale)
        assert abs(ratio - 1) < 6 * np.sqrt(5 / values.size), (level, ratio)


def _dense_workload_variance(sizes, b, root_share, noise):
    """tr(W L Σ Lᵀ Wᵀ) from explicit matrices: W the n × k cell-prefix matrix (uniform spread), A the measured
    nodes' incidence, Σ their variances (∝ 1/share² or 1/share), L = (AᵀΣ⁻¹A)⁻¹AᵀΣ⁻¹ the GLS operator."""
    from dphist.algorithms.strategies.trees import range_tree

    k = len(sizes)
    tree = range_tree(k, b)
    shares = level_shares(tree.levels, root_share)
    rows, variances = [], []
    for level, share in zip(range(tree.levels - len(shares), tree.levels), shares):
        labels = tree.labels(level)
        for node in range(tree.sizes[level]):
            rows.append((labels == node).astype(float))
            variances.append(1 / float(share) ** 2 if noise == "laplace" else 1 / float(share))
    A, V = np.array(rows), np.diag(variances)
    L = np.linalg.solve(A.T @ np.linalg.inv(V) @ A, A.T @ np.linalg.inv(V))
    W = np.array([np.concatenate([np.ones(j), [t / s], np.zeros(k - j - 1)])
                  for j, s in enumerate(sizes) for t in range(1, s + 1)])
    return float(np.trace(W @ L @ V @ L.T @ W.T)), W


def test_closed_form_workload_variance_matches_dense():
    """strategy_errors (closed form over the buckets, Sherman–Morrison over the root's share) against the dense
    computation on small examples, every share, both noises; and cell_prefix_matrix against WᵀW."""
    rng = np.random.default_rng(5)
    for k, b in ((2, 2), (5, 2), (7, 3), (6, 6), (9, 2), (10, 4)):
        sizes = rng.integers(1, 9, k)
        for noise in ("laplace", "gaussian"):
            errors = strategy_errors(sizes, b, noise)
            assert set(errors) >= {Fraction(0), *ROOT_SHARES}
            for r, value in errors.items():
                dense, W = _dense_workload_variance(sizes, b, r, noise)
                assert value == pytest.approx(dense, rel=1e-9), (k, b, r, noise)
        assert np.allclose(cell_prefix_matrix(sizes), W.T @ W)


def test_strategy_is_the_least_error_candidate_and_shares_add_up():
    """The chosen (b, r) has the least closed-form error among every candidate, the data-blind rule included; its
    shares add up to 1 exactly; and a whole run's bucket records add up to ε₂ exactly, in level_shares' order."""
    rng = np.random.default_rng(2)
    for sizes in ([3, 1, 1, 60], list(rng.integers(1, 300, 23)), [1] * 8 + [4000], [512] * 8):
        k = len(sizes)
        b, r = bucket_strategy(sizes)
        best = strategy_errors(sizes, b)[r]
        for other in sorted({c for c in (2, 3, 4, 6, 8, 12, 16) if c < k} | {k}):
            assert all(best <= e * (1 + 1e-12) for e in strategy_errors(sizes, other).values())
        assert best <= strategy_errors(sizes, bucket_branching(k))[Fraction(0)]
    for levels in (1, 2, 5):
        for r in (Fraction(0), Fraction(1, 8), Fraction(3, 4)):
            shares = level_shares(levels, r)
            assert sum(shares) == 1 and all(s > 0 for s in shares)
    counts = np.zeros(4096, dtype=np.int64)
    counts[:300] = 50 * (np.arange(300) % 7)  # mass on the left: big empty buckets on the right
    budget = _budget(Fraction(1))
    est = DAWA().run(counts, budget)
    rest = budget.measurements[1:]
    eps2 = 1 - DAWA().params["ratio"]
    assert sum(m.epsilon for m in rest) == eps2
    levels, root = est.choices["bucket_tree_levels"], Fraction(est.choices["bucket_tree_root_share"])
    assert root not in (0, Fraction(1, levels))  # neither of the even profiles: the check below can tell
    assert [m.epsilon for m in rest] == [eps2 * s for s in level_shares(levels, root)]


def test_strategy_depends_only_on_bucket_sizes():
    """Two count vectors with the same bucket sizes get the same tree, the same shares and the same noise scales
    (the counts are never read by the choice); different sizes may change it."""
    sizes = np.array([2, 1, 1, 4, 8, 16, 32, 4032])
    shapes, epsilons = [], []
    for counts in (np.array([5, 0, 3, 9, 0, 0, 1, 2]), np.array([900, 1, 0, 0, 70, 3, 3, 0]), np.zeros(8, int)):
        budget = _budget(Fraction(1, 3), 1)
        _, shape = DAWA.measure_buckets(counts.astype(np.int64), budget, sizes)
        shapes.append(shape)
        epsilons.append([(m.epsilon, m.scale) for m in budget.measurements])
    assert shapes[0] == shapes[1] == shapes[2] and epsilons[0] == epsilons[1] == epsilons[2]
    assert bucket_strategy(sizes) == (shapes[0]["bucket_tree_branching"], Fraction(shapes[0]["bucket_tree_root_share"]))
    assert bucket_strategy(sizes) != bucket_strategy(np.full(8, 512))


def test_left_heavy_buckets_give_the_root_more():
    """Mass on the left (a big right bucket holds most cell prefixes, whose answer is the total): the root's
    share is larger than for equal buckets of the same total, under both noises."""
    for noise in ("laplace", "gaussian"):
        for k in (6, 10, 30):
            left = [1] * (k - 1) + [4096 - (k - 1)]
            even = [4096 // k] * k
            r_left, r_even = bucket_strategy(left, noise)[1], bucket_strategy(even, noise)[1]
            assert r_left > r_even, (noise, k, r_left, r_even)


def test_partition_reads_only_the_noisy_costs():
    """The selection is the exact optimum of the noisy costs (brute force on 8 cells), and the run's structure
    does not depend on the data."""
    n = 8
    starts, stops = dyadic_candidates(n)
    rng = np.random.default_rng(1)
    pieces = [(a, b) for a, b in zip(starts.tolist(), stops.tolist())] + [(i, i + 1) for i in range(n)]
    for _ in range(20):
        costs = rng.normal(0, 3, starts.size)
        cost_of = {p: c for p, c in zip(pieces, costs)}
        penalty = float(rng.uniform(0, 3))
        best = np.inf
        # Every set of pieces that covers each cell once is a cut of the 8 cells into intervals: all 2^7 cuts,
        # kept where every interval is a piece.
        for cuts in itertools.product((False, True), repeat=n - 1):
            edges = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [n]
            combo = list(zip(edges[:-1], edges[1:]))
            if all(p in pieces for p in combo):
                best = min(best, sum(cost_of.get(p, 0.0) + penalty for p in combo))
        edges = best_partition(n, starts, stops, costs, penalty)
        got = sum(cost_of.get((a, b), 0.0) + penalty for a, b in zip(edges[:-1], edges[1:]))
        assert got == pytest.approx(best)
        # split: an interval is split exactly when its cost exceeds the threshold
        edges = split_partition(n, starts, stops, costs, penalty)
        for a, b in zip(edges[:-1].tolist(), edges[1:].tolist()):
            assert b - a == 1 or cost_of[(a, b)] <= penalty
    s1 = DAWA().run(np.arange(64, dtype=np.int64), _budget()).structure
    s2 = DAWA().run(np.zeros(64, dtype=np.int64), _budget()).structure
    assert s1 == s2


def test_bucket_branching_minimises_the_exact_prefix_variance():
    """prefix_error against a dense computation (W L, L the GLS map of the tree, from unit vectors) and the
    choice against every candidate; the flat tree is worse than the chosen one at 178 buckets."""
    from dphist.inference.nonnegative import tree_least_squares
    from dphist.algorithms.strategies.trees import range_tree

    for k, b in ((5, 2), (9, 3), (12, 12)):
        tree = range_tree(k, b)
        measured = list(range(1 if tree.levels > 1 else 0, tree.levels))
        h = len(measured)
        total = 0.0
        for level in measured:
            for node in range(tree.sizes[level]):
                noisy = [np.zeros(tree.sizes[l]) if l in measured else None for l in range(tree.levels)]
                noisy[level][node] = 1.0
                variances = [float(h * h) if l in measured else np.inf for l in range(tree.levels)]
                leaves = tree_least_squares(tree, noisy, variances).values[-1]
                total += h * h * float(np.sum(np.cumsum(leaves) ** 2))
        assert prefix_error(k, b) == pytest.approx(total / k)
    chosen = bucket_branching(178)
    assert chosen != 178 and prefix_error(178, chosen) < 0.5 * prefix_error(178, 178)
    assert all(prefix_error(40, chosen) <= prefix_error(40, b) + 1e-9 for chosen in [bucket_branching(40)]
               for b in (2, 3, 4, 6, 8, 12, 16, 40))


def test_mutant_pair_flips_on_true_costs():
    # The audit's pairs: one record changes the partition the true costs give (L1 costs on 8 cells, the prefix
    # deviation on the top level of 32), so a mutant that partitions on them is caught.
    data, neighbour = flip_pair()
    assert (true_buckets(data), true_buckets(neighbour)) == (1, 2)
    data, neighbour = prefix_pair()
    assert (true_buckets(data), true_buckets(neighbour)) == (4, 5)
    data, neighbour = grid_pair()
    assert (true_buckets(data), true_buckets(neighbour)) == (1, 3)


def test_runs_under_zcdp():
    counts = np.array([4, 0, 0, 7, 1, 1, 0, 0, 3, 3, 3, 3, 0, 0, 0, 9], dtype=np.int64)
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(3))
    est = DAWA().run(counts, budget)
    assert budget.spent == budget.amount
    assert est.values.shape == (16,) and np.all(np.isfinite(est.values))
    assert any(m.mechanism == "gaussian" for m in budget.measurements) or budget.measurements[-1].rho is not None


def test_bad_input():
    DAWA().check_shape((4, 4))  # 2-D grids are read along a Hilbert curve
    for shape in ((2, 2, 2), (4, 4, 4, 4)):
        with pytest.raises(UsageError, match="one-column tables and two-column grids"):
            DAWA().check_shape(shape)
    for shape in ((1,), (1, 1), (1024, 1025)):
        with pytest.raises(UsageError):
            DAWA().check_shape(shape)
    for bad in ({"ratio": 0}, {"ratio": "1"}, {"ratio": "x"}, {"penalty": -1}, {"penalty": "nan"},
                {"select": "best"}, {"nope": 1}, {"stage2": "tree"}, {"fit": "maybe"}, {"fit": 1}):
        with pytest.raises(UsageError):
            DAWA(**bad)


@pytest.mark.skipif(not (DATA / "HEPTH.n4096.npy").exists(), reason="DPBench data not present")
def test_better_than_identity_at_low_signal():
    x = np.load(DATA / "HEPTH.n4096.npy")
    sample = sample_from_shape(x, 1000, seed=0)
    W = workloads.prefix(4096)
    ours, theirs = [], []
    for seed in range(3):
        ours.append(workloads.scaled_average_l1(W, sample, DAWA().run(sample, _budget(Fraction(1, 10), seed)).values))
        theirs.append(workloads.scaled_average_l1(W, sample,
                                                  Identity().run(sample, _budget(Fraction(1, 10), seed)).values))
    assert np.mean(ours) < 0.5 * np.mean(theirs), (ours, theirs)


# ----- 2-D: the grid read along the Hilbert curve -----------------------------------------------------------------

GRID = np.array([[3, 0, 0, 1, 0, 0, 0, 0],
                 [9, 9, 0, 0, 0, 0, 2, 0],
                 [0, 1, 0, 0, 5, 5, 5, 4],
                 [0, 0, 0, 0, 5, 6, 5, 5],
                 [0, 0, 0, 0, 0, 0, 0, 0],
                 [1, 0, 0, 0, 0, 0, 0, 1],
                 [0, 0, 7, 0, 0, 0, 0, 0],
                 [0, 0, 0, 0, 0, 0, 30, 0]], dtype=np.int64)


@pytest.mark.parametrize("stage2", ["prefix", "ranges", "identity"])
def test_2d_is_1d_dawa_on_the_hilbert_sequence(stage2):
    """Same seed, same options: the 2-D run (2-D defaults) equals the 1-D run with those options on the table read
    along the curve, put back on the grid (so the partition's candidates, Δ and noise are those of n = r·c
    cells), and the budget is spent exactly with the documented split."""
    from dphist.algorithms.dawa import DEFAULTS_2D

    ratio = DEFAULTS_2D["ratio"]
    for shape in ((8, 8), (5, 7)):
        grid = GRID[: shape[0], : shape[1]]
        line = grid.ravel()[hilbert_order(shape)]
        for seed in range(3):
            b2, b1 = _budget(Fraction(1, 2), seed), _budget(Fraction(1, 2), seed)
            two = DAWA(stage2=stage2).run(grid, b2)
            one = DAWA(stage2=stage2, **DEFAULTS_2D).run(line, b1)
            assert two.values.shape == shape
            assert np.array_equal(two.values.ravel()[hilbert_order(shape)], one.values)
            assert two.choices == one.choices
            assert b2.spent == b2.amount
            first, *rest = b2.measurements
            assert first.sensitivity == candidate_sensitivity(grid.size)
            assert first.epsilon == Fraction(1, 2) * ratio
            assert sum(m.epsilon for m in rest) == Fraction(1, 2) * (1 - ratio)
            assert all(m.sensitivity == 1 for m in rest)
            assert two.structure["linearisation"] == "hilbert" and two.structure["bucket_workload"] == stage2


def test_2d_default_stage2_and_1d_default_unchanged():
    from dphist.algorithms.dawa import DEFAULTS_2D, STAGE2_2D

    assert DAWA().stage2(1) == "prefix" and DAWA().stage2(2) == STAGE2_2D
    for key, value in DEFAULTS_2D.items():
        assert DAWA().setting(key, 2) == value and DAWA().setting(key, 1) == DAWA.options[key][0]
        assert DAWA(**{key: "7/10"}).setting(key, 2) == Fraction(7, 10)  # a given option is never overridden
    budget = _budget()
    DAWA().run(GRID, budget)
    assert budget.measurements[0].epsilon == DEFAULTS_2D["ratio"]
    budget = _budget()
    DAWA(ratio="1/5").run(GRID, budget)
    assert budget.measurements[0].epsilon == Fraction(1, 5)
    assert DAWA().run(GRID, _budget()).structure["bucket_workload"] == STAGE2_2D
    assert "linearisation" not in DAWA().run(GRID.ravel(), _budget()).structure


def test_2d_sensitivity_holds_on_unit_changes():
    """One record in any cell of a 4 × 4 grid moves the linearised costs by Σ_I |Δq_I|/(s_I g_I) ≤ Δ(16), and the
    empty grid with a record in the curve's first cell reaches Δ (L1 levels only at 16 cells)."""
    shape, n = (4, 4), 16
    order = hilbert_order(shape)
    starts, stops = dyadic_candidates(n)
    relative = (stops - starts) * candidate_weights(n, starts, stops)
    delta = candidate_sensitivity(n)
    rng = np.random.default_rng(4)
    worst = Fraction(0)
    for grid in [np.zeros(shape, dtype=np.int64)] + [rng.integers(0, 5, shape) for _ in range(20)]:
        base = candidate_costs(grid.ravel()[order], starts, stops)
        for cell in np.ndindex(*shape):
            moved = grid.copy()
            moved[cell] += 1
            change = np.abs(candidate_costs(moved.ravel()[order], starts, stops) - base)
            total = sum((Fraction(int(c), int(r)) for c, r in zip(change, relative)), Fraction(0))
            assert total <= delta
            worst = max(worst, total)
    assert worst == delta


def test_2d_partition_noise_has_the_stated_variance():
    """q̃_I − q_I on a 4 × 4 grid (costs of the Hilbert sequence) over 300 seeds, per interval size: mean square
    against the exact discrete Laplace variance of scale s·g_s·b, 6 sd of √(5/m) (false alarm ~2e-9 per
    check; margins 0.27 at s = 2 and 0.39 at s = 4, so a halved scale or one without s or g fails)."""
    grid = GRID[:4, :4]
    starts, stops = dyadic_candidates(16)
    sizes = stops - starts
    weights = candidate_weights(16, starts, stops)
    exact = candidate_costs(grid.ravel()[hilbert_order((4, 4))], starts, stops)
    b = candidate_sensitivity(16) / DAWA().setting("ratio", 2)
    _check_partition_noise(grid, Fraction(1), b, sizes, weights, exact)


@pytest.mark.parametrize("workload", ["ranges", "identity"])
def test_2d_bucket_noise_has_the_stated_variance(workload):
    """The 2-D stage 2 strategies on fixed buckets: each level's noise against the exact discrete Laplace
    variance of scale 1/ε_l (ε_l as :func:`level_shares` states for the chosen tree) over 300 runs, 6 sd of
    √(5/m) (false alarm ~2e-9 per level).  identity: one level, the leaves, with the whole budget (m = 4,800,
    margin 0.19: a budget split in two, variance ratio 4, fails)."""
    from dphist.algorithms.strategies.trees import range_tree

    bucket_counts = np.array([40, 3, 0, 17, 9, 9, 1, 0, 22, 5, 5, 5, 0, 2, 8, 30], dtype=np.int64)
    sizes = np.array([4, 1, 1, 30, 2, 2, 8, 8, 1, 1, 1, 1, 64, 3, 3, 2])
    b, root_share = bucket_strategy(sizes, workload=workload)
    if workload == "identity":
        assert (b, root_share) == (16, 0)
    tree = range_tree(16, b)
    shares = level_shares(tree.levels, root_share)
    measured = list(range(tree.levels - len(shares), tree.levels))
    budget, trace, _ = replicated_buckets(bucket_counts, Fraction(1, 2), 0, 300, sizes, workload)
    assert budget.spent == budget.amount
    assert [r.epsilon for r in budget.measurements] == [Fraction(1, 2) * s for s in shares]
    sums = tree.level_sums(bucket_counts)
    for level, share, draw in zip(measured, shares, trace):
        assert draw.values.shape == (300, tree.sizes[level])
        values = draw.values - sums[level]
        ratio = float(np.mean(np.square(values))) / discrete_laplace_variance(1 / (Fraction(1, 2) * share))
        assert abs(ratio - 1) < 6 * np.sqrt(5 / values.size), (level, ratio)


def test_range_quadratic_matches_dense():
    """range_quadratic against WᵀW for the explicit all-cell-ranges matrix (uniform spread in each bucket), and
    strategy_errors(workload="ranges") against the dense GLS variance of that workload."""
    rng = np.random.default_rng(2)
    sizes = [3, 1, 4, 2, 5]
    k, n = len(sizes), sum(sizes)
    spread = np.zeros((n, k))  # cell i's share of each bucket
    cell = 0
    for j, s in enumerate(sizes):
        spread[cell:cell + s, j] = 1 / s
        cell += s
    W = np.array([spread[a:b].sum(axis=0) for a in range(n) for b in range(a + 1, n + 1)])
    M = W.T @ W
    c = rng.normal(size=(6, k))
    assert np.allclose(range_quadratic(c, sizes), np.einsum("ij,jk,ik->i", c, M, c))
    for b, root_share in ((2, Fraction(1, 4)), (5, Fraction(0)), (3, Fraction(1, 2))):
        _, W_prefix = _dense_workload_variance(sizes, b, root_share, "laplace")
        from dphist.algorithms.strategies.trees import range_tree

        tree = range_tree(k, b)
        shares = level_shares(tree.levels, root_share)
        rows, variances = [], []
        for level, share in zip(range(tree.levels - len(shares), tree.levels), shares):
            labels = tree.labels(level)
            for node in range(tree.sizes[level]):
                rows.append((labels == node).astype(float))
                variances.append(1 / float(share) ** 2)
        A, V = np.array(rows), np.diag(variances)
        L = np.linalg.solve(A.T @ np.linalg.inv(V) @ A, A.T @ np.linalg.inv(V))
        dense = float(np.trace(W @ L @ V @ L.T @ W.T))
        assert strategy_errors(sizes, b, "laplace", "ranges")[root_share] == pytest.approx(dense)


def test_2d_structure_is_public_and_runs_under_zcdp():
    s1 = DAWA().run(np.arange(64, dtype=np.int64).reshape(8, 8), _budget()).structure
    s2 = DAWA().run(np.zeros((8, 8), dtype=np.int64), _budget()).structure
    assert s1 == s2
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(3))
    est = DAWA().run(GRID, budget)
    assert budget.spent == budget.amount
    assert est.values.shape == GRID.shape and np.all(np.isfinite(est.values))
    assert all(m.mechanism == "discrete Gaussian" for m in budget.measurements[1:])


@pytest.mark.skipif(not (DATA_2D / "Adult_2D_256_256.npy").exists(), reason="DPBench data not present")
def test_2d_better_than_identity_at_low_signal():
    x = np.load(DATA_2D / "Adult_2D_256_256.npy")
    sample = sample_from_shape(x, 1000, seed=0)
    W = workloads.random_boxes(sample.shape, 500, seed=0)
    ours, theirs = [], []
    for seed in range(2):
        ours.append(workloads.scaled_average_l1(W, sample, DAWA().run(sample, _budget(Fraction(1, 10), seed)).values))
        theirs.append(workloads.scaled_average_l1(W, sample,
                                                  Identity().run(sample, _budget(Fraction(1, 10), seed)).values))
    assert np.mean(ours) < 0.2 * np.mean(theirs), (ours, theirs)


@pytest.mark.parametrize("runs", [600, pytest.param(3000, marks=pytest.mark.slow)])
def test_a_total_measured_elsewhere_joins_the_bucket_tree(runs):
    """``Algorithm.refit`` with a total (what auto does with its N̂), the noise measured: on runs where the partition is one
    bucket (the bucket's noise does not depend on the partition's), the refitted total's variance is the
    inverse-variance combination of the bucket's (v, at ε₂) and the total's (V = v here): v/2, within 5 standard
    errors of the sample variance, and more than 5 away from the unrefitted v; with a total of variance 3v it is
    (3B̂ + T)/4 exactly.  A total of huge variance leaves the estimate as it was; the report says where the total
    went.  About 2/3 of the runs are of one bucket (at least half asserted): m ≥ 300 of 600 runs (1,500 of
    3,000).  The refitted variance's relative standard error is √(3.5/m) ≤ 10.8 % (4.8 %), so the 5-se band is
    a false alarm below 1e-6, the unrefitted v is more than 9 se (20 se) away, and a refitted variance off by 79 %
    (35 %) of v/2 fails with probability above 0.99; the bucket alone is checked against v within 5 sd of
    √(5/m).  The runs draw from one pool of exact discrete Laplace noise (the audit's: a plain budget's
    distribution, drawn in bulk)."""
    n, eps = 64, Fraction(1)
    ratio = DAWA.options["ratio"][0]
    v = float(discrete_laplace_variance(1 / (eps * (1 - ratio))))
    x = np.zeros(n, dtype=np.int64)
    pool, refit_errors, plain_errors = NoisePool(SeededBits(61)), [], []
    for r in range(runs):
        estimate = DAWA().run(x, PooledBudget(eps, pool=pool))
        total = float(np.random.default_rng(r + 7).laplace(0, np.sqrt(v / 2)))
        if estimate.choices["buckets"] != 1:
            continue
        refit = DAWA().refit(estimate, total_measurement(total, v))
        plain_errors.append(estimate.values.sum())
        refit_errors.append(refit.values.sum())
        if len(refit_errors) <= 20:
            assert np.allclose(DAWA().refit(estimate, total_measurement(1e9, 1e30)).values, estimate.values, rtol=0, atol=1e-9)
            # the weights exactly: the bucket (variance v) and a total T of variance 3v → (3B̂ + T)/4
            b = estimate.values.sum()
            assert np.isclose(DAWA().refit(estimate, total_measurement(100.0, 3 * v)).values.sum(), (3 * b + 100) / 4, rtol=0, atol=1e-9)
    assert len(refit_errors) > runs / 2
    refit_errors, plain_errors = np.array(refit_errors), np.array(plain_errors)
    assert abs(plain_errors.var() - v) < 5 * v * np.sqrt(5 / plain_errors.size)  # the bucket alone: v
    # (e_b + e_T)/2 with e_T Laplace of variance v: kurtosis 4.5, so the variance's SE is σ²·sqrt(3.5/runs)
    se = (v / 2) * np.sqrt(3.5 / refit_errors.size)
    assert abs(refit_errors.var() - v / 2) < 5 * se
    assert abs(refit_errors.var() - v) > 5 * se
    assert refit.structure["bucket_root_also_from"] == "an earlier noisy total (least squares)"
    assert refit.choices == estimate.choices


def test_nonnegative_fit_is_post_processing_of_the_same_measurements():
    """fit=nnls changes only the fit: with the same noise the measurements (what was measured, at which ε and
    scale, with which noisy values) and the buckets are those of fit=lsq; the bucket estimates are at least 0
    and where least squares had none below 0 both releases are the same.  On sparse data at ε = 0.05 some run
    has a negative least-squares bucket (the premise of the difference), and there the nnls release differs."""
    x = np.zeros(512, dtype=np.int64)
    x[10:20], x[300] = 3, 40
    differed = 0
    for seed in range(30):
        releases = {}
        for fit in ("lsq", "nnls"):
            trace: list = []
            budget = _budget(Fraction(1, 20), seed, trace)
            estimate = DAWA(fit=fit).run(x, budget)
            records = [(r.what, r.epsilon, r.scale) for r in budget.measurements]
            releases[fit] = (estimate, records, [d.values.tolist() for d in trace])
            assert estimate.choices["fit"] == fit
        (lsq, lsq_records, lsq_noise), (nnls, nnls_records, nnls_noise) = releases["lsq"], releases["nnls"]
        assert lsq_records == nnls_records and lsq_noise == nnls_noise
        assert lsq.choices["buckets"] == nnls.choices["buckets"]
        assert nnls.values.min() >= 0
        if lsq.values.min() >= 0:
            assert np.array_equal(lsq.values, nnls.values)
        else:
            differed += 1
            assert not np.allclose(lsq.values, nnls.values)
    assert differed >= 3


def test_nonnegative_fit_takes_auto_total_and_falls_back_above_its_limit():
    """With auto's N̂ the nnls fit takes it as one more root measurement (the refit differs from the plain fit
    and stays at least 0); above NNLS_MAX_LEAVES buckets the fit is least squares, and the report says so."""
    from dphist.inference.nonnegative import NNLS_MAX_LEAVES

    x = np.zeros(256, dtype=np.int64)
    x[:8] = 50
    estimate = DAWA(fit="nnls").run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(4)))
    refit = DAWA(fit="nnls").refit(estimate, total_measurement(float(x.sum()) + 300, 1.0))
    assert refit.values.min() >= 0 and not np.allclose(refit.values, estimate.values)
    rng = np.random.default_rng(5)
    wild = rng.integers(0, 10**6, 4096)  # every cell differs a lot: near one bucket per cell at ε = 10
    many = DAWA(fit="nnls").run(wild, PrivacyBudget(Fraction(10), bits=SeededBits(6)))
    assert many.choices["buckets"] > NNLS_MAX_LEAVES
    assert many.choices["fit"] == f"lsq (nnls takes at most {NNLS_MAX_LEAVES} buckets)"


# ----- intervals: the bucket counts' exact variance given the partition, and their coverage ----------------------


def dense_bucket_covariance(plan, measurements):
    """(AᵀWA)⁻¹ of the bucket tree's least squares, built densely: one row per measured node (its buckets' 0/1
    incidence, weight 1/variance) and one for each measured total (every bucket), independent of
    ``tree_least_squares``."""
    rows, weights = [], []
    leaves = plan.sizes.size
    for m in measurements:
        if m.query == "the table's total":
            rows.append(np.ones((1, leaves)))
            weights.append([1 / float(m.variance)])
            continue
        level = m.query[1]
        member = np.zeros((plan.tree.sizes[level], leaves))
        member[plan.tree.labels(level), np.arange(leaves)] = 1.0
        rows.append(member)
        weights.append(np.full(member.shape[0], 1 / float(m.variance)))
    A, w = np.vstack(rows), np.concatenate(weights)
    return np.linalg.inv(A.T @ (w[:, None] * A))


@pytest.mark.parametrize("shape, eps, seed", [((64,), Fraction(1), 3), ((300,), Fraction(1, 10), 5),
                                              ((12, 10), Fraction(1), 4), ((8, 8), Fraction(1, 2), 2)])
def test_variance_is_the_bucket_tree_least_squares_one_for_the_partition_run(shape, eps, seed):
    """Given the partition a seeded run chose, each cell's variance is its bucket's least-squares variance, the
    diagonal of (AᵀWA)⁻¹ of the bucket tree (built densely here), ÷ the bucket's cells squared, also after a
    refit with a total (one more row: the variance comes out of ``infer``).  The groups name the buckets: along
    the cells' linear order (the Hilbert curve in 2-D) each bucket is one run of its size, and the values are
    constant on it.  Deterministic (no false alarm): a variance off by more than 1e-9 relative fails."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rng.choice([0.2, 3.0, 30.0], size=shape)).astype(np.int64)
    algo = DAWA()
    estimate = algo.run(counts, _budget(eps, seed))
    plan = estimate.plan
    order = np.arange(counts.size) if plan.order is None else plan.order
    along = estimate.groups.ravel()[order]
    assert estimate.groups.shape == counts.shape and estimate.variance.shape == counts.shape
    assert np.array_equal(along, np.repeat(np.arange(plan.sizes.size), plan.sizes))
    for refit in (estimate, algo.refit(estimate, total_measurement(float(counts.sum()) + 7, 40.0))):
        covariance = dense_bucket_covariance(plan, refit.measurements)
        stated = refit.variance.ravel()[order] * np.repeat(plan.sizes, plan.sizes) ** 2
        assert np.allclose(stated, np.repeat(np.diag(covariance), plan.sizes), rtol=1e-9, atol=0)
        assert np.array_equal(refit.groups, estimate.groups) and refit.no_interval is None
        values = refit.values.ravel()[order]
        assert all(np.ptp(values[along == b]) < 1e-9 for b in range(plan.sizes.size))
    assert np.all(refit.variance < estimate.variance)  # the total is one more measurement of every bucket


def test_the_nonnegative_fit_has_no_interval_and_says_why():
    """fit=nnls is not linear in the noisy sums: no variance, no groups, and the reason; past its bucket limit the
    fit is least squares again and has its interval."""
    x = np.zeros(256, dtype=np.int64)
    x[:8] = 50
    estimate = DAWA(fit="nnls").run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(4)))
    assert estimate.variance is None and estimate.halfwidth is None and estimate.groups is None
    assert "not linear" in estimate.no_interval
    refit = DAWA(fit="nnls").refit(estimate, total_measurement(float(x.sum()), 1.0))
    assert refit.variance is None and refit.no_interval == estimate.no_interval




def coverage(estimate, counts) -> float:
    """The share of cells whose 95 % interval (values ± 1.96 sd, or ± halfwidth) covers what it claims: the
    cell's count, or with groups its bucket's true total ÷ the bucket's cells."""
    truth = counts.astype(np.float64)
    if estimate.groups is not None:
        g = estimate.groups.ravel()
        truth = (np.bincount(g, weights=truth.ravel()) / np.bincount(g))[g].reshape(counts.shape)
    half = estimate.halfwidth if estimate.halfwidth is not None else 1.959964 * np.sqrt(estimate.variance)
    return float(np.mean(np.abs(estimate.values - truth) <= half + 1e-9))


def bucket_shares(counts, groups) -> np.ndarray:
    """Each cell's bucket's true total ÷ the bucket's cells: what an interval with ``groups`` claims to cover."""
    g = groups.ravel()
    return (np.bincount(g, weights=counts.ravel().astype(np.float64)) / np.bincount(g))[g].reshape(counts.shape)


@pytest.mark.parametrize("shape, records, eps", [((256,), 1_000, Fraction(1, 10)), ((256,), 100_000, Fraction(1)),
                                                 ((32, 32), 10_000, Fraction(1, 2))])
def test_intervals_cover_the_bucket_shares_given_the_partition(shape, records, eps):
    """The partition's noise is drawn apart from the bucket counts' (its own share of ε), so the interval holds
    given the partition: for the partitions of 4 seeded runs on a DPBench-like table, 2,000 replicated draws of
    the bucket tree's noise each (the bucket counts measured as a run measures them, the same tree), and the
    normal 95 % intervals of the inferred cells cover their buckets' shares in 93–97.5 % of (cell, draw) pairs.
    The draws are independent; the pooled share's standard error, taken from the spread of the draws' shares, is
    asserted below 0.25 % (0.17 % at the fewest buckets, 1,000 records), so a correct interval
    (95 %, or 93.7 % where a bucket's count is one Laplace draw) leaves the band with probability below 1 %, and
    an interval 15 % too narrow (coverage below 91 %) fails with probability above 0.99."""
    counts = (spiky_histogram(math.prod(shape), records, 11).reshape(shape))
    algo, shares = DAWA(), []
    for seed in range(4):
        plan = algo.run(counts, _budget(eps, seed)).plan
        line = counts.ravel() if plan.order is None else counts.ravel()[plan.order]
        ratio = algo.in_force(counts.ndim).params["ratio"]
        _, part = ReplicatedBudget(eps, SeededBits(100 + seed), 2000, []).split([ratio, 1 - ratio])
        tree, measurements, _ = DAWA.measure_bucket_tree(np.add.reduceat(line, np.r_[0, np.cumsum(plan.sizes)[:-1]]),
                                                         part, plan.sizes, algo.in_force(counts.ndim).stage2(counts.ndim))
        assert tree.sizes == plan.tree.sizes
        replicated = algo.infer(plan, measurements)
        assert replicated.values.shape == (2000,) + shape
        hit = np.abs(replicated.values - bucket_shares(counts, replicated.groups)) <= 1.959964 * np.sqrt(replicated.variance)
        shares.append(hit.reshape(2000, -1).mean(axis=1))
    shares = np.concatenate(shares)
    assert plan.sizes.size >= 3
    assert np.std(shares) / np.sqrt(shares.size) < 0.0025
    assert 0.93 <= shares.mean() <= 0.975, shares.mean()


@pytest.mark.slow
def test_whole_runs_cover_the_bucket_shares():
    """Whole runs (partition and bucket counts drawn afresh each time, 100,000 records, ε = 1): over 300 runs on a
    DPBench-like table of 64 cells the pooled share of cells whose interval covers its bucket's share lies in
    93–97.5 %.  The runs' standard error (from their spread) is asserted below 0.5 %; with a true coverage of
    94–95 % the band is at least 2 standard errors away (false alarm below 5 %, below 1e-3 at 95 %)."""
    counts = spiky_histogram(64, 100_000, 11)
    pool = NoisePool(SeededBits(23))
    shares = [coverage(DAWA().run(counts, PooledBudget(Fraction(1), pool=pool)), counts) for _ in range(300)]
    assert np.std(shares) / np.sqrt(len(shares)) < 0.005
    assert 0.93 <= np.mean(shares) <= 0.975, np.mean(shares)
