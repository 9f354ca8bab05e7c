"""Engines (dphist/read/engines/): every engine counts exactly what the local engine counts, on a table with numbers,
text, dates, nulls and values outside the declared domains, and a release on dask is the local release; an engine
without its extra fails cleanly; progress bars."""

from __future__ import annotations

import re

import importlib.util
import io
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dphist.read.counting import TableShape, count_tables
from dphist.read.engines import count, preflight
from dphist.errors import UsageError
from dphist.read.sources import open_source
from dphist.read.progress import Progress
from dphist.declare.schema import parse_schema

from cli_harness import invoke, run_process

ROWS = 1_000_000  # the full tier's table: seven row groups of 150,000
SMALL_ROWS = 40_000  # make test's: seven row groups of 6,000, the same shapes of data in a twenty-fifth the time
SCHEMA = {"columns": {
    "income": {"type": "numeric", "lower": 0, "upper": 200_000, "bins": 64, "out_of_domain": "drop",
               "nulls": "category"},
    "age": {"type": "numeric", "edges": [0, 18, 30, 45, 65, 120]},
    "state": {"type": "categorical", "values": ["CA", "NY", "TX", "Zoë"], "nulls": "category"},
    "day": {"type": "date", "lower": "2024-01-01", "upper": "2025-01-01", "unit": "month", "out_of_domain": "drop"},
}}
TABLES = [["income"], ["age", "state"], ["income", "age", "day"], ["state", "day"]]


def has(*modules):
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_dask = pytest.mark.skipif(not has("dask", "distributed"), reason="the dask extra is not installed")
needs_spark = pytest.mark.skipif(not has("pyspark") or shutil.which("java") is None,
                                 reason="the spark extra or Java is not installed")


def _make_data(root, rows: int, row_group: int):
    """``rows`` rows: NaN and null incomes, incomes below and above the domain, ages as integers with nulls, text
    with nulls, unknown labels and a non-ASCII label, dates with nulls and outside the year; as Parquet (row
    groups of ``row_group``) and CSV in ``root``."""
    ROWS = rows  # noqa: N806  (the generator below reads as it did for the one size)
    rng = np.random.default_rng(10)
    income = rng.lognormal(10.5, 1.2, ROWS)
    income[rng.random(ROWS) < 0.02] = -5.0
    income[rng.random(ROWS) < 0.01] = np.nan
    income_null = rng.random(ROWS) < 0.01
    age = rng.integers(-3, 130, ROWS)
    state = rng.choice(["CA", "NY", "TX", "Zoë", "WA", ""], ROWS, p=[.3, .2, .2, .1, .1, .1])
    state_null = rng.random(ROWS) < 0.03
    days = rng.integers(19_700, 20_200, ROWS).astype(np.int32)  # 2023-12-09 .. 2025-04-23
    table = pa.table({
        "income": pa.array(income, mask=income_null),
        "age": pa.array(age, mask=rng.random(ROWS) < 0.02),
        "state": pa.array(state, mask=state_null),
        "day": pa.array(days, mask=rng.random(ROWS) < 0.02).cast(pa.date32()),
    })
    pq.write_table(table, root / "people.parquet", row_group_size=row_group)
    pacsv.write_csv(table, root / "people.csv")
    schema = parse_schema(SCHEMA)
    shapes = [TableShape("_".join(t), tuple(schema[c] for c in t)) for t in TABLES]
    columns = {c: schema[c] for c in schema.columns}
    return root, shapes, columns


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The full tier's table: 1M rows."""
    return _make_data(tmp_path_factory.mktemp("engines"), ROWS, 150_000)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """make test's table: 40,000 rows."""
    return _make_data(tmp_path_factory.mktemp("engines-small"), SMALL_ROWS, 6_000)


@pytest.fixture(params=["small", pytest.param("data", marks=pytest.mark.slow)])
def table(request):
    """Each engine check on make test's table, and in the full tier on the 1M-row one too."""
    return request.getfixturevalue(request.param)


def local_counts(path, shapes, columns):
    src = open_source(path)
    return count_tables(src.batches(columns), shapes, src.name)


