"""MWEM (dphist/algorithms/mwem.py): budget split, score and measurement sensitivities, the noise, the public
plan, no interval (and why), accuracy on DPBench data, zCDP and bad options.  Fixed seeds throughout;
false-alarm rates stated."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dphist.algorithms.identity import Identity
from dphist.algorithms.mwem import MWEM, candidate_ranges
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.privacy import budget as kernel
from dphist.privacy.measurement import GAUSSIAN, SELECTION

from conftest import SHARED

DPBENCH = SHARED / "data" / "dpbench" / "1D"


def traced(algo, counts, epsilon, seed):
    trace: list = []
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    return algo.run(counts, budget), budget, trace


def spy_draws(monkeypatch):
    """Record (scores, ε per draw, sensitivity) of every permute-and-flip draw, at the sampler."""
    calls = []
    real = kernel.permute_and_flip

    def spy(scores, epsilon, sensitivity, bits):
        calls.append((list(scores), Fraction(epsilon), Fraction(sensitivity)))
        return real(scores, epsilon, sensitivity, bits)
    monkeypatch.setattr(kernel, "permute_and_flip", spy)
    return calls


COUNTS = np.array([3, 0, 5, 1, 0, 2, 4, 1, 7, 0, 0, 2, 9, 1, 0, 3], dtype=np.int64)


def test_budget_is_spent_exactly_and_split_as_documented(monkeypatch):
    calls = spy_draws(monkeypatch)
    eps = Fraction(1, 2)
    est, budget, _ = traced(MWEM(rounds=4), COUNTS, eps, 1)  # a fixed T: the split is exact
    assert budget.spent == eps
    m = budget.measurements
    share = Fraction(1, 4)
    assert m[0].what.startswith("the grand total") and m[0].epsilon == share * eps and m[0].sensitivity == 1
    assert m[1].mechanism == SELECTION and m[1].epsilon == (1 - share) * eps / 2 and m[1].queries == 4
    assert m[1].sensitivity == 1
    rounds = m[2:]
    assert len(rounds) == 4 and all(r.epsilon == (1 - share) * eps / 8 and r.sensitivity == 1 for r in rounds)
    assert all(r.queries == 1 for r in rounds)
    # each round's record names its range (public): the audit's structure events read it
    assert [r.what for r in rounds] == [f"round {t + 1}: the selected range [{a}, {b})"
                                        for t, (a, b) in enumerate(est.choices["ranges"])]
    # each draw gets its share of the selection's ε, over the candidates not yet chosen
    assert [c[1] for c in calls] == [(1 - share) * eps / 8] * 4 and all(c[2] == 1 for c in calls)
    assert [len(c[0]) for c in calls] == [16, 15, 14, 13]
    assert est.values.shape == COUNTS.shape and len(est.choices["ranges"]) == 4


def test_scores_are_exact_integers_with_sensitivity_one():
    """Add one record to each cell in turn: every candidate's score moves by at most 1 (and some by exactly 1)."""
    rng = np.random.default_rng(0)
    for workload in ("prefix", "dyadic"):
        lo, hi = candidate_ranges(16, workload)
        for _ in range(20):
            x = rng.integers(0, 20, 16)
            estimate = rng.random(16) * 20  # any public estimate
            base = MWEM.scores(np.concatenate([[0], np.cumsum(x)]), estimate, lo, hi)
            assert base.dtype == np.int64
            moved = 0
            for cell in range(16):
                for delta in (1, -1):
                    y = x.copy()
                    y[cell] += delta
                    other = MWEM.scores(np.concatenate([[0], np.cumsum(y)]), estimate, lo, hi)
                    assert np.abs(other - base).max() <= 1
                    moved = max(moved, np.abs(other - base).max())
            assert moved == 1


def test_measured_ranges_have_sensitivity_one():
    """A range query's answer moves by exactly 1 when a record is added inside it, 0 outside."""
    for workload in ("prefix", "dyadic"):
        lo, hi = candidate_ranges(16, workload)
        for cell in range(16):
            e = np.zeros(16, dtype=np.int64)
            e[cell] = 1
            p = np.concatenate([[0], np.cumsum(e)])
            assert set(np.unique(p[hi] - p[lo])) <= {0, 1}


