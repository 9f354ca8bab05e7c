"""Identity: noise on every cell (docs/algorithms.md §1.1–1.3).

    select:   the identity queries, one per cell (zeros included)
    measure:  y = x + noise; one record changes one cell by 1 under add/remove, so Δ₁ = Δ₂ = 1:
              discrete Laplace of scale 1/ε (pure ε) or discrete Gaussian of variance 1/(2ρ) (zCDP)
    infer:    x̂ = y (the identity is its own least-squares inverse)
"""

from __future__ import annotations

import numpy as np

from ..privacy import PrivacyBudget
from .base import Algorithm, Estimate

L1 = 1  # add/remove of one record changes one cell by 1
L2_SQUARED = 1


class Identity(Algorithm):
    name = "identity"
    summary = "noise on every cell (Laplace, or Gaussian under zCDP); best for point queries and small domains"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        noisy, record = budget.measure(counts, L1, L2_SQUARED, budget.amount, "every cell")
        return Estimate(
            values=noisy.astype(np.float64),
            # The same on every cell: read-only views of one value (no memory per cell).
            variance=np.broadcast_to(np.float64(record.noise_variance), counts.shape),
            halfwidth=np.broadcast_to(np.float64(record.halfwidth()), counts.shape),
        )
