"""AHP (dphist/algorithms/ahp.py): the greedy clustering rule, the budget split, the stated sensitivities, the
noise of both measurements, clusters chosen from noisy values only, the intervals (exact variance, coverage of
the clusters' shares), accuracy at low signal, zCDP, bad input."""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np
import pytest

from dphist.algorithms.ahp import AHP, greedy_clusters
from dphist.algorithms.identity import Identity
from dphist_audit.ahp_cases import TrueCountAHP
from dphist_audit.replication import NoisePool, PooledBudget
from dphist.errors import UsageError
from dphist.privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_halfwidth,
                            discrete_laplace_variance)

from conftest import SHARED
from interval_checks import covered_share, dpbench_like, standardised

DPBENCH = SHARED / "data" / "dpbench" / "1D"
# False alarms: each noise check below uses a z bound of 4.5 on a statistic that is close to normal (one-sided
# tail 3.4e-6 per check).
Z = 4.5


def traced_run(algo, counts, epsilon, seed, budget_class=PrivacyBudget):
    trace: list = []
    budget = budget_class(epsilon, bits=SeededBits(seed), trace=trace)
    estimate = algo.run(counts, budget)
    return estimate, budget, [d.values for d in trace]


def plain_greedy(values, c):
    """The rule of the module docstring, transcribed with plain loops (1-based v, v[0] unused)."""
    v = [0.0] + [float(a) for a in values]
    m = len(values)

    def err(i, j):
        part = v[i:j + 1]
        mean = sum(part) / len(part)
        return sum((a - mean) ** 2 for a in part) + c / len(part)

    def star(j):
        best, last1, last2 = c, 0.0, c
        bound = c / (m - j + 2) ** 2
        for ell in range(j + 1, m + 1):
            length = ell - j + 1
            e1 = (v[j] - sum(v[j:ell + 1]) / length) ** 2
            e2 = c / length ** 2
            if e1 - last1 >= last2 - bound:
                break
            best = min(best, e1 + e2)
            last1, last2 = e1, e2
        return best

    edges, i, last = [0], 1, err(1, 1)
    for j in range(2, m + 1):
        now = err(i, j)
        if now >= last + star(j):
            edges.append(j - 1)
            i, last = j, err(j, j)
        else:
            last = now
    return edges + [m]


# -- the clustering rule --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_greedy_clusters_follow_the_rule(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 160))
    # Runs of zeros and of repeated values (ties, long scans through err*'s numpy chunks) beside spread values.
    values = np.sort(np.where(rng.random(m) < 0.5, 0, rng.integers(1, 60, m) * rng.integers(1, 4, m)))
    c = float(rng.choice([2.0, 50.0, 800.0]))
    got = greedy_clusters(values.astype(np.float64), c).tolist()
    assert got == plain_greedy(values, c)


def test_greedy_clusters_split_levels_only_when_the_noise_is_cheap():
    values = np.array([0.0] * 6 + [100.0] * 6)
    assert greedy_clusters(values, 2.0).tolist() == [0, 6, 12]  # cheap totals: the two levels apart
    assert greedy_clusters(values, 1e9).tolist() == [0, 12]  # totals so noisy that one cluster is best
    assert greedy_clusters(np.zeros(300), 2.0).tolist() == [0, 300]  # ties never split
    assert greedy_clusters(np.array([5.0]), 2.0).tolist() == [0, 1]


# -- budget, sensitivities, noise ------------------------------------------------------------------------------------

def test_budget_is_spent_exactly_and_split_by_ratio():
    x = np.array([0, 0, 3, 40, 41, 0, 7, 90, 0, 1, 39, 0, 0, 2, 88, 0], dtype=np.int64)
    for ratio in (Fraction(17, 20), Fraction(1, 2)):
        est, budget, _ = traced_run(AHP(ratio=ratio), x, Fraction(1, 3), 4)
        cells, totals = budget.measurements
        assert budget.spent == budget.amount == Fraction(1, 3)
        assert cells.epsilon == ratio / 3 and totals.epsilon == (1 - ratio) / 3
        assert cells.sensitivity == totals.sensitivity == 1
        assert cells.scale == 1 / cells.epsilon and totals.scale == 1 / totals.epsilon
        assert cells.queries == 16 and totals.queries == est.choices["clusters"]


