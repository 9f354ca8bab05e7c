"""The privacy kernel's budget (dphist/privacy/budget.py): exact splits, refusal before any noise is drawn, paid
selections, the record of measurements, the protected unit's factor (recorded and measured in the noise), the
trace and the audit's replicated budget; and the zCDP budget (``ZCDPBudget``): amounts are ρ, linear queries get
exact discrete Gaussian noise of variance parameter σ² = factor²·Δ₂²/(2ρ), Laplace steps and selections buy
ε = √(2ρ) rounded down, costs add up exactly in ρ, and nothing is drawn for a refused measurement.

Statistical checks use fixed seeds.  A sample variance is compared with the exact discrete Laplace variance σ²
through the estimator V̂ = mean(x²) (the noise has mean 0 exactly), whose standard deviation is
sqrt((μ₄ − σ⁴)/n) with μ₄ the exact fourth moment; by the normal approximation (n >= 100,000, exponential
tails) a band of ±Z_BAND = 5.33 of those standard deviations has a two-sided false-alarm rate of about 1e-7 per
check.  Each check also shows the band excludes the variance at a scale 10 % off (so it can fail).  The
Gaussian checks compare mean(x²) with the exact discrete Gaussian variance V in the same way, μ₄ the exact
fourth moment from the pmf, and show the band excludes the variance at σ² × 0.81 and × 1.21 (σ × 0.9, × 1.1).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counting_bits import CountingBits
from dphist_audit.replication import ReplicatedBudget
from dphist.privacy import (BudgetExceeded, Draw, PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_pmf,
                            discrete_laplace_variance, epsilon_within)
from dphist.privacy import budget as kernel
from dphist.privacy.measurement import GAUSSIAN, LAPLACE, SELECTION

Z_BAND = 5.33  # P(|N(0, 1)| > 5.33) ≈ 9.8e-8


def zeros(n: int = 5) -> np.ndarray:
    return np.zeros(n, dtype=np.int64)


def variance_band(scale) -> tuple[float, float]:
    """σ² of the discrete Laplace of ``scale`` and the sd of mean(x²) per unit sample: sqrt(μ₄ − σ⁴)."""
    k = np.arange(-60 * math.ceil(scale) - 100, 60 * math.ceil(scale) + 101)
    pmf = discrete_laplace_pmf(k, float(scale))
    k = k.astype(np.float64)
    var, fourth = float(np.sum(k**2 * pmf)), float(np.sum(k**4 * pmf))
    assert var == pytest.approx(discrete_laplace_variance(scale), rel=1e-9)
    return var, math.sqrt(fourth - var**2)


def assert_variance(noise: np.ndarray, scale) -> None:
    """mean(noise²) within Z_BAND sd of the exact variance at ``scale``, and that band excludes scale ×0.9, ×1.1."""
    var, sd_one = variance_band(scale)
    half = Z_BAND * sd_one / math.sqrt(noise.size)
    estimate = float(np.mean(noise.astype(np.float64) ** 2))
    assert abs(estimate - var) < half, (estimate, var, half)
    for off in (Fraction(9, 10), Fraction(11, 10)):
        assert abs(discrete_laplace_variance(Fraction(scale) * off) - var) > 2 * half  # the check has power


# ---- splitting ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shares", [[1, 1, 1], [Fraction(1, 3), Fraction(1, 7), 1], [1, 7], [Fraction(1, 3)] * 7,
                                    [Fraction(2, 3), Fraction(1, 7), Fraction(5, 11), Fraction(1, 13)]])
@pytest.mark.parametrize("total", [Fraction(1), Fraction(1, 3), Fraction(22, 7), Fraction(1, 10**6)])
def test_split_parts_add_up_exactly(total, shares):
    parts = PrivacyBudget(total, bits=SeededBits(0)).split(shares)
    assert sum(p.epsilon for p in parts) == total
    assert all(p.epsilon * Fraction(shares[0]) == parts[0].epsilon * Fraction(s) for p, s in zip(parts, shares))


def fractions_in(lo, hi):
    """Rationals in [lo, hi]: lo + (hi − lo)·k/d for a denominator d up to 10⁶ and 0 ≤ k ≤ d (both ends
    included).  Hypothesis's own ``fractions`` builds a new strategy for every value it draws, most of this test's
    time with lists of up to 30 of them; this draws two integers."""
    lo, hi = Fraction(lo), Fraction(hi)
    return st.tuples(st.integers(1, 10**6), st.integers(0, 10**6)).map(
        lambda t: lo + (hi - lo) * Fraction(min(t[1], t[0]), t[0]))


@given(fractions_in(Fraction(1, 10**6), 1000),
       st.lists(fractions_in(Fraction(1, 1000), 100), min_size=1, max_size=30),
       st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1, 3), Fraction(1, 7)]))
@settings(max_examples=200, deadline=None)
def test_split_of_what_is_left_adds_up_exactly_and_keeps_ratios(total, shares, spent_share):
    budget = PrivacyBudget(total, bits=SeededBits(0))
    if spent_share:
        budget.laplace(zeros(1), 1, total * spent_share, "first")
    left = budget.remaining
    parts = budget.split(shares)
    assert sum(p.epsilon for p in parts) == left == total - budget.spent
    assert all(p.epsilon * shares[0] == parts[0].epsilon * s for p, s in zip(parts, shares))
    assert budget.remaining == 0


def test_delta_splits_exactly_with_zero_shares():
    delta = Fraction(1, 10**6)
    budget = PrivacyBudget(1, delta, bits=SeededBits(0))
    parts = budget.split([Fraction(1, 3), Fraction(1, 7), 1, 1], delta_shares=[0, Fraction(1, 3), 0, Fraction(1, 7)])
    assert sum(p.epsilon for p in parts) == 1
    assert [p.delta for p in parts] == [0, delta * 7 / 10, 0, delta * 3 / 10]
    assert sum(p.delta for p in parts) == delta and budget.remaining_delta == 0
    # Without delta shares δ follows the ε shares; a budget without δ gives every part δ = 0.
    even = PrivacyBudget(1, Fraction(1, 3), bits=SeededBits(0)).split([1, 1, 1])
    assert [p.delta for p in even] == [Fraction(1, 9)] * 3
    assert [p.delta for p in PrivacyBudget(1, bits=SeededBits(0)).split([1, 2], delta_shares=[0, 1])] == [0, 0]


@pytest.mark.parametrize("shares, delta_shares", [([1, 0], None), ([1, -1], None), ([], None), ([1, 1], [0, 0]),
                                                  ([1, 1], [1]), ([1, 1], [1, -1])])
def test_bad_shares_are_refused_and_charge_nothing(shares, delta_shares):
    budget = PrivacyBudget(1, Fraction(1, 10**6), bits=SeededBits(0))
    with pytest.raises(ValueError):
        budget.split(shares, delta_shares)
    assert budget.remaining == 1 and budget.remaining_delta == Fraction(1, 10**6) and budget.measurements == []


def test_children_cannot_spend_more_than_their_part_nor_the_parent_after_splitting():
    bits = CountingBits(1)
    budget = PrivacyBudget(1, bits=bits)
    small, large = budget.split([1, 3])
    with pytest.raises(BudgetExceeded):
        small.laplace(zeros(), 1, Fraction(1, 2), "more than the part")
    with pytest.raises(BudgetExceeded):
        budget.laplace(zeros(), 1, Fraction(1, 100), "the parent after a split")
    with pytest.raises(BudgetExceeded):
        budget.split([1])  # nothing left to split
    assert bits.read == 0
    small.laplace(zeros(), 1, Fraction(1, 4), "exactly the part")
    assert budget.spent == Fraction(1, 4) and large.remaining == Fraction(3, 4)


# ---- refusal before noise ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda b: b.laplace(zeros(), 1, Fraction(3, 4), "too much"),
    lambda b: b.laplace(zeros(), 1, Fraction(1, 4), "too much delta", delta=Fraction(1, 10**5)),
    lambda b: b.laplace(zeros(), 1, -1, "negative epsilon"),
    lambda b: b.laplace(zeros(), 1, 0, "zero epsilon"),
    lambda b: b.laplace_weighted(zeros(3), [1, 2, 3], 1, 0, "zero epsilon", composition="test"),
    lambda b: b.selection(1, 0, 1, "zero epsilon"),
    lambda b: b.laplace_weighted(zeros(3), [1, 2, 3], 1, Fraction(3, 4), "too much", composition="test"),
    lambda b: b.selection(2, Fraction(3, 4), 1, "too much"),
    lambda b: b.choose([0, 1, 2], 1, 1, "too much"),
])
def test_a_measurement_beyond_what_is_left_raises_before_any_noise_is_drawn(call):
    bits = CountingBits(2)
    budget = PrivacyBudget(1, Fraction(1, 10**6), bits=bits)
    budget.laplace(zeros(), 1, Fraction(1, 2), "half")
    read, records, left = bits.read, list(budget.measurements), budget.remaining
    assert read > 0  # the counting source does count
    with pytest.raises(BudgetExceeded):
        call(budget)
    assert bits.read == read, "noise was drawn before the refusal"
    assert budget.measurements == records and budget.remaining == left  # a refused call records and charges nothing


def test_a_measurement_the_sampler_refuses_charges_nothing():
    bits = CountingBits(2)
    budget = PrivacyBudget(1, bits=bits)
    with pytest.raises(ValueError, match="2\\^40"):
        budget.laplace(zeros(), 2**41, 1, "a scale beyond the sampler's range")
    with pytest.raises(ValueError, match="2\\^40"):
        budget.laplace_weighted(zeros(2), [1, 2**21], 2**20, 1, "its largest scale beyond the range",
                                composition="test")
    assert budget.measurements == [] and budget.remaining == 1 and bits.read == 0


def test_delta_shares_of_the_wrong_length_are_refused_without_delta_too():
    budget = PrivacyBudget(1, bits=SeededBits(0))
    with pytest.raises(ValueError, match="one share per part"):
        budget.split([1, 1], delta_shares=[1])


def test_the_whole_budget_can_be_spent_exactly():
    budget = PrivacyBudget(Fraction(1, 3), bits=SeededBits(3))
    for _ in range(7):
        budget.laplace(zeros(), 1, Fraction(1, 21), "a seventh")
    assert budget.spent == Fraction(1, 3) and budget.remaining == 0
    with pytest.raises(BudgetExceeded):
        budget.laplace(zeros(), 1, Fraction(1, 10**12), "one more")


# ---- selections --------------------------------------------------------------------------------------------------


def test_a_selection_makes_only_the_draws_paid_for(monkeypatch):
    calls = []
    real = kernel.permute_and_flip

    def spy(scores, epsilon, sensitivity, bits):
        calls.append((Fraction(epsilon), Fraction(sensitivity)))
        return real(scores, epsilon, sensitivity, bits)
    monkeypatch.setattr(kernel, "permute_and_flip", spy)
    budget = PrivacyBudget(1, bits=SeededBits(4), factor=3)
    draws = budget.selection(3, Fraction(3, 5), 2, "three draws")
    assert budget.remaining == Fraction(2, 5)  # the whole ε is charged when the selection is made
    record, = budget.measurements
    assert record.queries == 3 and record.epsilon == Fraction(3, 5) and record.sensitivity == 6
    assert [draws.choose([0, -1, -2]) in range(3) for _ in range(3)] == [True] * 3
    with pytest.raises(BudgetExceeded, match="more draws than the 3 paid for"):
        draws.choose([0, -1, -2])
    # Each draw at ε/3 on scores of sensitivity factor·Δ; the refused fourth never reached the sampler.
    assert calls == [(Fraction(1, 5), Fraction(6))] * 3
    with pytest.raises(ValueError):
        budget.selection(0, Fraction(1, 5), 1, "no draws")


# ---- the record ------------------------------------------------------------------------------------------------


def test_measurements_and_spent_follow_the_order_of_nested_splits():
    budget = PrivacyBudget(2, Fraction(1, 10**6), bits=SeededBits(5))
    budget.laplace(zeros(), 1, Fraction(1, 4), "a")
    first, second = budget.split([1, 2], delta_shares=[1, 0])
    # Time order differs from the order of the splits: second's measurement is made first.
    second.laplace(zeros(), 1, Fraction(1, 2), "d")
    inner_1, inner_2 = first.split([1, 1])
    inner_2.laplace(zeros(), 1, Fraction(1, 8), "c", delta=Fraction(1, 2 * 10**6))  # its half of first's δ
    inner_1.laplace(zeros(), 1, Fraction(1, 8), "b")
    second.choose([1, 0], Fraction(1, 4), 1, "e")
    assert [m.what for m in budget.measurements] == ["a", "b", "c", "d", "e"]
    assert [m.what for m in first.measurements] == ["b", "c"]
    # spent adds up what was measured; a child's unmeasured ε (first: 7/12 − 1/4, second: 7/6 − 3/4) is not spent.
    assert budget.spent == Fraction(1, 4) + Fraction(1, 8) * 2 + Fraction(1, 2) + Fraction(1, 4) == Fraction(5, 4)
    assert first.spent == Fraction(1, 4) and second.spent == Fraction(3, 4) and budget.remaining == 0
    assert budget.spent_delta == first.spent_delta == Fraction(1, 2 * 10**6) and second.spent_delta == 0


# ---- the protected unit's factor -----------------------------------------------------------------------------


def test_the_factor_multiplies_the_recorded_sensitivity_and_the_scale():
    budget = PrivacyBudget(1, bits=SeededBits(6), factor=3)
    assert budget.scale(1, 1) == 3 and budget.scale(2, Fraction(1, 2)) == 12
    child, = budget.split([1])
    assert child.factor == 3  # children protect the same unit
    _, record = child.laplace(zeros(), 2, Fraction(1, 2), "x")
    assert record.sensitivity == 6 and record.scale == 12 and record.epsilon == Fraction(1, 2)
    assert record.report()["sensitivity"] == 6 and record.report()["epsilon"] == "0.5"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            PrivacyBudget(1, bits=SeededBits(0), factor=bad)


def test_noise_drawn_under_a_factor_has_the_variance_of_scale_factor_times_delta_over_epsilon():
    """200,000 draws at factor 3, Δ = 1, ε = 1: the scale is 3 (false-alarm rate about 1e-7, module doc)."""
    budget = PrivacyBudget(1, bits=SeededBits(7), factor=3)
    noisy, record = budget.laplace(np.zeros(200_000, dtype=np.int64), 1, 1, "every cell")
    assert record.scale == 3
    assert_variance(noisy, 3)
    # The variance at factor 1 (scale 1) is far outside that band.
    var, sd_one = variance_band(3)
    assert abs(discrete_laplace_variance(1) - var) > Z_BAND * sd_one / math.sqrt(noisy.size)


def test_weighted_noise_has_each_values_scale():
    """100,000 values at each relative scale 1, 2 and 5, factor 2, Δ = 3, ε = 2: base scale 3, so scales 3, 6 and
    15; each group's variance checked (false-alarm rate about 1e-7 each, module doc)."""
    relative = np.repeat([1, 2, 5], 100_000)
    trace: list = []
    budget = PrivacyBudget(2, bits=SeededBits(8), factor=2, trace=trace)
    noisy, record = budget.laplace_weighted(np.zeros(relative.size, dtype=np.int64), relative, 3, 2,
                                            "weighted", composition="test")
    assert record.scale == 3 and record.sensitivity == 6 and record.epsilon == 2
    assert np.array_equal(trace[0].scales, 3.0 * relative)
    for r in (1, 2, 5):
        assert_variance(noisy[relative == r], 3 * r)


