"""PrivTree (dphist/algorithms/privtree.py): budget, the structure's exact privacy loss, the noise, public plan,
the intervals (exact variance, coverage of the leaves' shares), accuracy, zCDP and bad options."""

from __future__ import annotations

import decimal
from fractions import Fraction
import math

import numpy as np
import pytest

from dphist.algorithms.identity import Identity
from dphist.algorithms.privtree import PrivTree, bias, box_counts, full_tree, count_halfwidth, structure_sensitivity
from dphist.errors import UsageError
from dphist.privacy.measurement import GAUSSIAN, Measurement
from dphist.privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_halfwidth,
                            discrete_laplace_halfwidth, discrete_laplace_variance)

from conftest import SHARED
from dphist_audit.replication import NoisePool, PooledBudget
from interval_checks import covered_share, dpbench_like, standardised

DPBENCH = SHARED / "data" / "dpbench" / "1D"


def _run(counts, epsilon=Fraction(1), seed=0, trace=None, **options):
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    return PrivTree(**options).run(np.asarray(counts, dtype=np.int64), budget), budget


@pytest.mark.parametrize("shape, beta", [((64,), 2), ((16, 8), 4), ((4, 4, 2), 8)])
def test_budget_is_spent_exactly_and_split_as_documented(shape, beta):
    counts = np.arange(int(np.prod(shape))).reshape(shape) % 7
    epsilon = Fraction(1, 3)
    estimate, budget = _run(counts, epsilon)
    assert budget.spent == budget.amount == epsilon
    tree, leaves = budget.measurements
    assert tree.epsilon == leaves.epsilon == epsilon / 2
    # λ = (2β − 1)/(β − 1)/ε₁ exactly, and one noise value per node of the full tree (a public number)
    assert tree.scale == Fraction(2 * beta - 1, beta - 1) / (epsilon / 2)
    assert tree.queries == sum(level[0].shape[0] for level in full_tree(shape))
    assert leaves.sensitivity == 1 and leaves.scale == 1 / (epsilon / 2)
    assert leaves.queries == estimate.choices["leaves"]
    _, other = _run(counts, epsilon, structure_share=Fraction(1, 4))
    assert [m.epsilon for m in other.measurements] == [epsilon / 4, 3 * epsilon / 4]


@pytest.mark.parametrize("shape", [(1,), (7,), (64,), (5, 3), (8, 8), (3, 4, 5)])
def test_full_tree_partitions_every_level_and_one_record_moves_one_node_per_level_by_one(shape):
    levels = full_tree(shape)
    n = int(np.prod(shape))
    for k, (lo, hi, parent) in enumerate(levels):
        if k:
            assert np.all(np.diff(parent) >= 0) and np.all(np.bincount(parent) <= 1 << len(shape))
    for cell in range(n):
        unit = np.zeros(n, dtype=np.int64)
        unit[cell] = 1
        unit = unit.reshape(shape)
        path = 0
        for k, (lo, hi, _) in enumerate(levels):
            moved = box_counts(unit, lo, hi)
            # the nodes of a level are disjoint: one record changes at most one node count, by exactly 1
            assert moved.max() <= 1 and moved.sum() <= 1
            path += moved.sum()
        assert path >= 1
    # the deepest nodes are single cells and every cell is one of them once (the leaves' Δ = 1)
    covered = np.zeros(shape, dtype=np.int64)
    for lo, hi, _ in levels:
        for a, b in zip(lo, hi):
            if np.all(b - a == 1):
                covered[tuple(slice(x, y) for x, y in zip(a, b))] += 1
    assert np.all(covered == 1)


def _log_tails(m: int, lam: float) -> tuple[float, float]:
    """(ln P(Z >= m), ln P(Z < m)) for discrete Laplace of scale lam (ratio α = e^(−1/lam)), without underflow."""
    alpha = math.exp(-1 / lam)
    if m >= 1:
        return -m / lam - math.log1p(alpha), math.log1p(-math.exp(-m / lam) / (1 + alpha))
    return math.log1p(-math.exp(-(1 - m) / lam) / (1 + alpha)), -(1 - m) / lam - math.log1p(alpha)


