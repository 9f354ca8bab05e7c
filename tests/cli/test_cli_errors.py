"""The CLI's error contract, checked case by case through click's CliRunner AND as a real subprocess.

For every bad input the CLI must print ONE line on stderr (``Error: ...``) naming the file, column, field or line
at fault, exit with 2 (usage: options, schema, job spec, epsilon) or 1 (data), print no traceback, quote no data
value (every data file below hides the marker ``zzzsecret`` where a careless message would show it), and leave
the file system exactly as it was: no --out directory, no staging directory, a pre-existing --out untouched.

Each case is a *builder*: a function that writes its files into a fresh directory and returns the command line
(relative paths; both runners use that directory as the working directory) and what to expect.  The main cases
(CASES) run both ways; further variants (EXTRA_CASES) and regressions for bugs found while writing these tests
(REGRESSION_CASES) run through CliRunner only.  Both runners are cli_harness's: ``invoke`` in-process, and as a
real process of its own, forked from a server that has already imported dphist (``start``), except the cases in
FRESH_INTERPRETER, which start a new interpreter (``run_process``, a second of imports each) so that anything
printed while importing would break their one-line contract as it would for a user.  The subprocess runs are all
started when the module's first test runs and checked by the last tests in the file, so the whole file stays fast;
the module's tests run on one xdist worker (their xdist_group), so that only one worker starts them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dphist.api
import dphist.read.sources
import dphist.read.engines
from dphist.publishing.destination import MARKER

import cli_harness
from cli_harness import Outcome, invoke, run_process, snapshot, start
from conftest import write

# The subprocess runs are started by a module fixture when the module's first test runs: every test of the module
# on one worker, or each worker would start them all.
pytestmark = pytest.mark.xdist_group("cli_errors")

cli_harness.start_fork_server()  # it imports while the tests before these run

SECRET = "zzzsecret"  # planted in data; must never appear in any output
BANNER = "TEST MODE"  # the --seed banner line on stderr

SCHEMA = """\
columns:
  age: {type: numeric, lower: 0, upper: 100, bins: 4}
  sex: {type: categorical, values: [F, M]}
"""
GOOD_CSV = f"age,sex,note\n10,F,{SECRET}\n20,M,{SECRET}\n"
TABLE_COLUMNS = ["count", "noisy_count", "ci_lower", "ci_upper", "ci_covers", "bucket"]


# ---- cases ----------------------------------------------------------------------------------------------------


@dataclass
class Case:
    args: list[str]
    exit_code: int | tuple[int, ...]  # a tuple: any of these (for bugs whose fix may either accept or refuse)
    keywords: tuple[str, ...] = ()  # must all appear in the error line
    forbidden: tuple[str, ...] = ()  # must not appear in the error line
    seeded: bool = False  # the test-mode banner is expected before the error line
    check: Callable[[Path, "Outcome"], None] | None = None  # extra checks for a successful run


def release(data: str, *extra: str, schema: str | None = "schema.yaml", epsilon: str | None = "1",
            out: str = "out") -> list[str]:
    args = ["release", data]
    if schema is not None:
        args += ["--schema", schema]
    if epsilon is not None:
        args += ["--epsilon", epsilon]
    return args + list(extra) + ["--out", out]


def with_schema(d: Path, schema: str = SCHEMA) -> None:
    write(d, "schema.yaml", schema)


# 1. missing input


def missing_input(d):
    with_schema(d)
    return Case(release("nosuch.csv"), 1, ("nosuch.csv", "not found"))


# 2. unreadable / malformed data


def ragged_row(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex\n10,F\n20,M,{SECRET}\n30,F\n")
    return Case(release("data.csv"), 1, ("data.csv", "line 3", "expected 2 fields", "found 3"))


def non_numeric_value(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex\n10,F\n{SECRET},M\n30,F\n")
    return Case(release("data.csv"), 1, ("data.csv", "line 3", "'age'", "not a number"))


def non_numeric_value_seeded(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex\n10,F\n20,M\n{SECRET},F\n")
    return Case(release("data.csv", "--seed", "1"), 1, ("data.csv", "line 4", "'age'", "not a number"), seeded=True)


def non_date_value(d):
    with_schema(d, "columns:\n  d: {type: date, lower: 2020-01-01, upper: 2021-01-01, unit: month}\n")
    write(d, "data.csv", f"d\n2020-03-04\n{SECRET}\n")
    return Case(release("data.csv"), 1, ("data.csv", "line 3", "'d'", "not a date"))


def corrupt_parquet(d):
    with_schema(d)
    write(d, "data.parquet", (f"{SECRET} this is not parquet\x00\x01".encode()) * 20)
    return Case(release("data.parquet"), 1, ("data.parquet", "Parquet"))


def _corrupt_pages_parquet(d: Path) -> None:
    """A Parquet file with a valid footer whose data pages are overwritten: fails while reading rows."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"age": [float(i) for i in range(1000)], "sex": [SECRET, "F"] * 500}), sink,
                   compression="none")
    data = bytearray(sink.getvalue().to_pybytes())
    data[8:3000] = b"\xab" * (3000 - 8)
    write(d, "data.parquet", bytes(data))