@pytest.mark.parametrize("relative", [[1, 0.5, 1], [1, 1.5, 2], [0, 1, 1]])
def test_weighted_scales_must_be_whole_numbers_at_least_one(relative):
    bits = CountingBits(9)
    budget = PrivacyBudget(1, bits=bits)
    with pytest.raises(ValueError, match="whole numbers"):
        budget.laplace_weighted(zeros(3), relative, 1, 1, "w", composition="test")
    assert bits.read == 0 and budget.remaining == 1


# ---- what may be measured ------------------------------------------------------------------------------------


@pytest.mark.parametrize("answers", [np.zeros(3), np.array([1.0, 2.0]), np.array([0.5]), [1.0, 2.0]])
def test_float_answers_are_refused(answers):
    bits = CountingBits(10)
    budget = PrivacyBudget(1, bits=bits)
    with pytest.raises(TypeError, match="integer answers"):
        budget.laplace(answers, 1, 1, "floats")
    with pytest.raises(TypeError, match="integer answers"):
        budget.laplace_weighted(answers, 1, 1, 1, "floats", composition="test")
    assert bits.read == 0 and budget.remaining == 1 and budget.measurements == []
    noisy, _ = budget.laplace(np.array([3, 4], dtype=np.int32), 1, 1, "integers")
    assert noisy.dtype == np.int64


