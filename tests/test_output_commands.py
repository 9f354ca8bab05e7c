"""`synth`, `plot` and `schema -o`: bad output paths, damaged releases and big draws fail with one line (or
stream), exit 1 or 2 as the contract says, no traceback, and leave nothing behind (no hidden temp file either)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dphist
from dphist import synth
from dphist.cli import main
from dphist.errors import DataError
from dphist.io import output_file
from dphist.io.output_file import atomic_output, check_output_file, write_frames

from conftest import ROOT

CENSUS, SCHEMA = str(ROOT / "sample_data" / "census.csv"), str(ROOT / "sample_data" / "census.schema.yaml")


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """Test-mode releases (no ledger): age x sex in CSV and Parquet, interview_date x education in JSON, and a
    --raw one (negative, fractional counts)."""
    base = tmp_path_factory.mktemp("releases")
    made = {}
    for key, columns, fmt, raw in [("csv", "age,sex", "csv", False), ("parquet", "age,sex", "parquet", False),
                                   ("json", "interview_date,education", "json", False),
                                   ("raw", "age,education", "csv", True)]:
        made[key] = base / key
        extra = {"raw": True, "algorithm": "h", "epsilon": 0.5} if raw else {"epsilon": 1}  # h: fractional counts
        dphist.release(CENSUS, schema=SCHEMA, columns=columns, seed=3, **extra).write(made[key], fmt)
    return made


def entries(folder) -> list[str]:
    """Every name in ``folder``, hidden ones included."""
    return sorted(p.name for p in folder.iterdir())


def fails(args, code: int, *fragments: str):
    """Run the CLI; assert exit ``code``, exactly one stderr line 'Error: ...' holding every fragment."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    lines = result.stderr.splitlines()
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output and "internal error" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


COMMANDS = {  # command -> (arguments before -o, a file type it writes, a file type it does not)
    "synth": (lambda rel: ["synth", rel, "-n", "5"], ".csv", ".txt"),
    "plot": (lambda rel: ["plot", rel], ".png", ".foo"),
    "schema": (lambda rel: ["schema", CENSUS], ".yaml", ".json"),
}


# ---- 1. the output path, checked before any work -----------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", ["missing folder", "a folder", "folder syntax", "unknown type", "a file under a file",
                                  "not writable", "a FIFO", "exists"])
def test_a_bad_output_path_is_one_line_exit_2_and_leaves_nothing(releases, tmp_path, monkeypatch, command, case):
    before, good, bad = COMMANDS[command]
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    (tmp_path / f"old{good}").write_text("keep me")
    out, fragment = {
        "missing folder": (tmp_path / "nowhere" / f"out{good}", "does not exist"),
        "a folder": (tmp_path / "adir", "is a folder"),
        "folder syntax": (f"{tmp_path / 'new'}/", "names a folder"),
        "unknown type": (tmp_path / f"out{bad}", bad),
        "a file under a file": (tmp_path / "afile" / f"out{good}", "not a folder"),
        "not writable": (tmp_path / "adir" / f"out{good}", "cannot write to the folder"),
        "a FIFO": (tmp_path / f"fifo{good}", "not a regular file"),
        "exists": (tmp_path / f"old{good}", "exists (use --overwrite"),
    }[case]
    if case == "not writable":  # chmod does not stop root, so deny the way access() would for a user
        (tmp_path / "adir").chmod(0o555)
        real = os.access
        monkeypatch.setattr(output_file.os, "access", lambda p, mode: False if str(p).endswith("adir") else real(p, mode))
    if case == "a FIFO":
        os.mkfifo(tmp_path / f"fifo{good}")
    listing = entries(tmp_path)
    fails([*before(releases["csv"]), "-o", out], 2, fragment)
    assert entries(tmp_path) == listing and entries(tmp_path / "adir") == []
    assert (tmp_path / f"old{good}").read_text() == "keep me"


@pytest.mark.parametrize("command", COMMANDS)
def test_the_output_is_checked_before_the_input_is_read(tmp_path, command):
    before = COMMANDS[command][0]
    args = before(tmp_path / "no-such-release")
    if command == "schema":
        args = ["schema", tmp_path / "no-such.csv"]
    fails([*args, "-o", tmp_path / "nowhere" / f"out{COMMANDS[command][1]}"], 2, "nowhere", "does not exist")


def test_schema_private_refuses_a_bad_output_before_charging(tmp_path, private_ledger):
    fails(["schema", CENSUS, "--private", "-e", "1", "-o", tmp_path / "nowhere" / "s.yaml"], 2, "does not exist")
    assert not private_ledger.exists()  # the ledger was never opened, so nothing was charged


