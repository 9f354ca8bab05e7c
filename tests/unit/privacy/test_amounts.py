"""Exact amounts (dphist/privacy/amounts.py): parsing what the user wrote and printing it back exactly; absurd
exponents, deltas out of range and numerals other than plain ASCII digits refused at once.  (Splitting a budget
exactly is the privacy kernel's job: test_budget.py.)"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dphist.errors import UsageError
from dphist.privacy.amounts import format_fraction, parse_epsilon, parse_share

from input_files import ABSURD


@pytest.mark.parametrize("text, value", [("0.1", Fraction(1, 10)), ("1", Fraction(1)), ("1e-3", Fraction(1, 1000)),
                                         (" 2.50 ", Fraction(5, 2)), ("1/3", Fraction(1, 3)), (0.1, Fraction(1, 10)),
                                         (2, Fraction(2)), ("1000", Fraction(1000))])
def test_epsilon_is_exact(text, value):
    assert parse_epsilon(text) == value


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "", "nan", "NaN", "inf", "+infinity", "-inf", "1e10000000",
                                 "1000.0001", True, float("nan"), "1/0", "x" * 100])
def test_bad_epsilon_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_epsilon(bad)


@pytest.mark.parametrize("value, text", [(Fraction(1, 4), "0.25"), (Fraction(1, 3), "1/3"), (Fraction(3), "3"),
                                         (Fraction(1, 10**6), "0.000001"), (Fraction(-5, 2), "-2.5"),
                                         (Fraction(1, 24), "1/24"), (Fraction(0), "0")])
def test_format_fraction(value, text):
    assert format_fraction(value) == text
    assert Fraction(text) == value


def test_shares_must_be_positive_numbers():
    assert parse_share("2.5", "t") == Fraction(5, 2)
    for bad in ("0", "-1", "x", "inf"):
        with pytest.raises(UsageError, match="table 't'"):
            parse_share(bad, "t")


def test_numpy_floats_are_read_as_the_decimal_they_print():
    import numpy as np

    from dphist.privacy import exact_fraction
    assert exact_fraction(np.float64(0.1), "x") == Fraction(1, 10)


@pytest.mark.parametrize("value", ABSURD)
def test_shared_parsers_refuse_absurd_exponents_fast(value):
    import time

    from dphist.privacy import exact_fraction, parse_delta, parse_epsilon, parse_share

    start = time.monotonic()
    for parse in (lambda v: parse_epsilon(v), lambda v: parse_delta(v, "delta"), lambda v: parse_share(v, "t"),
                  lambda v: exact_fraction(v, "x")):
        with pytest.raises(UsageError):
            parse(value)
    assert time.monotonic() - start < 1


def test_parse_delta_range():
    from dphist.privacy import parse_delta

    assert parse_delta("1e-6") == Fraction(1, 10**6) and parse_delta(0) == 0
    for bad in ("1", "-0.1", "nan", "inf", True, "x"):
        with pytest.raises(UsageError, match="delta"):
            parse_delta(bad)


@pytest.mark.parametrize("value", ["1_0", "1_0_", "١", "0x10", "1e5/2"])
def test_budgets_are_plain_ascii_numerals(value):
    from dphist.privacy import exact_fraction

    with pytest.raises(UsageError):
        exact_fraction(value, "epsilon")