def assert_same(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == np.int64 and g.shape == e.shape
        assert np.array_equal(g, e)


def test_the_local_counts_are_right(table):
    """The reference itself, against numpy on the whole columns (so engines are compared with right answers)."""
    root, shapes, columns = table
    (income, *_), table = local_counts(root / "people.parquet", shapes, columns), pq.read_table(root / "people.parquet")
    v = table.column("income").to_numpy(zero_copy_only=False)
    missing = np.isnan(v)
    inside = ~missing & (v >= 0) & (v < 200_000)
    expected = np.bincount((v[inside] // (200_000 / 64)).astype(int), minlength=64).tolist() + [int(missing.sum())]
    assert income.tolist() == expected
    assert sum(income) < table.num_rows  # some rows were out of the domain


@needs_dask
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_dask_counts_equal_local(table, fmt):
    root, shapes, columns = table
    path = root / f"people.{fmt}"
    expected = local_counts(path, shapes, columns)
    assert_same(count("dask", None, open_source(path), columns, shapes), expected)


@needs_dask
@pytest.mark.slow
def test_dask_local_cluster_counts_equal_local(data):
    root, shapes, columns = data
    path = root / "people.parquet"
    got = count("dask", "local-cluster", open_source(path), columns, shapes)
    assert_same(got, local_counts(path, shapes, columns))


@needs_spark
@pytest.mark.time_limit(120)  # the first Spark session starts a JVM (20 s and more); the other variants are slow
@pytest.mark.parametrize("fmt", ["parquet", pytest.param("csv", marks=pytest.mark.slow)])
def test_spark_counts_equal_local(table, fmt):
    root, shapes, columns = table
    path = root / f"people.{fmt}"
    got = count("spark", "local[2]", open_source(path), columns, shapes)
    assert_same(got, local_counts(path, shapes, columns))


@needs_dask
def test_release_on_dask_is_the_local_release(small, tmp_path):
    """End to end through the CLI: same seed, same files."""
    root, _, _ = small
    schema = tmp_path / "schema.yaml"
    schema.write_text(__import__("yaml").safe_dump(SCHEMA, allow_unicode=True))
    outs = {}
    for engine in ("local", "dask"):
        out = tmp_path / engine
        res = invoke(["release", str(root / "people.parquet"), "--schema", str(schema), "-e", "1",
                      "--columns", "age,state", "--seed", "4", "--engine", engine,
                      "--out", str(out), "--quiet"])
        assert res.exit_code == 0, res.output
        outs[engine] = (out / "age_state.csv").read_text()
    assert outs["local"] == outs["dask"]


def test_engine_needs_its_extra_or_fails_cleanly(small, tmp_path, monkeypatch):
    root, _, _ = small
    import dphist.read.engines as engines

    monkeypatch.setattr(engines.importlib.util, "find_spec", lambda name: None)
    res = invoke(["release", str(root / "people.parquet"), "--columns", "age", "-e", "1",
                  "--seed", "1", "--engine", "spark", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "pip install 'dphist[spark]'" in res.output
    assert not (tmp_path / "o").exists()


# ---- the preflight: what cannot run is refused before the budget is reserved ---------------------------------


@needs_dask
@pytest.mark.parametrize("master, said", [("bogus", "is not a Dask scheduler address"),
                                          ("tcp://127.0.0.1:1", "no Dask scheduler answered there"),
                                          ("inproc://nowhere", "no Dask scheduler answered there")])
def test_dask_preflight_refuses_a_master_that_cannot_be_used_at_once(master, said):
    from dphist.read.engines.dask_engine import preflight_dask

    started = time.perf_counter()
    with pytest.raises(UsageError, match=said):
        preflight(engine="dask", master=master)
    assert time.perf_counter() - started < 3  # a refused port fails at once, not after Dask's 30 s
    preflight_dask(None)  # the threaded default needs nothing


@needs_spark
@pytest.mark.parametrize("master, said", [("bogus://", "is not a Spark master"), ("local[x]", "is not a Spark master"),
                                          ("spark://127.0.0.1:1", "no Spark master accepted a connection")])
def test_spark_preflight_refuses_a_master_that_cannot_be_used_without_starting_java(master, said, monkeypatch):
    from dphist.read.engines import spark_engine

    monkeypatch.setattr(spark_engine, "session", lambda m: pytest.fail("the JVM was started"))
    with pytest.raises(UsageError, match=said):
        preflight(engine="spark", master=master)


@pytest.mark.parametrize("master", ["local", "local[4]", "local[*]", "local[2,3]", "local-cluster[2,1,1024]", "yarn",
                                    "spark://a:7077", "spark://a:7077,b:7077", "k8s://https://h:443"])
def test_every_master_spark_accepts_parses(master):
    from dphist.read.engines.spark_engine import MASTER

    assert MASTER.fullmatch(master)


@needs_spark
@pytest.mark.slow  # a JVM that starts and exits: 10 s and more
def test_spark_that_does_not_start_is_one_line_naming_its_log_and_charges_nothing(small, tmp_path):
    root, _, _ = small
    ledger, schema = tmp_path / "l.sqlite", tmp_path / "schema.yaml"
    schema.write_text(__import__("yaml").safe_dump(SCHEMA, allow_unicode=True))
    res = run_process(["release", str(root / "people.parquet"), "--schema", str(schema), "--columns", "age", "-e",
                       "1", "--engine", "spark", "--master", "yarn", "--ledger", str(ledger), "--out", str(tmp_path / "o")],
                      env={"HADOOP_CONF_DIR": None, "YARN_CONF_DIR": None}, timeout=300)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "Spark did not start" in res.stderr, res.stderr
    log = Path(res.stderr.rstrip().rsplit(" ", 1)[-1])
    assert "HADOOP_CONF_DIR" in log.read_text()  # the JVM's trace went there, not to the terminal
    log.unlink()
    assert not ledger.exists() and not (tmp_path / "o").exists()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_rows_rate_and_percent():
    stream = Terminal()
    bar = Progress(1000, "rows", stream, interval=0)
    for _ in range(4):
        bar.add(250)
        bar.show()
    bar.close()
    text = stream.getvalue()
    assert "counting" in text and "100%" in text and "rows/s" in text


def test_progress_counts_csv_bytes_and_parquet_rows(table):
    root, shapes, columns = table
    for name, unit in (("people.csv", "bytes"), ("people.parquet", "rows")):
        src = open_source(root / name)
        total, got_unit = src.progress_total()
        bar = Progress(total, got_unit, Terminal(), interval=0)
        count_tables(src.batches(columns, bar), shapes[:1], src.name)
        assert got_unit == unit and bar.done == total  # every byte or row was seen, none twice


def test_no_progress_bar_off_a_terminal(small, tmp_path):
    root, _, _ = small
    res = invoke(["release", str(root / "people.parquet"), "--columns", "state", "-e", "1",
                  "--seed", "1", "--delta", "1e-6", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "counting" not in res.output and not re.search(r"\[[#-]{5,}\]", res.output)  # no bar drawn