def test_default_options_are_the_references():
    assert AHP().params == {"ratio": Fraction(17, 20), "eta": Fraction(7, 20)}


class FixedClusters(AHP):
    """AHP whose clusters are fixed in advance, so that neighbouring tables measure the same cluster totals."""

    partition = (np.array([3, 0, 5, 1, 7, 2, 6, 4]), np.array([0, 3, 4, 8]))

    def clusters(self, noisy, cutoff, c):
        return self.partition


def test_each_stated_sensitivity_holds_on_unit_changes():
    x = np.array([3, 0, 5, 1, 0, 2, 4, 1], dtype=np.int64)
    _, _, (cells, totals) = traced_run(FixedClusters(), x, Fraction(1), 9)
    for i in range(x.size):
        for step in (1, -1):
            y = x.copy()
            y[i] += step
            if y[i] < 0:
                continue
            _, _, (cells_y, totals_y) = traced_run(FixedClusters(), y, Fraction(1), 9)  # same seed: same noise
            assert np.abs(cells_y - cells).sum() == 1  # Δ = 1 for the cells
            assert np.abs(totals_y - totals).sum() == 1  # Δ = 1 for disjoint cluster totals


class OneCluster(AHP):
    """AHP with every cell in one cluster: the cell noise is drawn before the clusters are chosen, so its runs
    draw the very cell noise AHP draws on the same seed, without AHP's clustering of thousands of cells."""

    def clusters(self, noisy, cutoff, c):
        return np.arange(noisy.size), np.array([0, noisy.size])


def test_cell_noise_has_the_discrete_laplace_variance():
    x = np.zeros(4096, dtype=np.int64)
    x[::7] = 5
    epsilon = Fraction(1, 2)
    small = x[:64]
    assert np.array_equal(traced_run(AHP(), small, epsilon, 0)[2][0], traced_run(OneCluster(), small, epsilon, 0)[2][0])
    noise = np.concatenate([traced_run(OneCluster(), x, epsilon, seed)[2][0] - x for seed in range(6)])
    sigma2 = discrete_laplace_variance(1 / (epsilon * Fraction(17, 20)))
    # Var of the sample variance ≈ (μ₄ − σ⁴)/N with μ₄ ≈ 6σ⁴ (Laplace).
    assert abs(noise.var() - sigma2) < Z * sigma2 * math.sqrt(5 / noise.size)
    assert abs(noise.mean()) < Z * math.sqrt(sigma2 / noise.size)


def test_cluster_totals_are_of_the_noisy_clusters_with_the_stated_noise():
    """The second measurement's queries are the totals of the clusters the noisy cells give (recomputed here from
    the traced cells), and their noise has the discrete Laplace variance of ε₂.  The 1,500 runs draw from one pool
    of exact discrete Laplace noise (the audit's: a plain budget's distribution, drawn in bulk)."""
    x = np.array([0, 0, 1, 9, 10, 0, 30, 31, 0, 2, 0, 12, 29, 0, 0, 11], dtype=np.int64)
    epsilon, algo = Fraction(1), AHP()
    scale1, scale2 = 1 / (epsilon * Fraction(17, 20)), 1 / (epsilon * Fraction(3, 20))
    pool, noise = NoisePool(SeededBits(0)), []
    for _ in range(1500):
        trace: list = []
        algo.run(x, PooledBudget(epsilon, pool=pool, trace=trace))
        cells, totals = (d.values for d in trace)
        order, edges = algo.clusters(cells, algo.threshold(16, scale1), 2 * float(scale2) ** 2)
        noise.append(totals - np.add.reduceat(x[order], edges[:-1]))
    noise = np.concatenate(noise)
    sigma2 = discrete_laplace_variance(scale2)
    assert noise.size > 1500
    assert abs(noise.var() - sigma2) < Z * sigma2 * math.sqrt(5 / noise.size)


