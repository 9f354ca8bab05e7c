"""Clopper–Pearson bounds, the lower confidence bound on ε they give (docs/privacy.md §2.2), and the check
of a ρ-zCDP claim against them."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy import stats

__all__ = ["cp_lower", "cp_upper", "epsilon_lower_bound", "zcdp_grid", "zcdp_margins", "zcdp_lower_bound",
           "runs_for_power"]


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


# -- zCDP claims ------------------------------------------------------------------------------------------------
#
# A ρ-zCDP mechanism is (ε, δ_ρ(ε))-DP for every ε > 0, with δ_ρ the tight conversion of Canonne, Kamath and
# Steinke (conversions.delta_for): for every event E, P[E | D] <= e^ε P[E | D′] + δ_ρ(ε).  With p_L a lower
# confidence bound on P[E | D] and q_U an upper one on P[E | D′], holding together with probability >= 1 - alpha,
# the claim is contradicted at ε when p_L − e^ε q_U > δ_ρ(ε), i.e. when ln((p_L − δ_ρ(ε)) / q_U) > ε: the
# smallest ε the event allows at δ = δ_ρ(ε) exceeds the ε the claim gives at that δ.  Checking many ε needs no
# further multiple-testing correction: every check is implied by the same two confidence statements.

#: Spacing of the ε grid on which a zCDP claim is checked.
GRID_STEP = 0.01
#: The grid stops where δ_ρ(ε) falls below this: past it ln((p_L − δ)/q_U) − ε only decreases for the events the
#: audit uses (probabilities of 1e-3 and more), so larger ε cannot show a violation that smaller ones miss.
GRID_DELTA = 1e-12


@lru_cache(maxsize=64)
def zcdp_grid(rho: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """The ε grid (multiples of GRID_STEP from GRID_STEP up to epsilon_for(ρ, GRID_DELTA)) and δ_ρ at each point
    (float arrays of the same length; δ exact to float precision, from the tight conversion)."""
    from dphist.privacy.conversions import delta_for, epsilon_for  # noqa: PLC0415  (the kernel's conversion)

    rho = Fraction(rho)
    top = int(math.ceil(epsilon_for(rho, GRID_DELTA) / GRID_STEP)) + 1
    steps = round(1 / GRID_STEP)
    eps = np.arange(1, top + 1) / steps
    delta = np.array([delta_for(rho, Fraction(j, steps)) for j in range(1, top + 1)])
    return eps, delta


def zcdp_margins(p_low, q_high, rho) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For bounds p_L, q_U (arrays of any shape S): the grid (ε, δ) and ln((p_L − δ)/q_U) at every grid point,
    shape S + (grid,), −inf where p_L <= δ (the event is too rare to say anything at that δ)."""
    eps, delta = zcdp_grid(Fraction(rho))
    p = np.asarray(p_low, dtype=float)[..., None]
    q = np.asarray(q_high, dtype=float)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        lower = np.where(p > delta, np.log(np.maximum(p - delta, 1e-300) / q), -np.inf)
    return eps, delta, lower


def zcdp_lower_bound(k_first: int, k_second: int, n: int, rho, alpha: float) -> tuple[float, float, float]:
    """The zCDP check of one event seen k_first times in n runs on one input and k_second times on the other.

    Returns (lower, ε, δ) at the grid point where the event contradicts the ρ-zCDP claim most (largest
    lower − ε): ``lower`` = ln((p_L − δ)/q_U) is, with probability >= 1 - alpha (alpha/2 for each bound), at most
    the smallest ε for which the mechanism can be (ε, δ)-DP on this event, and the claim gives (ε, δ) with
    δ = δ_ρ(ε).  The claim is contradicted iff lower > ε.  When the event is rarer than every δ on the grid,
    lower is −inf and (ε, δ) is the point where p_L − e^ε q_U − δ is largest.
    """
    p_low = float(cp_lower(k_first, n, alpha / 2))
    q_high = float(cp_upper(k_second, n, alpha / 2))
    eps, delta, lower = zcdp_margins(p_low, q_high, rho)
    lower = lower[0] if lower.ndim > 1 else lower
    if np.all(np.isneginf(lower)):
        j = int(np.argmax(p_low - delta - np.exp(eps) * q_high))
    else:
        j = int(np.argmax(lower - eps))
    return float(lower[j]), float(eps[j]), float(delta[j])


# -- power ------------------------------------------------------------------------------------------------------


def runs_for_power(p: float, q: float, alpha: float, epsilon: float | None = None, rho=None,
                   power: float = 0.99) -> int:
    """The fewest test runs per table with which an event of probability ``p`` on one table and ``q`` on the other
    contradicts the claim (ε, or ρ-zCDP when ``rho`` is given) with probability at least ``power``.

    The bound is monotone (it rises with the first count and falls with the second), so it suffices that the
    ((1 − power)/2)-quantile of Bin(n, p) and the ((1 + power)/2)-quantile of Bin(n, q) still give a bound above
    the claim: both counts are at least that favourable together with probability >= ``power``.  The event is
    taken as fixed (chosen on a separate selection sample); 0 < q <= p <= 1.
    """
    tail = (1 - power) / 2

    def flagged(n: int) -> bool:
        k1, k2 = int(stats.binom.ppf(tail, n, p)), int(stats.binom.ppf(1 - tail, n, q))
        if rho is not None:
            lower, eps, _ = zcdp_lower_bound(k1, k2, n, rho, alpha)
            return lower > eps
        return epsilon_lower_bound(k1, k2, n, alpha) > epsilon

    high = 16
    while not flagged(high):
        high *= 2
        if high > 1 << 34:
            raise ValueError(f"no sample size up to 2^34 runs shows an event of p = {p:g}, q = {q:g}")
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if flagged(mid) else (mid, high)
    return high
