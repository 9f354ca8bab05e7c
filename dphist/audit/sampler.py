"""Audit layer 1: the production sampler against its exact distribution (privacy-engineering.md §2.3).

A χ² goodness-of-fit test of discrete Laplace draws against the exact pmf must pass, and the same test must
reject the pmf at 0.9 and 1.1 times the scale (so it has the power to see a mis-scaled sampler).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

from ..privacy import BitSource
from ..privacy.samplers import discrete_laplace, discrete_laplace_pmf

__all__ = ["chi2_pvalue", "SamplerResult", "check_sampler"]


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
