"""The kernel's residual measurement (``ZCDPBudget.gaussian_residual``, docs/privacy.md §1.6): exact cost, the
record, a released residual that sums to 0 along every axis, its noise variance by Monte Carlo, refusal before
paying, and no residual from a pure-ε budget."""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np
import pytest

from counting_bits import CountingBits
from dphist_audit.replication import ReplicatedZCDPBudget
from dphist.privacy import (BudgetExceeded, PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_pmf,
                            discrete_gaussian_variance)
from dphist.privacy.measurement import GAUSSIAN

Z = 5.33  # P(|N(0, 1)| > 5.33) ≈ 1e-7 per check (normal approximation of a mean of 50,000 draws)


def _table(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 40, size=shape)


def test_costs_exactly_its_amount_and_parts_add_up():
    budget = ZCDPBudget(Fraction(2, 3), bits=SeededBits(1))
    parts = budget.split([Fraction(1), Fraction(2), Fraction(5, 2)])
    shapes = [(), (3,), (2, 4)]
    for part, shape in zip(parts, shapes):
        part.gaussian_residual(_table(shape), part.amount, f"basis {shape}")
        assert part.remaining == 0
    assert budget.spent == Fraction(2, 3)
    assert sum((m.rho for m in budget.measurements), Fraction(0)) == Fraction(2, 3)


@pytest.mark.parametrize("factor", [1, 3])
def test_the_record_states_the_scaled_measurement(factor):
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(2), factor=factor)
    residual, record = budget.gaussian_residual(_table((3, 4)), Fraction(1, 5), "basis (0, 1)")
    n, kept = 12, Fraction(2, 3) * Fraction(3, 4)
    s2 = Fraction(factor) ** 2 * n ** 2 * kept / (2 * Fraction(1, 5))
    assert record.mechanism == GAUSSIAN and record.rho == Fraction(1, 5)
    assert record.l2_squared == factor ** 2 * kept
    assert record.sigma2 == s2 / n ** 2
    assert record.l2_squared / (2 * record.sigma2) == record.rho  # the cost in marginal units
    assert record.queries == n and record.scaled_by == n
    assert record.composition == "one residual basis (a projection of the scaled marginal)"
    assert record.noise_variance == pytest.approx(discrete_gaussian_variance(s2) / n ** 2, rel=1e-12)
    assert record.halfwidth() is None  # projected noise: no per-value interval
    assert record.report()["scaled_by"] == n
    assert residual.shape == (3, 4) and residual.dtype == np.float64


def test_the_total_is_the_count_plus_noise():
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(3))
    total, record = budget.gaussian_residual(np.array(1234), Fraction(1, 2), "total")
    assert total.shape == () and float(total) == round(float(total))
    assert record.sigma2 == 1 and record.l2_squared == 1 and record.scaled_by == 1


def test_the_released_residual_sums_to_zero_along_every_axis():
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(4))
    residual, _ = budget.gaussian_residual(_table((2, 3, 5)), Fraction(1), "basis (0, 1, 2)")
    for axis in range(3):
        assert np.allclose(residual.sum(axis=axis), 0, atol=1e-9)
    assert np.any(np.abs(residual) > 0.01)


def test_noise_variance_by_monte_carlo_is_p_times_the_records():
    """50,000 replicated draws of a (2, 3) residual whose scaled noise has s² = 0.2: there the discrete Gaussian's
    variance (0.141) is far below s², so the check tells the record's truthful figure discrete_gaussian_variance(s²)
    /N² from both the continuous s²/N² (41 % more) and the naive discrete_gaussian_variance(s²/N²) (about 0)."""
    shape, n, kept = (2, 3), 6, Fraction(1, 3)
    s2 = Fraction(1, 5)
    amount = n ** 2 * kept / (2 * s2)
    reps = 50_000
    budget = ReplicatedZCDPBudget(amount, SeededBits(5), reps, trace=[])
    table = _table(shape)
    truth = table - table.mean(axis=0, keepdims=True) - table.mean(axis=1, keepdims=True) + table.mean()
    residual, record = budget.gaussian_residual(table, amount, "basis (0, 1)")
    errors = (residual - truth).reshape(reps, -1)
    target = float(kept) * record.noise_variance
    # the error of a cell is (P z)_c / N, z iid discrete Gaussian; its fourth moment from the exact pmf
    support = np.arange(-40, 41)
    pmf = discrete_gaussian_pmf(support, s2)
    m2, m4 = float(pmf @ support ** 2), float(pmf @ support ** 4)
    assert target == pytest.approx(float(kept) * m2 / n ** 2, rel=1e-9)
    weights = _projector(shape)[0] / n  # cell 0's row of P/N (every cell has the same row up to order)
    fourth = m4 * np.sum(weights ** 4) + 3 * m2 ** 2 * (np.sum(weights ** 2) ** 2 - np.sum(weights ** 4))
    sd = math.sqrt((fourth - target ** 2) / reps)
    for cell in range(errors.shape[1]):
        assert abs(np.mean(errors[:, cell] ** 2) - target) <= Z * sd
        assert abs(errors[:, cell].mean()) <= Z * math.sqrt(target / reps)
    assert abs(float(kept * s2) / n ** 2 - target) > 2 * Z * sd  # the continuous figure would fail
    assert abs(float(kept) * discrete_gaussian_variance(s2 / n ** 2) - target) > 2 * Z * sd


def _projector(shape) -> np.ndarray:
    out = np.ones((1, 1))
    for n in shape:
        out = np.kron(out, np.eye(n) - np.ones((n, n)) / n)
    return out


def test_a_refused_scale_charges_nothing_and_draws_nothing():
    bits = CountingBits(6)
    budget = ZCDPBudget(Fraction(1), bits=bits)
    with pytest.raises(ValueError, match="2\\^60"):
        budget.gaussian_residual(_table((1000, 1000)), Fraction(1, 10**8), "huge")
    with pytest.raises(ValueError):
        budget.gaussian_residual(_table((1, 3)), Fraction(1, 2), "one value")
    with pytest.raises(TypeError):
        budget.gaussian_residual(np.zeros((2, 2)), Fraction(1, 2), "floats")
    with pytest.raises(BudgetExceeded):
        budget.gaussian_residual(_table((2,)), Fraction(2), "too much")
    assert budget.spent == 0 and budget.remaining == 1 and not budget.measurements and bits.read == 0


def test_a_pure_budget_refuses():
    budget = PrivacyBudget(Fraction(1), bits=SeededBits(7))
    with pytest.raises(BudgetExceeded, match="zCDP"):
        budget.gaussian_residual(_table((2, 2)), Fraction(1, 2), "basis")
    assert budget.spent == 0


def test_counts_beyond_64_bit_scaling_are_measured_not_refused():
    """Whether N·m fits in int64 depends on the counts, so it must not decide a refusal: a table whose scaled
    counts pass 2^62 is measured (in Python integers) and released like any other."""
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(8))
    big = np.array([[2**61, 2**61 + 4], [2**61 + 8, 2**61]], dtype=np.int64)
    residual, record = budget.gaussian_residual(big, Fraction(1, 2), "basis (0, 1)")
    assert budget.spent == Fraction(1, 2) and record.scaled_by == 4
    # The residual is shift-invariant: the noiseless one is that of the offsets from 2^61.
    projected = _projector((2, 2)) @ np.array([0, 4, 8, 0], dtype=np.float64)
    assert np.allclose(residual.ravel(), projected, atol=10)
