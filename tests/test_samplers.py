"""The exact discrete Laplace sampler: distribution (χ² against the exact pmf), variance, exactness of the lazy
coin, and the production randomness path.

False-alarm budget: every statistical check uses a fixed seed and a threshold of p < 1e-6 (or a ±5 σ band), so a
correct sampler fails with probability below about 1e-6 per check if the seed were drawn at random.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dphist.audit.sampler import chi2_pvalue
from dphist.privacy import samplers
from dphist.privacy.bits import BitSource, SeededBits, SystemBits
from dphist.privacy.samplers import (bernoulli, discrete_laplace, discrete_laplace_halfwidth, discrete_laplace_pmf,
                                     discrete_laplace_variance, geometric)

P_THRESHOLD = 1e-6


@pytest.mark.parametrize("scale", [Fraction(10), Fraction(1, 2), Fraction(10, 3), Fraction(1000)])
def test_chi2_matches_exact_pmf_and_rejects_wrong_scales(scale):
    sample = discrete_laplace(scale, 1_000_000, SeededBits(1234))
    assert chi2_pvalue(sample, float(scale)) > P_THRESHOLD
    # The same test must be able to fail: the pmf at scale x0.9 and x1.1 is rejected.
    assert chi2_pvalue(sample, float(scale) * 0.9) < P_THRESHOLD
    assert chi2_pvalue(sample, float(scale) * 1.1) < P_THRESHOLD


def test_chi2_oracle_itself_rejects_a_wrong_sampler():
    # numpy's float Laplace rounded to integers is a different distribution from the discrete Laplace.
    rng = np.random.default_rng(5)
    wrong = np.rint(rng.laplace(0, 3, 1_000_000)).astype(np.int64)
    assert chi2_pvalue(wrong, 3.0) < P_THRESHOLD


@pytest.mark.parametrize("scale", [Fraction(1, 10), Fraction(1), Fraction(10)])
def test_sample_variance_matches_formula(scale):
    n = 400_000
    sample = discrete_laplace(scale, n, SeededBits(99)).astype(float)
    var = discrete_laplace_variance(scale)
    # sd of the sample variance is sqrt((m4 - var^2)/n); m4 of a discrete Laplace is at most 6 var^2 + var.
    sd = math.sqrt((5 * var**2 + var) / n)
    assert abs(sample.var() - var) < 5 * sd
    assert abs(sample.mean()) < 5 * math.sqrt(var / n)


def test_variance_formula_against_direct_sum():
    for scale in (0.3, 1.0, 10.0):
        k = np.arange(-5000, 5001)
        direct = np.sum(k.astype(float) ** 2 * discrete_laplace_pmf(k, scale))
        assert math.isclose(direct, discrete_laplace_variance(scale), rel_tol=1e-9)


def test_geometric_distribution_mean_and_zero_mass():
    scale = Fraction(5, 2)
    a = math.exp(-1 / 2.5)
    g = geometric(scale, 500_000, SeededBits(7)).astype(float)
    mean = a / (1 - a)
    sd = math.sqrt(a / (1 - a) ** 2 / g.size)
    assert abs(g.mean() - mean) < 5 * sd
    p0 = 1 - a
    assert abs(np.mean(g == 0) - p0) < 5 * math.sqrt(p0 * (1 - p0) / g.size)


def test_shape_and_dtype():
    z = discrete_laplace(2, (3, 4, 5), SeededBits(0))
    assert z.shape == (3, 4, 5) and z.dtype == np.int64
    assert discrete_laplace(2, 0, SeededBits(0)).shape == (0,)


@pytest.mark.parametrize("bad", [0, -1, Fraction(-1, 2)])
def test_scale_must_be_positive(bad):
    with pytest.raises(ValueError):
        discrete_laplace(bad, 10, SeededBits(0))


def test_halfwidth_is_smallest_covering_integer():
    assert discrete_laplace_halfwidth(Fraction(1, 5000)) == 0  # exp(-5000) underflows to 0
    for scale in (0.1, 0.5, 2, 10, 100):
        q = discrete_laplace_halfwidth(scale)
        a = math.exp(-1 / scale)
        assert 2 * a ** (q + 1) / (1 + a) <= 0.05  # P(|Z| > q) <= 5 %
        assert q == 0 or 2 * a**q / (1 + a) > 0.05  # and q - 1 would not do


# ---- the lazy comparison is exact ------------------------------------------------------------------------------


def exp_neg_bounds(x: Fraction, terms: int = 80) -> tuple[Fraction, Fraction]:
    """Rigorous bounds on exp(-x) for 0 < x < 1 from the alternating Taylor series."""
    total, term = Fraction(0), Fraction(1)
    for k in range(terms):
        total += term
        term = term * (-x) / (k + 1)
    # The next term bounds the error of an alternating series with decreasing terms.
    return (total - abs(term), total + abs(term))


def test_expansion_digits_match_an_independent_computation():
    x = Fraction(1, 10)  # overflow probability exp(-2^J/scale) with 2^J/scale = 1/10 for scale 10, j = 0
    expansion = samplers._tail_probability(Fraction(10), 0)
    lo, hi = exp_neg_bounds(x)
    bits = 32 * 4
    assert math.floor(lo * 2**bits) == math.floor(hi * 2**bits)
    expected = math.floor(lo * 2**bits)
    got = 0
    for k in range(4):
        got = (got << 32) | expansion.word(k)
    assert got == expected


class ScriptedBits(BitSource):
    """Returns the given words in order (for exercising the tie path)."""

    def __init__(self, words):
        self.queue = list(words)

    def words(self, n):
        out, self.queue = self.queue[:n], self.queue[n:]
        assert len(out) == n, "script ran out of words"
        return np.array(out, dtype=np.uint32)


def test_ties_are_resolved_by_further_words():
    p = samplers._bit_probability(Fraction(10), 0)
    w0, w1, w2 = p.word(0), p.word(1), p.word(2)
    assert bernoulli(p, 1, ScriptedBits([w0 - 1])).tolist() == [True]
    assert bernoulli(p, 1, ScriptedBits([w0 + 1])).tolist() == [False]
    # A tie on the first word is decided by the second, then the third.
    assert bernoulli(p, 1, ScriptedBits([w0, w1 - 1])).tolist() == [True]
    assert bernoulli(p, 1, ScriptedBits([w0, w1 + 1])).tolist() == [False]
    assert bernoulli(p, 1, ScriptedBits([w0, w1, w2 + 1])).tolist() == [False]
    # Several coins at once, only one tied.
    assert bernoulli(p, 3, ScriptedBits([0, w0, 0xFFFFFFFF, w1 - 1])).tolist() == [True, True, False]


# ---- where production randomness comes from -----------------------------------------------------------------


def test_system_bits_read_os_urandom(urandom_calls):
    discrete_laplace(10, 1000, SystemBits())
    assert urandom_calls and sum(urandom_calls) >= 4 * 1000


def test_unseeded_draws_differ_and_pass_chi2():
    a = discrete_laplace(10, 100_000, SystemBits())
    b = discrete_laplace(10, 100_000, SystemBits())
    assert not np.array_equal(a, b)
    assert chi2_pvalue(a, 10.0) > 1e-9  # not seeded, so a looser threshold (false alarm < 1e-9)


def test_seeded_bits_are_reproducible_and_not_private():
    assert np.array_equal(discrete_laplace(3, 1000, SeededBits(5)), discrete_laplace(3, 1000, SeededBits(5)))
    assert SeededBits(5).private is False and SystemBits().private is True
