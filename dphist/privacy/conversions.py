"""Conversions between ρ-zCDP and (ε, δ)-DP: the tight one of Canonne, Kamath and Steinke, and the classic one.

Tight conversion (CKS20, "The Discrete Gaussian for Differential Privacy", Proposition 12 / Corollary 13): every
ρ-zCDP mechanism is (ε, δ)-DP for

    δ(ρ, ε) = inf over α > 1 of  exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α .

Any single α gives a valid δ, so an imprecise minimiser can only make δ larger (safe), never smaller.

How the infimum is found.  Write u = α − 1 > 0 and f(u) for the logarithm of the bracket:

    f(u)  = u((1+u)ρ − ε) − ln u − (1+u)·ln(1 + 1/u)
    f'(u) = (2u+1)ρ − ε − ln(1 + 1/u)
    f''(u) = 2ρ + 1/(u(1+u)) > 0

so f is strictly convex, f' runs from −∞ (u → 0) to +∞ (u → ∞), and the infimum is attained at the unique root
of f'.  We find that root by bracketed root finding (Brent) on t = ln u, which needs no tuning and cannot wander
off to a local minimum; then δ = min(1, exp(f(u*))).  Everything is done in log space, so nothing overflows.

Classic (loose) conversion (Bun and Steinke 2016): ε = ρ + 2√(ρ ln(1/δ)), i.e. δ = exp(−(ε−ρ)²/(4ρ)) for ε > ρ.
That is the same bracket at α = (ε+ρ)/(2ρ) without the factor (1−1/α)^α/(α−1), which is always below 1, so the
tight δ is never larger than the classic one, and the tight ρ for a given (ε, δ) never smaller.

Safety margins (all on the side that protects the individual):

* ``rho_for`` returns a ρ that still satisfies δ(ρ·(1 + 1e-9), ε) ≤ δ as computed here, and is rounded DOWN to 12
  significant digits.  A 1e-9 relative change of ρ moves ln δ by far more than the ~1e-14 absolute float error of
  ln δ, so the returned ρ is safe for the exact real-number bound too.
* ``epsilon_for`` returns an ε that still satisfies δ(ρ, ε·(1 − 1e-11)) ≤ δ as computed here.  Its margin is
  smaller than rho_for's so that a round trip (rho_for, then epsilon_for on the result) never exceeds the ε one
  started from (ε grows at least like √ρ, so the 1e-9 taken off ρ takes at least ~5e-10 off ε).
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from typing import Any

from ..errors import UsageError
from .amounts import exact_fraction, format_fraction

__all__ = ["ConversionError", "RHO_MARGIN", "EPSILON_MARGIN", "delta_for", "epsilon_for", "rho_for",
           "loose_epsilon", "loose_rho"]

#: Relative safety margin kept by rho_for: the returned ρ is still valid if it were this much larger.
RHO_MARGIN = 1e-9
#: Relative safety margin kept by epsilon_for: the returned ε is still valid if it were this much smaller.
EPSILON_MARGIN = 1e-11
#: ρ and ε are accepted in [_MIN_AMOUNT, _MAX_AMOUNT]; outside it the float search below is not meaningful (and no
#: budget dphist accepts comes near either end).
_MIN_AMOUNT = 1e-30
_MAX_AMOUNT = 1e30
_SIGNIFICANT_DIGITS = 12
_SMALLEST_DELTA = math.ulp(0.0)  # 5e-324
_T_LIMIT = 700.0  # |ln u| beyond this would overflow exp(); u = α − 1 never needs it within the accepted amounts


class ConversionError(UsageError, ValueError):
    """A bad amount given to a conversion: a ValueError, and a UsageError so the CLI prints it as one line."""


def _exact(value: Any, what: str) -> Fraction:
    """The exact amount; a float subclass (numpy.float64) is read as the plain float it is."""
    if isinstance(value, float) and type(value) is not float:
        value = float(value)  # exact_fraction reads repr(), which for numpy 2 is 'np.float64(0.5)'
    try:
        return exact_fraction(value, what)
    except UsageError as exc:
        raise ConversionError(str(exc)) from None


def _amount(value: Any, what: str) -> float:
    """ρ or ε as a float in [_MIN_AMOUNT, _MAX_AMOUNT]; refuses anything else with one line."""
    exact = _exact(value, what)
    if exact <= 0:
        raise ConversionError(f"{what} must be greater than 0, got {format_fraction(exact)}")
    number = float(exact)
    if not _MIN_AMOUNT <= number <= _MAX_AMOUNT:
        raise ConversionError(f"{what} must be between {_MIN_AMOUNT:g} and {_MAX_AMOUNT:g}, got {number:g}")
    return number


def _log_inverse_delta(value: Any) -> float:
    """ln(1/δ) > 0 for 0 < δ < 1, computed from the exact δ so that δ near 0 or near 1 loses nothing."""
    exact = _exact(value, "delta")
    if not 0 < exact < 1:
        raise ConversionError(f"delta must be greater than 0 and less than 1, got {format_fraction(exact)}")
    if exact > Fraction(1, 2):
        # ln(1/δ) = −ln(1 − (1−δ)); 1−δ is exact, so a δ like 1 − 1e-20 does not collapse to ln 1 = 0.
        return -math.log1p(-float(1 - exact))
    # ln of the integers: exact for a δ too small for a float (1e-400 is a valid Fraction).
    return math.log(exact.denominator) - math.log(exact.numerator)


def _brentq(*args, **kwargs) -> float:
    """scipy's root finder, imported on first use: scipy.optimize takes ~0.3 s to import, and most runs (every
    pure-epsilon one, the ledger's reading commands) never convert."""
    from scipy.optimize import brentq as scipy_brentq

    return scipy_brentq(*args, **kwargs)


