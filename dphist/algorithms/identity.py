"""Identity: discrete Laplace noise on every cell (algorithms.md §1.1–1.2).

    strategy:  the identity queries, one per cell (zeros included)
    measure:   y = x + DLap(Δ/ε) with Δ = 1 (one record changes one cell by 1 under add/remove)
    infer:     x̂ = y (the identity is its own least-squares inverse)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..noise import BitSource, discrete_laplace, discrete_laplace_halfwidth, discrete_laplace_variance
from .base import Algorithm, Estimate, Measurement

SENSITIVITY = 1  # L1, add/remove of one record, one table


class Identity(Algorithm):
    name = "identity"
    summary = "discrete Laplace noise on every cell; best for point queries and small domains"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource) -> Estimate:
        scale = Fraction(SENSITIVITY) / epsilon
        noisy = counts + discrete_laplace(scale, counts.shape, bits)
        variance = discrete_laplace_variance(scale)
        measurement = Measurement(
            what="every cell",
            mechanism="discrete Laplace",
            sensitivity=SENSITIVITY,
            scale=scale,
            epsilon=epsilon,
            queries=int(counts.size),
            cell_sd=variance**0.5,
        )
        return Estimate(
            values=noisy.astype(np.float64),
            measurements=[measurement],
            variance=np.full(counts.shape, variance),
            halfwidth=np.full(counts.shape, discrete_laplace_halfwidth(scale)),
        )
