"""Tidy release tables made chunk by chunk: the same rows, dtypes and file bytes as the whole table at once."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dphist.publishing import tidy
from dphist.publishing import writers
from dphist.declare.schema import parse_schema
from dphist.publishing.tidy import Tables, TidyTable

SCHEMA = parse_schema({"columns": {
    "age": {"type": "numeric", "lower": 0, "upper": 90, "bins": 9, "nulls": "category"},
    "state": {"type": "categorical", "values": ["CA", "N,Y", 'Q"T', "Zoë"]},
    "day": {"type": "date", "lower": "2024-01-01", "upper": "2024-04-01", "unit": "month"},
}})


def table(values=None):
    columns = [SCHEMA["age"], SCHEMA["state"], SCHEMA["day"]]
    n = int(np.prod([c.n_cells for c in columns]))
    rng = np.random.default_rng(1)
    noisy = rng.normal(3, 4, n)
    values = values or {"count": rng.integers(0, 9, n), "noisy_count": np.round(noisy, 6),
                        "ci_lower": lambda a, b: np.round(np.maximum(noisy[a:b] - 2.5, 0), 2)}
    return TidyTable(columns, values), columns, n, noisy


def expected_frame(columns, values):
    """The tidy layout written out plainly: C order over the columns' cells, their labels, then the values."""
    sizes = [c.n_cells for c in columns]
    cells = np.indices(sizes).reshape(len(sizes), -1)
    data = {}
    for column, position in zip(columns, cells):
        for name, labels in column.labels().items():
            data[name] = pd.array([labels[i] for i in position], dtype=pd.array(labels).dtype)
    data.update(values)
    return pd.DataFrame(data)


def test_rows_follow_the_c_order_of_the_cells_with_each_columns_labels():
    t, columns, n, noisy = table()
    frame = t.frame()
    assert len(t) == n == 10 * 4 * 3
    want = expected_frame(columns, {"count": t.column("count"), "noisy_count": np.round(noisy, 6),
                                    "ci_lower": np.round(np.maximum(noisy - 2.5, 0), 2)})
    pd.testing.assert_frame_equal(frame, want)
    assert frame["age_lower"].isna().sum() == 12  # the null cell of age: 4 states x 3 months


@pytest.mark.parametrize("rows", [1, 7, 120, 1000])
def test_chunks_are_the_frame_in_pieces(rows):
    t, *_ = table()
    pieces = list(t.chunks(rows))
    assert all(len(p) <= rows for p in pieces) and len(pieces) == -(-len(t) // rows)
    pd.testing.assert_frame_equal(pd.concat(pieces, ignore_index=True), t.frame())
    assert list(t.prototype().dtypes) == list(t.frame().dtypes) and len(t.prototype()) == 0


def test_a_one_cell_table_is_one_chunk_and_value_arrays_must_fit():
    empty = parse_schema({"columns": {"s": {"type": "categorical", "values": ["a"]}}})["s"]
    t = TidyTable([empty], {"count": np.zeros(1, dtype=np.int64)})
    assert [len(c) for c in t.chunks(5)] == [1]
    with pytest.raises(ValueError, match="column count: 2 values for 1 cells"):
        TidyTable([empty], {"count": np.zeros(2)})


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_a_streamed_table_writes_what_the_whole_frame_writes(tmp_path, fmt, monkeypatch):
    """In chunks of 7 rows: the CSV and JSON bytes are those of the whole frame; Parquet reads back equal."""
    monkeypatch.setattr(tidy, "CHUNK_ROWS", 7)
    t, *_ = table()
    writers._write_table(tmp_path / f"streamed.{fmt}", t, fmt)
    writers._write_table(tmp_path / f"whole.{fmt}", t.frame(), fmt)
    streamed, whole = (tmp_path / f"streamed.{fmt}").read_bytes(), (tmp_path / f"whole.{fmt}").read_bytes()
    if fmt == "parquet":
        back = pq.read_table(io.BytesIO(streamed))
        assert back.num_rows == len(t) and pq.ParquetFile(io.BytesIO(streamed)).num_row_groups == -(-len(t) // 7)
        assert back.equals(pq.read_table(io.BytesIO(whole)))
        pd.testing.assert_frame_equal(back.to_pandas(), t.frame())
    else:
        assert streamed == whole


def test_tables_build_each_frame_once_on_first_access():
    t, *_ = table()
    built = []
    original = t.frame
    t.frame = lambda: built.append(1) or original()
    tables = Tables({"a": t, "b": pd.DataFrame({"x": [1]})})
    assert list(tables) == ["a", "b"] and len(tables) == 2 and not built
    assert tables.source("a") is t
    first = tables["a"]
    assert tables["a"] is first and built == [1]
    assert tables["b"]["x"].tolist() == [1]
