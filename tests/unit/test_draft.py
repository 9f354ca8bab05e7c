"""Drafting a schema from the data (dphist/draft.py): long fields and far dates."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from dphist.schema import parse_schema

from input_files import _long_field_csv


def test_draft_schema_of_long_fields_and_far_dates(tmp_path):
    from dphist.draft import draft_schema
    from dphist.io.sources import _CSV_BLOCK

    text = draft_schema(_long_field_csv(tmp_path / "long.csv", 2 * _CSV_BLOCK))
    assert "x" * 300 not in text and "note: more than 100 distinct values, or values longer" in text
    ticks = [0, 2**50, -(2**50), None]
    pq.write_table(pa.table({"t": pa.array(ticks, pa.timestamp("s")),
                             "d": pa.array([dt.date(2020, 5, 1), dt.date(9999, 12, 31), None, None])}),
                   tmp_path / "far.parquet")
    schema = parse_schema(__import__("yaml").safe_load(draft_schema(tmp_path / "far.parquet")))
    assert schema["t"].lower == dt.date(1, 1, 1) and schema["t"].upper == dt.date(9999, 12, 31)
    assert schema["d"].lower == dt.date(2020, 5, 1) and schema["d"].upper == dt.date(9999, 12, 31)