def _log_bracket(u: float, rho: float, eps: float) -> float:
    """f(u): ln of the CKS20 bracket at α = 1 + u (u > 0).  Valid as ln δ for every u, optimal at the root of f'."""
    return u * ((1.0 + u) * rho - eps) - math.log(u) - (1.0 + u) * math.log1p(1.0 / u)


def _slope(t: float, rho: float, eps: float) -> float:
    """f'(u) at u = e^t; strictly increasing in t."""
    u = math.exp(t)
    return (2.0 * u + 1.0) * rho - eps - math.log1p(1.0 / u)


def _log_delta(rho: float, eps: float) -> float:
    """ln δ(ρ, ε) ≤ 0 for ρ > 0, ε ≥ 0 (the infimum over α, capped at ln 1 = 0)."""
    lo, hi = -_T_LIMIT, _T_LIMIT
    if _slope(lo, rho, eps) >= 0:
        # f is increasing down to u = e^-700: the infimum is at α → 1, where the bracket tends to 1.
        return 0.0
    if _slope(hi, rho, eps) <= 0:  # cannot happen for amounts in range (2·e^700·1e-30 > 1e30); kept as a guard
        raise ConversionError(f"rho {rho!r} and epsilon {eps!r} are out of the range this conversion supports")
    t = _brentq(_slope, lo, hi, args=(rho, eps), xtol=1e-13, rtol=4 * 2.0**-52, maxiter=500)
    return min(0.0, _log_bracket(math.exp(t), rho, eps))


def _nudge(excess, x: float, direction: float) -> float:
    """x moved (direction +1: up, −1: down) just far enough that excess(x) ≤ 0, for a start point that is valid in
    exact arithmetic and can miss only by float rounding; a miss beyond 1e-6 relative is a bug, not bad input."""
    step = 1e-13
    while excess(x) > 0:
        if step > 1e-6:
            raise RuntimeError("conversion: a bound that should hold failed by more than float rounding")
        x += direction * step * max(abs(x), 1e-300)
        step *= 2.0
    return x


def delta_for(rho: Any, epsilon: Any) -> float:
    """The smallest δ with which the tight CKS20 conversion shows every ρ-zCDP mechanism is (ε, δ)-DP.

    ρ > 0 and ε > 0 (Fraction, int, float or decimal string).  Returns a float in (0, 1]; 1 means the conversion
    gives nothing at this ε; a δ too small for a float is returned as 5e-324, never 0.  Never larger than the classic exp(−(ε−ρ)²/(4ρ)).  Raises ConversionError (a
    ValueError) on a bad amount.
    """
    # A δ below the float range is reported as the smallest positive float, never as 0 (which would claim more).
    return max(math.exp(_log_delta(_amount(rho, "rho"), _amount(epsilon, "epsilon"))), _SMALLEST_DELTA)


