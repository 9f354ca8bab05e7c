"""Writing release files (dphist/publishing/writers.py, its CSV text from csv_text.py): big tables are written as CSV by
chunks, byte for byte as pandas' to_csv writes them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.publishing import csv_text, writers

from conftest import SAMPLE


@pytest.fixture
def chunked(monkeypatch):
    """Every table with two or more columns goes through the chunked writer, in chunks of 7 rows."""
    monkeypatch.setattr(writers, "_STREAM_CSV_ROWS", 0)
    monkeypatch.setattr(writers, "_CSV_CHUNK", 7)


def written(tmp_path, frame):
    path = tmp_path / "t.csv"
    writers._write_table(path, frame, "csv")
    return path.read_bytes()


def test_mixed_columns_match_pandas(tmp_path, chunked):
    n = 50
    rng = np.random.default_rng(0)
    labels = ["a", "b,c", 'say "hi"', "line\nbreak", "", "Zoë", None, "x\r"]
    frame = pd.DataFrame({
        "text": pd.Series(pd.array(labels)).take(np.arange(n) % len(labels)).reset_index(drop=True),
        "edge": pd.Series(pd.array([0, 0.5, 1e-7, None, 2.5])).take(np.arange(n) % 5).reset_index(drop=True),
        "whole": pd.Series(pd.array([1, None, -3], dtype="Int64")).take(np.arange(n) % 3).reset_index(drop=True),
        "count": rng.integers(-5, 10**12, n),
        "noisy": np.where(np.arange(n) % 9 == 0, np.nan, np.round(rng.normal(0, 1e3, n), 6)),
        "ci": np.round(rng.normal(0, 3, n), 2).astype(np.float32),
        "empty": np.full(n, np.nan),
    })
    assert written(tmp_path, frame) == frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


def test_small_tables_still_go_through_pandas(tmp_path):
    frame = pd.DataFrame({"a": [1.0, np.nan], "b": [1, 2]})
    assert len(frame) < writers._STREAM_CSV_ROWS
    assert written(tmp_path, frame) == frame.to_csv(index=False, lineterminator="\n").encode("utf-8")


special = st.sampled_from([0.0, -0.0, 1.0, 1e-4, 9.999999999999999e-05, 1e15 + 0.5, 1e16, 9999999999999998.0, 1e21,
                           5e-324, 1.7976931348623157e308, math.inf, -math.inf, math.nan, 123456789012.5])


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.one_of(st.floats(), special, st.floats(-1e6, 1e6).map(lambda x: round(x, 6))),
                       min_size=1, max_size=300))
def test_floats_as_pandas_writes_them(values):
    values = np.array(values, dtype=np.float64)
    expected = pd.DataFrame({"v": values, "w": 0}).to_csv(index=False, header=False, lineterminator="\n")
    assert csv_text._float_text(values).to_pylist() == [line[:-2] for line in expected.split("\n")[:-1]]


def test_a_release_writes_the_same_csv_by_chunks(tmp_path, monkeypatch):
    import dphist

    kwargs = dict(epsilon="1", schema=str(SAMPLE / "census.schema.yaml"), columns="age,education", seed=4)
    dphist.release(str(SAMPLE / "census.parquet"), **kwargs).write(tmp_path / "pandas", format="csv")
    monkeypatch.setattr(writers, "_STREAM_CSV_ROWS", 0)
    monkeypatch.setattr(writers, "_CSV_CHUNK", 5)
    dphist.release(str(SAMPLE / "census.parquet"), **kwargs).write(tmp_path / "chunks", format="csv")
    a, b = (tmp_path / "pandas" / "age_education.csv"), (tmp_path / "chunks" / "age_education.csv")
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes().splitlines()) > 10
