"""Drafting a schema from the data (dphist/declare/draft.py): long fields and far dates."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

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
    assert (columns["half"]["lower"], columns["half"]["upper"]) == (1, 3)
    assert (columns["huge"]["lower"], columns["huge"]["upper"]) == (int(1.7e308), int(1.7e308) + 1)
    assert columns["span"]["values"] == ["1", "2"] and (columns["codes"]["lower"], columns["codes"]["upper"]) == (3, 5)
