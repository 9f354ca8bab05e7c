"""Hostile but valid-looking inputs (issue 19): each one used to crash with exit 5 after the budget was charged,
hang, or get a wrong message.  Each must now succeed, or end with one clear line (exit 1 or 2) -- and where the
check needs no rows, before any row is read, so nothing is charged.

CLI cases go through click's CliRunner with their own ledger (``--ledger``) and assert the exit code, a single
stderr line, no traceback and, for planning errors, an empty ledger.  Cases that could block forever (FIFOs) run
the CLI in a subprocess with a timeout.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dphist import api, counting, discovery
from dphist.algorithms import get_algorithm
from dphist.cli import main
from dphist.counting import TableShape, count_tables
from dphist.errors import DataError, UsageError
from dphist.ledger import Ledger
from dphist.schema import parse_schema

EPOCH = _dt.date(1970, 1, 1)


# ---- helpers --------------------------------------------------------------------------------------------------


def cli(tmp_path: Path, *args: str):
    """Run ``dphist ARGS`` with a ledger and output folder of its own; returns click's result."""
    result = CliRunner().invoke(main, [*args], prog_name="dphist", env={"DPHIST_DEBUG": None})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"crashed: {result.exception!r}") from result.exception
    return result


def release(tmp_path: Path, *args: str):
    return cli(tmp_path, "release", *args, "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "out"), "-q")


def charged(tmp_path: Path) -> Fraction:
    """The epsilon the run's ledger has charged (0 if it was never created)."""
    path = tmp_path / "l.sqlite"
    if not path.exists():
        return Fraction(0)
    return sum((Fraction(r["epsilon_spent"]) for r in Ledger(path).status()), Fraction(0))


def assert_refused(result, code: int, *words: str) -> str:
    """One stderr line, the exit code, no traceback; returns the line."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.stderr
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


# ---- 1. dates and timestamps of any range -------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_days_since_epoch_is_exact_for_any_timestamp(unit):
    per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}[unit]
    ticks = [-(2**62), -per_day - 1, -1, 0, 1, per_day, 2**62, None]
    days = counting.days_since_epoch(pa.array(ticks, pa.timestamp(unit))).to_pylist()
    assert days == [None if t is None else t // per_day for t in ticks]  # floor, never a wrapped cast


def test_days_since_epoch_of_calendar_extremes_and_zones():
    stamps = [_dt.datetime(1, 1, 1), _dt.datetime(9999, 12, 31, 23, 59)]
    assert counting.days_since_epoch(pa.array(stamps, pa.timestamp("s"))).to_pylist() == [
        (_dt.date(1, 1, 1) - EPOCH).days, (_dt.date(9999, 12, 31) - EPOCH).days]
    # A zoned timestamp counts on its own wall clock: 2024-03-01 23:30 in New York is 04:30 UTC the next day.
    zoned = pa.array([_dt.datetime(2024, 3, 2, 4, 30)], pa.timestamp("us", "UTC")).cast(
        pa.timestamp("us", "America/New_York"))
    assert counting.days_since_epoch(zoned).to_pylist() == [(_dt.date(2024, 3, 1) - EPOCH).days]
    dates = pa.array([_dt.date(1, 1, 1), _dt.date(9999, 12, 31)], pa.date32())
    assert counting.days_since_epoch(dates).cast(pa.int32()).to_pylist() == [(d - EPOCH).days for d in dates.to_pylist()]


def _far_dates(n_normal: int = 2000, n_far: int = 1000) -> list[_dt.date]:
    return [_dt.date(2020, 1, 1 + i % 28) for i in range(n_normal)] + [_dt.date(9999, 12, 31)] * n_far


def test_undeclared_csv_date_column_with_far_sentinels_is_released(tmp_path):
    data = write_csv(tmp_path / "d.csv", "d", [d.isoformat() for d in _far_dates()])
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6", "--seed", "3")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (column,) = report["discovery"]["columns"]
    assert column["type"]["chosen"] == "date"
    assert column["domain"]["upper"] <= "9999-12-31"


@pytest.mark.parametrize("kind", ["date32", "timestamp[s]", "timestamp[us]", "timestamp[ms]"])
def test_undeclared_parquet_dates_far_out_of_range_are_released(tmp_path, kind):
    if kind == "date32":
        array = pa.array(_far_dates(), pa.date32())
    else:
        unit = kind[10:-1]
        stamps = [_dt.datetime(2020, 1, 1 + i % 28) for i in range(2000)]
        stamps += [_dt.datetime(1, 1, 1)] * 1000 + [_dt.datetime(9999, 12, 31, 12)] * 1000
        array = pa.array(stamps, pa.timestamp(unit))
    pq.write_table(pa.table({"t": array}), tmp_path / "t.parquet")
    result = release(tmp_path, str(tmp_path / "t.parquet"), "-e", "1")
    assert result.exit_code == 0, result.stderr
    assert charged(tmp_path) == 1


def test_parquet_timestamps_beyond_the_calendar_are_discovered_and_clamped(tmp_path):
    """Timestamps past year 9999 (int64 seconds far out) have no calendar date: discovery cuts its bounds to
    years 1..9999 and counts them in the edge bins."""
    ticks = [0] * 3000 + [2**50] * 3000 + [-(2**50)] * 3000  # enough rows for the discovered bounds' ε
    pq.write_table(pa.table({"t": pa.array(ticks, pa.timestamp("s"))}), tmp_path / "t.parquet")
    result = release(tmp_path, str(tmp_path / "t.parquet"), "-e", "1", "--seed", "1", "--raw")
    assert result.exit_code == 0, result.stderr
    (column,) = json.loads((tmp_path / "out" / "report.json").read_text())["discovery"]["columns"]
    assert "0001-01-01" <= column["domain"]["lower"] < column["domain"]["upper"] <= "9999-12-31"


@pytest.mark.parametrize("policy", ["clamp", "drop"])
def test_declared_date_column_counts_far_timestamps_as_declared(policy):
    schema = parse_schema({"columns": {"t": {"type": "date", "lower": "2020-01-01", "upper": "2021-01-01",
                                             "unit": "quarter", "out_of_domain": policy}}})
    ticks = [-(2**62), -(2**40), 1_590_000_000, 2**40, 2**62, None]  # 1_590_000_000 s: 2020-05-20
    batch = pa.record_batch({"t": pa.array(ticks, pa.timestamp("s"))})
    (counts,) = count_tables([batch], [TableShape("t", (schema["t"],))])
    expected = [2, 1, 0, 2] if policy == "clamp" else [0, 1, 0, 0]
    assert counts.tolist() == expected


@pytest.mark.parametrize("unit,lower", [("year", "9990-01-01"), ("month", "9999-01-01"), ("day", "9999-12-01"),
                                        ("week", "9999-11-01"), ("quarter", "9999-01-01")])
def test_declared_date_domain_may_end_at_the_calendars_last_day(unit, lower):
    column = parse_schema({"columns": {"d": {"type": "date", "lower": lower, "upper": "9999-12-31",
                                             "unit": unit}}})["d"]
    assert column.labels()["d_upper"][-1] == "9999-12-31"


# ---- 2. discovered CSV columns, many of them ------------------------------------------------------------------


def test_typed_text_makes_values_unlike_the_chosen_type_missing():
    text = pa.array(["1", " 2 ", "N/A", None, "2024-13-45", "2024-03-01", "1e3"])
    assert discovery.typed_text(text, "integer").to_pylist() == [1, 2, None, None, None, None, None]
    assert discovery.typed_text(text, "float").to_pylist() == [1, 2, None, None, None, None, 1000]
    dates = discovery.typed_text(text.dictionary_encode(), "date").to_pylist()
    assert dates == [None] * 5 + [_dt.date(2024, 3, 1), None]


def test_discovered_number_column_with_some_text_is_released(tmp_path):
    """The counting pass reads a discovered column as discovery did: 'N/A' in a column found to hold integers
    is missing (the null cell), not an error after the budget is spent."""
    data = write_csv(tmp_path / "m.csv", "a", [str(i % 50) for i in range(10_000)] + ["N/A"] * 300)
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["discovery"]["columns"][0]["type"]["chosen"] == "integer"


def test_wide_csv_without_schema_ends_cleanly(tmp_path):
    """Many undeclared columns, each with a sliver of ε: their types are drawn nearly at random (dates from
    digits, numbers from text), and whatever is drawn, the run ends with a release or one data error."""
    n = 400
    rows = [",".join(str((i * r) % 7) if i % 3 else f"x{r}" for i in range(n)) for r in range(50)]
    data = write_csv(tmp_path / "wide.csv", ",".join(f"c{i}" for i in range(n)), rows)
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6")
    if result.exit_code != 0:
        assert_refused(result, 1, "no table can be released")


@pytest.mark.parametrize("lower,upper", [(-1e12, 1e12), (-(2.0**32), -(2.0**31)), (2.0**31, 2.0**32),
                                         (0.0, 2.0**32), (-(2.0**32), 0.0)])
def test_discovered_date_bounds_are_cut_to_the_calendar(lower, upper):
    """Noise (or sentinels) can put a date column's bounds anywhere in +-2^32 days: the bins still fit the
    calendar (years 1 to 9999)."""
    column = parse_schema({"columns": {"d": discovery._bins("date", lower, upper, 16)}})["d"]
    assert _dt.date(1, 1, 1) <= column.lower < column.upper <= _dt.date(9999, 12, 31)


def test_discovered_date_column_with_some_text_is_released(tmp_path):
    data = write_csv(tmp_path / "m.csv", "d", [f"2020-01-{1 + i % 28:02d}" for i in range(3000)]
                     + ["unknown", "2020-02-30"] * 50)
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["discovery"]["columns"][0]["type"]["chosen"] == "date"


# ---- 3. cell counts are Python integers ---------------------------------------------------------------------


WRAP_SCHEMA = "columns:\n" + "".join(f"  {c}: {{type: numeric, lower: 0, upper: 65536, bins: 65536}}\n"
                                     for c in "abcd")


def test_table_shape_cell_count_does_not_wrap():
    schema = parse_schema({"columns": {c: {"type": "numeric", "lower": 0, "upper": 65536, "bins": 65536}
                                       for c in "abcd"}})
    shape = TableShape("t", tuple(schema[c] for c in "abcd"))
    assert shape.n_cells == 2**64  # int64 arithmetic gives 0
    assert int(np.prod(shape.shape, dtype=np.int64)) == 0  # (what the old code compared with the limit)


def test_table_whose_cell_count_wraps_int64_is_refused_in_planning(tmp_path):
    (tmp_path / "s.yaml").write_text(WRAP_SCHEMA)
    data = write_csv(tmp_path / "d.csv", "a,b,c,d", ["1,2,3,4"])
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"), "-c", "a,b,c,d",
                     "--max-cells", "100000000")
    assert_refused(result, 2, "18,446,744,073,709,551,616 cells")
    assert charged(tmp_path) == 0


def test_marginals_whose_full_table_wraps_int64_do_not_take_the_full_strategy(tmp_path):
    (tmp_path / "s.yaml").write_text(WRAP_SCHEMA)
    data = write_csv(tmp_path / "d.csv", "a,b,c,d", ["1,2,3,4"])
    with pytest.raises(UsageError, match="cells"):
        api.plan_release(data, 1, tmp_path / "s.yaml", marginals="a,b;c,d", marginal_strategy="full")


# ---- 4. algorithm option values -----------------------------------------------------------------------------


BAD_NUMBERS_YAML = [".inf", "-.inf", ".nan", "-3", "0", "1.0e+400", "true", "text", "2.5", "[1]",
                    "99999999999999999999999999"]


@pytest.mark.parametrize("value", BAD_NUMBERS_YAML)
def test_job_spec_option_values_are_refused_in_planning(tmp_path, value):
    data = write_csv(tmp_path / "d.csv", "age", ["1", "2"])
    (tmp_path / "s.yaml").write_text("columns:\n  age: {type: numeric, lower: 0, upper: 10, bins: 5}\n")
    (tmp_path / "job.yaml").write_text(
        f"input: d.csv\nschema: s.yaml\nepsilon: 1\ntables:\n"
        f"  - {{columns: [age], algorithm: structurefirst, options: {{cap: {value}}}}}\n")
    result = cli(tmp_path, "release", "--spec", str(tmp_path / "job.yaml"), "--ledger", str(tmp_path / "l.sqlite"),
                 "-o", str(tmp_path / "out"), "-q")
    assert_refused(result, 2, "option 'cap'")
    assert charged(tmp_path) == 0 and data.exists()


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e400", "true", "abc", "2.5", "99999999999999999999", "²",
                                   "1e-999999999"])
def test_command_line_option_values_are_refused_in_planning(tmp_path, value):
    data = write_csv(tmp_path / "d.csv", "age", ["1", "2"])
    (tmp_path / "s.yaml").write_text("columns:\n  age: {type: numeric, lower: 0, upper: 10, bins: 5}\n")
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"), "-a", "structurefirst",
                     "--option", f"cap={value}")
    assert_refused(result, 2, "option 'cap'")
    assert charged(tmp_path) == 0


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


# ---- 5. the input, schema and job spec must be regular files --------------------------------------------------


FIFO_CASES = {
    "release input": (["release", "pipe.csv", "-e", "1"], 1, "named pipe"),
    "release schema": (["release", "d.csv", "-e", "1", "-s", "pipe.yaml"], 2, "named pipe"),
    "release spec": (["release", "--spec", "pipe.yaml"], 2, "named pipe"),
    "schema draft": (["schema", "pipe.csv"], 1, "named pipe"),
    "schema private": (["schema", "pipe.csv", "--private", "-e", "1", "--delta", "1e-6"], 1, "named pipe"),
    "schema is a folder": (["release", "d.csv", "-e", "1", "-s", "."], 2, "is a directory"),
    "spec is a folder": (["release", "--spec", "."], 2, "is a directory"),
}


@contextlib.contextmanager
def unblocked(*fifos: Path):
    """Keeps a test from hanging if the code under test opens one of ``fifos`` for reading: a writer thread
    per FIFO opens it (blocking until some reader does) and closes it at once, again and again, so every
    reader sees an empty file instead of waiting forever.  Afterwards non-blocking readers release them."""
    stop = threading.Event()

    def writer(fifo: Path) -> None:
        while not stop.is_set():
            open(fifo, "wb").close()

    writers = [threading.Thread(target=writer, args=(f,), daemon=True) for f in fifos]
    for w in writers:
        w.start()
    try:
        yield
    finally:
        stop.set()
        for f, w in zip(fifos, writers):
            while w.is_alive():
                fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)
                w.join(0.1)
                os.close(fd)


@pytest.mark.parametrize("case", list(FIFO_CASES))
def test_fifo_is_refused_without_opening_it(tmp_path, monkeypatch, case):
    args, code, word = FIFO_CASES[case]
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe.csv")
    os.mkfifo("pipe.yaml")
    write_csv(tmp_path / "d.csv", "a", ["1"])
    with unblocked(tmp_path / "pipe.csv", tmp_path / "pipe.yaml"):
        extra = ["--ledger", "l.sqlite"] if args[0] == "release" or "--private" in args else []
        result = cli(tmp_path, *args, *extra)
    assert_refused(result, code, word)
    assert not (tmp_path / "release").exists()
    assert charged(tmp_path) == 0


def test_fifo_and_device_refused_by_the_real_command(tmp_path):
    """End to end, in processes of their own (killed after a minute, so a regression cannot hang the suite):
    a FIFO as input, and /dev/zero (endless) as the schema."""
    os.mkfifo(tmp_path / "pipe.csv")
    write_csv(tmp_path / "d.csv", "a", ["1"])
    for args, code, word in ((["release", "pipe.csv", "-e", "1"], 1, "named pipe"),
                             (["release", "d.csv", "-e", "1", "-s", "/dev/zero"], 2, "device")):
        proc = subprocess.run([sys.executable, "-m", "dphist", *args, "--ledger", "l.sqlite"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "DPHIST_DEBUG"})
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == code and len(lines) == 1 and word in lines[0], proc.stderr
    assert charged(tmp_path) == 0


def test_device_or_glob_of_pipes_as_input_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    assert_refused(release(tmp_path, "/dev/null", "-e", "1"), 1, "device")
    assert_refused(release(tmp_path, str(tmp_path / "pipe*.csv"), "-e", "1"), 1, "no files match")
    assert charged(tmp_path) == 0


def test_open_source_refuses_a_fifo_by_its_mode(tmp_path):
    from dphist.io.sources import open_source

    os.mkfifo(tmp_path / "p.csv")
    with unblocked(tmp_path / "p.csv"), pytest.raises(DataError, match="named pipe"):
        open_source(tmp_path / "p.csv")


# ---- 10. an existing path is never a glob ---------------------------------------------------------------------


def test_existing_path_with_glob_characters_is_taken_literally(tmp_path):
    literal = write_csv(tmp_path / "data[1].csv", "a", ["1", "2"])
    write_csv(tmp_path / "data1.csv", "b", ["3"])  # what the pattern data[1].csv would match
    plan = api.plan_release(literal, 1, {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 2}}})
    assert plan.source.files == [literal]
    result = release(tmp_path, str(literal), "-e", "1", "-s", str(_schema(tmp_path, "a")))
    assert result.exit_code == 0, result.stderr


def test_pattern_is_expanded_when_no_such_file_exists(tmp_path):
    write_csv(tmp_path / "data1.csv", "a", ["1"])
    write_csv(tmp_path / "data2.csv", "a", ["2"])
    plan = api.plan_release(tmp_path / "data[12].csv", 1,
                            {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 2}}})
    assert [p.name for p in plan.source.files] == ["data1.csv", "data2.csv"]


def _schema(tmp_path: Path, column: str) -> Path:
    path = tmp_path / "schema.yaml"
    path.write_text(f"columns:\n  {column}: {{type: numeric, lower: 0, upper: 4, bins: 2}}\n")
    return path


# ---- 6. absurd exponents are refused at once ------------------------------------------------------------------


ABSURD = ["1e-999999999", "1e999999999", "-1e-999999999", "1E+999999999", "0.1e-99999", "1e-31", "1e31"]


@pytest.mark.parametrize("value", ABSURD)
def test_budget_set_refuses_absurd_exponents_fast(tmp_path, value):
    import time

    for option in ("--delta", "--epsilon"):
        args = ["--epsilon", "1", "--delta", value] if option == "--delta" else ["--epsilon", value]
        start = time.monotonic()
        result = cli(tmp_path, "budget", "set", "data.csv", *args, "--ledger", str(tmp_path / "l.sqlite"))
        assert time.monotonic() - start < 5
        assert_refused(result, 2, option.lstrip("-"))


@pytest.mark.parametrize("value", ABSURD)
def test_shared_parsers_refuse_absurd_exponents_fast(value):
    import time

    from dphist.privacy import exact_fraction, parse_delta, parse_epsilon, parse_share

    start = time.monotonic()
    for parse in (lambda v: parse_epsilon(v), lambda v: parse_delta(v, "delta"), lambda v: parse_share(v, "t"),
                  lambda v: exact_fraction(v, "x")):
        with pytest.raises(UsageError):
            parse(value)
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("option", ["--epsilon", "--delta", "--discovery-share"])
def test_release_refuses_absurd_exponents_in_planning(tmp_path, option):
    data = write_csv(tmp_path / "d.csv", "a", ["1", "2"])
    args = {"--epsilon": ["-e", ABSURD[0]], "--delta": ["-e", "1", "--delta", ABSURD[1]],
            "--discovery-share": ["-e", "1", "--delta", "1e-6", "--discovery-share", ABSURD[0]]}[option]
    assert_refused(release(tmp_path, str(data), *args), 2)
    assert charged(tmp_path) == 0


def test_parse_delta_range():
    from dphist.privacy import parse_delta

    assert parse_delta("1e-6") == Fraction(1, 10**6) and parse_delta(0) == 0
    for bad in ("1", "-0.1", "nan", "inf", True, "x"):
        with pytest.raises(UsageError, match="delta"):
            parse_delta(bad)


# ---- 7. big schemas -------------------------------------------------------------------------------------------


def test_oversized_schema_is_refused_from_its_size_at_once(tmp_path):
    import time

    from dphist.schema import load_schema

    for name, size in (("big.yaml", 50 << 20), ("big.json", 65 << 20)):
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size)  # sparse: nothing is written, and nothing may be read
        start = time.monotonic()
        with pytest.raises(UsageError, match=r"MB, more than the \d+ MB"):
            load_schema(tmp_path / name)
        assert time.monotonic() - start < 0.5
    data = write_csv(tmp_path / "d.csv", "a", ["1"])
    assert_refused(release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "big.yaml")), 2, "big.yaml", "MB")
    assert charged(tmp_path) == 0


def test_schema_with_100000_categories_and_a_hierarchy_loads_quickly(tmp_path):
    """Loading is linear: label lookups in the hierarchy used to scan the list (100,000 labels: a minute)."""
    import time

    from dphist.schema import load_schema

    n = 100_000
    labels = [f"v{i}" for i in range(n)]
    groups = "".join(f"      g{g}: [{', '.join(labels[g * 100:(g + 1) * 100])}]\n" for g in range(n // 100))
    (tmp_path / "s.yaml").write_text("columns:\n  c:\n    type: categorical\n    values:\n"
                                     + "".join(f"      - \"{v}\"\n" for v in labels) + "    hierarchy:\n" + groups)
    start = time.monotonic()
    column = load_schema(tmp_path / "s.yaml")["c"]
    assert time.monotonic() - start < 10  # about 1 s; 65 s before
    assert column.n_cells == n and column.hierarchy[0][-1] == n // 100 - 1


# ---- 8. rows longer than a block ------------------------------------------------------------------------------


def _long_field_csv(path: Path, field_bytes: int) -> Path:
    with open(path, "w") as fh:
        fh.write("a,note\n")
        fh.writelines(f"{i % 7},short\n" for i in range(1000))
        fh.write('3,"' + "x" * field_bytes + '"\n')
        fh.writelines(f'{i % 5},"two\nlines"\n' for i in range(1000))
    return path


A_SCHEMA = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 10, "bins": 10}}}


def test_valid_csv_with_a_field_longer_than_a_block_is_read(tmp_path):
    from dphist.io.sources import _CSV_BLOCK, open_source

    data = _long_field_csv(tmp_path / "long.csv", 3 * _CSV_BLOCK)
    schema = parse_schema(A_SCHEMA)
    (counts,) = count_tables(open_source(data).batches({"a": schema["a"]}), [TableShape("a", (schema["a"],))])
    expected = np.bincount([i % 7 for i in range(1000)] + [3] + [i % 5 for i in range(1000)], minlength=10)
    assert counts.tolist() == expected.tolist()
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"))
    assert result.exit_code == 0, result.stderr


def test_rereading_with_bigger_blocks_gives_every_row_once_in_order(tmp_path, monkeypatch):
    """Tiny blocks, so that the reader restarts several times at growing block sizes mid-file."""
    import pandas as pd

    from dphist.io import sources

    monkeypatch.setattr(sources, "_CSV_BLOCK", 256)
    path = tmp_path / "d.csv"
    rows = [f'{i},"{"z" * (i * 37 % 900)}"' for i in range(400)]
    write_csv(path, "a,note", rows)
    got = [v for batch in sources.open_source(path).batches({"a": parse_schema(A_SCHEMA)["a"]})
           for v in batch.column("a").to_pylist()]
    assert got == pd.read_csv(path)["a"].astype(float).tolist()


def test_a_row_longer_than_the_largest_block_is_reported_for_what_it_is(tmp_path, monkeypatch):
    from dphist.io import sources

    monkeypatch.setattr(sources, "_CSV_MAX_BLOCK", sources._CSV_BLOCK)
    data = _long_field_csv(tmp_path / "long.csv", 3 * sources._CSV_BLOCK)
    with pytest.raises(DataError, match="a row is longer than 1 MB") as info:
        list(sources.open_source(data).batches({"a": parse_schema(A_SCHEMA)["a"]}))
    assert "quote" not in str(info.value)


def test_unbalanced_quotes_are_still_called_unbalanced(tmp_path):
    rows = [f"{i % 7},short" for i in range(5)] + ['3,"never closed'] + [f"{i % 5},fine" for i in range(300_000)]
    data = write_csv(tmp_path / "u.csv", "a,note", rows)
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    assert_refused(release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml")), 1,
                   "unbalanced quotes", "never closed")


def test_draft_schema_of_long_fields_and_far_dates(tmp_path):
    from dphist.draft import draft_schema
    from dphist.io.sources import _CSV_BLOCK

    text = draft_schema(_long_field_csv(tmp_path / "long.csv", 2 * _CSV_BLOCK))
    assert "x" * 300 not in text and "note: more than 100 distinct values, or values longer" in text
    ticks = [0, 2**50, -(2**50), None]
    pq.write_table(pa.table({"t": pa.array(ticks, pa.timestamp("s")),
                             "d": pa.array([_dt.date(2020, 5, 1), _dt.date(9999, 12, 31), None, None])}),
                   tmp_path / "far.parquet")
    schema = parse_schema(__import__("yaml").safe_load(draft_schema(tmp_path / "far.parquet")))
    assert schema["t"].lower == _dt.date(1, 1, 1) and schema["t"].upper == _dt.date(9999, 12, 31)
    assert schema["d"].lower == _dt.date(2020, 5, 1) and schema["d"].upper == _dt.date(9999, 12, 31)


# ---- 9. ISO timestamps with a zone in a declared date column ----------------------------------------------------


DAY_SCHEMA = {"columns": {"d": {"type": "date", "lower": "2024-02-28", "upper": "2024-03-04", "unit": "day"}}}
ZONED = ["2024-03-01T10:00:00Z", "2024-03-01T23:30:00-05:00", "2024-03-01T00:30:00+05:00", "2024-03-01 10:00:00z",
         "2024-03-02T10:00:00.123456+0530", "2024-03-02T10:00+14:00", "2024-03-02", "2024-03-03T01:02:03", ""]


def test_zoned_timestamps_count_as_the_date_written():
    """Text dates (a Parquet or DataFrame text column) count on the date as written, whatever the zone."""
    schema = parse_schema(DAY_SCHEMA)
    for values in (pa.array([v or None for v in ZONED]), pa.array([v or None for v in ZONED]).dictionary_encode()):
        (counts,) = count_tables([pa.record_batch({"d": values})], [TableShape("d", (schema["d"],))])
        assert counts.tolist() == [0, 0, 4, 3, 1]  # 02-28, 02-29, 03-01, 03-02, 03-03


def test_csv_with_zoned_timestamps_in_a_declared_date_column_is_released(tmp_path):
    from dphist.io.sources import open_source

    data = write_csv(tmp_path / "d.csv", "d", ZONED)
    schema = parse_schema(DAY_SCHEMA)
    (counts,) = count_tables(open_source(data).batches({"d": schema["d"]}), [TableShape("d", (schema["d"],))])
    assert counts.tolist() == [0, 0, 4, 3, 1]
    (tmp_path / "s.yaml").write_text(json.dumps(DAY_SCHEMA))
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"))
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("bad", ["2024-03-01T10:00:00+25:00", "2024-02-30", "yesterday", "2024-03-01Tnoon",
                                 "2024-03-01T10:00:00 UTC", "01/03/2024", "2024-03-01Z"])
def test_values_that_are_not_dates_are_still_a_data_error(tmp_path, bad):
    data = write_csv(tmp_path / "d.csv", "d", ["2024-03-01T10:00:00Z", "2024-03-02", bad])
    (tmp_path / "s.yaml").write_text(json.dumps(DAY_SCHEMA))
    line = assert_refused(release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml")), 1,
                          "line 4", "column 'd'", "not a date")
    assert bad not in line


def test_discovery_reads_zoned_timestamps_as_dates(tmp_path):
    data = write_csv(tmp_path / "d.csv", "d", [f"2024-03-{1 + i % 20:02d}T10:00:00+05:00" for i in range(10_000)])
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6", "--seed", "2")
    assert result.exit_code == 0, result.stderr
    (column,) = json.loads((tmp_path / "out" / "report.json").read_text())["discovery"]["columns"]
    assert column["type"]["chosen"] == "date"
    assert "2023-01-01" <= column["domain"]["lower"] <= "2024-03-01" < "2024-03-20" < column["domain"]["upper"]


def test_quote_left_open_at_the_end_is_a_data_error_not_lost_rows(tmp_path):
    """Arrow reads a quote open at the end of the file as one field swallowing every later row."""
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    data = write_csv(tmp_path / "d.csv", "a,note", ["1,fine", '2,"opens', "3,x", "4,y"])
    assert_refused(release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml")), 1,
                   "line 3", "never closed")
    literal = write_csv(tmp_path / "ok.csv", "a,note", ["1,5'11\"", "2,x"])  # an odd count, but no open field
    assert release(tmp_path, str(literal), "-e", "1", "-s", str(tmp_path / "s.yaml"), "--overwrite").exit_code == 0


def test_header_without_line_end_is_an_empty_table(tmp_path):
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    (tmp_path / "d.csv").write_text("a,note")
    result = release(tmp_path, str(tmp_path / "d.csv"), "-e", "1", "-s", str(tmp_path / "s.yaml"))
    assert result.exit_code == 0, result.stderr


def test_megabytes_of_digits_in_a_number_column_are_diagnosed_in_linear_time(tmp_path):
    import time

    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    (tmp_path / "d.csv").write_text("a,note\n1,x\n" + "9" * (6 << 20) + "zzz,y\n")
    start = time.monotonic()
    line = assert_refused(release(tmp_path, str(tmp_path / "d.csv"), "-e", "1", "-s", str(tmp_path / "s.yaml")), 1,
                          "line 3", "column 'a'", "not a number")
    assert time.monotonic() - start < 20 and "zzz" not in line


@pytest.mark.parametrize("value", ["1_0", "1_0_", "١", "0x10", "1e5/2"])
def test_budgets_are_plain_ascii_numerals(value):
    from dphist.privacy import exact_fraction

    with pytest.raises(UsageError):
        exact_fraction(value, "epsilon")
