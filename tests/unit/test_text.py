"""dphist.text.quoted: user input quoted for a one-line message, bounded and escaped."""

from __future__ import annotations

import pytest

from dphist.text import QUOTE_LIMIT, quoted


@pytest.mark.parametrize("value, expected", [
    ("age", "'age'"),
    ("", "''"),
    ("a b", "'a b'"),
    ("ümlaut ε", "'ümlaut ε'"),
    ("a\nb\r\tc", "'a\\nb\\r\\tc'"),
    ("\x1b[31mred", "'\\x1b[31mred'"),
    ("\u2028\u2029\x85\x0b\x0c", "'\\u2028\\u2029\\x85\\x0b\\x0c'"),  # str.splitlines() breaks at each of these
    ("\u202eevil", "'\\u202eevil'"),  # a bidirectional override would reorder the rest of the line
    ("bad\udcff", "'bad\\udcff'"),  # a lone surrogate (os.fsdecode of a non-UTF-8 byte) cannot be encoded as is
    ("\U000e0001", "'\\U000e0001'"),
    (42, "'42'"),
])
def test_short_values_are_quoted_whole_with_escapes(value, expected):
    assert quoted(value) == expected


def test_quote_marks_may_be_left_out():
    assert quoted("/tmp/a\nb.csv", quote="") == "/tmp/a\\nb.csv"


@pytest.mark.parametrize("value", ["n" * 7_000_000, "x" * (QUOTE_LIMIT + 1), "\n" * QUOTE_LIMIT,
                                   "é\x00" * 10_000, "\u202e" * 1000])
def test_long_values_are_cut_with_their_length_noted(value):
    text = quoted(value)
    assert len(text) <= QUOTE_LIMIT + 40
    assert text.startswith("'") and "...' (" in text
    assert text.endswith(f"({len(value):,} characters)")
    assert text.isprintable()


def test_the_limit_is_exact_and_escapes_are_not_split():
    assert quoted("x" * QUOTE_LIMIT) == "'" + "x" * QUOTE_LIMIT + "'"
    text = quoted("a" + "\x1b" * 100, limit=10)  # 1 + 4 + 4 = 9 characters fit, the next escape would not
    assert text == "'a\\x1b\\x1b...' (101 characters)"


def test_every_result_is_one_printable_line():
    every = "".join(chr(c) for c in range(0x3000)) + "\ud800\udfff\U0010ffff"
    for start in range(0, len(every), 50):
        text = quoted(every[start:start + 50], limit=10_000)
        assert text.isprintable() and len(text.splitlines()) == 1, start
        text.encode("ascii", "backslashreplace")  # no lone surrogate left to fail an encoder


def test_labels_of_floats_of_any_value():
    import numpy as np
    import pyarrow as pa

    from dphist.text import as_text

    values = [3.0, 2.5, None, float("nan"), float("inf"), -float("inf"), 1.7e308, -9.2e18, 9.3e18, -0.0, 1e17]
    assert as_text(pa.array(values)).to_pylist() == [
        "3", "2.5", None, "nan", "inf", "-inf", "1.7e+308", "-9200000000000000000", "9.3e+18", "0",
        "100000000000000000"]
    assert as_text(pa.array(np.array([1, 2.5], np.float16))).to_pylist() == ["1", "2.5"]


def test_lists_of_names_are_bounded():
    from dphist.text import quoted_list

    assert quoted_list(["age", "sex"]) == "age, sex"
    assert quoted_list([]) == ""
    many = quoted_list([f"column{i}" for i in range(5000)])
    assert many.startswith("column0, column1, ") and many.endswith(" more)") and len(many) <= QUOTE_LIMIT + 30
    huge = quoted_list(["n" * 7_000_000, "b\nc"])
    assert huge.endswith("... (7,000,000 characters), ... (1 more)") and len(huge) <= 2 * QUOTE_LIMIT


def test_first_of_bounds_lists_of_reasons():
    from dphist.text import first_of

    assert first_of([]) == "" and first_of(["a"]) == "a"
    assert first_of(["a", "b", "c"]) == "a; b; c"
    assert first_of([f"column {i}: too few" for i in range(10_000)]) == \
        "column 0: too few; column 1: too few; column 2: too few; and 9,997 more"