def test_sensitivity_must_be_positive_and_budget_amounts_valid():
    budget = PrivacyBudget(1, bits=SeededBits(0))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="sensitivity"):
            budget.laplace(zeros(), bad, Fraction(1, 2), "x")
        with pytest.raises(ValueError, match="sensitivity"):
            budget.selection(1, Fraction(1, 2), bad, "x")
    assert budget.remaining == 1
    for epsilon, delta in ((0, 0), (-1, 0), (1, -1)):
        with pytest.raises(ValueError):
            PrivacyBudget(epsilon, delta, bits=SeededBits(0))


# ---- the trace -----------------------------------------------------------------------------------------------


def test_the_trace_records_values_scales_and_choices_only_when_given_a_list():
    def session(trace):
        budget = PrivacyBudget(2, bits=SeededBits(11), trace=trace)
        left, right = budget.split([1, 1])
        noisy, _ = right.laplace(np.array([5, 6, 7]), 1, Fraction(1, 2), "cells")
        weighted, _ = left.laplace_weighted(np.array([1, 2]), [1, 4], 1, Fraction(1, 2), "w", composition="t")
        choice = left.choose([0, 5, 1], Fraction(1, 2), 1, "pick")
        return budget, noisy, weighted, choice

    trace: list = []
    budget, noisy, weighted, choice = session(trace)
    assert [type(d) for d in trace] == [Draw] * 3  # the children write to the root's trace, in time order
    cells, w, pick = trace
    assert (cells.what, w.what, pick.what) == ("cells", "w", "pick")
    assert cells.values.dtype == np.float64 and np.array_equal(cells.values, noisy) and float(cells.scales) == 2
    assert np.array_equal(w.values, weighted) and np.array_equal(w.scales, [2.0, 8.0])
    assert pick.choice == choice and pick.values is None and cells.choice is None
    # Without a list nothing is kept anywhere (the same draws are made: the trace changes no noise).
    plain, noisy2, weighted2, choice2 = session(None)
    assert np.array_equal(noisy, noisy2) and np.array_equal(weighted, weighted2) and choice == choice2

    def holds_draws(b):
        return any(isinstance(v, list) and any(isinstance(x, Draw) for x in v) for v in vars(b).values())
    assert not holds_draws(plain) and not any(holds_draws(e) for e in plain._entries
                                              if isinstance(e, PrivacyBudget))
    assert holds_draws(budget)
    assert [m.what for m in plain.measurements] == [m.what for m in budget.measurements] == ["w", "pick", "cells"]