@pytest.mark.parametrize("command", COMMANDS)
def test_overwrite_replaces_a_file_with_its_permissions_and_no_temp_file(releases, tmp_path, command):
    before, good, _ = COMMANDS[command]
    target = tmp_path / f"out{good}"
    target.write_text("old")
    target.chmod(0o640)
    result = CliRunner().invoke(main, [*map(str, before(releases["csv"])), "-o", str(target), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert target.read_bytes() != b"old" and target.stat().st_mode & 0o777 == 0o640
    assert entries(tmp_path) == [target.name]


def test_check_output_file_accepts_a_new_file_and_creates_nothing(tmp_path):
    assert check_output_file(tmp_path / "x.CSV", False, {".csv"}) == tmp_path / "x.CSV"  # suffix case-blind
    assert entries(tmp_path) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_a_failed_write_leaves_neither_the_file_nor_a_temp_file(tmp_path, error):
    target = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt if error is KeyboardInterrupt else DataError):
        with atomic_output(target) as fh:
            fh.write(b"half")
            raise error(28, "No space left on device")
    assert entries(tmp_path) == []


# ---- 2. damaged or hostile release directories ------------------------------------------------------------------


def _csv(rel, edit):
    """Edit the age_sex table of a CSV release as a frame (read as text, so that any text can go in)."""
    frame = pd.read_csv(rel / "age_sex.csv", dtype=str, keep_default_na=False)
    frame = edit(frame)
    frame.to_csv(rel / "age_sex.csv", index=False)


def _report(rel, edit):
    report = json.loads((rel / "report.json").read_text())
    edit(report)
    (rel / "report.json").write_text(json.dumps(report))


def _set(frame, column, row, value):
    frame.loc[row, column] = value
    return frame


def _parquet_nested(rel):
    table = pq.read_table(rel / "age_sex.parquet")
    counts = pa.array([[c] for c in table["count"].to_pylist()])
    pq.write_table(table.set_column(table.schema.get_field_index("count"), "count", counts), rel / "age_sex.parquet")


def _json_nested(rel):
    records = json.loads((rel / "interview_date_education.json").read_text())
    records[4]["education"] = {"nested": [1, 2]}
    (rel / "interview_date_education.json").write_text(json.dumps(records))


DAMAGE = {  # name -> (release, damage, what the one line must name)
    "text in a count cell": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 3, "many")),
                             ["age_sex.csv", "row 4", "'count'", "text"]),
    "a negative count": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 0, "-3")), ["'count'", "negative"]),
    "a fractional count": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 2, "2.5")), ["'count'", "whole"]),
    "an empty count": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 1, "")), ["row 2", "'count'", "empty"]),
    "an infinite count": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 1, "inf")), ["'count'", "infinite"]),
    "a NaN count": ("csv", lambda r: _csv(r, lambda f: _set(f, "count", 1, "nan")), ["'count'"]),
    "a missing column": ("csv", lambda r: _csv(r, lambda f: f.drop(columns="sex")), ["age_sex.csv", "'sex'"]),
    "text in a bound": ("csv", lambda r: _csv(r, lambda f: _set(f, "age_lower", 0, "young")),
                        ["'age_lower'", "not a finite number"]),
    "rows out of order": ("csv", lambda r: _csv(r, lambda f: f.iloc[[0, 2, 1, *range(3, len(f))]]), ["age_sex.csv", "C order"]),
    "an empty table": ("csv", lambda r: _csv(r, lambda f: f.iloc[:0]), ["age_sex.csv", "0 rows"]),
    "an empty file": ("csv", lambda r: (r / "age_sex.csv").write_bytes(b""), ["age_sex.csv", "cannot be read"]),
    "binary in a CSV": ("csv", lambda r: (r / "age_sex.csv").write_bytes(bytes(range(256)) * 8),
                        ["age_sex.csv", "cannot be read"]),
    "a table file missing": ("csv", lambda r: (r / "age_sex.csv").unlink(), ["age_sex", "missing"]),
    "a folder as the table": ("csv", lambda r: ((r / "age_sex.csv").unlink(), (r / "age_sex.csv").mkdir()),
                              ["age_sex.csv", "not a regular file"]),
    "report not JSON": ("csv", lambda r: (r / "report.json").write_text("{tables: "), ["report.json", "JSON"]),
    "report nested too deep": ("csv", lambda r: (r / "report.json").write_text("[" * 100_000),
                               ["report.json", "JSON"]),
    "report without tables": ("csv", lambda r: _report(r, lambda d: d.pop("tables")), ["report.json", "'tables'"]),
    "report without a shape": ("csv", lambda r: _report(r, lambda d: d["tables"][0].pop("shape")),
                               ["report.json", "'shape'"]),
    "report with a bad type": ("csv", lambda r: _report(r, lambda d: d["tables"][0]["domain"]["sex"].update(
        type="colour")), ["report.json", "'sex'"]),
    "a name outside the release": ("csv", lambda r: _report(r, lambda d: d["tables"][0].update(name="../csv/age_sex")),
                                   ["report.json", "plain file name"]),
    "nested Parquet": ("parquet", _parquet_nested, ["age_sex.parquet", "'count'", "nested"]),
    "CSV named .parquet": ("parquet", lambda r: shutil.copy(r.parent / "csv" / "age_sex.csv", r / "age_sex.parquet"),
                           ["age_sex.parquet", "cannot be read as a Parquet table"]),
    "text counts in Parquet": ("parquet", lambda r: pq.write_table(pq.read_table(r / "age_sex.parquet").set_column(
        3, "count", pa.array(["x"] * 32)), r / "age_sex.parquet"), ["age_sex.parquet", "'count'", "text"]),
    "nested JSON cell": ("json", _json_nested, ["interview_date_education.json", "'education'", "row 5"]),
    "a bad date": ("json", lambda r: (r / "interview_date_education.json").write_text(
        (r / "interview_date_education.json").read_text().replace('"2023-01-01"', '"2023-13-01"', 1)),
        ["'interview_date_lower'", "not a date"]),
}