def test_candidate_workloads_are_public_and_complete():
    lo, hi = candidate_ranges(8, "dyadic")
    assert lo.size == 15 and sorted(zip(lo.tolist(), hi.tolist()))[0] == (0, 1) and (0, 8) in zip(lo, hi)
    lo, hi = candidate_ranges(5, "prefix")
    assert lo.tolist() == [0] * 5 and hi.tolist() == [1, 2, 3, 4, 5]
    lo, hi = candidate_ranges(6, "dyadic")  # not a power of two: ranges are clipped to the domain
    assert hi.max() == 6 and np.all(lo < hi)


def test_round_noise_has_the_discrete_laplace_variance():
    """Round measurements minus the true range answers, over 400 seeds × 4 rounds: their sample variance lies
    within 5 standard errors of the exact discrete Laplace variance (false alarm < 1e-6 under normality of the
    variance estimate; the noise is light-tailed enough that the 4th-moment SE below holds)."""
    algo, eps = MWEM(rounds=4, replay=1), Fraction(2)
    x = COUNTS
    p = np.concatenate([[0], np.cumsum(x)])
    errors, totals = [], []
    for seed in range(400):
        est, budget, trace = traced(algo, x, eps, seed)
        totals.append(trace[0].values.item() - x.sum())
        draws = [d for d in trace[1:] if d.values is not None]
        for (a, b), d in zip(est.choices["ranges"], draws):
            errors.append(d.values.item() - (p[b] - p[a]))
    errors, totals = np.array(errors), np.array(totals)
    for sample, scale in ((errors, 8 / ((1 - Fraction(1, 4)) * eps)), (totals, 1 / (Fraction(1, 4) * eps))):
        var = discrete_laplace_variance(scale)
        se = np.sqrt((np.mean((sample - sample.mean()) ** 4) - var ** 2) / sample.size)
        assert abs(sample.var() - var) < 5 * se, (sample.var(), var)


def test_selection_prefers_the_worst_query_at_large_epsilon():
    """At ε = 200 the first draw takes the top-scoring query (permute-and-flip: others lose exp(−ε/(2·T·4)...))."""
    x = np.zeros(16, dtype=np.int64)
    x[12] = 500
    est, _, _ = traced(MWEM(rounds=1, queries="dyadic"), x, Fraction(200), 3)
    a, b = est.choices["ranges"][0]
    assert a <= 12 < b and b - a < 16


def test_plan_and_structure_do_not_depend_on_the_counts():
    algo = MWEM()
    one, _, _ = traced(algo, COUNTS, Fraction(1), 5)
    two, _, _ = traced(algo, COUNTS[::-1] * 3, Fraction(1), 5)
    assert one.structure == two.structure == {"queries": "prefix", "candidates": 16, "replay": 100}
    for n in (5, 64):
        assert [a.tolist() for a in MWEM().plan(n)] == [a.tolist() for a in candidate_ranges(n, "prefix")]


def test_rounds_follow_the_noisy_total_only():
    """T is read off N̂·ε by the documented table, capped by the candidates; the option overrides it; the run
    draws exactly T selections and T round measurements, with T from the traced noisy total."""
    algo = MWEM()
    assert [algo.rounds_for(4096, total, Fraction(1, 10)) for total in (-50, 0, 1000, 10_000, 55_000, 1e8)] == \
        [2, 2, 2, 8, 10, 140]
    assert algo.rounds_for(5, 1e8, Fraction(1)) == 5 and MWEM(rounds=3).rounds_for(4096, 1e8, Fraction(1)) == 3
    counts = np.full(64, 40, dtype=np.int64)  # N·ε = 2560 at ε = 1: about 9 rounds
    for seed in range(3):
        est, budget, trace = traced(algo, counts, Fraction(1), seed)
        rounds = algo.rounds_for(64, trace[0].values.item(), Fraction(1))
        assert est.choices["rounds"] == rounds == len(budget.measurements) - 2 == len(est.choices["ranges"])