# ---- the audit's replicated budget -------------------------------------------------------------------------------


def test_a_replicated_budget_draws_a_leading_axis_of_runs_and_refuses_selections():
    trace: list = []
    bits = CountingBits(12)
    budget = ReplicatedBudget(1, bits, 4000, trace, factor=2)
    first, second = budget.split([1, 1])
    noisy, record = first.laplace(np.full((3, 2), 10), 1, Fraction(1, 2), "cells")
    assert noisy.shape == (4000, 3, 2) and record.queries == 6 and record.scale == 4
    assert trace[0].values.shape == (4000, 3, 2)
    # The runs are independent draws around the answers: the runs differ, and the noise has the scale's variance
    # (24,000 draws: within 6 sd of the exact variance, a normal-approximation false alarm below 1e-8).
    assert len({tuple(run.ravel()) for run in noisy}) > 3000
    var, sd_one = variance_band(4)
    assert abs(np.mean((noisy - 10.0) ** 2) - var) < 6 * sd_one / math.sqrt(noisy.size)
    weighted, _ = second.laplace_weighted(np.zeros(3, dtype=np.int64), [1, 2, 3], 1, Fraction(1, 4), "w",
                                          composition="t")
    assert weighted.shape == (4000, 3) and trace[1].values.shape == (4000, 3)
    read = bits.read
    with pytest.raises(TypeError, match="cannot make selections"):
        second.choose([0, 1], Fraction(1, 4), 1, "pick")
    assert bits.read == read


