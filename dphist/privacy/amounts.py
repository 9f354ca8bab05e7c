"""Privacy amounts as exact rationals: reading the numbers a user wrote (ε, δ, shares) and writing them back.

Amounts are ``fractions.Fraction`` built from the decimal strings the user wrote ('0.1' is exactly 1/10), so
the parts of a budget add up exactly and the report can print what was spent without rounding.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from ..errors import UsageError
from ..text import quoted

__all__ = ["MAX_EPSILON", "MIN_EPSILON", "MAX_RHO", "MIN_RHO", "exact_fraction", "parse_epsilon", "parse_rho",
           "parse_delta", "parse_share", "format_fraction"]

#: The budget range dphist accepts.  Above MAX_EPSILON a release protects nobody in any useful sense; below
#: MIN_EPSILON (for any one table, after splitting) the noise swamps every count.  Both also keep the sampler's
#: exact arithmetic in a sane range.
MAX_EPSILON = Fraction(1000)
MIN_EPSILON = Fraction(1, 10**6)
#: The ρ range ``--rho`` accepts: the smallest is the zCDP cost ε²/2 of the smallest ε (MIN_EPSILON), so a table
#: gets noise of the same order at either minimum (σ² = 1/(2ρ) = 10¹² against a Laplace variance of 2·10¹²); the
#: largest is MAX_EPSILON, past which (as for ε) nobody is protected in any useful sense.
MIN_RHO = MIN_EPSILON ** 2 / 2
MAX_RHO = Fraction(1000)
_MAX_EXPONENT = 30  # decimal exponents beyond this are refused before any exact arithmetic
_NUMBER_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?[0-9]+/[0-9]+")


def exact_fraction(value: Any, what: str) -> Fraction:
    """The exact rational a user wrote: '0.1' is 1/10, '1/3' is 1/3; refuses non-finite and absurd exponents."""
    if isinstance(value, bool):
        raise UsageError(f"{what} must be a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(f"{what} must be a finite number, got {value!r}")
        value = repr(float(value))  # (a numpy float64 reprs as "np.float64(...)"); the shortest decimal that round-trips: what the user typed
    text = str(value).strip()
    if len(text) > 64:
        raise UsageError(f"{what} must be a number such as 0.5 (got {len(text)} characters)")
    if not _NUMBER_TEXT.fullmatch(text) and text.lower().lstrip("+-") not in ("inf", "infinity", "nan"):
        # Decimal() and Fraction() also take '1_0' and non-ASCII digits: not what anyone means by a budget.
        raise UsageError(f"{what} must be a number such as 0.5, got {quoted(text)}")
    try:
        if "/" in text:
            return Fraction(text)
        number = Decimal(text)
    except (InvalidOperation, ValueError, ZeroDivisionError):
        raise UsageError(f"{what} must be a number such as 0.5, got {quoted(text)}") from None
    if not number.is_finite():
        raise UsageError(f"{what} must be a finite number, got {quoted(text)}")
    if number and abs(number.adjusted()) > _MAX_EXPONENT:
        # Refused from the exponent alone: Fraction('1e-999999999') would build a billion-digit integer.
        raise UsageError(f"{what} is out of range (a number between 1e-{_MAX_EXPONENT} and 1e{_MAX_EXPONENT} in "
                         f"size, or 0), got {quoted(text)}")
    return Fraction(number)


def _parse_budget(value: Any, what: str, maximum: Fraction) -> Fraction:
    """The exact amount written as ``value`` (decimal string, int, float or Fraction), in (0, maximum]."""
    amount = exact_fraction(value, what)
    if amount <= 0:
        raise UsageError(f"{what} must be greater than 0, got {format_fraction(amount)}")
    if amount > maximum:
        raise UsageError(f"{what} must be at most {maximum}: beyond that the release gives no meaningful "
                         f"privacy, got {format_fraction(amount)}")
    return amount


def parse_epsilon(value: Any, what: str = "epsilon") -> Fraction:
    """The exact epsilon written as ``value`` (decimal string, int, float or Fraction), in (0, MAX_EPSILON]."""
    return _parse_budget(value, what, MAX_EPSILON)


def parse_rho(value: Any, what: str = "rho") -> Fraction:
    """The exact ρ written as ``value`` (decimal string, int, float or Fraction), in (0, MAX_RHO]."""
    return _parse_budget(value, what, MAX_RHO)


def parse_delta(value: Any, what: str = "delta") -> Fraction:
    """The exact delta written as ``value``, in [0, 1); absurd exponents are refused at once (UsageError)."""
    delta = exact_fraction(value, what)
    if not 0 <= delta < 1:
        raise UsageError(f"{what} must be at least 0 and less than 1, got {format_fraction(delta)}")
    return delta


def parse_share(value: Any, table: str) -> Fraction:
    """A table's budget share: a positive number (only the ratios between shares matter)."""
    share = exact_fraction(value, f"table {quoted(table)}: share")
    if share <= 0:
        raise UsageError(f"table {quoted(table)}: share must be greater than 0")
    return share


def format_fraction(value: Fraction) -> str:
    """An exact decimal string when one exists (``0.25``), otherwise ``p/q`` (``1/3``)."""
    value = Fraction(value)
    d = value.denominator
    twos = fives = 0
    while d % 2 == 0:
        d //= 2
        twos += 1
    while d % 5 == 0:
        d //= 5
        fives += 1
    if d != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = max(twos, fives)
    scaled = value * 10**digits
    text = str(abs(scaled.numerator))
    sign = "-" if value < 0 else ""
    if digits == 0:
        return sign + text
    text = text.rjust(digits + 1, "0")
    return f"{sign}{text[:-digits]}.{text[-digits:]}"