def _worst_path_loss(path_counts, lam: Fraction, delta: Fraction, theta: Fraction = Fraction(0)) -> float:
    """The exact largest |ln P[T | D′]/P[T | D]| over released trees T, for a record on a path whose node counts
    in D are ``path_counts`` (root first; D′ adds one to each); the last node is a forced leaf (one cell)."""
    def log_split(c, depth):  # (ln P(split), ln P(no split)) of a node of count c at this depth
        b = max(theta - delta, Fraction(c) - depth * delta)
        return _log_tails(math.floor(theta - b) + 1, float(lam))

    splits = [(log_split(c + 1, i), log_split(c, i)) for i, c in enumerate(path_counts)]  # D′ and D, per node
    worst = 0.0
    for up in (True, False):  # D′ over D, then D over D′
        prefix = 0.0
        for i, ((p, not_p), (q, not_q)) in enumerate(splits):
            if not up:
                p, not_p, q, not_q = q, not_q, p, not_p
            if i == len(path_counts) - 1:  # a single cell: a forced leaf, no loss
                worst = max(worst, prefix)
                break
            worst = max(worst, prefix + not_p - not_q)  # T stops at this node
            prefix += p - q
    return worst


def test_structure_loss_is_at_most_epsilon_1_on_every_path_and_the_bias_is_what_keeps_it():
    """Exact privacy loss of the split decisions along a record's path (the other nodes cancel), over a sweep of
    path counts; with the bias removed the same computation exceeds ε₁ (so the test can fail)."""
    height = 12  # a 4096-cell column: 13 nodes on every path
    for beta in (2, 4, 8):
        for eps1 in (Fraction(1, 20), Fraction(1, 2), Fraction(2)):
            lam = structure_sensitivity(beta) / eps1
            delta = bias(lam, beta)
            worst = 0.0
            rng = np.random.default_rng(beta)
            for top in range(0, int(20 * lam) + 40, max(1, int(lam // 8))):
                # all the mass on one path (counts equal down the path), and decreasing random paths
                worst = max(worst, _worst_path_loss([top] * (height + 1), lam, delta))
                cuts = np.sort(rng.integers(0, top + 1, height))[::-1]
                worst = max(worst, _worst_path_loss([top, *cuts.tolist()], lam, delta))
            assert worst <= float(eps1) * (1 + 1e-9), (beta, eps1, worst)
            assert worst > 0.5 * float(eps1)  # the sweep reaches the interesting region
            unbiased = max(_worst_path_loss([c] * (height + 1), lam, Fraction(0)) for c in range(0, 5))
            assert unbiased > 1.5 * float(eps1)


def test_bias_is_a_rational_upper_bound_on_the_discrete_condition():
    decimal.getcontext().prec = 60
    for beta in (2, 4, 8):
        for lam in (Fraction(3, 2), Fraction(6), Fraction(60), Fraction(7000, 3)):
            delta = bias(lam, beta)
            d = decimal.Decimal
            exact = d(lam.numerator) / d(lam.denominator)
            needed = exact * (1 + (beta - 1) * (1 / exact).exp()).ln()
            assert d(delta.numerator) / d(delta.denominator) >= needed
            assert delta - Fraction(needed) < Fraction(1, 10**5)  # rounded up by little
            assert float(lam) * math.log(beta) < float(delta) < float(lam) * math.log(beta) + 1


def test_split_test_is_exact():
    """The integer evaluation of max(θ − δ, c − kδ) + Z > θ against Fractions, on values at the boundary."""
    algo = PrivTree()
    rng = np.random.default_rng(1)
    delta, theta = Fraction(10522729, 250000), Fraction(5, 2)
    for depth in (0, 1, 3, 11):
        counts = rng.integers(0, 600, 4000)
        noise = rng.integers(-300, 300, 4000)
        got = algo.split_tests(counts, noise, depth, delta, theta)
        want = [max(theta - delta, int(c) - depth * delta) + int(z) > theta for c, z in zip(counts, noise)]
        assert got.tolist() == want
    # exactly at the threshold: c − kδ + Z = θ does not split, one more count does
    c = np.array([int(theta + 2 * delta) + 1])
    z = np.array([0])
    exact_hit = Fraction(c[0]) - 2 * delta
    assert algo.split_tests(c, z, 2, delta, exact_hit) == [False]
    assert algo.split_tests(c + 1, z, 2, delta, exact_hit) == [True]


def test_structure_noise_has_the_discrete_laplace_variance_of_scale_lambda():
    """The traced split-test noise (5 runs × 8191 nodes) against 2α/(1 − α)².  The sample variance of N values
    has relative sd sqrt((κ − 1)/N) with kurtosis κ = 6: 1.1 % here; 6 sd (6.6 %) is a false alarm < 1e-8."""
    values = []
    for seed in range(5):
        trace = []
        _run(np.zeros(4096), Fraction(1, 10), seed, trace)
        values.append(trace[0].values)
        assert float(trace[0].scales) == 60.0
    values = np.concatenate(values)
    expected = discrete_laplace_variance(Fraction(60))
    assert abs(values.var() / expected - 1) < 0.066
    assert abs(values.mean()) < 6 * math.sqrt(expected / values.size)


def test_leaf_noise_has_the_discrete_laplace_variance_of_scale_1_over_epsilon_2():
    """Leaves of one cell (ε₂ = 1/2, scale 2): 64 cells of a million records each split down to single cells (a
    count 10⁵ scales above the threshold always splits), so each run has 64 leaves of one cell, whatever their
    order, and 47 runs give 3,008 noisy counts.  Relative sd of the sample variance sqrt(5/3008) = 4.1 %; 6 sd =
    24.4 % (false alarm < 1e-8)."""
    counts, noise = np.full(64, 10**6), []
    for seed in range(47):
        trace: list = []
        estimate, budget = _run(counts, Fraction(1), seed, trace)
        assert estimate.choices["leaves"] == 64 and budget.measurements[1].scale == 2
        noise.append(trace[1].values - 10**6)
    noise = np.concatenate(noise)
    expected = discrete_laplace_variance(Fraction(2))
    assert abs(np.var(noise) / expected - 1) < 6 * math.sqrt(5 / noise.size)


def test_plan_and_public_structure_do_not_depend_on_the_data():
    a, budget_a = _run(np.zeros((16, 16)), Fraction(1), 3)
    b, budget_b = _run(np.random.default_rng(0).integers(0, 50, (16, 16)), Fraction(1), 3)
    assert a.structure == b.structure
    tree_a, tree_b = budget_a.measurements[0], budget_b.measurements[0]
    assert (tree_a.queries, tree_a.scale, tree_a.epsilon) == (tree_b.queries, tree_b.scale, tree_b.epsilon)
    assert a.choices["leaves"] == 1 or a.choices != b.choices  # empty data rarely splits at all


def test_decisions_follow_the_biased_noisy_counts():
    """Large counts at ε = 10 split down to single cells where the data is; empty halves stop at once."""
    counts = np.zeros(64, dtype=np.int64)
    counts[:8] = 10_000
    estimate, _ = _run(counts, Fraction(10), 4)
    assert np.all(np.abs(estimate.values[:8] - 10_000) < 50)
    assert estimate.choices["leaves"] <= 16
    assert abs(estimate.values[8:].sum()) < 100


def test_runs_under_zcdp():
    counts = np.random.default_rng(2).integers(0, 30, (32, 32))
    budget = ZCDPBudget(Fraction(1, 50), bits=SeededBits(5))
    estimate = PrivTree().run(counts, budget)
    assert budget.spent == budget.amount
    tree, leaves = budget.measurements
    assert tree.rho == leaves.rho == Fraction(1, 100)
    assert leaves.mechanism != tree.mechanism  # the leaves are measured with the discrete Gaussian
    assert estimate.values.shape == counts.shape


@pytest.mark.parametrize("options", [{"structure_share": 1}, {"structure_share": "x"}, {"theta": "abc"},
                                     {"theta": float("nan")}, {"height": 3}])
def test_bad_options_are_refused(options):
    with pytest.raises(UsageError):
        PrivTree(**options)


@pytest.mark.parametrize("shape", [(2, 2, 2, 2), ()])
def test_unsupported_shapes_are_refused(shape):
    with pytest.raises(UsageError, match="privtree"):
        PrivTree().check_shape(shape)


def _prefix_error(values, truth, scale):
    return float(np.mean(np.abs(np.cumsum(values) - np.cumsum(truth)))) / scale


@pytest.mark.skipif(not DPBENCH.exists(), reason="../shared/data/dpbench is absent")
def test_more_accurate_than_identity_at_low_signal():
    """HEPTH and INCOME at scale 1000, ε = 0.1 (4 samples each): the scaled prefix error beats identity's."""
    for name in ("HEPTH.n4096.npy", "INCOME.n4096.npy"):
        shape = np.load(DPBENCH / name).astype(np.float64)
        ours, base = [], []
        for seed in range(4):
            rng = np.random.default_rng(seed)
            truth = rng.multinomial(1000, shape / shape.sum())
            estimate = PrivTree().run(truth, PrivacyBudget(Fraction(1, 10), bits=SeededBits(seed)))
            ours.append(_prefix_error(estimate.values, truth, 1000))
            plain = Identity().run(truth, PrivacyBudget(Fraction(1, 10), bits=SeededBits(seed)))
            base.append(_prefix_error(plain.values, truth, 1000))
        assert np.mean(ours) < 0.5 * np.mean(base), (name, ours, base)


# -- intervals: each cell's covers its leaf's share -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(64,), (8, 8)])
def test_interval_is_the_leaf_counts_noise_spread_over_the_leaf(shape):
    """groups name the leaves (boxes whose cells share one value); a cell of a leaf of k cells has variance v/k²
    and half-width q/k, v and q the variance and exact 95 % half-width of one noisy leaf count (ε₂ = 1/2)."""
    x = dpbench_like(64, 2_000, 1).reshape(shape)
    trace: list = []
    estimate, budget = _run(x, Fraction(1), 2, trace)
    record = budget.measurements[1]
    assert record.halfwidth() == discrete_laplace_halfwidth(Fraction(2)) and estimate.no_interval is None
    leaves = np.unique(estimate.groups)
    assert leaves.size == estimate.choices["leaves"] == trace[1].values.size
    for leaf in leaves:
        cells = estimate.groups == leaf
        k = int(cells.sum())
        assert np.unique(estimate.values[cells]).size == 1
        assert estimate.variance[cells] == pytest.approx(record.noise_variance / k ** 2)
        assert estimate.halfwidth[cells] == pytest.approx(record.halfwidth() / k)
        assert estimate.values[cells][0] * k == pytest.approx(float(np.round(estimate.values[cells][0] * k)))


def test_interval_under_zcdp_is_the_discrete_gaussians():
    counts = np.random.default_rng(2).integers(0, 30, (16, 16))
    budget = ZCDPBudget(Fraction(1, 50), bits=SeededBits(5))
    estimate = PrivTree().run(counts, budget)
    leaves = budget.measurements[1]
    k = np.bincount(estimate.groups.ravel())[estimate.groups]
    assert np.allclose(estimate.halfwidth * k, discrete_gaussian_halfwidth(leaves.sigma2))
    assert np.allclose(estimate.variance * k * k, leaves.noise_variance)


@pytest.mark.parametrize("sigma2", [Fraction(10**8 + 1), Fraction(10**10), Fraction(3 * 10**11, 7)])
def test_half_width_of_a_very_wide_gaussian_is_its_normal_quantile_rounded_up(sigma2):
    """Beyond σ² = 10⁸ the leaves' half-width is ⌈1.96·sd⌉ (the exact one's tail sum is slow there): never
    narrower than the exact one, and at most one count wider."""
    record = Measurement("leaves", GAUSSIAN, None, None, None, sigma2=sigma2, l2_squared=Fraction(1))
    exact = discrete_gaussian_halfwidth(sigma2)
    assert exact <= count_halfwidth(record) <= exact + 1


@pytest.fixture(scope="module")
def privtree_runs():
    """400 runs of PrivTree on one DPBench-like table of 64 cells (10,000 records, ε = 1/2: about 57 leaves a
    run), on pooled exact noise."""
    x = dpbench_like(64, 10_000, 5)
    pool = NoisePool(SeededBits(11))
    return x, [PrivTree().run(x, PooledBudget(Fraction(1, 2), pool=pool, trace=None)) for _ in range(400)]


def test_stated_variance_is_the_variance_of_each_leafs_share(privtree_runs):
    """z = (share − true share) / stated sd, one per (run, leaf): the leaf counts are measured afresh, so given
    the tree E[z²] = 1 exactly.  About 23,000 values of z; the bound is 4.5 standard errors of their mean
    (measured from them: 1.5 %), a false alarm below 1e-5; it rejects a variance off by about 7 %."""
    x, runs = privtree_runs
    z2 = np.concatenate([standardised(e, x) for e in runs]) ** 2
    assert z2.size > 15_000
    assert abs(z2.mean() - 1) < 4.5 * z2.std() / math.sqrt(z2.size)


def test_intervals_cover_the_leaf_shares(privtree_runs):
    """The share of the cells whose interval holds their leaf's true share, over the 400 runs: at least 95 % by
    construction (the exact half-width), a little more by the noise's discreteness (measured 95.5 %, standard
    error over runs 0.15 %): the 93-97.5 % band is 13 standard errors away (no false alarm in practice)."""
    x, runs = privtree_runs
    per_run = np.array([covered_share(e, x) for e in runs])
    assert per_run.std() / math.sqrt(per_run.size) < 0.004
    assert 0.93 <= per_run.mean() <= 0.975
