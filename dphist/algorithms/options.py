"""Validators for algorithm options: each turns a user value into the option's value or raises ValueError."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

__all__ = ["choice", "positive_int", "non_negative_int", "fraction_between_0_and_1", "positive_number_or_auto",
           "branching", "exact"]

MAX_BRANCHING = 1 << 16


def choice(*options: str):
    """A validator accepting exactly one of ``options``."""
    def check(value):
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return value
    return check


#: The largest whole number an option takes: exact in float64 and in every array type the algorithms use, so a
#: value the validator accepts cannot overflow later, once data has been read.
MAX_INTEGER = 2**53
_DIGITS = re.compile(r"[+-]?[0-9]+")  # ASCII only: str.isdigit() also accepts '²', which int() refuses


def _integer(value) -> int:
    """A whole number given as an int, a whole finite float (YAML may write 8.0) or ASCII digits, of size at
    most MAX_INTEGER.  Refuses true/false, inf, nan, fractions and anything else with ValueError."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError("must be an integer, not true/false")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 20 or not _DIGITS.fullmatch(text):
            raise ValueError("must be an integer written in digits")
        number = int(text)
    elif isinstance(value, (int, np.integer)):
        number = int(value)
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        number = int(value)
    else:
        raise ValueError("must be an integer")
    if abs(number) > MAX_INTEGER:
        raise ValueError(f"must be at most {MAX_INTEGER:,} in size")
    return number


def positive_int(value) -> int:
    number = _integer(value)
    if number < 1:
        raise ValueError("must be a positive integer")
    return number


def non_negative_int(value) -> int:
    number = _integer(value)
    if number < 0:
        raise ValueError("must be a non-negative integer")
    return number


def fraction_between_0_and_1(value) -> Fraction:
    """The exact number a user wrote ('0.25', '1/3', 0.25), strictly between 0 and 1."""
    number = exact(value)
    if number is None:
        raise ValueError("must be a number between 0 and 1")
    if not 0 < number < 1:
        raise ValueError("must be strictly between 0 and 1")
    return number


def positive_number_or_auto(value) -> float | str:
    """'auto' (None) for the method's own choice, or a number greater than 0 and at most 10⁶."""
    if value in (None, "auto"):
        return "auto"
    number = exact(value)
    if number is None or not 0 < number <= 10**6:
        raise ValueError("must be auto or a number greater than 0 and at most 1000000")
    return float(number)


def exact(value) -> Fraction | None:
    """The exact rational written as ``value``, or None for anything that is not a finite number of sane size
    (true/false, inf, nan, text, or an exponent such as 1e-999999999, whose exact value would take minutes to
    build)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, Fraction):
        return value
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return None
        value = repr(float(value))  # the shortest decimal that round-trips: what the user wrote
    elif not isinstance(value, (str, int, np.integer)):
        return None
    text = str(value).strip()
    if len(text) > 64:
        return None
    try:
        if "/" in text:
            return Fraction(text)
        number = Decimal(text)
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None
    if not number.is_finite() or (number and abs(number.adjusted()) > 30):
        return None
    return Fraction(number)


def branching(value) -> int | str:
    """A tree's fan-out per axis: an integer >= 2, or 'auto' (None) for the method's own choice."""
    if value in (None, "auto"):
        return "auto"
    number = _integer(value)
    if number < 2:
        raise ValueError("must be an integer >= 2 or 'auto'")
    return min(number, MAX_BRANCHING)
