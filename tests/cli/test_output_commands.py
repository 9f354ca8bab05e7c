"""`synth`, `plot` and `schema -o`: bad output paths, damaged releases and big draws fail with one line (or
stream), exit 1 or 2 as the contract says, no traceback, and leave nothing behind (no hidden temp file either);
synth writes its records chunk by chunk in every format, and refuses requests that are not clear (several tables
without --table or --joint, --table with --joint)."""

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

import dphist
from dphist.products import synth
from dphist.errors import UsageError
from dphist.products import output_file
from dphist.products.synth import synthesize

from census_releases import census_releases
from cli_harness import invoke
from conftest import SAMPLE

CENSUS, SCHEMA = str(SAMPLE / "census.csv"), str(SAMPLE / "census.schema.yaml")


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """Test-mode releases of the census (census_releases.census_releases), keyed csv, parquet, json, nulls-csv,
    nulls-parquet and raw (negative, fractional counts)."""
    return census_releases(tmp_path_factory.mktemp("releases"))


def entries(folder) -> list[str]:
    """Every name in ``folder``, hidden ones included."""
    return sorted(p.name for p in folder.iterdir())


def fails(args, code: int, *fragments: str):
    """Run the CLI; assert exit ``code``, exactly one stderr line 'Error: ...' holding every fragment."""
    result = invoke([str(a) for a in args])
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
                                  "not writable", "a FIFO", "exists", "a newline", "a NUL", "a name too long"])
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
        "a newline": (f"{tmp_path}/no\nwhere/out{good}", "no\\nwhere"),  # shown escaped: still one line
        "a NUL": (f"{tmp_path}/out\0{good}", "NUL"),
        "a name too long": (tmp_path / f"{'x' * 300}{good}", "too long"),
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
    result = invoke([*map(str, before(releases["csv"])), "-o", str(target), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert target.read_bytes() != b"old" and target.stat().st_mode & 0o777 == 0o640
    assert entries(tmp_path) == [target.name]


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
    "an unknown ci_covers": ("csv", lambda r: _csv(r, lambda f: _set(f, "ci_covers", 1, "everything")),
                             ["age_sex.csv", "row 2", "'ci_covers'", "'everything'"]),
    "text in a bucket": ("csv", lambda r: _csv(r, lambda f: _set(f, "bucket", 2, "first")),
                         ["age_sex.csv", "row 3", "'bucket'", "text"]),
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
    "a name with a newline": ("csv", lambda r: _report(r, lambda d: d["tables"][0].update(name="age\nsex")),
                              ["report.json", "plain file name"]),
    "a name too long": ("csv", lambda r: _report(r, lambda d: d["tables"][0].update(name="t" * 300)),
                        ["file is missing"]),
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
    result = invoke(["synth", str(releases["raw"]), "-n", "3000", "-o", str(out), "--seed", "1"])
    assert result.exit_code == 0, result.output
    records = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert len(records) == 3000
    hits = pd.Series(0, index=table.index)
    for i, row in table.iterrows():  # records per released cell
        inside = (records["age"].between(row.age_lower, row.age_upper, inclusive="left") & (records["education"].isna() if pd.isna(row.education) else records["education"] == row.education))
        hits[i] = inside.sum()
    assert hits.sum() == 3000 and hits[table["count"] <= 0].sum() == 0 and hits[table["count"] > 0].sum() > 0
    released = synth.read_table(releases["raw"], synth.load_report(releases["raw"])["tables"][0])
    assert (released.counts < 0).any() and (released.weights >= 0).all()  # plot draws the counts as released
    assert invoke(["plot", str(releases["raw"]), "-o", str(tmp_path / "p.png")]).exit_code == 0


def test_all_zero_counts_are_nothing_to_sample_but_still_a_picture(releases, tmp_path):
    shutil.copytree(releases["csv"], tmp_path / "rel")
    _csv(tmp_path / "rel", lambda f: f.assign(count="0"))
    fails(["synth", tmp_path / "rel", "-n", "5", "-o", tmp_path / "s.csv"], 1, "age_sex.csv", "every released count is 0")
    assert invoke(["plot", str(tmp_path / "rel"), "-o", str(tmp_path / "p.png")]).exit_code == 0


def test_wrong_table_options_are_exit_2(releases, tmp_path):
    fails(["synth", releases["csv"], "-n", "5", "-t", "nope", "-o", tmp_path / "s.csv"], 2, "no table 'nope'")
    fails(["plot", releases["csv"], "-t", "nope", "-o", tmp_path / "p.png"], 2, "no table 'nope'")
    fails(["synth", tmp_path, "-n", "5", "-o", tmp_path / "s.csv"], 2, "not a dphist release")
    assert entries(tmp_path) == []


# ---- 3. synth streams: memory bounded by one chunk, whatever --rows is ---------------------------------------------


@pytest.fixture(scope="module")
def marginal_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("marginals") / "rel"
    dphist.release(CENSUS, 1, schema=SCHEMA, seed=1, marginals="age,sex;sex,income").write(out)
    return out


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_the_cli_writes_chunk_by_chunk_the_same_records_as_one_frame(releases, tmp_path, monkeypatch, fmt):
    """Written in chunks of 1000, the file holds the records of the chunks in order, and (below one chunk)
    exactly the bytes the whole frame gives."""
    rel = releases["json"]  # a date column and a categorical one with a null category
    monkeypatch.setattr(synth, "CHUNK_ROWS", 1000)
    out = tmp_path / f"s.{fmt}"
    result = invoke(["synth", str(rel), "-n", "2500", "-o", str(out), "--seed", "4"])
    assert result.exit_code == 0 and "wrote 2500 synthetic rows" in result.stderr, result.output
    expected = pd.concat(synth.plan_synthesis(rel, 2500, chunk_rows=1000).chunks(np.random.default_rng(4)),
                         ignore_index=True)
    if fmt == "parquet":
        assert pq.ParquetFile(out).metadata.num_row_groups == 3
        back = pd.read_parquet(out)
        pd.testing.assert_frame_equal(back, expected, check_dtype=False)
    else:
        whole = (expected.to_csv(index=False, lineterminator="\n") if fmt == "csv"
                 else expected.to_json(orient="records", force_ascii=False) + "\n")
        assert out.read_text() == whole
    assert entries(tmp_path) == [out.name]


def test_ctrl_c_while_streaming_leaves_no_file(releases, tmp_path, monkeypatch):
    real = synth.Synthesis.chunks

    def interrupted(self, rng):
        chunks = real(self, rng)
        yield next(chunks)
        raise KeyboardInterrupt

    monkeypatch.setattr(synth.Synthesis, "chunks", interrupted)
    result = invoke(["synth", str(releases["csv"]), "-n", "5000", "-o", str(tmp_path / "s.csv")])
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert entries(tmp_path) == []


# ---- 4. plot without matplotlib ------------------------------------------------------------------------------------


@pytest.mark.parametrize("out", ["p.png", "nowhere/p.png", "p.foo"])
def test_plot_without_matplotlib_is_one_line_exit_2_and_leaves_nothing(releases, tmp_path, monkeypatch, out):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now fails, as if not installed
    fails(["plot", releases["csv"], "-o", tmp_path / out], 2, "needs matplotlib", "pip install 'dphist[plot]'")
    assert entries(tmp_path) == []


# ---- 5. synth: the output format, --table and --joint ---------------------------------------------------------------


ARGS = [CENSUS, "-s", SCHEMA]


def release(tmp_path, *extra, name="rel"):
    out = tmp_path / name
    result = invoke(["release", *ARGS, "-e", "1", "-o", str(out), "--seed", "5", "-q", *extra])
    assert result.exit_code == 0, result.output
    return out


def test_cli_writes_parquet_and_refuses_unclear_requests(tmp_path):
    out = release(tmp_path, "--spec", str(_spec(tmp_path)))
    target = tmp_path / "s.parquet"
    ok = invoke(["synth", str(out), "-n", "500", "-t", "sex", "-o", str(target), "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    assert pd.read_parquet(target).shape == (500, 1)
    several = invoke(["synth", str(out), "-n", "5", "-o", str(tmp_path / "x.csv")])
    assert several.exit_code == 2 and "--table" in several.stderr and "--joint" in several.stderr
    assert not (tmp_path / "x.csv").exists()
    again = invoke(["synth", str(out), "-n", "5", "-t", "sex", "-o", str(target)])
    assert again.exit_code == 2 and "exists" in again.stderr
    bad = invoke(["synth", str(tmp_path), "-n", "5", "-o", str(tmp_path / "y.csv")])
    assert bad.exit_code == 2 and "not a dphist release" in bad.stderr
    with pytest.raises(UsageError, match="no table 'nope'"):
        synthesize(out, 5, "nope")


def _spec(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("tables:\n  - {columns: [sex]}\n  - {columns: [age]}\n")
    return spec


def test_cli_joint_writes_the_union_of_the_columns_and_refuses_a_table(marginal_release, tmp_path):
    target = tmp_path / "joint.csv"
    ok = invoke(["synth", str(marginal_release), "-n", "300", "--joint", "-o", str(target), "--seed", "2"])
    assert ok.exit_code == 0, ok.output
    assert "Warning" not in ok.stderr
    written = pd.read_csv(target)
    assert list(written.columns) == ["age", "sex", "income"] and len(written) == 300
    both = invoke(["synth", str(marginal_release), "-n", "5", "--joint", "-t", "age_sex",
                   "-o", str(tmp_path / "x.csv")])
    assert both.exit_code == 2 and "--joint" in both.stderr and not (tmp_path / "x.csv").exists()
    with pytest.raises(UsageError, match="--joint"):
        synthesize(marginal_release, 5, "age_sex", joint=True)