def test_scale_classes_list_each_distinct_scale_with_its_positions_in_order():
    from dphist.privacy.budget import _classes

    rng = np.random.default_rng(2)
    for scales in ([1, 2, 7, 64], [1, 2, 3, 5, 8, 13, 21], [4]):
        relative = rng.choice(scales, size=500).astype(float)
        classes = _classes(relative)
        assert [v for v, _ in classes] == sorted(scales)
        for value, where in classes:
            assert np.array_equal(np.arange(500)[where], np.flatnonzero(relative == value))


# ---- the zCDP budget ------------------------------------------------------------------------------------------------


def moments(sigma2: float) -> tuple[float, float]:
    """The exact variance and fourth moment of the discrete Gaussian with variance parameter ``sigma2``."""
    half = int(40 * math.sqrt(sigma2)) + 20
    k = np.arange(-half, half + 1, dtype=np.float64)
    weights = np.exp(-(k**2) / (2 * sigma2))
    pmf = weights / weights.sum()
    return float(np.sum(k**2 * pmf)), float(np.sum(k**4 * pmf))


def assert_gaussian_variance(noise: np.ndarray, sigma2: float) -> None:
    var, fourth = moments(sigma2)
    half = Z_BAND * math.sqrt((fourth - var**2) / noise.size)
    estimate = float(np.mean(noise.astype(np.float64) ** 2))
    assert abs(estimate - var) <= half, (estimate, var, half)
    for off in (0.81, 1.21):  # the band has power against σ 10 % off
        assert abs(moments(sigma2 * off)[0] - var) > 2 * half


