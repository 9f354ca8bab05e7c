"""Exact budgets: parsing what the user wrote, splitting it, and printing it back exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dphist.accountant import format_fraction, parse_epsilon, parse_share, split_budget
from dphist.errors import UsageError


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


@given(st.fractions(min_value=Fraction(1, 100), max_value=1000),
       st.lists(st.integers(1, 100), min_size=1, max_size=30))
def test_split_adds_up_exactly_and_keeps_ratios(total, shares):
    parts = split_budget(total, [Fraction(s) for s in shares])
    assert sum(parts) == total
    assert all(p * shares[0] == parts[0] * s for p, s in zip(parts, shares))


def test_split_refuses_a_table_below_the_minimum():
    with pytest.raises(UsageError, match="table 'tiny'.*below the minimum"):
        split_budget(Fraction(1), [Fraction(1), Fraction(10**7)], ["tiny", "big"])


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
