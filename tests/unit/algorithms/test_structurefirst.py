"""StructureFirst: a public plan, exact scores of bounded sensitivity, exponential-mechanism draws with the exact
distribution, and noisy bucket totals that spend the rest of the budget.

χ² tests use fixed seeds and p > 1e-6 (false alarm below 1e-6 each).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dphist
from dphist.algorithms import get_algorithm
from dphist.algorithms import structurefirst as sf
from dphist.errors import UsageError
from dphist_audit.replication import NoisePool, PooledBudget
from dphist.privacy import PrivacyBudget, SeededBits, discrete_laplace_tail, discrete_laplace_variance
from dphist.privacy import budget as kernel
from interval_checks import spiky_histogram


def traced_run(algo, counts, epsilon, bits):
    """One run on a fresh budget that keeps a trace: the estimate, the budget (its measurements) and the noisy
    answers of each Laplace measurement in the order drawn."""
    trace: list = []
    budget = PrivacyBudget(epsilon, bits=bits, trace=trace)
    estimate = algo.run(counts, budget)
    return estimate, budget, [d.values for d in trace if d.values is not None]


def sse(v) -> Fraction:
    v = [Fraction(int(a)) for a in v]
    mean = sum(v, Fraction(0)) / len(v)
    return sum(((a - mean) ** 2 for a in v), Fraction(0))


def exact_scores(clipped, k, right, j):
    """Brute force: for each b in [j, right), the least SSE of [0, b) in j buckets plus SSE([b, right))."""
    out = []
    for b in range(j, right):
        best = min(sum((sse(clipped[a:c]) for a, c in zip((0, *inner), (*inner, b))), Fraction(0))
                   for inner in itertools.combinations(range(1, b), j - 1))
        out.append(best + sse(clipped[b:right]))
    return out


def recorded_scores(monkeypatch, counts, **options):
    """Run StructureFirst and record every permute-and-flip draw the privacy kernel makes for it (scores, ε per
    draw, sensitivity), at the sampler itself."""
    calls = []
    real = kernel.permute_and_flip

    def spy(scores, epsilon, sensitivity, bits):
        calls.append(([Fraction(s) for s in scores], Fraction(epsilon), Fraction(sensitivity)))
        return real(scores, epsilon, sensitivity, bits)
    monkeypatch.setattr(kernel, "permute_and_flip", spy)
    est = get_algorithm("structurefirst", **options).run(counts, PrivacyBudget(1, bits=SeededBits(5)))
    return est, calls


def test_scores_are_the_clipped_v_optimal_costs_and_draws_get_their_share(monkeypatch):
    counts = np.array([0, 9, 2, 30, 4, 4, 0, 7, 1], dtype=np.int64)
    est, calls = recorded_scores(monkeypatch, counts, cap=6, buckets=4, structure_share="1/2")
    assert len(calls) == 3
    clipped = np.minimum(counts, 6)
    edges = [0] + est.choices["boundaries"] + [counts.size]
    for (scores, eps, sensitivity), j in zip(calls, (3, 2, 1)):
        right = edges[j + 1]
        expected = exact_scores(clipped, 4, right, j)
        assert [-s for s in scores] == pytest.approx([float(e) for e in expected], abs=1e-9)
        assert eps == Fraction(1, 2) / 3
        assert 13 < sensitivity <= 13 + Fraction(1, 1000)  # 2F + 1 plus the rounding margin


@pytest.mark.parametrize("seed", range(30))
def test_score_sensitivity_is_at_most_2F_plus_1_on_clipped_counts(seed):
    rng = np.random.default_rng(seed)
    F = int(rng.integers(1, 8))
    counts = rng.integers(0, 2 * F, 7)
    neighbour = counts.copy()
    cell = int(rng.integers(0, 7))
    neighbour[cell] += 1 if rng.random() < 0.5 or counts[cell] == 0 else -1
    right, j = int(rng.integers(3, 8)), int(rng.integers(1, 3))
    a = exact_scores(np.minimum(counts, F), 3, right, j)
    b = exact_scores(np.minimum(neighbour, F), 3, right, j)
    assert max(abs(x - y) for x, y in zip(a, b)) <= 2 * F + 1


def test_the_2F_plus_1_bound_is_reached_in_the_limit():
    # A cell at F − 1 among zeros in a long bucket, raised to F: ΔSSE = 2(x − mean) + 1 − 1/m → 2F − 1 + ...
    F, m = 5, 400
    low = np.zeros(m, dtype=np.int64)
    low[0] = F - 1
    high = low.copy()
    high[0] = F
    assert float(sse(high) - sse(low)) > 2 * F - 1 - 0.1


def pf_distribution(scores, epsilon, sensitivity):
    best = max(scores)
    accept = [math.exp(-float(epsilon * (best - q) / (2 * sensitivity))) for q in scores]
    prob = np.zeros(len(scores))
    for order in itertools.permutations(range(len(scores))):
        reach = 1.0
        for r in order:
            prob[r] += reach * accept[r]
            reach *= 1 - accept[r]
    return prob / math.factorial(len(scores))


@pytest.mark.parametrize("draws", [1500, pytest.param(10_000, marks=pytest.mark.slow)])
def test_boundary_frequencies_match_the_exact_exponential_mechanism_distribution(draws):
    """One boundary (k = 2) over 5 cells, 4 candidates with exactly known scores: the boundary's frequencies
    over ``draws`` whole runs (a selection cannot be replicated) against the exact permute-and-flip distribution,
    χ² with p > 1e-6 (false alarm 1e-6).  A selection whose ε per draw is off by a factor 1.33 up or 1.36 down at
    1,500 draws (1.12 at 10,000) fails with probability above 0.99 (noncentral χ², 3 degrees of freedom); the
    distribution at twice the budget is rejected too (noncentrality 730 at 1,500 draws)."""
    counts = np.array([0, 1, 6, 6, 2], dtype=np.int64)
    F, eps = 6, Fraction(4)
    algo = get_algorithm("structurefirst", cap=F, buckets=2, structure_share="1/2")
    # Each run's one boundary, a cut index = a cell index.
    bits = SeededBits(9)
    chosen = np.array([algo.run(counts, PrivacyBudget(eps, bits=bits)).choices["boundaries"][0]
                       for _ in range(draws)])
    observed = np.bincount(chosen, minlength=5)[1:]
    scores = [-s for s in exact_scores(np.minimum(counts, F), 2, 5, 1)]
    sensitivity = 2 * F + 1 + 2 * sf.score_rounding_bound(5, F, 2)
    expected = pf_distribution(scores, eps / 2, sensitivity) * draws
    assert stats.chisquare(observed, expected).pvalue > 1e-6
    # The same test tells apart the distribution at twice the budget (it can fail).
    wrong = pf_distribution(scores, eps, sensitivity) * draws
    assert stats.chisquare(observed, wrong).pvalue < 1e-6


def test_large_budget_recovers_the_true_steps():
    counts = np.repeat(np.array([0, 8, 2, 8]), 25)
    est = get_algorithm("structurefirst", cap=10, buckets=4, structure_share="1/2").run(
        counts, PrivacyBudget(500, bits=SeededBits(2)))
    assert est.choices["boundaries"] == [25, 50, 75]
    assert np.allclose(est.values, counts, atol=0.2)


def test_budget_parts_add_up_and_bucket_totals_carry_their_noise():
    counts = np.random.default_rng(1).integers(0, 30, 64)
    eps = Fraction(3, 10)
    est, budget, (noisy_totals,) = traced_run(get_algorithm("structurefirst", cap=30, buckets=8), counts, eps,
                                              SeededBits(3))
    select, totals = budget.measurements
    assert select.epsilon + totals.epsilon == eps and select.queries == 7 and totals.queries == 8
    assert totals.sensitivity == 1 and totals.scale == 1 / totals.epsilon
    edges = [0] + est.choices["boundaries"] + [64]
    sizes = np.diff(edges)
    # Values are the noisy bucket totals spread evenly: constant per bucket, summing to the noisy totals.
    assert np.allclose(np.add.reduceat(est.values, edges[:-1]), noisy_totals)
    assert all(np.ptp(est.values[a:b]) < 1e-9 for a, b in zip(edges, edges[1:]))
    assert np.all(sizes > 0)


@pytest.mark.parametrize("runs", [1000, pytest.param(4000, marks=pytest.mark.slow)])
def test_bucket_total_noise_has_the_stated_variance(runs):
    """``runs`` runs × 8 buckets of noise on the totals: sample variance within 5 sd of the exact discrete Laplace
    variance, 2a/(1 − a)².  The sample variance's relative sd over m draws is √(5/m) (kurtosis 6): 2.5 % at
    1,000 runs (m = 8,000), 1.25 % at 4,000, so the bound is ±12.5 % and ±6.3 %, a false alarm below 1e-6; a
    variance off by 18 % at 1,000 runs (9.2 % at 4,000) fails with probability above 0.99."""
    counts = np.zeros(64, dtype=np.int64)
    algo = get_algorithm("structurefirst", cap=5, buckets=8, structure_share="1/2")
    bits, noise = SeededBits(4), []
    for _ in range(runs):
        _, budget, (noisy_totals,) = traced_run(algo, counts, Fraction(1, 2), bits)
        noise.append(noisy_totals)
    noise = np.concatenate(noise)
    ratio = noise.var() / discrete_laplace_variance(budget.measurements[1].scale)
    assert abs(ratio - 1) < 5 * np.sqrt(5 / noise.size), ratio


def test_one_bucket_spends_everything_on_the_total():
    est, budget, _ = traced_run(get_algorithm("structurefirst", cap=5, buckets=1), np.arange(10), Fraction(1),
                                SeededBits(1))
    assert [m.epsilon for m in budget.measurements] == [Fraction(1)]
    assert est.choices == {"buckets": 1, "boundaries": []}


def test_public_plan_does_not_depend_on_the_counts():
    algo = get_algorithm("structurefirst", cap=50, buckets=16)
    a, spent_a, _ = traced_run(algo, np.zeros(300, dtype=np.int64), Fraction(1, 10), SeededBits(1))
    b, spent_b, _ = traced_run(algo, np.random.default_rng(0).integers(0, 1000, 300), Fraction(1, 10), SeededBits(1))
    assert a.structure == b.structure
    assert [(m.what, m.sensitivity, m.scale, m.epsilon, m.queries) for m in spent_a.measurements] == \
        [(m.what, m.sensitivity, m.scale, m.epsilon, m.queries) for m in spent_b.measurements]


def test_guarded_split_never_picks_a_negative_proxy():
    # With a large cap every ε₁ makes the proxy's denominator negative: the fallback is used, not a "win".
    assert sf.guarded_structure_share(32, 1000, 4096, Fraction(1, 10), Fraction(1, 2)) == Fraction(1, 2)
    # A tiny cap leaves room: the choice is the grid point with the least proxy among the valid ones.
    k, F, n, eps = 4, 1, 16, Fraction(10)
    valid = {}
    for step in range(1, 20):
        e1 = Fraction(step, 20) * eps
        d = 8 * (k - 1) * (2 * F + 1) - e1 * n * F * F
        if d > 0:
            valid[Fraction(step, 20)] = 8 * (k - 1) ** 2 * (2 * F + 1) ** 2 / (e1 * d) + 2 * k / (eps - e1) ** 2
    assert 0 < len(valid) < 19  # some points are guarded off, some are not
    assert sf.guarded_structure_share(k, F, n, eps, Fraction(1, 2)) == min(valid, key=valid.get)


@pytest.mark.parametrize("options, message", [
    ({}, "needs a public cap"),
    ({"cap": 10, "buckets": 65}, "at most 64"),
    ({"cap": 1 << 20}, "cap × cells"),
])
def test_bad_options_are_refused_before_reading_data(options, message):
    frame = pd.DataFrame({"a": [1, 2]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4096, "bins": 4096}}}
    with pytest.raises(UsageError, match=message):
        dphist.api.plan_release(frame, "1", schema, columns="a", algorithm="structurefirst",
                                algorithm_options=options)


def test_two_way_tables_are_refused():
    with pytest.raises(UsageError, match="one-column"):
        get_algorithm("structurefirst", cap=3).check_shape((4, 4))


# ----- intervals: one fresh Laplace draw per bucket, given boundaries chosen with their own share ----------------




def test_interval_is_the_exact_one_of_the_bucket_total_spread_over_its_cells():
    """Each cell's variance is its bucket total's discrete Laplace variance ÷ the bucket's cells squared, its
    half-width the exact 95 % half-width of that draw ÷ the cells, and its group the bucket (cells of a bucket
    share one value).  Deterministic: any other variance or half-width fails."""
    counts = np.random.default_rng(1).integers(0, 30, 64)
    est, budget, _ = traced_run(get_algorithm("structurefirst", cap=30, buckets=8), counts, Fraction(3, 10),
                                SeededBits(3))
    totals = budget.measurements[1]
    edges = np.array([0] + est.choices["boundaries"] + [64])
    sizes = np.repeat(np.diff(edges), np.diff(edges)).astype(float)
    assert np.array_equal(est.groups, np.repeat(np.arange(8), np.diff(edges)))
    assert np.allclose(est.variance, discrete_laplace_variance(totals.scale) / sizes**2, rtol=1e-12, atol=0)
    assert np.allclose(est.halfwidth, totals.halfwidth() / sizes, rtol=1e-12, atol=0)
    assert totals.halfwidth() > 0 and est.no_interval is None
    for b in range(8):
        assert np.ptp(est.values[est.groups == b]) == 0


@pytest.mark.parametrize("records, eps", [(1_000, Fraction(1, 10)), (10_000, Fraction(1))])
def test_intervals_cover_the_bucket_shares(records, eps):
    """300 seeded runs on a DPBench-like table of 64 cells, 16 buckets: the half-widths cover the bucket shares (a
    bucket's true total ÷ its cells, what every cell of it claims) of a share of the 4,800 (bucket, run) pairs
    within 4 standard errors of the exact probability 1 − 2·P(Z > q) that one discrete Laplace draw Z lies within
    the half-width q, and that probability is in 95–97.5 % (the budget's scale is the same every run).  The
    bucket's draw is independent of its boundaries, so the pairs are independent Bernoulli trials: the standard
    error is at most √(0.05·0.95/4800) = 0.31 %, the 4-SE band a false alarm below 1e-4, and a coverage 2 points
    below the exact probability (6.4 SE; the normal approximation's 93.7 % on a wide draw is 1.3 points below
    95 %) fails with probability above 0.99.  (Per cell the share is the same in expectation, weighted by bucket
    size.)"""
    counts = spiky_histogram(64, records, 5)
    algo = get_algorithm("structurefirst", cap=max(1, records // 100), buckets=16)
    pool = NoisePool(SeededBits(31))
    hits, scales = [], set()
    for _ in range(300):
        budget = PooledBudget(eps, pool=pool)
        est = algo.run(counts, budget)
        scales.add(budget.measurements[1].scale)
        g = est.groups
        first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])  # each bucket's first cell
        share = np.bincount(g, weights=counts.astype(float)) / np.bincount(g)
        hits.append(np.abs(est.values[first] - share) <= est.halfwidth[first] + 1e-9)
    hits = np.concatenate(hits)
    (scale,) = scales
    exact = 1 - 2 * discrete_laplace_tail(scale, budget.measurements[1].halfwidth())
    se = np.sqrt(exact * (1 - exact) / hits.size)
    assert 0.95 <= exact <= 0.975 and hits.size == 4800
    assert abs(hits.mean() - exact) < 4 * se, (hits.mean(), exact, se)