@settings(max_examples=200, deadline=None)
@given(st.fractions(min_value=Fraction(1, 10**12), max_value=Fraction(10**6)))
def test_epsilon_within_is_the_largest_grid_epsilon_whose_square_half_fits(rho):
    eps = epsilon_within(rho)
    assert eps.denominator <= 10**9 and (eps * 10**9).denominator == 1
    assert eps**2 / 2 <= rho < (eps + Fraction(1, 10**9)) ** 2 / 2


def test_a_zcdp_budget_has_no_epsilon_and_counts_rho():
    budget = ZCDPBudget(Fraction(1, 8), bits=SeededBits(1))
    assert budget.definition == "zcdp" and budget.noise == "gaussian" and budget.rho == Fraction(1, 8)
    with pytest.raises(AttributeError):
        budget.epsilon  # noqa: B018
    parts = budget.split([1, 2, 5])
    assert [p.amount for p in parts] == [Fraction(1, 64), Fraction(2, 64), Fraction(5, 64)]
    parts[0].laplace(np.zeros(3, dtype=np.int64), 1, parts[0].amount, "laplace")
    parts[1].gaussian(np.zeros(4, dtype=np.int64), 3, parts[1].amount, "gaussian")
    parts[2].selection(4, parts[2].amount, 1, "selection").choose([1, 2, 3])
    assert budget.spent == Fraction(1, 8)  # exactly, in rho
    assert [m.rho for m in budget.measurements] == [Fraction(1, 64), Fraction(2, 64), Fraction(5, 64)]


def test_laplace_in_zcdp_buys_epsilon_root_two_rho_rounded_down():
    budget = ZCDPBudget(Fraction(1, 50), bits=SeededBits(2), factor=3)
    _, record = budget.laplace(np.zeros(10, dtype=np.int64), 2, budget.amount, "cells")
    assert record.mechanism == LAPLACE and record.rho == Fraction(1, 50)
    assert record.epsilon == epsilon_within(Fraction(1, 50)) == Fraction(1, 5)  # √(2/50) = 1/5 exactly
    assert record.scale == Fraction(3 * 2) / Fraction(1, 5) and record.sensitivity == 6
    assert record.epsilon**2 / 2 <= record.rho


def test_selection_in_zcdp_splits_rho_over_draws():
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(3))
    selection = budget.selection(4, budget.amount, 1, "draws")
    per_draw = epsilon_within(Fraction(1, 8))  # ρ/4 per draw → ε_d = √(2ρ/4) = 1/2
    assert per_draw == Fraction(1, 2)
    assert selection.record.mechanism == SELECTION and selection.record.epsilon == 4 * per_draw
    assert selection.record.rho == Fraction(1, 2) and selection.record.scale == 2 / per_draw
    for _ in range(4):
        assert selection.choose([0, 5, 1]) in (0, 1, 2)
    with pytest.raises(BudgetExceeded):
        selection.choose([0, 1])