def test_estimate_sums_to_the_noisy_total_and_stays_finite():
    est, _, trace = traced(MWEM(scale_fit="none"), COUNTS, Fraction(1, 100), 7)  # wild noise on a tiny total
    assert np.all(np.isfinite(est.values)) and np.all(est.values >= 0)
    assert est.values.sum() == pytest.approx(max(trace[0].values.item(), 1.0))


def test_selection_share_splits_the_rest_exactly():
    eps = Fraction(1)
    est, budget, _ = traced(MWEM(rounds=3, selection_share=Fraction(1, 3)), COUNTS, eps, 2)
    m = budget.measurements
    assert budget.spent == eps and m[1].epsilon == Fraction(3, 4) * Fraction(1, 3) * eps
    assert all(r.epsilon == Fraction(3, 4) * Fraction(2, 3) * eps / 3 for r in m[2:]) and len(m) == 5


def test_rescale_is_the_weighted_least_squares_total():
    """The released total is (N̂/v₀ + Σ q_j(f)·m_j/v_j) / (1/v₀ + Σ q_j(f)²/v_j), recomputed here from the trace
    (noisy values), the records' noise variances and the shape of the released estimate; the shape is the same
    as without the rescale (same seed: the draws do not depend on it)."""
    for seed in range(5):
        est, budget, trace = traced(MWEM(rounds=4), COUNTS, Fraction(1, 2), seed)
        plain, _, _ = traced(MWEM(rounds=4, scale_fit="none"), COUNTS, Fraction(1, 2), seed)
        np.testing.assert_allclose(est.values / est.values.sum(), plain.values / plain.values.sum(), rtol=1e-12)
        m = budget.measurements
        f = np.concatenate([[0.0], np.cumsum(est.values / est.values.sum())])
        num, den = trace[0].values.item() / m[0].noise_variance, 1 / m[0].noise_variance
        answers = [d.values.item() for d in trace[1:] if d.values is not None]
        for (a, b), value, record in zip(est.choices["ranges"], answers, m[2:]):
            num += (f[b] - f[a]) * value / record.noise_variance
            den += (f[b] - f[a]) ** 2 / record.noise_variance
        assert est.values.sum() == pytest.approx(max(num / den, 1.0), rel=1e-9)


@pytest.mark.parametrize("runs", [200, pytest.param(1000, marks=pytest.mark.slow)])
def test_rescale_lowers_the_released_totals_variance(runs):
    """All 1000 records in the first of 64 cells, ε = 0.1, T = 2, over ``runs`` seeds: the released total's error
    variance with the rescale (the default) against the total without it, max(N̂, 1) (the release with
    ``scale_fit=none`` sums to it, checked on three seeds) on the same runs.  Were both selected ranges to hold
    the whole mass, the rescale would bring v₀ (the noisy total's variance) down to 1/(1/v₀ + 2/v₁) ≈ 0.47·v₀;
    they do not always, and 3,000 seeds give 0.62·v₀ against 0.96·v₀, a ratio r = 0.65.  Paired on the same
    runs, r has sd 0.054 at 200 runs (0.024 at 1,000; bootstrap of the 3,000), so r < 0.9 is 4.7 sd (10.5 sd)
    above it: a false alarm below 2e-6; a release without the rescale (r = 1) always fails.  The total without
    the rescale has variance v₀ within 5 sd of √(4.6/runs) (kurtosis 5.6): ±76 % at 200 runs, ±34 % at 1,000,
    a false alarm below 1e-6; a variance 2.1 times v₀ (or, at 1,000 runs, off by 50 %) fails with probability
    above 0.99."""
    x = np.zeros(64, dtype=np.int64)
    x[0] = 1000
    v0 = discrete_laplace_variance(1 / (Fraction(1, 4) * Fraction(1, 10)))
    rescaled, plain = [], []
    for seed in range(runs):
        est, _, trace = traced(MWEM(rounds=2), x, Fraction(1, 10), seed)
        assert trace[0].what.startswith("the grand total")
        without = max(trace[0].values.item(), 1.0)
        if seed < 3:
            assert traced(MWEM(rounds=2, scale_fit="none"), x, Fraction(1, 10), seed)[0].values.sum() == \
                pytest.approx(without, rel=1e-12)
        rescaled.append(est.values.sum() - 1000)
        plain.append(without - 1000)
    ratio = np.var(rescaled) / np.var(plain)
    assert ratio < 0.9, ratio
    assert abs(np.var(plain) / v0 - 1) < 5 * np.sqrt(4.6 / runs), np.var(plain) / v0


