"""The zCDP budget of the privacy kernel (dphist/privacy/budget.py, ``ZCDPBudget``): amounts are ρ, linear queries
get exact discrete Gaussian noise of variance parameter σ² = factor²·Δ₂²/(2ρ), Laplace steps and selections buy
ε = √(2ρ) rounded down, costs add up exactly in ρ, and nothing is drawn for a refused measurement.

The noise checks compare mean(x²) with the exact discrete Gaussian variance V (the noise has mean 0 exactly);
the standard deviation of mean(x²) is sqrt((μ₄ − V²)/n), μ₄ the exact fourth moment from the pmf.  A band of
±Z_BAND = 5.33 of those has a two-sided false-alarm rate of about 1e-7 per check (normal approximation, n >=
100,000); each check also shows its band excludes the variance at σ² × 0.81 and × 1.21 (σ × 0.9, × 1.1).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from counting_bits import CountingBits
from dphist.privacy import BudgetExceeded, PrivacyBudget, SeededBits, ZCDPBudget, epsilon_within
from dphist.privacy.measurement import GAUSSIAN, LAPLACE, SELECTION

Z_BAND = 5.33


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