def epsilon_for(rho: Any, delta: Any) -> float:
    """The smallest ε ≥ 0 with delta_for(ρ, ε) ≤ δ: the ε that ρ-zCDP buys at this δ under the tight conversion.

    ρ > 0, 0 < δ < 1.  Found by bisection (Brent) between 0 and the classic ε, which is always valid; the result
    keeps a relative margin of EPSILON_MARGIN (it is still valid at ε·(1 − EPSILON_MARGIN)).  Never larger than
    loose_epsilon(ρ, δ) by more than that margin.  Can be 0.0 when ρ is tiny beside δ² (ρ-zCDP then already
    implies (0, δ)-DP).
    """
    r = _amount(rho, "rho")
    log_inv = _log_inverse_delta(delta)
    target = -log_inv
    if _log_delta(r, 0.0) <= target:
        return 0.0
    hi = _loose_epsilon(r, log_inv)

    def excess(e: float) -> float:
        return _log_delta(r, e) - target

    hi = _nudge(excess, hi, +1.0)  # float rounding only: the classic ε is valid in exact arithmetic
    root = _brentq(excess, 0.0, hi, xtol=1e-300, rtol=4 * 2.0**-52, maxiter=500)
    # Twice the margin, so that the check below (at one margin less) looks at a point past the root.
    result = root * (1.0 + 2.0 * EPSILON_MARGIN)
    for _ in range(1000):
        if excess(result * (1.0 - EPSILON_MARGIN)) <= 0:
            return result
        result *= 1.0 + EPSILON_MARGIN
    raise RuntimeError(f"epsilon_for({rho!r}, {delta!r}) found no verified epsilon")  # a bug, not bad input


def _round_down(value: float) -> Fraction:
    """The largest decimal with _SIGNIFICANT_DIGITS significant digits that is ≤ value, as an exact Fraction."""
    return Fraction(Context(prec=_SIGNIFICANT_DIGITS, rounding=ROUND_FLOOR).plus(Decimal(value)))


def rho_for(epsilon: Any, delta: Any) -> Fraction:
    """The largest ρ such that ρ-zCDP implies (ε, δ)-DP by the tight conversion, as an exact Fraction.

    ε > 0, 0 < δ < 1.  The float optimum is shrunk by RHO_MARGIN and rounded DOWN to 12 significant digits, then
    verified: delta_for(ρ·(1 + RHO_MARGIN), ε) ≤ δ holds for the returned ρ.  Never below loose_rho(ε, δ) (bar
    that margin and rounding).  A budget holder can spend this ρ on Gaussian noise and report (ε, δ).
    """
    e = _amount(epsilon, "epsilon")
    log_inv = _log_inverse_delta(delta)
    target = -log_inv

    def excess(log_r: float) -> float:
        return _log_delta(math.exp(log_r), e) - target

    lo = _loose_rho(e, log_inv)  # valid (the tight δ is below the classic one), so excess(ln lo) < 0
    lo = math.exp(_nudge(excess, math.log(lo), -1.0))  # float rounding only
    hi = 2.0 * lo
    while excess(math.log(hi)) <= 0:  # δ(ρ, ε) rises to 1 as ρ grows and δ < 1, so this ends
        hi *= 2.0
        if hi > _MAX_AMOUNT:
            raise ConversionError(f"epsilon {epsilon!r} and delta {delta!r} are out of the supported range")
    root = math.exp(_brentq(excess, math.log(lo), math.log(hi), xtol=1e-14, rtol=4 * 2.0**-52, maxiter=500))
    # Twice the margin, so that the check below (at one margin more) looks at a point short of the root.
    candidate = root * (1.0 - 2.0 * RHO_MARGIN)
    for _ in range(1000):
        result = _round_down(candidate)
        if excess(math.log(float(result) * (1.0 + RHO_MARGIN))) <= 0:
            return result
        candidate *= 1.0 - RHO_MARGIN
    raise RuntimeError(f"rho_for({epsilon!r}, {delta!r}) found no verified rho")  # a bug, not bad input


def _loose_epsilon(rho: float, log_inv: float) -> float:
    return rho + 2.0 * math.sqrt(rho * log_inv)


def _loose_rho(eps: float, log_inv: float) -> float:
    # (√(L+ε) − √L)² written as (ε / (√(L+ε) + √L))² so that a small ε does not cancel away.
    return (eps / (math.sqrt(log_inv + eps) + math.sqrt(log_inv))) ** 2


def loose_epsilon(rho: Any, delta: Any) -> float:
    """The classic conversion ε = ρ + 2√(ρ ln(1/δ)) (Bun–Steinke 2016), for reference; ρ > 0, 0 < δ < 1."""
    return _loose_epsilon(_amount(rho, "rho"), _log_inverse_delta(delta))


def loose_rho(epsilon: Any, delta: Any) -> float:
    """The classic conversion solved for ρ: ρ = (√(ln(1/δ)+ε) − √(ln(1/δ)))², for reference (a float)."""
    return _loose_rho(_amount(epsilon, "epsilon"), _log_inverse_delta(delta))
