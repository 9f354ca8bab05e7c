"""The exact exponential-mechanism primitive: permute-and-flip with exact Bernoulli(exp(-x)) coins.

χ² tests use fixed seeds and p > 1e-6 (false alarm below 1e-6).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dphist.privacy.bits import SeededBits
from dphist.privacy.samplers import bernoulli_exp, permute_and_flip, uniform_below


def permute_and_flip_distribution(scores, epsilon, sensitivity):
    """Exact output probabilities, by enumerating every visiting order."""
    best = max(scores)
    accept = [math.exp(-epsilon * (best - q) / (2 * sensitivity)) for q in scores]
    n = len(scores)
    prob = np.zeros(n)
    for order in itertools.permutations(range(n)):
        reach = 1.0
        for r in order:
            prob[r] += reach * accept[r]
            reach *= 1 - accept[r]
    return prob / math.factorial(n)


@pytest.mark.parametrize("scores, epsilon", [([0, -3, -1, -7, -2], 1.0), ([5, 5, 4, 0], 0.5), ([2, 0], 1.5)])
def test_permute_and_flip_frequencies_match_the_exact_distribution(scores, epsilon):
    bits = SeededBits(17)
    draws = np.array([permute_and_flip(scores, Fraction(epsilon), 1, bits) for _ in range(40_000)])
    observed = np.bincount(draws, minlength=len(scores))
    expected = permute_and_flip_distribution(scores, epsilon, 1) * draws.size
    keep = expected > 0
    assert stats.chisquare(observed[keep], expected[keep]).pvalue > 1e-6
    # The same test rejects the distribution at twice the epsilon (it can fail).
    wrong = permute_and_flip_distribution(scores, 2 * epsilon, 1) * draws.size
    assert stats.chisquare(observed, wrong).pvalue < 1e-6


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 10), Fraction(1), Fraction(5, 2), Fraction(3), Fraction(7, 2),
                               Fraction(12)])
def test_bernoulli_exp_rate(x):
    bits = SeededBits(3)
    n = 100_000 if x < 5 else 2_000_000
    hits = sum(bernoulli_exp(x, bits) for _ in range(n)) if n <= 100_000 else None
    p = math.exp(-float(x))
    if hits is None:  # rare event: vectorised check through the same expansion
        from dphist.privacy.samplers import _exp_neg, bernoulli
        hits = int(bernoulli(_exp_neg(x), n, bits).sum())
    assert abs(hits - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1e-9


def test_uniform_below_is_uniform():
    bits = SeededBits(4)
    for m in (1, 2, 3, 7, 1000, 2**33 + 5):
        draws = [uniform_below(m, bits) for _ in range(3000)]
        assert min(draws) >= 0 and max(draws) < m
    draws = np.array([uniform_below(7, bits) for _ in range(70_000)])
    assert stats.chisquare(np.bincount(draws, minlength=7)).pvalue > 1e-6


def test_best_candidate_always_wins_at_huge_epsilon_and_inputs_are_checked():
    bits = SeededBits(5)
    assert {permute_and_flip([0, -100, -50], Fraction(1000), 1, bits) for _ in range(200)} == {0}
    with pytest.raises(ValueError):
        bernoulli_exp(-1, bits)
    with pytest.raises(ValueError):
        permute_and_flip([], Fraction(1), 1, bits)