@pytest.fixture
def damaged(releases, tmp_path, request):
    """A copy of the named release, damaged as the case says; returns (release dir, expected fragments)."""
    kind, damage, fragments = DAMAGE[request.param]
    for name, path in releases.items():
        shutil.copytree(path, tmp_path / name)
    damage(tmp_path / kind)
    return tmp_path / kind, fragments


@pytest.mark.parametrize("damaged", DAMAGE, indirect=True)
@pytest.mark.parametrize("command", ["synth", "plot"])
def test_a_damaged_release_is_one_line_exit_1_naming_file_and_column(damaged, tmp_path, command):
    rel, fragments = damaged
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / ("s.csv" if command == "synth" else "p.png")
    args = ["synth", rel, "-n", "5"] if command == "synth" else ["plot", rel]
    fails([*args, "-o", out], 1, *fragments)
    assert entries(tmp_path / "out") == []


def test_a_raw_release_draws_its_negative_counts_as_zero(releases, tmp_path):
    table = pd.read_csv(releases["raw"] / "age_education.csv", keep_default_na=False, na_values=[""])
    assert (table["count"] < 0).any() and (table["count"] % 1 != 0).any()  # what --raw publishes
    out = tmp_path / "s.csv"
    result = CliRunner().invoke(main, ["synth", str(releases["raw"]), "-n", "3000", "-o", str(out), "--seed", "1"])
    assert result.exit_code == 0, result.output
    records = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert len(records) == 3000
    hits = pd.Series(0, index=table.index)
    for i, row in table.iterrows():  # records per released cell
        inside = (records["age"].between(row.age_lower, row.age_upper, inclusive="left") & (records["education"].isna() if pd.isna(row.education) else records["education"] == row.education))
        hits[i] = inside.sum()
    assert hits.sum() == 3000 and hits[table["count"] <= 0].sum() == 0 and hits[table["count"] > 0].sum() > 0


def test_all_zero_counts_are_nothing_to_sample_but_still_a_picture(releases, tmp_path):
    shutil.copytree(releases["csv"], tmp_path / "rel")
    _csv(tmp_path / "rel", lambda f: f.assign(count="0"))
    fails(["synth", tmp_path / "rel", "-n", "5", "-o", tmp_path / "s.csv"], 1, "age_sex.csv", "every released count is 0")
    assert CliRunner().invoke(main, ["plot", str(tmp_path / "rel"), "-o", str(tmp_path / "p.png")]).exit_code == 0


def test_wrong_table_options_are_exit_2(releases, tmp_path):
    fails(["synth", releases["csv"], "-n", "5", "-t", "nope", "-o", tmp_path / "s.csv"], 2, "no table 'nope'")
    fails(["plot", releases["csv"], "-t", "nope", "-o", tmp_path / "p.png"], 2, "no table 'nope'")
    fails(["synth", tmp_path, "-n", "5", "-o", tmp_path / "s.csv"], 2, "not a dphist release")
    assert entries(tmp_path) == []
