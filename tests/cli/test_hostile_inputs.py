"""Hostile but valid-looking inputs through the command line: dates and timestamps of any range, wide CSVs without a
schema, tables whose cell count wraps int64, algorithm option values, named pipes and devices, paths with glob
characters, absurd exponents, oversized schemas, rows longer than a read block and ISO timestamps with a zone.  Each
used to crash with exit 5 after the budget was charged, hang, or get a wrong message.  Each must now succeed, or end
with one clear line (exit 1 or 2) -- and where the check needs no rows, before any row is read, so nothing is
charged.  (The readers, counting and parsers on the same inputs: the unit tests of their modules.)

Cases run in-process (cli_harness.invoke) with their own ledger (``--ledger``) and assert the exit code, a single
stderr line, no traceback and, for planning errors, an empty ledger.  Cases that could block forever (FIFOs) keep
the pipes unblocked, or run the CLI as a real process with a timeout (cli_harness.run_forked: forked from a server
that has already imported dphist).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dphist import api
from dphist.read.counting import TableShape, count_tables
from dphist.errors import UsageError
from dphist.publishing.ledger import Ledger
from dphist.declare.schema import parse_schema

import cli_harness
from cli_harness import Outcome, invoke, run_forked
from input_files import ABSURD, A_SCHEMA, DAY_SCHEMA, WRAP_SCHEMA, ZONED, _long_field_csv, unblocked, write_csv

cli_harness.start_fork_server()  # it imports while the tests before these run


# ---- helpers --------------------------------------------------------------------------------------------------------


def cli(tmp_path: Path, *args: str) -> Outcome:
    """Run ``dphist ARGS`` in-process (cli_harness.invoke); an exception escaping the CLI fails the test."""
    result = invoke([*args])
    if result.crash:
        raise AssertionError(f"crashed:\n{result.crash}")
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


# ---- dates and timestamps of any range ------------------------------------------------------------------------------


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


@pytest.mark.time_limit(20)  # a real process that discovers, then may optimise hdmm's strategy: ~4 s alone
def test_parquet_timestamps_beyond_the_calendar_are_discovered_and_clamped(tmp_path):
    """Timestamps past year 9999 (int64 seconds far out) have no calendar date: discovery cuts its bounds to
    years 1..9999 and counts them in the edge bins."""
    ticks = [0] * 3000 + [2**50] * 3000 + [-(2**50)] * 3000  # enough rows for the discovered bounds' ε
    pq.write_table(pa.table({"t": pa.array(ticks, pa.timestamp("s"))}), tmp_path / "t.parquet")
    result = release(tmp_path, str(tmp_path / "t.parquet"), "-e", "1", "--seed", "1", "--raw")
    assert result.exit_code == 0, result.stderr
    (column,) = json.loads((tmp_path / "out" / "report.json").read_text())["discovery"]["columns"]
    assert "0001-01-01" <= column["domain"]["lower"] < column["domain"]["upper"] <= "9999-12-31"


# ---- discovered CSV columns, many of them ---------------------------------------------------------------------------


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
    n = 200  # discovery takes ~5 ms a column; the corpus's discover_500_columns_no_schema is wider
    rows = [",".join(str((i * r) % 7) if i % 3 else f"x{r}" for i in range(n)) for r in range(50)]
    data = write_csv(tmp_path / "wide.csv", ",".join(f"c{i}" for i in range(n)), rows)
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6")
    if result.exit_code != 0:
        assert_refused(result, 1, "no table can be released")


def test_discovered_date_column_with_some_text_is_released(tmp_path):
    data = write_csv(tmp_path / "m.csv", "d", [f"2020-01-{1 + i % 28:02d}" for i in range(3000)]
                     + ["unknown", "2020-02-30"] * 50)
    result = release(tmp_path, str(data), "-e", "1", "--delta", "1e-6")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["discovery"]["columns"][0]["type"]["chosen"] == "date"


# ---- cell counts are Python integers --------------------------------------------------------------------------------


def test_table_whose_cell_count_wraps_int64_is_refused_in_planning(tmp_path):
    (tmp_path / "s.yaml").write_text(WRAP_SCHEMA)
    data = write_csv(tmp_path / "d.csv", "a,b,c,d", ["1,2,3,4"])
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"), "-c", "a,b,c,d",
                     "--max-cells", "100000000")
    assert_refused(result, 2, "18,446,744,073,709,551,616 cells")
    assert charged(tmp_path) == 0


# ---- algorithm option values ----------------------------------------------------------------------------------------


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


# ---- the input, schema and job spec must be regular files -----------------------------------------------------------


FIFO_CASES = {
    "release input": (["release", "pipe.csv", "-e", "1"], 1, "named pipe"),
    "release schema": (["release", "d.csv", "-e", "1", "-s", "pipe.yaml"], 2, "named pipe"),
    "release spec": (["release", "--spec", "pipe.yaml"], 2, "named pipe"),
    "schema draft": (["schema", "pipe.csv"], 1, "named pipe"),
    "schema private": (["schema", "pipe.csv", "--private", "-e", "1", "--delta", "1e-6"], 1, "named pipe"),
    "schema is a folder": (["release", "d.csv", "-e", "1", "-s", "."], 2, "is a directory"),
    "spec is a folder": (["release", "--spec", "."], 2, "is a directory"),
}


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
        proc = run_forked([*args, "--ledger", "l.sqlite"], cwd=tmp_path, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.exit_code == code and len(lines) == 1 and word in lines[0], proc.stderr
    assert charged(tmp_path) == 0


def test_device_or_glob_of_pipes_as_input_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    assert_refused(release(tmp_path, "/dev/null", "-e", "1"), 1, "device")
    assert_refused(release(tmp_path, str(tmp_path / "pipe*.csv"), "-e", "1"), 1, "no files match")
    assert charged(tmp_path) == 0


# ---- an existing path is never a glob -------------------------------------------------------------------------------


def test_existing_path_with_glob_characters_is_taken_literally(tmp_path):
    literal = write_csv(tmp_path / "data[1].csv", "a", ["1", "2"])
    write_csv(tmp_path / "data1.csv", "b", ["3"])  # what the pattern data[1].csv would match
    plan = api.plan_release(literal, 1, {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 2}}})
    assert plan.source.files == [literal]
    result = release(tmp_path, str(literal), "-e", "1", "-s", str(_schema(tmp_path, "a")))
    assert result.exit_code == 0, result.stderr


def _schema(tmp_path: Path, column: str) -> Path:
    path = tmp_path / "schema.yaml"
    path.write_text(f"columns:\n  {column}: {{type: numeric, lower: 0, upper: 4, bins: 2}}\n")
    return path


# ---- absurd exponents are refused at once ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ABSURD)
def test_budget_set_refuses_absurd_exponents_fast(tmp_path, value):
    import time

    for option in ("--delta", "--epsilon"):
        args = ["--epsilon", "1", "--delta", value] if option == "--delta" else ["--epsilon", value]
        start = time.monotonic()
        result = cli(tmp_path, "budget", "set", "data.csv", *args, "--ledger", str(tmp_path / "l.sqlite"))
        assert time.monotonic() - start < 5
        assert_refused(result, 2, option.lstrip("-"))


@pytest.mark.parametrize("option", ["--epsilon", "--delta", "--discovery-share"])
def test_release_refuses_absurd_exponents_in_planning(tmp_path, option):
    data = write_csv(tmp_path / "d.csv", "a", ["1", "2"])
    args = {"--epsilon": ["-e", ABSURD[0]], "--delta": ["-e", "1", "--delta", ABSURD[1]],
            "--discovery-share": ["-e", "1", "--delta", "1e-6", "--discovery-share", ABSURD[0]]}[option]
    assert_refused(release(tmp_path, str(data), *args), 2)
    assert charged(tmp_path) == 0


# ---- big schemas ----------------------------------------------------------------------------------------------------


def test_oversized_schema_is_refused_from_its_size_at_once(tmp_path):
    import time

    from dphist.declare.schema import load_schema

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


# ---- rows longer than a block ---------------------------------------------------------------------------------------


def test_valid_csv_with_a_field_longer_than_a_block_is_read(tmp_path):
    from dphist.read.sources import _CSV_BLOCK, open_source

    data = _long_field_csv(tmp_path / "long.csv", 3 * _CSV_BLOCK)
    schema = parse_schema(A_SCHEMA)
    (counts,) = count_tables(open_source(data).batches({"a": schema["a"]}), [TableShape("a", (schema["a"],))])
    expected = np.bincount([i % 7 for i in range(1000)] + [3] + [i % 5 for i in range(1000)], minlength=10)
    assert counts.tolist() == expected.tolist()
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    result = release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml"))
    assert result.exit_code == 0, result.stderr


def test_unbalanced_quotes_are_still_called_unbalanced(tmp_path):
    rows = [f"{i % 7},short" for i in range(5)] + ['3,"never closed'] + [f"{i % 5},fine" for i in range(300_000)]
    data = write_csv(tmp_path / "u.csv", "a,note", rows)
    (tmp_path / "s.yaml").write_text(json.dumps(A_SCHEMA))
    assert_refused(release(tmp_path, str(data), "-e", "1", "-s", str(tmp_path / "s.yaml")), 1,
                   "unbalanced quotes", "never closed")


# ---- ISO timestamps with a zone in a declared date column -----------------------------------------------------------


def test_csv_with_zoned_timestamps_in_a_declared_date_column_is_released(tmp_path):
    from dphist.read.sources import open_source

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