def test_gaussian_records_sigma2_from_the_l2_sensitivity_rho_and_factor():
    budget = ZCDPBudget(Fraction(3, 10), bits=SeededBits(4), factor=2)
    noisy, record = budget.gaussian(np.arange(6, dtype=np.int64), 5, budget.amount, "levels")
    assert noisy.dtype == np.int64 and noisy.shape == (6,)
    assert record.mechanism == GAUSSIAN and record.epsilon is None and record.sensitivity is None
    assert record.l2_squared == 4 * 5 and record.sigma2 == Fraction(4 * 5) / (2 * Fraction(3, 10))
    assert record.rho == Fraction(3, 10) and record.queries == 6
    report = record.report()
    assert report["sigma2"] == "100/3" and report["rho"] == "0.3" and report["l2_sensitivity_squared"] == 20
    assert report["l2_sensitivity"] == pytest.approx(math.sqrt(20))


def test_measure_gives_each_definition_its_noise():
    pure = PrivacyBudget(1, bits=SeededBits(5))
    _, record = pure.measure(np.zeros(3, dtype=np.int64), 2, 4, pure.amount, "cells")
    assert record.mechanism == LAPLACE and record.scale == 2 and record.rho is None
    zcdp = ZCDPBudget(1, bits=SeededBits(5))
    _, record = zcdp.measure(np.zeros(3, dtype=np.int64), 2, 4, zcdp.amount, "cells")
    assert record.mechanism == GAUSSIAN and record.sigma2 == 2 and record.rho == 1


def test_refusals_come_before_any_bit_is_read():
    bits = CountingBits(6)
    budget = ZCDPBudget(Fraction(1, 10), bits=bits)
    answers = np.zeros(5, dtype=np.int64)
    with pytest.raises(BudgetExceeded):
        budget.gaussian(answers, 1, Fraction(2, 10), "too much")
    with pytest.raises(BudgetExceeded):
        budget.laplace(answers, 1, Fraction(1, 20), "a delta step", delta=Fraction(1, 10**6))
    with pytest.raises(ValueError):
        budget.gaussian(answers, 2**70, Fraction(1, 10), "variance beyond the sampler")
    with pytest.raises(ValueError):
        budget.gaussian_weighted(answers, np.array([1, 1, 0, 1, 1.0]), 1, Fraction(1, 10), "zero weight", "")
    with pytest.raises(BudgetExceeded):
        PrivacyBudget(1, bits=bits).gaussian(answers, 1, 1, "pure budgets have no Gaussian")
    with pytest.raises(BudgetExceeded):
        budget.laplace(answers, 1, Fraction(1, 10**20), "rho too small for any grid epsilon")
    assert bits.read == 0 and budget.spent == 0 and budget.remaining == Fraction(1, 10)


@pytest.mark.parametrize("rho, factor, l2_squared", [(Fraction(1, 200), 1, 1), (Fraction(1, 2), 3, 2)])
def test_gaussian_noise_has_the_discrete_gaussian_variance(rho, factor, l2_squared):
    budget = ZCDPBudget(rho, bits=SeededBits(7), factor=factor)
    noisy, record = budget.gaussian(np.full(400_000, 7, dtype=np.int64), l2_squared, rho, "cells")
    sigma2 = factor**2 * l2_squared / (2 * float(rho))
    assert float(record.sigma2) == pytest.approx(sigma2)
    assert abs(float(np.mean(noisy - 7))) < Z_BAND * math.sqrt(sigma2 / noisy.size)
    assert_gaussian_variance(noisy - 7, sigma2)
    assert record.noise_variance == pytest.approx(moments(sigma2)[0], rel=1e-9)


def test_weighted_gaussian_noise_has_each_values_variance():
    budget = ZCDPBudget(Fraction(1, 8), bits=SeededBits(8))
    relative = np.repeat([1.0, 0.5, 2.5], 200_000)
    noisy, record = budget.gaussian_weighted(np.zeros(relative.size, dtype=np.int64), relative, 3, budget.amount,
                                             "weighted", composition="test")
    assert record.sigma2 == 12  # 3 / (2 · 1/8)
    for g in (1.0, 0.5, 2.5):
        assert_gaussian_variance(noisy[relative == g], 12 * g * g)


