"""Clopper–Pearson bounds and the lower confidence bound on ε they give (privacy-engineering.md §2.2)."""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["cp_lower", "cp_upper", "epsilon_lower_bound"]


def cp_lower(k, n, alpha):
    """One-sided (1 - alpha) Clopper–Pearson lower bound on a binomial proportion; 0 when k = 0."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(alpha, k, n - k + 1)
    return np.where(k <= 0, 0.0, out)


def cp_upper(k, n, alpha):
    """One-sided (1 - alpha) Clopper–Pearson upper bound on a binomial proportion; 1 when k = n."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        out = stats.beta.ppf(1 - alpha, k + 1, n - k)
    return np.where(k >= n, 1.0, out)


def epsilon_lower_bound(k_first: int, k_second: int, n: int, alpha: float) -> float:
    """ln(p_L / q_U) for an event seen k_first times in n runs on one input and k_second times on the other.

    With probability >= 1 - alpha (alpha/2 for each bound), this is below the true ln(p/q), and an ε-DP
    mechanism has ln(p/q) <= ε.  Returns -inf when the event never occurred on the first input.
    """
    p_low = float(cp_lower(k_first, n, alpha / 2))
    q_high = float(cp_upper(k_second, n, alpha / 2))
    if p_low <= 0:
        return -np.inf
    return float(np.log(p_low / q_high))
