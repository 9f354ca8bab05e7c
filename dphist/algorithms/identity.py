"""Identity: discrete Laplace noise on every cell (algorithms.md §1.1–1.2).

    select:   the identity queries, one per cell (zeros included)
    measure:  y = x + DLap(Δ/ε) with Δ = 1 (one record changes one cell by 1 under add/remove)
    infer:    x̂ = y (the identity is its own least-squares inverse)
"""

from __future__ import annotations

import numpy as np

from ..privacy import PrivacyBudget, discrete_laplace_halfwidth
from .base import Algorithm, Estimate

SENSITIVITY = 1  # L1, add/remove of one record, one table


class Identity(Algorithm):
    name = "identity"
    summary = "discrete Laplace noise on every cell; best for point queries and small domains"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        noisy, record = budget.laplace(counts, SENSITIVITY, budget.epsilon, "every cell")
        return Estimate(
            values=noisy.astype(np.float64),
            variance=np.full(counts.shape, record.noise_variance),
            halfwidth=np.full(counts.shape, discrete_laplace_halfwidth(record.scale)),
        )
