"""SimulationBits: the report's error simulation may draw very large discrete Gaussian noise as rounded normals;
releases (SystemBits, SeededBits) never do."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dphist.privacy import SeededBits, SimulationBits, ZCDPBudget
from dphist.privacy.bits import APPROXIMATE_GAUSSIAN_FROM


def draws(bits, sigma2, n=20_000) -> np.ndarray:
    budget = ZCDPBudget(Fraction(1), bits=bits)
    l2 = 2 * Fraction(sigma2)  # σ² = Δ₂²/(2ρ) at ρ = 1
    noisy, record = budget.gaussian(np.zeros(n, dtype=np.int64), l2, 1, "noise")
    assert record.sigma2 == Fraction(sigma2)
    return noisy


def test_below_the_threshold_the_simulation_draws_the_exact_sampler():
    sigma2 = APPROXIMATE_GAUSSIAN_FROM // 4
    assert np.array_equal(draws(SimulationBits(3), sigma2), draws(SeededBits(3), sigma2))


def test_above_it_a_rounded_normal_of_the_same_variance():
    """20,000 draws at σ² = 2³²: the sample variance is within 5 % of σ² (its relative sd is √(2/n) = 1 %, so a
    false alarm has probability about 6e-7), and the draws are not the exact sampler's (a different law of the
    words, not a copy)."""
    sigma2 = 2**32
    fast = draws(SimulationBits(3), sigma2)
    assert abs(fast.var() / sigma2 - 1) < 0.05 and abs(fast.mean()) < 5 * 2**16 / np.sqrt(fast.size)
    assert not np.array_equal(fast[:1000], draws(SeededBits(3), sigma2, n=1000))


def test_a_release_source_never_approximates():
    assert not getattr(SeededBits(1), "approximate_gaussian", False)
    assert SimulationBits(1).private is False