def test_the_cluster_check_above_catches_clusters_read_off_the_true_counts():
    """The recomputation in the test above can fail: on a table whose true counts are clustered differently from
    most of their noisy versions, the true-count mutant measures a different number of totals."""
    x = np.array([0, 0, 0, 0, 2, 2, 6, 6], dtype=np.int64)
    epsilon, algo = Fraction(1), AHP()
    scale1, scale2 = 1 / (epsilon * Fraction(17, 20)), 1 / (epsilon * Fraction(3, 20))
    mismatches = 0
    for seed in range(50):
        _, _, (cells, totals) = traced_run(TrueCountAHP(), x, epsilon, seed)
        _, edges = algo.clusters(cells, algo.threshold(8, scale1), 2 * float(scale2) ** 2)
        mismatches += totals.size != edges.size - 1
    assert mismatches >= 10  # measured: 38 of 50


# -- public structure, the threshold, the release ------------------------------------------------------------------

def test_structure_and_threshold_depend_on_shape_options_and_budget_only():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 50, 64), np.zeros(64, dtype=np.int64)
    ea, _, _ = traced_run(AHP(), a, Fraction(1, 10), 1)
    eb, _, _ = traced_run(AHP(), b, Fraction(1, 10), 2)
    assert ea.structure == eb.structure
    assert ea.structure["threshold"] == pytest.approx(0.35 * math.log(64) * 10 / 0.85)


def test_noisy_cells_at_or_below_the_threshold_count_as_zero():
    algo = AHP()
    noisy = np.array([-5, 3, 4, 5, 100, 0], dtype=np.int64)
    order, edges = algo.clusters(noisy, 4.0, 1e9)  # one cluster: the order alone shows the thresholded values
    assert order.tolist() == [0, 1, 2, 5, 3, 4]  # -5, 3, 4 and 0 all became 0 (ties by index)


def test_release_spreads_each_noisy_total_evenly_over_its_cluster():
    x = np.array([0, 0, 3, 40, 41, 0, 7, 90, 0, 1, 39, 0, 0, 2, 88, 0], dtype=np.int64).reshape(4, 4)
    est, _, (cells, totals) = traced_run(AHP(), x, Fraction(2), 5)
    assert est.values.shape == (4, 4)
    assert est.values.sum() == pytest.approx(totals.sum())
    assert len(np.unique(np.round(est.values, 9))) <= est.choices["clusters"] == totals.size


# -- accuracy, zCDP, bad input --------------------------------------------------------------------------------------

@pytest.mark.skipif(not DPBENCH.exists(), reason="DPBench data sets not present")
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["ADULTFRANK.n4096.npy", "PATENT.n4096.npy"])
def test_beats_identity_at_low_signal(name, seed):
    """AHP's mean prefix error below 0.6 of identity's on the same seed, one seed per test (AHP's clustering of
    4,096 cells takes about a second a run), so each seed must pass on its own."""
    p = np.load(DPBENCH / name).astype(np.float64)
    x = np.random.default_rng(0).multinomial(1000, p / p.sum()).astype(np.int64)
    eps = Fraction(1, 10)

    def prefix_error(algo, seed):
        values = algo.run(x, PrivacyBudget(eps, bits=SeededBits(seed))).values
        return np.abs(np.cumsum(values) - np.cumsum(x)).mean()

    ours, identity = prefix_error(AHP(), seed), prefix_error(Identity(), seed)
    assert ours < 0.6 * identity  # measured: 0.16 and 0.10 (ADULT), 0.12 and 0.30 (PATENT)


def test_runs_on_a_zcdp_budget():
    x = np.array([0, 0, 3, 40, 41, 0, 7, 90], dtype=np.int64)
    est, budget, _ = traced_run(AHP(), x, Fraction(1, 50), 2, ZCDPBudget)
    assert budget.spent == budget.amount == Fraction(1, 50)
    cells, totals = budget.measurements
    assert cells.rho == Fraction(17, 1000) and totals.rho == Fraction(3, 1000)
    assert cells.epsilon ** 2 / 2 <= cells.rho
    assert est.values.shape == (8,)


