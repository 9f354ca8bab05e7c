"""Long user input echoed in an error message: a file, column or table name, an option's value, a path of a
megabyte.  Every message quotes at most about 200 characters of any one piece of input (dphist.text.quoted), so
the one error line stays short whatever was given, and escapes what would break it (a newline in a name).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_harness import invoke
from conftest import SAMPLE
from dphist.text import QUOTE_LIMIT

LONG = "n" * 1_000_000
LINE_LIMIT = 8 * QUOTE_LIMIT  # a message with a few quoted pieces and its own words
CSV, SCHEMA = str(SAMPLE / "census.csv"), str(SAMPLE / "census.schema.yaml")


def _build(tmp_path, case: str) -> list[str]:
    """The command line of ``case``, its files written into tmp_path."""
    out = ["--out", str(tmp_path / "out"), "--ledger", str(tmp_path / "ledger.sqlite")]
    if case == "csv header":
        # (a CSV field of more than 128 KB is refused as not CSV at all: that message quotes nothing)
        (tmp_path / "d.csv").write_text(f"{LONG[:100_000]},b\n1,2\n")
        return ["release", str(tmp_path / "d.csv"), "-e", "1", "--columns", "zz", *out]
    if case == "parquet column":
        pq.write_table(pa.table({LONG: [1, 2, 3], "x\ny": [1, 2, 3]}), tmp_path / "d.parquet")
        return ["release", str(tmp_path / "d.parquet"), "-e", "1", "--columns", "zz", *out]
    if case == "parquet nested column":
        pq.write_table(pa.table({LONG: [[1], [2]]}), tmp_path / "d.parquet")
        return ["release", str(tmp_path / "d.parquet"), "-e", "1", "--columns", LONG, *out]
    if case == "--columns":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "--columns", LONG, *out]
    if case == "spec table name":
        (tmp_path / "spec.yaml").write_text(f"epsilon: 1\ntables:\n  - {{name: {LONG}, columns: [age]}}\n")
        return ["release", CSV, "-s", SCHEMA, "--spec", str(tmp_path / "spec.yaml"), *out]
    if case == "spec unknown field":
        # (an explicit key: YAML allows plain keys of at most 1024 characters)
        (tmp_path / "spec.yaml").write_text(f"epsilon: 1\n? {LONG}\n: 1\ntables:\n  - {{columns: [age]}}\n")
        return ["release", CSV, "-s", SCHEMA, "--spec", str(tmp_path / "spec.yaml"), *out]
    if case == "schema column":
        (tmp_path / "s.yaml").write_text(f"columns:\n  ? {LONG}\n  : {{type: numeric, lower: 0, upper: 1, bins: 1}}\n")
        return ["release", CSV, "-s", str(tmp_path / "s.yaml"), "-e", "1", *out]
    if case == "schema label twice":
        (tmp_path / "s.yaml").write_text(f"columns:\n  sex: {{type: categorical, values: [{LONG}, {LONG}]}}\n")
        return ["release", CSV, "-s", str(tmp_path / "s.yaml"), "-e", "1", *out]
    if case == "--option value":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "-c", "age", "-a", "h", "--option", f"branching={LONG}", *out]
    if case == "--option key":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "-c", "age", "--option", f"{LONG}=1", *out]
    if case == "--noise (click)":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "--noise", LONG, *out]
    if case == "--epsilon":
        return ["release", CSV, "-s", SCHEMA, "-e", LONG, *out]
    if case == "--algorithm":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "-c", "age", "-a", LONG, *out]
    if case == "input path":
        return ["release", str(tmp_path / LONG), "-s", SCHEMA, "-e", "1", *out]
    if case == "schema path":
        return ["release", CSV, "-s", str(tmp_path / LONG), "-e", "1", *out]
    if case == "--out path":
        return ["release", CSV, "-s", SCHEMA, "-e", "1", "-c", "age", "--out", str(tmp_path / LONG),
                "--ledger", str(tmp_path / "ledger.sqlite")]
    if case == "schema --out":
        return ["schema", CSV, "--out", str(tmp_path / f"{LONG}.yaml")]
    if case == "synth --table":
        assert invoke(["release", CSV, "-s", SCHEMA, "-e", "1", "-c", "age", "--seed", "1", *out]).exit_code == 0
        return ["synth", str(tmp_path / "out"), "--table", LONG, "--rows", "5", "--out", str(tmp_path / "s.csv")]
    raise AssertionError(case)


CASES = ["csv header", "parquet column", "parquet nested column", "--columns", "spec table name", "spec unknown field",
         "schema column", "schema label twice", "--option value", "--option key", "--noise (click)", "--epsilon",
         "--algorithm", "input path", "schema path", "--out path", "schema --out", "synth --table"]


# Refused without quoting the long input: a value that is not a number, a path too long for the file system.
UNECHOED = {"--option value", "--epsilon", "input path", "schema path", "--out path", "schema --out"}


@pytest.mark.parametrize("case", CASES)
def test_a_long_input_gives_a_short_error_line(tmp_path, case):
    outcome = invoke(_build(tmp_path, case))
    assert not outcome.crash, outcome.crash
    lines = [line for line in outcome.stderr.splitlines() if "TEST MODE" not in line]
    assert outcome.exit_code in (1, 2), (outcome.exit_code, outcome.stderr[:1000])
    assert len(lines) == 1 and lines[0].startswith("Error: "), outcome.stderr[:1000]
    assert "internal error" not in lines[0], lines[0]
    assert len(lines[0]) <= LINE_LIMIT, (len(lines[0]), lines[0][:1000])
    if case not in UNECHOED:
        assert "characters)" in lines[0], lines[0]  # says that it cut, and how much