def corrupt_parquet_pages(d):
    with_schema(d)
    _corrupt_pages_parquet(d)
    return Case(release("data.parquet"), 1, ("data.parquet", "Parquet"))


def zero_byte_csv(d):
    with_schema(d)
    write(d, "data.csv", b"")
    return Case(release("data.csv"), 1, ("data.csv", "empty"))


# 3. unknown columns


def column_not_in_schema(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    # An undeclared column would be discovered privately; one that is not in the file either is a data error.
    return Case(release("data.csv", "--columns", "nosuch"), 1, ("'nosuch'", "not found", "age, sex, note"))


def column_not_in_file(d):
    with_schema(d, SCHEMA + "  zip: {type: categorical, values: ['12345']}\n")
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv"), 1, ("data.csv", "'zip'", "not found"))


def column_not_in_parquet_file(d):
    with_schema(d)
    pq.write_table(pa.table({"age": [1.0, 2.0], "note": [SECRET, SECRET]}), d / "data.parquet")
    return Case(release("data.parquet", "--columns", "age,sex"), 1, ("data.parquet", "'sex'", "not found"))


# 4. column type against the schema


def parquet_text_in_numeric_column(d):
    with_schema(d)
    pq.write_table(pa.table({"age": [SECRET, "12"], "sex": ["F", "M"]}), d / "data.parquet")
    return Case(release("data.parquet"), 1, ("data.parquet", "'age'", "numeric", "text"))


# 5. invalid schemas (usage errors: exit 2, message names the column and field)


def _schema_case(d, schema: str, *keywords: str, name: str = "schema.yaml") -> Case:
    write(d, name, schema)
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", schema=name), 2, (name, *keywords))


def schema_empty_mapping(d):
    return _schema_case(d, "{}\n", "'columns'")


def schema_without_columns_key(d):
    return _schema_case(d, "age: {type: numeric, lower: 0, upper: 100, bins: 4}\n", "'age'", "'columns'")


def schema_unknown_type(d):
    return _schema_case(d, "columns:\n  age: {type: integer, lower: 0, upper: 100, bins: 4}\n", "'age'", "'type'")


def schema_numeric_without_bounds(d):
    return _schema_case(d, "columns:\n  age: {type: numeric, bins: 4}\n", "'age'", "'lower'", "required")


def schema_bins_zero(d):
    return _schema_case(d, "columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 0}\n", "'age'", "'bins'")


def schema_edges_not_increasing(d):
    return _schema_case(d, "columns:\n  age: {type: numeric, edges: [0, 50, 20, 100]}\n",
                        "'age'", "'edges'", "increasing")


def schema_duplicate_category(d):
    return _schema_case(d, "columns:\n  sex: {type: categorical, values: [F, M, F]}\n", "'sex'", "'values'", "twice")


def schema_bad_date(d):
    return _schema_case(d, "columns:\n  d: {type: date, lower: '2020-02-30', upper: '2021-01-01'}\n",
                        "'d'", "'lower'", "YYYY-MM-DD")


def schema_invalid_yaml(d):
    return _schema_case(d, "columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 4\n  sex: [\n",
                        "YAML", "line")


def schema_unknown_field(d):
    return _schema_case(d, "columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 4, bin: 4}\n",
                        "'age'", "'bin'", "not a known field")


def schema_file_missing(d):
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", schema="nosuch.yaml"), 2, ("nosuch.yaml", "not found"))


def schema_option_missing(d):
    write(d, "data.csv", GOOD_CSV)
    # Without a schema the domains are discovered privately; text columns then need a delta.
    return Case(release("data.csv", schema=None), 2, ("needs delta", "--delta", "schema"))


# 6. epsilon (usage errors)


def _epsilon_case(d, epsilon: str | None, *keywords: str) -> Case:
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    args = release("data.csv", epsilon=None)
    if epsilon is not None:
        args.append(f"--epsilon={epsilon}")  # '=' so that '-1' is not read as an option
    return Case(args, 2, ("epsilon", *keywords))


def epsilon_zero(d):
    return _epsilon_case(d, "0", "greater than 0")


def epsilon_negative(d):
    return _epsilon_case(d, "-1", "greater than 0")


def epsilon_not_a_number(d):
    return _epsilon_case(d, "abc", "number")


def epsilon_nan(d):
    return _epsilon_case(d, "nan", "finite")


def epsilon_inf(d):
    return _epsilon_case(d, "inf", "finite")


def epsilon_missing(d):
    return _epsilon_case(d, None, "--epsilon", "missing")


# 7. empty input: header-only is a full-shape release; zero bytes is an error (zero_byte_csv above)


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _check_full_shape(test_mode: bool):
    def check(d: Path, outcome: Outcome) -> None:
        out = d / "out"
        expected = ["age.csv", "report.json", "sex.csv"] + (["NOT_PRIVATE.txt"] if test_mode else [])
        assert sorted(p.name for p in out.iterdir() if p.name != MARKER) == sorted(expected)
        assert (out / MARKER).is_file()
        age, sex = _read_csv(out / "age.csv"), _read_csv(out / "sex.csv")
        assert list(age[0]) == ["age_lower", "age_upper", *TABLE_COLUMNS]
        assert [(r["age_lower"], r["age_upper"]) for r in age] == [("0", "25"), ("25", "50"), ("50", "75"),
                                                                 ("75", "100")]
        assert list(sex[0]) == ["sex", *TABLE_COLUMNS] and [r["sex"] for r in sex] == ["F", "M"]
        for row in age + sex:
            assert int(row["count"]) >= 0
            # Empty when the algorithm auto chose gives no interval; else ci_covers says what it covers.
            if row["ci_lower"] == "":
                assert row["ci_upper"] == row["ci_covers"] == row["bucket"] == ""
            else:
                assert float(row["ci_lower"]) <= float(row["ci_upper"])
                assert row["ci_covers"] == "count" and row["bucket"] == "" or \
                    row["ci_covers"] == "bucket share" and int(row["bucket"]) >= 0
            float(row["noisy_count"])
        report = json.loads((out / "report.json").read_text())
        assert report["test_mode"] is test_mode
        assert report["epsilon_spent"] == report["epsilon_requested"] == "1"
        assert [(t["name"], t["cells"]) for t in report["tables"]] == [("age", 4), ("sex", 2)]
        assert not [p.name for p in d.iterdir() if p.name.startswith(".")]  # no staging left behind
        if not test_mode:
            assert "wrote 3 files" in outcome.stderr
    return check


def header_only_csv_seeded(d):
    with_schema(d)
    write(d, "data.csv", "age,sex\n")
    return Case(release("data.csv", "--seed", "1", "--quiet"), 0, seeded=True, check=_check_full_shape(True))


def header_only_csv_unseeded(d):
    with_schema(d)
    write(d, "data.csv", "age,sex\n")
    return Case(release("data.csv"), 0, check=_check_full_shape(False))


def zero_row_parquet(d):
    with_schema(d)
    pq.write_table(pa.table({"age": pa.array([], pa.float64()), "sex": pa.array([], pa.string())}),
                   d / "data.parquet")
    return Case(release("data.parquet"), 0, check=_check_full_shape(False))


# 8. non-UTF-8 text


def non_utf8_category(d):
    with_schema(d)
    write(d, "data.csv", b"age,sex\n10,F\n20," + SECRET.encode() + b"\xff\xfe\n30,M\n")
    return Case(release("data.csv"), 1, ("data.csv", "UTF-8"))


def non_utf8_category_far_down(d):
    """Past the first 8 KB, where the header check has not decoded it: found by Arrow while reading."""
    with_schema(d)
    rows = b"".join(b"%d,F\n" % (i % 100) for i in range(5000))
    write(d, "data.csv", b"age,sex\n" + rows + b"20," + SECRET.encode() + b"\xff\xfe\n30,M\n")
    return Case(release("data.csv"), 1, ("data.csv", "UTF-8"))


# 9. duplicate column names


def duplicate_header(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex,age\n10,F,{SECRET}\n")
    return Case(release("data.csv"), 1, ("data.csv", "'age'", "more than once"))


# 10. output directory


def _old_release(d: Path) -> None:
    """A release written by an earlier dphist (before release markers): report.json and its tables only."""
    write(d, "out/report.json", json.dumps({"dphist_version": "0.0.9", "tables": [{"name": "age"}, {"name": "old"}]}))
    write(d, "out/old.csv", "previous release\n")
    write(d, "out/age.csv", "stale\n")


def out_foreign_files_with_overwrite(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    write(d, "out/thesis.txt", "not a release\n")
    return Case(release("data.csv", "--overwrite"), 2, ("out", "does not hold a dphist release"))


def out_not_empty(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    _old_release(d)
    return Case(release("data.csv"), 2, ("out", "not empty", "--overwrite"))


def out_not_empty_with_overwrite(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    _old_release(d)

    def check(d: Path, outcome: Outcome) -> None:
        assert sorted(p.name for p in (d / "out").iterdir()) == [MARKER, "age.csv", "report.json", "sex.csv"]
        assert (d / "out" / "age.csv").read_text().startswith("age_lower,age_upper,count")
        assert not [p.name for p in d.iterdir() if p.name.startswith(".")]  # no staging or backup left

    return Case(release("data.csv", "--overwrite", "--quiet"), 0, check=check)


def out_not_empty_with_overwrite_and_bad_data(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex\n10,F\n{SECRET},M\n")
    _old_release(d)
    return Case(release("data.csv", "--overwrite"), 1, ("data.csv", "line 3", "'age'"))


def out_empty_dir_and_bad_data(d):
    with_schema(d)
    write(d, "data.csv", f"age,sex\n10,F\n{SECRET},M\n")
    (d / "out").mkdir()
    return Case(release("data.csv"), 1, ("data.csv", "line 3", "'age'"))


def out_is_a_file(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    write(d, "out", "a file\n")
    return Case(release("data.csv"), 2, ("out", "not a directory"))


# 11. job specs (usage errors)


def _job_case(d, spec: str | None, *keywords: str) -> Case:
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    if spec is not None:
        write(d, "job.yaml", "input: data.csv\nschema: schema.yaml\nepsilon: '1'\n" + spec)
    return Case(["release", "--spec", "job.yaml", "--out", "out"], 2, keywords)


def job_ok(d):
    case = _job_case(d, "tables:\n  - {name: t, columns: [age, sex], share: 2}\n  - {columns: [sex]}\n")

    def check(d: Path, outcome: Outcome) -> None:
        assert sorted(p.name for p in (d / "out").iterdir()) == [MARKER, "report.json", "sex.csv", "t.csv"]
        report = json.loads((d / "out" / "report.json").read_text())
        assert [(t["name"], t["epsilon"]) for t in report["tables"]] == [("t", "2/3"), ("sex", "1/3")]

    case.exit_code, case.check = 0, check
    return case


def job_spec_missing(d):
    return _job_case(d, None, "job.yaml", "not found")


def job_unknown_field(d):
    return _job_case(d, "tabels:\n  - {columns: [age]}\n", "job.yaml", "'tabels'")


def job_unknown_table_field(d):
    return _job_case(d, "tables:\n  - {columns: [age], shares: 2}\n", "job.yaml", "table 1", "'shares'")


def job_table_without_columns(d):
    return _job_case(d, "tables:\n  - {name: t}\n", "job.yaml", "table 1", "'columns'")


def job_table_with_empty_columns(d):
    return _job_case(d, "tables:\n  - {name: t, columns: []}\n", "job.yaml", "table 1", "'columns'")


def job_duplicate_table_names(d):
    return _job_case(d, "tables:\n  - {name: t, columns: [age]}\n  - {name: t, columns: [sex]}\n", "'t'", "twice")


def job_share_zero(d):
    return _job_case(d, "tables:\n  - {columns: [age], share: 0}\n", "'age'", "share", "greater than 0")


def job_share_negative(d):
    return _job_case(d, "tables:\n  - {columns: [age], share: -1}\n", "'age'", "share", "greater than 0")


def job_unknown_algorithm(d):
    return _job_case(d, "tables:\n  - {columns: [age], algorithm: nosuch}\n", "'nosuch'", "identity")


def job_unknown_column(d):
    # Not declared, so it would be discovered; not in the file either: a data error.
    case = _job_case(d, "tables:\n  - {columns: [nosuch]}\n", "'nosuch'", "not found")
    return Case(case.args, 1, case.keywords)


# 12. unknown --algorithm


def unknown_algorithm(d):
    with_schema(d)
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", "--algorithm", "nosuch"), 2, ("unknown algorithm", "'nosuch'", "identity"))


# other options


def columns_and_spec(d):
    case = _job_case(d, "tables:\n  - {columns: [age]}\n", "--columns", "--spec")
    case.args += ["--columns", "age"]
    return case


def missing_input_argument(d):
    with_schema(d)
    return Case(["release", "--schema", "schema.yaml", "--epsilon", "1", "--out", "out"], 2, ("INPUT",))


# 13. a data error far down a large file, after whole blocks have been counted


BIG_ROWS = 60_000
BAD_ROW = 50_000  # 1-based data row: line BAD_ROW + 1 of the file


def big_csv(d: Path, name: str = "big.csv", rows: int = BIG_ROWS, bad: int = BAD_ROW) -> str:
    pad = "p" * 120  # ~130 bytes a row: 60,000 rows are ~7.5 MB, two 4 MB read blocks
    lines = ["age,sex,pad\n"]
    lines += [f"{SECRET if i == bad else i % 100},{'FM'[i % 2]},{pad}\n" for i in range(1, rows + 1)]
    write(d, name, "".join(lines))
    return name


def bad_value_mid_stream(d):
    with_schema(d)
    big_csv(d)
    return Case(release("big.csv"), 1, ("big.csv", f"line {BAD_ROW + 1}", "'age'", "not a number"))


# ---- regressions: bugs found while writing these tests, now fixed ---------------------------------------


def epsilon_plus_infinity(d):
    """'inf' is refused cleanly, but '+infinity' slips past the spelled-out list and Fraction() overflows."""
    return _epsilon_case(d, "+infinity", "finite")


def epsilon_huge(d):
    """Accepting a huge epsilon (5000 is accepted on purpose) or refusing it are both fine; crashing is not."""
    case = _epsilon_case(d, "1e20")
    case.exit_code = (0, 2)
    return case


def epsilon_tiny(d):
    case = _epsilon_case(d, "1e-20")
    case.exit_code = (0, 2)
    return case


def schema_unquoted_impossible_date(d):
    """PyYAML builds datetime.date itself for an unquoted 2020-13-01 and raises ValueError, not YAMLError."""
    return _schema_case(d, "columns:\n  d: {type: date, lower: 2020-13-01, upper: 2021-01-01}\n")


def job_unquoted_impossible_date(d):
    return _job_case(d, "out: 2020-13-01\ntables:\n  - {columns: [age]}\n", "job.yaml")


def schema_typo_instead_of_bins(d):
    """'bin: 4' in place of 'bins: 4': the message blames the missing 'bins' and never names the typo."""
    return _schema_case(d, "columns:\n  age: {type: numeric, lower: 0, upper: 100, bin: 4}\n", "'age'", "'bin'")


def schema_column_declared_twice(d):
    """YAML keeps the last of two equal keys: the first declaration of 'age' is silently dropped."""
    return _schema_case(d, "columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 4}\n"
                           "  age: {type: numeric, lower: 0, upper: 100, bins: 10}\n", "'age'")


def number_python_accepts_but_arrow_does_not(d):
    """float('1_000') works, Arrow refuses it: the diagnosis finds no bad row and says 'malformed CSV (In CSV
    column #0)', naming neither the line nor the column."""
    with_schema(d)
    write(d, "data.csv", f"age,sex,note\n10,F,{SECRET}\n1_000,M,{SECRET}\n")
    return Case(release("data.csv"), 1, ("data.csv", "line 3", "'age'", "not a number"))


def non_utf8_category_blames_header(d):
    """The header is valid UTF-8; the bad bytes are in row 2, but the small file is decoded in one chunk by the
    header check, which then says 'the header row is not valid UTF-8 text'."""
    case = non_utf8_category(d)
    case.forbidden = ("header",)
    return case


def corrupt_parquet_message_cut_mid_word(d):
    """_first_clause() cuts the library message at the first apostrophe: '(Couldn)'."""
    case = corrupt_parquet_pages(d)
    case.forbidden = ("(Couldn)",)
    return case


# The main cases: run through both CliRunner and a subprocess.
CASES = [pytest.param(b, id=b.__name__) for b in [
    missing_input,
    ragged_row, non_numeric_value, corrupt_parquet, zero_byte_csv,
    column_not_in_schema, column_not_in_file,
    parquet_text_in_numeric_column,
    schema_without_columns_key, schema_unknown_type, schema_numeric_without_bounds, schema_bins_zero,
    schema_edges_not_increasing, schema_duplicate_category, schema_bad_date, schema_invalid_yaml,
    schema_unknown_field, schema_file_missing,
    epsilon_zero, epsilon_negative, epsilon_not_a_number, epsilon_nan, epsilon_inf, epsilon_missing,
    header_only_csv_seeded, header_only_csv_unseeded,
    non_utf8_category,
    duplicate_header,
    out_not_empty, out_not_empty_with_overwrite, out_foreign_files_with_overwrite,
    job_spec_missing, job_unknown_field, job_table_without_columns, job_duplicate_table_names, job_share_zero,
    job_unknown_algorithm,
    unknown_algorithm,
    bad_value_mid_stream,
]]

# Bugs found while writing these tests (CliRunner only, like the extra cases below: the code paths are the same
# in a subprocess, and each subprocess costs ~0.5 s of imports).
REGRESSION_CASES = [pytest.param(b, id=b.__name__) for b in [
    epsilon_plus_infinity,
    epsilon_huge,
    epsilon_tiny,
    schema_unquoted_impossible_date,
    job_unquoted_impossible_date,
    schema_typo_instead_of_bins,
    schema_column_declared_twice,
    number_python_accepts_but_arrow_does_not,
    non_utf8_category_blames_header,
    corrupt_parquet_message_cut_mid_word,
]]

# More variants of the same contract, through CliRunner only.
EXTRA_CASES = [pytest.param(b, id=b.__name__) for b in [
    non_numeric_value_seeded, non_date_value, corrupt_parquet_pages, column_not_in_parquet_file,
    schema_empty_mapping, schema_option_missing, zero_row_parquet, non_utf8_category_far_down,
    out_not_empty_with_overwrite_and_bad_data, out_empty_dir_and_bad_data, out_is_a_file,
    job_ok, job_unknown_table_field, job_table_with_empty_columns, job_share_negative, job_unknown_column,
    columns_and_spec, missing_input_argument,
]]


# ---- the subprocess runs ------------------------------------------------------------------------------------------

# Run as a new `python -m dphist` process, imports and all: one case per path through the imports (a data error
# after reading CSV, a Parquet error, a schema error, and a test-mode release whose banner must be the first line).
FRESH_INTERPRETER = {"non_numeric_value", "corrupt_parquet", "schema_numeric_without_bounds", "header_only_csv_seeded"}


def run_subprocess(name: str, args: list[str], d: Path, pool: ThreadPoolExecutor | None = None):
    """Start case ``name`` as a real process in ``d``; returns a function that waits for its Outcome."""
    if name in FRESH_INTERPRETER:
        if pool is None:
            return lambda: run_process(args, cwd=d, timeout=120)
        return pool.submit(run_process, args, cwd=d, timeout=120).result
    started = start(["-m", "dphist", *args], cwd=d)
    return lambda: started.wait(120)


@pytest.fixture(scope="module", autouse=True)
def subprocess_runs(request, tmp_path_factory):
    """Build every case selected for the subprocess runner and start them all at once (the fresh interpreters in a
    thread pool), when the module's first test runs (autouse)."""
    wanted = {}
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if getattr(item, "module", None) is request.module and spec and spec.params.get("runner") == "subprocess":
            builder = spec.params["builder"]
            wanted[builder.__name__] = builder
    runs: dict[str, tuple[Path, Case, dict, Callable[[], Outcome]]] = {}
    with ThreadPoolExecutor(max_workers=len(FRESH_INTERPRETER)) as pool:
        for name, builder in sorted(wanted.items(), key=lambda w: w[0] not in FRESH_INTERPRETER):  # slowest first
            d = tmp_path_factory.mktemp(name)
            case = builder(d)
            runs[name] = (d, case, snapshot(d), run_subprocess(name, case.args, d, pool))
        yield runs
        for *_, outcome in runs.values():  # a test that did not run (stopped by -x) leaves its process
            outcome()


# ---- the contract ---------------------------------------------------------------------------------------------


def verify(case: Case, outcome: Outcome, d: Path, before: dict) -> None:
    seen = f"exit {outcome.exit_code}\nstdout: {outcome.stdout!r}\nstderr: {outcome.stderr!r}\n{outcome.crash}"
    assert not outcome.crash, seen
    both = outcome.stdout + outcome.stderr
    assert "Traceback" not in both, seen
    assert SECRET not in both, seen
    allowed = case.exit_code if isinstance(case.exit_code, tuple) else (case.exit_code,)
    assert outcome.exit_code in allowed, seen
    lines = outcome.stderr.splitlines()
    if case.seeded:
        assert lines and BANNER in lines[0], seen
        lines = lines[1:]
    assert not any(BANNER in line for line in lines), seen
    if outcome.exit_code == 0:
        assert not any(line.startswith("Error") for line in lines), seen
        if case.check is not None:
            case.check(d, outcome)
        return
    assert outcome.stdout == "", seen
    assert len(lines) == 1, seen
    line = lines[0]
    assert line.startswith("Error: "), seen
    assert "internal error" not in line, seen
    for word in case.keywords:
        assert word in line, f"{word!r} missing from the error line\n{seen}"
    for word in case.forbidden:
        assert word not in line, f"{word!r} in the error line\n{seen}"
    after = snapshot(d)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the failed run changed the file system: {changed}\n{seen}"


@pytest.mark.parametrize("builder", EXTRA_CASES + REGRESSION_CASES)
def test_cli_case_clirunner_only(builder, tmp_path, monkeypatch):
    case = builder(tmp_path)
    before = snapshot(tmp_path)
    verify(case, invoke(case.args, cwd=tmp_path), tmp_path, before)


# ---- single-path checks -------------------------------------------------------------------------------------------


def test_mid_stream_error_comes_after_batches_were_counted(tmp_path, monkeypatch):
    """The bad row is found only after earlier blocks were read and counted: still one line and no output."""
    monkeypatch.setattr(dphist.read.sources, "_CSV_BLOCK", 1 << 16)  # 64 KB blocks: the file spans ~16 of them
    with_schema(tmp_path)
    big_csv(tmp_path, rows=9_000, bad=8_000)
    consumed = []
    real_count_tables = dphist.read.engines.count_tables

    def counting(batches, shapes, *args, **kwargs):
        def tap():
            for batch in batches:
                consumed.append(batch.num_rows)
                yield batch
        return real_count_tables(tap(), shapes, *args, **kwargs)

    monkeypatch.setattr(dphist.read.engines, "count_tables", counting)
    case = Case(release("big.csv"), 1, ("big.csv", "line 8001", "'age'", "not a number"))
    before = snapshot(tmp_path)
    verify(case, invoke(case.args, cwd=tmp_path), tmp_path, before)
    assert len(consumed) >= 2 and sum(consumed) < 8_000, consumed  # several batches in, then the error


def test_the_error_line_is_the_only_stderr_output_in_test_mode_too(tmp_path, monkeypatch):
    """With --seed the banner comes first and the error line second: exactly two lines, in that order."""
    case = non_numeric_value_seeded(tmp_path)
    outcome = invoke(case.args, cwd=tmp_path)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 2 and BANNER in lines[0] and lines[1].startswith("Error: "), outcome.stderr


def test_every_case_builder_is_registered():
    builders = {p.values[0].__name__ for p in CASES + EXTRA_CASES + REGRESSION_CASES}
    defined = {name for name, obj in globals().items()
               if callable(obj) and getattr(obj, "__code__", None) is not None and not name.startswith("_")
               and obj.__code__.co_argcount == 1 and obj.__code__.co_varnames[0] == "d"}
    assert defined <= builders, sorted(defined - builders)


# ---- both ways -----------------------------------------------------------------------------------------------
# Last in the file, and the cases run in a fresh interpreter last of all: the subprocess runs, started when the
# module's first test runs, have had the tests before theirs to finish in.


@pytest.mark.parametrize("runner", ["clirunner", "subprocess"])
@pytest.mark.parametrize("builder", sorted(CASES, key=lambda p: p.id in FRESH_INTERPRETER))
def test_cli_case(builder, runner, tmp_path, monkeypatch, subprocess_runs):
    if runner == "subprocess" and builder.__name__ in subprocess_runs:
        d, case, before, outcome_of = subprocess_runs[builder.__name__]
        outcome = outcome_of()
    else:
        d = tmp_path
        case = builder(d)
        before = snapshot(d)
        outcome = (invoke(case.args, cwd=d) if runner == "clirunner"
                   else run_subprocess(builder.__name__, case.args, d)())
    verify(case, outcome, d, before)