@pytest.mark.parametrize("options", [{"ratio": 0}, {"ratio": 1}, {"ratio": "1.5"}, {"ratio": "x"}, {"eta": -1},
                                     {"eta": "nan"}, {"eta": True}, {"height": 3}])
def test_bad_options_give_one_clear_line(options):
    with pytest.raises(UsageError) as info:
        AHP(**options)
    assert "\n" not in str(info.value) and "ahp" in str(info.value)


def test_empty_table_is_refused():
    with pytest.raises(UsageError, match="at least one cell"):
        AHP().check_shape((0,))
    AHP().check_shape((3, 5, 2))  # any number of axes


# -- intervals: each cell's covers its cluster's share ----------------------------------------------------------------

def test_interval_is_the_cluster_totals_noise_spread_over_the_cluster():
    """groups name the clusters the traced noisy cells give; a cell of a cluster of k cells has variance v/k² and
    half-width q/k, v and q the variance and exact 95 % half-width of one noisy total (ε₂ = 3/20)."""
    x = np.array([0, 0, 1, 9, 10, 0, 30, 31, 0, 2, 0, 12, 29, 0, 0, 11], dtype=np.int64)
    algo = AHP()
    est, budget, (cells, totals) = traced_run(algo, x, Fraction(1), 3)
    order, edges = algo.clusters(cells, algo.threshold(16, 1 / Fraction(17, 20)), 2 * float(1 / Fraction(3, 20)) ** 2)
    record = budget.measurements[1]
    assert record.halfwidth() == discrete_laplace_halfwidth(1 / Fraction(3, 20))
    assert est.no_interval is None and np.unique(est.groups).size == totals.size == edges.size - 1
    for t in range(edges.size - 1):
        members = order[edges[t]:edges[t + 1]]
        k = members.size
        assert np.unique(est.groups[members]).size == 1
        assert np.all(np.isin(est.groups, est.groups[members]) == np.isin(np.arange(16), members))
        assert est.variance[members] == pytest.approx(record.noise_variance / k ** 2)
        assert est.halfwidth[members] == pytest.approx(record.halfwidth() / k)
        assert est.values[members] == pytest.approx(totals[t] / k)


@pytest.fixture(scope="module")
def ahp_runs():
    """400 runs of AHP on one DPBench-like table of 64 cells (10,000 records, ε = 1/2: about 20 clusters a run),
    on pooled exact noise."""
    x = dpbench_like(64, 10_000, 5)
    pool = NoisePool(SeededBits(11))
    return x, [AHP().run(x, PooledBudget(Fraction(1, 2), pool=pool, trace=None)) for _ in range(400)]


def test_stated_variance_is_the_variance_of_each_clusters_share(ahp_runs):
    """z = (share − true share) / stated sd, one per (run, cluster): the clusters' totals are measured afresh, so
    given the clusters E[z²] = 1 exactly.  About 6,800 values of z; the bound is 4.5 standard errors of their
    mean (measured from them: 2.9 %), a false alarm below 1e-5; it rejects a variance off by about 13 % (a
    cluster's variance v/k instead of v/k² is off by k)."""
    x, runs = ahp_runs
    z2 = np.concatenate([standardised(e, x) for e in runs]) ** 2
    assert z2.size > 5_000
    assert abs(z2.mean() - 1) < 4.5 * z2.std() / math.sqrt(z2.size)


def test_intervals_cover_the_cluster_shares(ahp_runs):
    """The share of the cells whose interval holds their cluster's true share, over the 400 runs: at least 95 %
    by construction (the exact half-width), a little more by the noise's discreteness (measured 95.2 %).  The
    standard error over runs is 0.36 %, so the 93-97.5 % band is 6 standard errors from the measured value on
    either side (a false alarm below 1e-8)."""
    x, runs = ahp_runs
    per_run = np.array([covered_share(e, x) for e in runs])
    assert per_run.std() / math.sqrt(per_run.size) < 0.006
    assert 0.93 <= per_run.mean() <= 0.975
