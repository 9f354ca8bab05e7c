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
        dphist.release(CENSUS, 1, schema=SCHEMA, columns=columns, seed=3, raw=raw).write(made[key], fmt)
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
