"""Sources (dphist/read/sources.py): an existing path is never a glob, a named pipe is refused by its mode without
being opened, and CSV rows longer than a read block are read again with bigger blocks, every row once and in
order, up to a limit that is reported for what it is."""

from __future__ import annotations

import os

import pytest

from dphist import api
from dphist.errors import DataError
from dphist.declare.schema import parse_schema

from input_files import A_SCHEMA, _long_field_csv, unblocked, write_csv


def test_open_source_refuses_a_fifo_by_its_mode(tmp_path):
    from dphist.read.sources import open_source

    os.mkfifo(tmp_path / "p.csv")
    with unblocked(tmp_path / "p.csv"), pytest.raises(DataError, match="named pipe"):
        open_source(tmp_path / "p.csv")


def test_pattern_is_expanded_when_no_such_file_exists(tmp_path):
    write_csv(tmp_path / "data1.csv", "a", ["1"])
    write_csv(tmp_path / "data2.csv", "a", ["2"])
    plan = api.plan_release(tmp_path / "data[12].csv", 1,
                            {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 2}}})
    assert [p.name for p in plan.source.files] == ["data1.csv", "data2.csv"]


def test_rereading_with_bigger_blocks_gives_every_row_once_in_order(tmp_path, monkeypatch):
    """Tiny blocks, so that the reader restarts several times at growing block sizes mid-file."""
    import pandas as pd

    from dphist.read import sources

    monkeypatch.setattr(sources, "_CSV_BLOCK", 256)
    path = tmp_path / "d.csv"
    rows = [f'{i},"{"z" * (i * 37 % 900)}"' for i in range(400)]
    write_csv(path, "a,note", rows)
    got = [v for batch in sources.open_source(path).batches({"a": parse_schema(A_SCHEMA)["a"]})
           for v in batch.column("a").to_pylist()]
    assert got == pd.read_csv(path)["a"].astype(float).tolist()


def test_a_row_longer_than_the_largest_block_is_reported_for_what_it_is(tmp_path, monkeypatch):
    from dphist.read import sources

    monkeypatch.setattr(sources, "_CSV_MAX_BLOCK", sources._CSV_BLOCK)
    data = _long_field_csv(tmp_path / "long.csv", 3 * sources._CSV_BLOCK)
    with pytest.raises(DataError, match="a row is longer than 1 MB") as info:
        list(sources.open_source(data).batches({"a": parse_schema(A_SCHEMA)["a"]}))
    assert "quote" not in str(info.value)