def test_runs_on_a_zcdp_budget_and_spends_exactly():
    budget = ZCDPBudget(Fraction(1, 200), bits=SeededBits(2))
    est = MWEM(rounds=3).run(COUNTS, budget)
    assert budget.spent == Fraction(1, 200) and est.values.shape == COUNTS.shape
    assert [m.mechanism for m in budget.measurements] == [GAUSSIAN, SELECTION] + [GAUSSIAN] * 3


@pytest.mark.parametrize("options, message", [({"rounds": 0}, "positive"), ({"queries": "all"}, "one of"),
                                              ({"selection_share": 0}, "between"), ({"scale_fit": "ls"}, "one of"),
                                              ({"replay": "x"}, "integer"), ({"total_share": 1}, "between"),
                                              ({"nrounds": 3}, "no option"), ({"workload": "dyadic"}, "no option")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(UsageError, match=message):
        MWEM(**options)


def test_shapes_and_too_many_rounds_are_refused_before_reading_data():
    with pytest.raises(UsageError, match="one-column"):
        MWEM().check_shape((4, 4))
    with pytest.raises(UsageError, match="at most the number of candidate"):
        MWEM(rounds=9).check_shape((8,))


@pytest.mark.skipif(not DPBENCH.exists(), reason="DPBench data not present")
@pytest.mark.parametrize("name", ["NETTRACE.n4096.npy", "MEDCOST.n4096.npy"])
def test_better_than_identity_on_prefixes_at_low_signal(name):
    """Scale 1000, ε = 0.1, 4096 cells, 3 samples: mean |prefix error| below identity's (identity's is ~10x
    larger here, so a failure means a broken algorithm, not bad luck)."""
    p = np.load(DPBENCH / name).astype(float)
    p /= p.sum()
    ours, identity = [], []
    for seed in range(3):
        x = np.random.default_rng(seed).multinomial(1000, p).astype(np.int64)
        truth = np.cumsum(x)
        for algo, out in ((MWEM(), ours), (Identity(), identity)):
            est = algo.run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(seed)))
            out.append(np.abs(np.cumsum(est.values) - truth).mean())
    assert np.mean(ours) < np.mean(identity) / 2


def test_audit_pair_moves_the_true_argmax_whatever_the_noisy_total():
    """The audit's pair (dphist_audit/mwem_cases.py, N = 25): for every noisy total within 9.5 of N (91 % of
    them at ε = 1, the total's scale being 4), the best-scoring first query is the last cell on D and the first
    cell on D′, so a selection that ignores its draw is visible; far outside, the whole range wins on both."""
    from dphist_audit.mwem_cases import TINY, flip_pair
    data, neighbour = flip_pair()
    lo, hi = candidate_ranges(8, TINY["queries"])
    for total in np.arange(15.0, 34.5, 0.5):
        picks = []
        for table in (data, neighbour):
            scores = MWEM.scores(np.concatenate([[0], np.cumsum(table)]), np.full(8, total / 8), lo, hi)
            picks.append((int(lo[np.argmax(scores)]), int(hi[np.argmax(scores)])))
        assert picks == [(7, 8), (0, 1)], (total, picks)
    far = MWEM.scores(np.concatenate([[0], np.cumsum(data)]), np.full(8, 40 / 8), lo, hi)
    assert (lo[np.argmax(far)], hi[np.argmax(far)]) == (0, 8)


def test_no_interval_and_why():
    """MWEM's estimate is non-linear in its noisy answers: no variance, no half-width, the reason instead."""
    estimate = MWEM().run(COUNTS, PrivacyBudget(1, bits=SeededBits(0)))
    assert estimate.variance is None and estimate.halfwidth is None and estimate.groups is None
    assert "multiplicative-weights" in estimate.no_interval
