"""Identity: discrete Laplace noise on every cell (algorithms.md §1.1–1.2).

    strategy:  the identity queries, one per cell (zeros included)
    measure:   y = x + DLap(Δ/ε) with Δ = 1 (one record changes one cell by 1 under add/remove)
    infer:     x̂ = y (the identity is its own least-squares inverse)
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..noise import BitSource, discrete_laplace_halfwidth, discrete_laplace_variance
from .base import Algorithm, Estimate, measure

SENSITIVITY = 1  # L1, add/remove of one record, one table


class Identity(Algorithm):
    name = "identity"
    summary = "discrete Laplace noise on every cell; best for point queries and small domains"

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        noisy, record = measure(counts, SENSITIVITY, epsilon, bits, "every cell")
        scale = record.scale
        return Estimate(
            values=noisy.astype(np.float64),
            measurements=[record],
            variance=np.full(counts.shape, discrete_laplace_variance(scale)),
            halfwidth=np.full(counts.shape, discrete_laplace_halfwidth(scale)),
            noisy=[noisy],
        )
