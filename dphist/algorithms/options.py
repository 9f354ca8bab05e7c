"""Validators for algorithm options: each turns a user value into the option's value or raises ValueError."""

from __future__ import annotations

from fractions import Fraction

__all__ = ["choice", "positive_int", "non_negative_int", "fraction_between_0_and_1", "branching"]

MAX_BRANCHING = 1 << 16


def choice(*options: str):
    """A validator accepting exactly one of ``options``."""
    def check(value):
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return value
    return check


def _integer(value) -> int:
    if isinstance(value, bool):
        raise ValueError("must be an integer")
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            raise ValueError("must be an integer")
        return int(value)
    if int(value) != value:
        raise ValueError("must be an integer")
    return int(value)


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
    try:
        number = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError("must be a number between 0 and 1") from None
    if not 0 < number < 1:
        raise ValueError("must be strictly between 0 and 1")
    return number


def branching(value) -> int | str:
    """A tree's fan-out per axis: an integer >= 2, or 'auto' (None) for the method's own choice."""
    if value in (None, "auto"):
        return "auto"
    number = _integer(value)
    if number < 2:
        raise ValueError("must be an integer >= 2 or 'auto'")
    return min(number, MAX_BRANCHING)
