"""Audit layer 1: the production samplers against their exact distributions (docs/privacy.md §2.3).

A χ² goodness-of-fit test of discrete Laplace draws against the exact pmf must pass, and the same test must
reject the pmf at 0.9 and 1.1 times the scale (so it has the power to see a mis-scaled sampler); the same for
discrete Gaussian draws at σ × 0.9 and × 1.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

from dphist.privacy import BitSource
from dphist.privacy.samplers import discrete_gaussian, discrete_gaussian_pmf, discrete_laplace, discrete_laplace_pmf

__all__ = ["chi2_pvalue", "gaussian_chi2_pvalue", "SamplerResult", "check_sampler", "check_gaussian_sampler"]


def chi2_pvalue(sample: np.ndarray, scale: float) -> float:
    """χ² goodness of fit of integer draws against the discrete Laplace pmf of ``scale``.

    Cells: every integer whose expected count is at least 20, plus the two tails merged.
    """
    n = sample.size
    a = math.exp(-1 / scale)
    k = 0
    while n * discrete_laplace_pmf(k + 1, scale) >= 20:
        k += 1
    centre = np.arange(-k, k + 1)
    expected = n * discrete_laplace_pmf(centre, scale)
    tail = n * a ** (k + 1) / (1 + a)  # P(Z > k) = P(Z < -k) = a^(k+1) / (1 + a)
    observed = np.bincount(np.clip(sample, -k - 1, k + 1) + k + 1, minlength=2 * k + 3)
    return float(stats.chisquare(observed, np.concatenate([[tail], expected, [tail]])).pvalue)


def gaussian_chi2_pvalue(sample: np.ndarray, sigma2: float) -> float:
    """χ² goodness of fit of integer draws against the discrete Gaussian pmf of variance parameter ``sigma2``.

    Cells: every integer whose expected count is at least 20, plus the two tails merged (by symmetry, each tail's
    probability is half of what the central cells leave)."""
    n = sample.size
    k = 0
    while n * float(discrete_gaussian_pmf(k + 1, sigma2)) >= 20:
        k += 1
    centre = np.arange(-k, k + 1)
    expected = n * np.asarray(discrete_gaussian_pmf(centre, sigma2), dtype=np.float64)
    tail = max((n - expected.sum()) / 2, 1e-300)
    observed = np.bincount(np.clip(sample, -k - 1, k + 1) + k + 1, minlength=2 * k + 3)
    return float(stats.chisquare(observed, np.concatenate([[tail], expected, [tail]])).pvalue)


@dataclass(frozen=True)
class SamplerResult:
    scale: Fraction
    n: int
    p_exact: float
    p_smaller: float
    p_larger: float
    threshold: float

    @property
    def ok(self) -> bool:
        return self.p_exact > self.threshold and self.p_smaller < self.threshold and self.p_larger < self.threshold


def check_sampler(scale, n: int, bits: BitSource, threshold: float = 1e-6) -> SamplerResult:
    """Draw ``n`` values at ``scale`` from ``bits`` and test them against the pmf at 1, 0.9 and 1.1 x scale."""
    scale = Fraction(scale)
    sample = discrete_laplace(scale, n, bits)
    s = float(scale)
    return SamplerResult(scale, n, chi2_pvalue(sample, s), chi2_pvalue(sample, 0.9 * s), chi2_pvalue(sample, 1.1 * s),
                         threshold)


def check_gaussian_sampler(sigma2, n: int, bits: BitSource, threshold: float = 1e-6) -> SamplerResult:
    """Draw ``n`` discrete Gaussian values of variance parameter ``sigma2`` and test them against the pmf at σ,
    0.9σ and 1.1σ (σ² × 0.81, × 1.21).  ``scale`` in the result holds σ²."""
    sigma2 = Fraction(sigma2)
    sample = discrete_gaussian(sigma2, n, bits)
    s = float(sigma2)
    return SamplerResult(sigma2, n, gaussian_chi2_pvalue(sample, s), gaussian_chi2_pvalue(sample, 0.81 * s),
                         gaussian_chi2_pvalue(sample, 1.21 * s), threshold)
