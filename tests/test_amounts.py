"""Exact amounts: parsing what the user wrote and printing it back exactly; a table whose share of the budget
falls below the minimum is refused when the release is planned.  (Splitting a budget exactly is the privacy
kernel's job: tests/test_budget.py.)"""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

from dphist.api import plan_release
from dphist.errors import UsageError
from dphist.privacy.amounts import MIN_EPSILON, format_fraction, parse_epsilon, parse_share


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


def test_a_table_whose_share_falls_below_the_minimum_is_refused_when_planned():
    frame = pd.DataFrame({"a": [0, 1], "b": [1, 0]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2},
                          "b": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2}}}
    tables = [{"name": "tiny", "columns": ["a"], "share": 1}, {"name": "big", "columns": ["b"], "share": 10**7}]
    assert Fraction(1, 10**7 + 1) < MIN_EPSILON
    with pytest.raises(UsageError, match="table 'tiny'.*below the minimum"):
        plan_release(frame, "1", schema, tables=tables)
    # The same shares at a budget large enough for both are accepted (the check can pass).
    plan = plan_release(frame, "20", schema, tables=tables)
    assert sum(plan.budgets) == 20 and plan.budgets[0] == Fraction(20, 10**7 + 1)


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
