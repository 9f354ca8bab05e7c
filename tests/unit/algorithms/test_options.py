"""Algorithm options (dphist/algorithms/options.py), checked when the algorithm is made: a whole-number option
refuses anything that is not a whole number, a fraction option anything that is not a fraction in its range (fast,
whatever the exponent), naming the option; valid spellings still work."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dphist.algorithms import get_algorithm
from dphist.errors import UsageError


@pytest.mark.parametrize("name,key", [("structurefirst", "cap"), ("structurefirst", "buckets"),
                                      ("structurefirst", "grid"), ("dpcube", "max_depth"), ("dpcube", "block"),
                                      ("privelet", "small_axis"), ("noisefirst", "max_buckets"),
                                      ("h", "branching")])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1, 1e400, True, "text", "²", 10**40, [3]])
def test_integer_options_refuse_non_integers(name, key, value):
    with pytest.raises(UsageError, match=f"option '{key}'"):
        get_algorithm(name, **{key: value})


@pytest.mark.parametrize("name,key", [("dpcube", "alpha"), ("auto", "total_share"),
                                      ("structurefirst", "structure_share")])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), "1e-999999999", "1e999999999", True, "text", 2, -0.5,
                                   "x" * 100])
def test_fraction_options_refuse_non_fractions_fast(name, key, value):
    with pytest.raises(UsageError, match=f"option '{key}'"):
        get_algorithm(name, **{key: value})


def test_option_values_that_are_valid_still_work():
    assert get_algorithm("structurefirst", cap="20", buckets=8.0, grid=" 64 ").params["cap"] == 20
    assert get_algorithm("dpcube", alpha="1/3").params["alpha"] == Fraction(1, 3)
    assert get_algorithm("dpcube", alpha=0.25).params["alpha"] == Fraction(1, 4)