# ---------------------------------------------------------------------------------------------------------------
# The figures the rest of dphist reads from the kernel instead of computing with a budget's amounts


def test_epsilon_per_record_is_the_reciprocal_of_a_count_scale_exactly():
    pure = PrivacyBudget(Fraction(3, 10), bits=SeededBits(0), factor=4)
    assert pure.epsilon_per_record(Fraction(3, 10)) == Fraction(3, 40) == 1 / pure.scale(1, Fraction(3, 10))
    assert isinstance(pure.epsilon_per_record(1), Fraction)
    z = ZCDPBudget(Fraction(1, 2), bits=SeededBits(0), factor=2)
    assert z.epsilon_per_record(Fraction(1, 2)) == epsilon_within(Fraction(1, 2)) / 2 == Fraction(1, 2)
    # the float rate is taken from the float scale, as error models read it: 1/float(b), not float(1/b)
    assert pure.inverse_scale(1, Fraction(3, 10)) == 1 / float(Fraction(40, 3))
    assert pure.inverse_scale(2, Fraction(3, 10)) == 1 / float(Fraction(80, 3))


def test_a_share_of_a_budget_is_what_a_split_or_probe_gives():
    budget = PrivacyBudget(Fraction(7, 10), bits=SeededBits(0))
    assert budget.part(Fraction(1, 3)) == Fraction(7, 30)
    first, _ = PrivacyBudget(Fraction(7, 10), bits=SeededBits(0)).split([1, 2])
    assert first.amount == budget.part(Fraction(1, 3)) == budget.probe(Fraction(1, 3)).amount
    assert budget.part(0) == 0


def test_sigma_of_a_gaussian_part():
    z = ZCDPBudget(Fraction(1, 8), bits=SeededBits(0), factor=3)
    assert z.gaussian_sigma(Fraction(1, 8)) == 3 / math.sqrt(0.25) == 6.0  # factor / √(2ρ)
    assert z.gaussian_sigma(Fraction(1, 8), 2) == 12.0
    _, record = z.gaussian(np.zeros(1, dtype=np.int64), 1, Fraction(1, 8), "x")
    assert record.sigma2 == Fraction(36)  # σ² of the measurement the same part buys


def test_partition_selection_splits_delta_over_the_rows_of_the_unit():
    one = PrivacyBudget(1, Fraction(1, 10**6), bits=SeededBits(0))
    assert one.delta_per_row() == 1 - (1 - 1e-6)
    three = PrivacyBudget(1, Fraction(1, 10**6), bits=SeededBits(0), factor=3)
    each = three.delta_per_row()
    assert 1 - (1 - each) ** 3 == pytest.approx(1e-6, rel=1e-9) and each < 1e-6 / 3 * (1 + 1e-6)
    # m labels a unit may hold alone, plus the tail threshold at the unit's scale and δ′
    t = kernel.discrete_laplace_tail_threshold(three.scale(1, 1), each)
    assert three.partition_threshold() == 3 + t
    a = math.exp(-1 / float(three.scale(1, 1)))
    assert a ** (t + 1) / (1 + a) <= each < a ** t / (1 + a)  # the smallest such t


def test_per_row_amounts_of_a_unit_of_k_rows():
    assert kernel.per_row_amount("pure", Fraction(1, 2), 4) == Fraction(1, 8)
    assert kernel.per_row_amount("zcdp", Fraction(1, 2), 4) == Fraction(1, 32)  # ρ/K²
    assert kernel.per_row_amount("approximate", Fraction(1, 2), 4) == Fraction(1, 32)
    assert kernel.per_row_epsilon_like("pure", Fraction(1, 2), 4) == 0.125
    assert kernel.per_row_epsilon_like("zcdp", Fraction(1, 2), 4) == 0.25  # √(2ρ)/K


def test_spent_counting_what_was_charged_and_never_measured():
    budget = PrivacyBudget(1, bits=SeededBits(0))
    used, _ = budget.split([1, 1])
    used.laplace(np.zeros(2, dtype=np.int64), 1, used.amount, "x")
    assert budget.spent == Fraction(1, 2) and budget.spent_counting(Fraction(1, 2)) == 1
