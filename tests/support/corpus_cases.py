"""The bad-input corpus: one builder per case, registered in ``CASES`` in definition order.

A builder writes its files into a fresh, empty directory ``d`` and returns a :class:`Case`: the command line
(relative paths; the CLI runs with ``d`` as its working directory) and what the error contract promises for it.
Every data file hides :data:`SECRET` where a careless message would quote it.  The checks themselves live in
``test_bad_input_corpus.py``; this module only describes inputs and expectations.
"""

from __future__ import annotations

import atexit
import dataclasses
import gzip
import io
import json
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conftest import write

SECRET = "zzzsecret"
BANNER = "TEST MODE"

SCHEMA = """\
columns:
  age: {type: numeric, lower: 0, upper: 100, bins: 4}
  sex: {type: categorical, values: [F, M]}
"""
GOOD_CSV = f"age,sex,note\n10,F,{SECRET}\n20,M,{SECRET}\n30,F,{SECRET}\n"

ANY_FAILURE = (1, 2)  # either is a clean refusal where the contract does not say which
ACCEPT_OR_REFUSE = (0, 2)  # a value the tool may accept (and then must work) or refuse as usage


@dataclass
class Case:
    args: list[str]
    code: int | tuple[int, ...]  # the allowed exit codes
    keywords: tuple[str, ...] = ()  # must appear in the error line
    seeded: bool = False  # --seed: a TEST MODE banner line comes first on stderr
    may_charge: bool = False  # exit 1 found only while reading rows: the ledger may keep the charge
    ledger: str | None = None  # a ledger inside the case directory (else $DPHIST_LEDGER, outside it)
    damaged_ledger: bool = False  # the ledger is damaged on purpose: it must stay byte-identical, unread
    frozen: tuple[str, ...] = ()  # paths that must be byte-identical after the run whatever the exit code
    may_create: tuple[str, ...] = ()  # paths a failed run may leave (e.g. a ledger's new folder)
    check: Callable[[Path], None] | None = None  # extra checks after exit 0
    timeout: float | None = None  # run as a real process, killed after this many seconds (FIFOs, hangs)


CASES: dict[str, Callable[[Path], Case]] = {}
# Cases that run as a real process with a timeout (they could hang an in-process run): their Case sets timeout.
PROCESS = {"fifo_as_input", "fifo_as_schema", "fifo_in_input_directory", "fifo_schema_draft", "private_fifo_input",
           "schema_yaml_alias_bomb", "epsilon_tiny_exponent", "epsilon_huge_exponent", "delta_tiny_exponent",
           "delta_huge_exponent", "budget_set_epsilon_huge_exponent", "budget_set_delta_tiny_exponent",
           "private_epsilon_tiny_exponent", "rho_huge_exponent",
           # slow ones, run beside the in-process cases to keep the file fast
           "discover_wide_no_schema", "discover_500_columns_no_schema", "schema_date_full_range_by_day",
           "schema_categories_huge_list", "csv_huge_valid_field", "csv_huge_field_in_numeric_column"}
# Larger variants, in the slow tier (make test-full): each costs 10 to 20 CPU seconds in dphist itself, and a smaller
# case of the same kind runs on every change (named beside it).
SLOW = {"discover_wide_no_schema",  # discover_500_columns_no_schema
        "schema_date_full_range_by_day"}  # schema_date_range_by_day_over_max_cells


def case(fn: Callable[[Path], Case]) -> Callable[[Path], Case]:
    assert fn.__name__ not in CASES, fn.__name__
    CASES[fn.__name__] = fn
    return fn


def add(name: str, fn: Callable[[Path], Case]) -> None:
    assert name not in CASES, name
    CASES[name] = fn


# ---- helpers ------------------------------------------------------------------------------------------------


def release(data: str = "data.csv", *extra: str, schema: str | None = "schema.yaml", epsilon: str | None = "1",
            out: str | None = "out") -> list[str]:
    args = ["release", data]
    if schema is not None:
        args += ["--schema", schema]
    if epsilon is not None:
        args += ["--epsilon", epsilon]
    args += list(extra)
    return args + (["--out", out] if out is not None else [])


def good(d: Path, schema: str = SCHEMA, data: str = GOOD_CSV) -> None:
    write(d, "schema.yaml", schema)
    write(d, "data.csv", data)


def wrote_release(*names: str) -> Callable[[Path], None]:
    """After exit 0: out/ holds these files (and report.json) and no hidden staging is left in the case folder."""
    def check(d: Path) -> None:
        out = d / "out"
        assert out.is_dir(), "no out/ after exit 0"
        present = {p.name for p in out.iterdir()}
        assert {"report.json", *names} <= present, present
        assert not [p.name for p in d.iterdir() if p.name.startswith(".")], "hidden leftovers"
    return check


def parquet(d: Path, name: str, table: pa.Table) -> str:
    (d / name).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, d / name)
    return name


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


GOOD_TABLE = pa.table({"age": [10.0, 20.0, 30.0], "sex": ["F", "M", "F"], "note": [SECRET] * 3})


def _timed(case: Case, seconds: float = 60) -> Case:
    return dataclasses.replace(case, timeout=seconds)


def _changed(builder: Callable[[Path], Case], **changes) -> Callable[[Path], Case]:
    """The same case with some expectations changed."""
    return lambda d: dataclasses.replace(builder(d), **changes)


# ---- release: CSV input --------------------------------------------------------------------------------------


@case
def csv_missing_file(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("nosuch.csv"), 1, ("nosuch.csv",))


@case
def csv_zero_bytes(d):
    good(d, data="")
    return Case(release(), 1, ("data.csv",))


@case
def csv_only_newline(d):
    good(d, data="\n")
    return Case(release(), 1, ("data.csv",))


@case
def csv_only_whitespace(d):
    good(d, data="   \n\t\n  \n")
    return Case(release(), 1, ("data.csv",))


@case
def csv_random_binary(d):
    good(d)
    rng = np.random.default_rng(19)
    write(d, "data.csv", rng.integers(0, 256, 20_000, dtype=np.uint8).tobytes() + SECRET.encode())
    return Case(release(), 1, ("data.csv",))


@case
def csv_gzip_named_csv(d):
    good(d)
    write(d, "data.csv", gzip.compress(GOOD_CSV.encode()))
    return Case(release(), 1, ("data.csv",))


@case
def csv_latin1_header(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.csv", "age,sex,caf\xe9\n10,F,x\n".encode("latin-1"))
    return Case(release(), 1, ("data.csv", "UTF-8"))


@case
def csv_latin1_value_first_row(d):
    good(d)
    write(d, "data.csv", b"age,sex\n10," + SECRET.encode() + b"\xe9\n")
    return Case(release(), 1, ("data.csv", "UTF-8"), may_charge=True)


@case
def csv_utf16_with_bom(d):
    good(d)
    write(d, "data.csv", GOOD_CSV.encode("utf-16"))
    return Case(release(), 1, ("data.csv",))


@case
def csv_utf8_bom_is_fine(d):
    good(d)
    write(d, "data.csv", b"\xef\xbb\xbf" + GOOD_CSV.encode())
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def csv_bom_only(d):
    good(d)
    write(d, "data.csv", b"\xef\xbb\xbf")
    return Case(release(), 1, ("data.csv",))


@case
def csv_ragged_long_row(d):
    good(d, data=f"age,sex\n10,F\n20,M,{SECRET},{SECRET}\n")
    return Case(release(), 1, ("data.csv", "line 3"), may_charge=True)


@case
def csv_ragged_short_row(d):
    good(d, data="age,sex,note\n10,F,x\n20\n30,F,x\n")
    return Case(release(), 1, ("data.csv", "line 3"), may_charge=True)


@case
def csv_unterminated_quote(d):
    good(d, data=f'age,sex,note\n10,F,"{SECRET}\n20,M,x\n')
    return Case(release(), 1, ("data.csv",), may_charge=True)


@case
def csv_unterminated_quote_in_header(d):
    good(d, data=f'age,sex,"note\n10,F,{SECRET}\n')
    return Case(release(), 1, ("data.csv",))


@case
def csv_duplicate_header_used_column(d):
    good(d, data=f"sex,age,sex\nF,10,{SECRET}\n")
    return Case(release(), 1, ("data.csv", "'sex'"))


@case
def csv_duplicate_header_unused_column(d):
    """A duplicated column the release does not use: pandas would rename it; refusing is the documented rule."""
    good(d, data=f"age,sex,note,note\n10,F,{SECRET},{SECRET}\n")
    return Case(release(), 1, ("data.csv", "'note'"))


@case
def csv_empty_header_name(d):
    good(d, data=f"age,,sex\n10,{SECRET},F\n")
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv",))


@case
def csv_header_without_newline(d):
    good(d, data="age,sex")
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def csv_crlf_line_ends(d):
    good(d, data=GOOD_CSV.replace("\n", "\r\n"))
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def csv_cr_only_line_ends(d):
    good(d, data=GOOD_CSV.replace("\n", "\r"))
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv",), may_charge=True)


@case
def csv_huge_valid_field(d):
    """A valid 12 MB quoted field (three CSV read blocks) in an unused column: read, not 'unbalanced quotes'."""
    big = "x" * (12 << 20)
    good(d, data=f'age,sex,note\n10,F,"{big}"\n20,M,{SECRET}\n')
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"), timeout=30)


@case
def csv_huge_field_in_numeric_column(d):
    good(d, data="age,sex\n10,F\n" + "9" * (6 << 20) + SECRET + ",M\n")
    return Case(release(), 1, ("data.csv", "'age'"), may_charge=True, timeout=30)


@case
def csv_nul_byte_in_number(d):
    good(d, data=f"age,sex\n10,F\n2\x000{SECRET},M\n")
    return Case(release(), 1, ("data.csv",), may_charge=True)


@case
def csv_text_in_numeric_column(d):
    good(d, data=f"age,sex\n10,F\n20,M\nthirty{SECRET},F\n")
    return Case(release(), 1, ("data.csv", "line 4", "'age'"), may_charge=True)


@case
def csv_inf_and_nan_numbers(d):
    good(d, data="age,sex\ninf,F\nnan,M\n-inf,F\n10,M\n")
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv", "'age'"), may_charge=True)


@case
def csv_number_with_exponent_overflow(d):
    good(d, data="age,sex\n1e999999,F\n10,M\n")
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv", "'age'"), may_charge=True)


@case
def csv_category_outside_domain(d):
    good(d, data=f"age,sex\n10,{SECRET}\n20,M\n")
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv", "'sex'"), may_charge=True)


_DATE_SCHEMA = "columns:\n  d: {type: date, lower: 2020-01-01, upper: 2021-01-01, unit: month}\n"


@case
def csv_declared_date_iso_timestamps(d):
    """ISO timestamps with Z and +05:00 in a declared date column: their dates are counted."""
    good(d, _DATE_SCHEMA, "d\n2020-03-04T10:00:00Z\n2020-05-06T23:30:00+05:00\n2020-07-08T00:00:00-08:00\n")
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("d.csv"))


@case
def csv_declared_date_far_off(d):
    """9999-12-31 and 0001-01-01 sentinels outside the declared range: clamped (or dropped), never a crash."""
    good(d, _DATE_SCHEMA, "d\n2020-03-04\n9999-12-31\n0001-01-01\n")
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("d.csv"))


@case
def csv_declared_date_five_digit_year(d):
    good(d, _DATE_SCHEMA, "d\n2020-03-04\n10000-01-01\n")
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv", "'d'"), may_charge=True)


@case
def csv_declared_date_impossible_day(d):
    good(d, _DATE_SCHEMA, f"d,note\n2020-03-04,x\n2020-02-30,{SECRET}\n")
    return Case(release("data.csv", "--quiet"), 1, ("data.csv", "line 3", "'d'"), may_charge=True)


@case
def csv_wide_with_schema(d):
    """10,000 columns, two of them declared: only those two are read."""
    names = ["age", "sex"] + [f"c{i}" for i in range(10_000)]
    row = ["10", "F"] + ["1"] * 10_000
    good(d, data=",".join(names) + "\n" + ",".join(row) + "\n")
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def csv_directory_named_like_csv(d):
    write(d, "schema.yaml", SCHEMA)
    (d / "data.csv").mkdir()
    return Case(release(), 1, ("data.csv",))


@case
def csv_dev_null(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("/dev/null"), 1, ("/dev/null",))


@case
def csv_header_with_quoted_newline(d):
    good(d, data='"age\nyears",sex\n10,F\n')
    return Case(release("data.csv", "--quiet"), 1, ("data.csv",))


# ---- release: hostile path names ------------------------------------------------------------------------------

_LONG = "a" * 300  # longer than a file name may be (NAME_MAX 255)


@case
def input_name_too_long(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release(_LONG + ".csv"), 1, ())


@case
def input_name_with_newline(d):
    """A missing file whose name holds a newline: still one line on stderr."""
    write(d, "schema.yaml", SCHEMA)
    return Case(release("bad\nname.csv"), 1, ("name.csv",))


@case
def input_name_with_nul(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("bad\x00name.csv"), (1, 2), ())


@case
def input_dash_is_not_stdin(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("-"), (1, 2), ())


@case
def schema_name_too_long(d):
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", schema=_LONG + ".yaml"), 2, ())


@case
def schema_name_with_newline(d):
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", schema="no\nsuch.yaml"), 2, ("such.yaml",))


@case
def spec_name_too_long(d):
    good(d)
    return Case(["release", "--spec", _LONG + ".yaml", "--out", "out"], 2, ())


@case
def out_name_too_long(d):
    good(d)
    return Case(release("data.csv", out=_LONG), 2, ())


@case
def ledger_name_too_long_release(d):
    good(d)
    return Case(release("data.csv", "--ledger", _LONG + ".sqlite"), ANY_FAILURE, ("ledger",))


@case
def ledger_name_too_long_budget_show(d):
    return Case(["budget", "show", "--ledger", _LONG + ".sqlite"], (0, 1, 2), ())


@case
def draft_out_name_too_long(d):
    write(d, "data.csv", GOOD_CSV)
    return Case(["schema", "data.csv", "-o", _LONG + ".yaml"], 2, ())


# ---- release: Parquet input ----------------------------------------------------------------------------------


@case
def parquet_zero_bytes(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.parquet", b"")
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_truncated_half(d):
    write(d, "schema.yaml", SCHEMA)
    data = parquet_bytes(GOOD_TABLE)
    write(d, "data.parquet", data[: len(data) // 2])
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_truncated_footer(d):
    write(d, "schema.yaml", SCHEMA)
    data = parquet_bytes(GOOD_TABLE)
    write(d, "data.parquet", data[:-9] + b"PAR1")
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_magic_only(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.parquet", b"PAR1PAR1")
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_footer_length_huge(d):
    write(d, "schema.yaml", SCHEMA)
    data = parquet_bytes(GOOD_TABLE)
    write(d, "data.parquet", data[:-8] + (2**31 - 1).to_bytes(4, "little") + b"PAR1")
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_csv_content(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.parquet", GOOD_CSV)
    return Case(release("data.parquet"), 1, ("data.parquet",))


@case
def parquet_content_named_csv(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.csv", parquet_bytes(GOOD_TABLE))
    return Case(release("data.csv", "--quiet"), (0, 1), ("data.csv",))


@case
def parquet_list_column(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [[1.0, 2.0], [3.0]], "sex": ["F", "M"]}))
    return Case(release("data.parquet"), 1, ("data.parquet", "'age'"))


@case
def parquet_struct_column(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [10.0, 20.0], "sex": [{"a": SECRET}, {"a": "M"}]}))
    return Case(release("data.parquet"), 1, ("data.parquet", "'sex'"))


@case
def parquet_map_column(d):
    write(d, "schema.yaml", SCHEMA)
    sex = pa.array([[("k", SECRET)], [("k", "M")]], pa.map_(pa.string(), pa.string()))
    parquet(d, "data.parquet", pa.table({"age": [10.0, 20.0], "sex": sex}))
    return Case(release("data.parquet"), 1, ("data.parquet", "'sex'"))


@case
def parquet_nested_unused_column(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [10.0, 20.0], "sex": ["F", "M"], "tags": [[SECRET], []]}))
    return Case(release("data.parquet", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def parquet_bool_for_numeric(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [True, False], "sex": ["F", "M"]}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'age'"))


@case
def parquet_binary_for_categorical(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [10.0, 20.0], "sex": pa.array([b"F", b"\xff" + SECRET.encode()])}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'sex'"), may_charge=True)


@case
def parquet_text_for_date(d):
    write(d, "schema.yaml", "columns:\n  d: {type: date, lower: 2020-01-01, upper: 2021-01-01, unit: month}\n")
    parquet(d, "data.parquet", pa.table({"d": [SECRET, "2020-02-02"]}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'d'"), may_charge=True)


@case
def parquet_timestamps_far_out_of_range(d):
    """Timestamps near the ends of int64 microseconds: out of the declared domain, clamped or refused cleanly."""
    write(d, "schema.yaml", "columns:\n  d: {type: date, lower: 2020-01-01, upper: 2021-01-01, unit: month}\n")
    ts = pa.array([2**62, -(2**62), 1_600_000_000_000_000], pa.timestamp("us"))
    parquet(d, "data.parquet", pa.table({"d": ts}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'d'"), may_charge=True)


@case
def parquet_date32_extremes(d):
    write(d, "schema.yaml", "columns:\n  d: {type: date, lower: 2020-01-01, upper: 2021-01-01, unit: month}\n")
    parquet(d, "data.parquet", pa.table({"d": pa.array([-719162, 2932896, 18300], pa.date32())}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'d'"), may_charge=True)


@case
def parquet_timestamp_millis_extremes(d):
    """Millisecond timestamps near the ends of int64 (years beyond +-100 million): no overflow."""
    write(d, "schema.yaml", _DATE_SCHEMA)
    ts = pa.array([2**62, -(2**62), 1_600_000_000_000], pa.timestamp("ms"))
    parquet(d, "data.parquet", pa.table({"d": ts}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'d'"), may_charge=True)


@case
def parquet_timestamps_with_zone(d):
    write(d, "schema.yaml", _DATE_SCHEMA)
    ts = pa.array([1_600_000_000_000_000, 1_580_000_000_000_000], pa.timestamp("us", tz="+05:00"))
    parquet(d, "data.parquet", pa.table({"d": ts}))
    return Case(release("data.parquet", "--quiet"), 0, check=wrote_release("d.csv"))


@case
def parquet_int64_extremes(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": pa.array([2**63 - 1, -(2**63), 5], pa.int64()),
                                          "sex": ["F", "M", "F"]}))
    return Case(release("data.parquet", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def parquet_null_typed_column(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": pa.array([None, None], pa.null()), "sex": ["F", "M"]}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'age'"))


@case
def parquet_decimal_column(d):
    import decimal
    write(d, "schema.yaml", SCHEMA)
    ages = pa.array([decimal.Decimal("10.5"), decimal.Decimal("99.25")], pa.decimal128(10, 2))
    parquet(d, "data.parquet", pa.table({"age": ages, "sex": ["F", "M"]}))
    return Case(release("data.parquet", "--quiet"), (0, 1), ("data.parquet", "'age'"))


@case
def parquet_dictionary_categories(d):
    write(d, "schema.yaml", SCHEMA)
    sex = pa.array(["F", "M", "F"]).dictionary_encode()
    parquet(d, "data.parquet", pa.table({"age": [1.0, 2.0, 3.0], "sex": sex}))
    return Case(release("data.parquet", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def parquet_duplicate_column_names(d):
    write(d, "schema.yaml", SCHEMA)
    table = pa.Table.from_arrays([pa.array([1.0]), pa.array(["F"]), pa.array([2.0])], names=["age", "sex", "age"])
    parquet(d, "data.parquet", table)
    return Case(release("data.parquet"), 1, ("data.parquet", "'age'"))


@case
def parquet_missing_declared_column(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({"age": [1.0], "note": [SECRET]}))
    return Case(release("data.parquet"), 1, ("data.parquet", "'sex'"))


@case
def parquet_zero_columns(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "data.parquet", pa.table({}))
    return Case(release("data.parquet"), 1, ("data.parquet",))


# ---- release: directories, globs, symlinks, special files ------------------------------------------------------


@case
def dir_empty(d):
    write(d, "schema.yaml", SCHEMA)
    (d / "in").mkdir()
    return Case(release("in"), 1, ("in",))


@case
def dir_of_non_data_files(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/readme.txt", SECRET)
    write(d, "in/notes.md", SECRET)
    write(d, "in/.hidden", SECRET)
    return Case(release("in"), 1, ("in",))


@case
def dir_mixed_formats(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    parquet(d, "in/b.parquet", GOOD_TABLE)
    return Case(release("in", "--quiet"), (0, 1), ("in",))


@case
def dir_csvs_with_different_headers(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    write(d, "in/b.csv", f"sex,note\nF,{SECRET}\n")
    return Case(release("in"), 1, ("b.csv",))


@case
def dir_with_one_zero_byte_csv(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    write(d, "in/b.csv", "")
    return Case(release("in"), 1, ("b.csv",))


@case
def dir_with_one_corrupt_parquet(d):
    write(d, "schema.yaml", SCHEMA)
    parquet(d, "in/a.parquet", GOOD_TABLE)
    write(d, "in/b.parquet", b"PAR1" + SECRET.encode() + b"PAR1")
    return Case(release("in"), 1, ("b.parquet",))


@case
def dir_nested_good_files(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/2025/a.csv", GOOD_CSV)
    write(d, "in/2026/b.csv", GOOD_CSV)
    return Case(release("in", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def glob_no_match(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("nosuch*.csv"), 1, ("nosuch*.csv",))


@case
def glob_matches_only_directories(d):
    write(d, "schema.yaml", SCHEMA)
    (d / "a.csv").mkdir()
    (d / "b.csv").mkdir()
    return Case(release("*.csv"), 1, ("*.csv",))


@case
def glob_one_bad_file_among_good(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    write(d, "in/b.csv", f"age,sex,note\n10,F,x\n{SECRET},M,x\n")
    return Case(release("in/*.csv"), 1, ("b.csv", "'age'"), may_charge=True)


@case
def glob_recursive_good(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/x/a.csv", GOOD_CSV)
    return Case(release("in/**/*.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def path_with_brackets_exists(d):
    """An existing file named data[1].csv is that file, not the glob data1.csv."""
    write(d, "schema.yaml", SCHEMA)
    write(d, "data[1].csv", GOOD_CSV)
    return Case(release("data[1].csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def path_with_brackets_beside_glob_match(d):
    """data[1].csv exists and so does data1.csv (what the glob would match, with bad data): read the file named."""
    write(d, "schema.yaml", SCHEMA)
    write(d, "data[1].csv", GOOD_CSV)
    write(d, "data1.csv", f"age,sex\n{SECRET},F\n")
    return Case(release("data[1].csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def path_with_brackets_missing(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(release("data[1].csv"), 1, ("data[1].csv",))


@case
def symlink_to_good_csv(d):
    good(d)
    os.symlink("data.csv", d / "link.csv")
    return Case(release("link.csv", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def symlink_dangling(d):
    write(d, "schema.yaml", SCHEMA)
    os.symlink("nosuch.csv", d / "link.csv")
    return Case(release("link.csv"), 1, ("link.csv",))


@case
def symlink_loop(d):
    write(d, "schema.yaml", SCHEMA)
    os.symlink("b.csv", d / "a.csv")
    os.symlink("a.csv", d / "b.csv")
    return Case(release("a.csv"), 1, ("a.csv",))


@case
def symlink_to_directory_of_csvs(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "real/a.csv", GOOD_CSV)
    os.symlink("real", d / "in")
    return Case(release("in", "--quiet"), 0, check=wrote_release("age.csv", "sex.csv"))


def _fifo(d: Path, name: str) -> str:
    if not hasattr(os, "mkfifo"):
        import pytest
        pytest.skip("no os.mkfifo on this platform")
    os.mkfifo(d / name)
    return name


@case
def fifo_as_input(d):
    write(d, "schema.yaml", SCHEMA)
    _fifo(d, "data.csv")
    return Case(release(), 1, ("data.csv",), timeout=20)


@case
def fifo_as_schema(d):
    write(d, "data.csv", GOOD_CSV)
    _fifo(d, "schema.yaml")
    return Case(release(), 2, ("schema.yaml",), timeout=20)


@case
def fifo_in_input_directory(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    _fifo(d, "in/b.csv")
    return Case(release("in"), (0, 1), ("b.csv",), timeout=20,
                check=wrote_release("age.csv", "sex.csv"))


@case
def fifo_schema_draft(d):
    _fifo(d, "data.csv")
    return Case(["schema", "data.csv"], 1, ("data.csv",), timeout=20)


# ---- release: bad schemas (usage errors, before any row is read) ---------------------------------------------------


def _schema(text: str | bytes, *keywords: str, name: str = "schema.yaml", code=2):
    def build(d: Path) -> Case:
        write(d, name, text)
        write(d, "data.csv", SCHEMA_DATA)
        return Case(release("data.csv", schema=name), code, (name, *keywords))
    return build


SCHEMA_DATA = f"age,sex,d,note\n10,F,2020-03-04,{SECRET}\n20,M,2020-07-08,{SECRET}\n"
_NUM = "columns:\n  age: {type: numeric, %s}\n"
_CAT = "columns:\n  sex: {type: categorical, %s}\n"
_DATE = "columns:\n  d: {type: date, %s}\n"

for _name, _text, _kw in [
    ("schema_bounds_reversed", _NUM % "lower: 100, upper: 0, bins: 4", ("'age'",)),
    ("schema_bounds_equal", _NUM % "lower: 5, upper: 5, bins: 4", ("'age'",)),
    ("schema_lower_nan", _NUM % "lower: .nan, upper: 100, bins: 4", ("'age'", "'lower'")),
    ("schema_upper_inf", _NUM % "lower: 0, upper: .inf, bins: 4", ("'age'", "'upper'")),
    ("schema_lower_minus_inf", _NUM % "lower: -.inf, upper: 0, bins: 4", ("'age'", "'lower'")),
    ("schema_lower_text", _NUM % "lower: zero, upper: 100, bins: 4", ("'age'", "'lower'")),
    ("schema_upper_list", _NUM % "lower: 0, upper: [100], bins: 4", ("'age'", "'upper'")),
    ("schema_lower_bool", _NUM % "lower: false, upper: 100, bins: 4", ("'age'", "'lower'")),
    ("schema_bounds_beyond_float", _NUM % "lower: 0, upper: 1e400, bins: 4", ("'age'",)),
    ("schema_bins_negative", _NUM % "lower: 0, upper: 100, bins: -4", ("'age'", "'bins'")),
    ("schema_bins_fraction", _NUM % "lower: 0, upper: 100, bins: 2.5", ("'age'", "'bins'")),
    ("schema_bins_text", _NUM % "lower: 0, upper: 100, bins: four", ("'age'", "'bins'")),
    ("schema_bins_bool", _NUM % "lower: 0, upper: 100, bins: true", ("'age'", "'bins'")),
    ("schema_bins_huge", _NUM % "lower: 0, upper: 100, bins: 1000000000000", ("'age'",)),
    ("schema_bins_beyond_int64", _NUM % "lower: 0, upper: 100, bins: 100000000000000000000000", ("'age'",)),
    ("schema_width_zero", _NUM % "lower: 0, upper: 100, width: 0", ("'age'", "'width'")),
    ("schema_width_negative", _NUM % "lower: 0, upper: 100, width: -5", ("'age'", "'width'")),
    ("schema_width_nan", _NUM % "lower: 0, upper: 100, width: .nan", ("'age'", "'width'")),
    ("schema_width_tiny", _NUM % "lower: 0, upper: 100, width: 1e-300", ("'age'",)),
    ("schema_width_and_bins", _NUM % "lower: 0, upper: 100, width: 5, bins: 20", ("'age'",)),
    ("schema_edges_empty", "columns:\n  age: {type: numeric, edges: []}\n", ("'age'", "'edges'")),
    ("schema_edges_single", "columns:\n  age: {type: numeric, edges: [5]}\n", ("'age'", "'edges'")),
    ("schema_edges_nan", "columns:\n  age: {type: numeric, edges: [0, .nan, 100]}\n", ("'age'", "'edges'")),
    ("schema_edges_text", "columns:\n  age: {type: numeric, edges: [0, x, 100]}\n", ("'age'", "'edges'")),
    ("schema_edges_repeated", "columns:\n  age: {type: numeric, edges: [0, 50, 50, 100]}\n", ("'age'", "'edges'")),
    ("schema_edges_scalar", "columns:\n  age: {type: numeric, edges: 5}\n", ("'age'", "'edges'")),
    ("schema_values_empty", _CAT % "values: []", ("'sex'", "'values'")),
    ("schema_values_scalar", _CAT % "values: F", ("'sex'", "'values'")),
    ("schema_values_mapping", _CAT % "values: {F: 1}", ("'sex'", "'values'")),
    ("schema_values_nested_list", _CAT % "values: [[F], [M]]", ("'sex'", "'values'")),
    ("schema_values_null_item", _CAT % "values: [F, null]", ("'sex'", "'values'")),
    ("schema_values_same_as_text", _CAT % "values: [1, '1']", ("'sex'", "'values'")),
    ("schema_values_missing", "columns:\n  sex: {type: categorical}\n", ("'sex'", "'values'")),
    ("schema_out_of_domain_unknown", _CAT % "values: [F, M], out_of_domain: explode", ("'sex'", "'out_of_domain'")),
    ("schema_nulls_unknown", _CAT % "values: [F, M], nulls: maybe", ("'sex'", "'nulls'")),
    ("schema_hierarchy_not_mapping", _CAT % "values: [F, M], hierarchy: 5", ("'sex'", "'hierarchy'")),
    ("schema_type_missing", "columns:\n  age: {lower: 0, upper: 100, bins: 4}\n", ("'age'", "'type'")),
    ("schema_type_list", "columns:\n  age: {type: [numeric], lower: 0, upper: 100, bins: 4}\n", ("'age'", "'type'")),
    ("schema_date_malformed", _DATE % "lower: '2020-13-45', upper: 2021-01-01, unit: month", ("'d'", "'lower'")),
    ("schema_date_text", _DATE % "lower: yesterday, upper: 2021-01-01, unit: month", ("'d'", "'lower'")),
    ("schema_date_number", _DATE % "lower: 20200101, upper: 2021-01-01, unit: month", ("'d'", "'lower'")),
    ("schema_date_reversed", _DATE % "lower: 2021-01-01, upper: 2020-01-01, unit: month", ("'d'",)),
    ("schema_date_unit_unknown", _DATE % "lower: 2020-01-01, upper: 2021-01-01, unit: fortnight", ("'d'", "'unit'")),
    ("schema_date_width_zero", _DATE % "lower: 2020-01-01, upper: 2021-01-01, unit: day, width: 0", ("'d'", "'width'")),
    ("schema_date_year_zero", _DATE % "lower: '0000-01-01', upper: 2021-01-01, unit: year", ("'d'", "'lower'")),
    ("schema_date_year_five_digits", _DATE % "lower: 2020-01-01, upper: '10000-01-01', unit: year", ("'d'", "'upper'")),
    ("schema_unknown_top_key", "columns:\n  sex: {type: categorical, values: [F, M]}\nversion: 2\n", ("'version'",)),
    ("schema_columns_list", "columns:\n  - sex\n  - age\n", ("'columns'",)),
    ("schema_columns_empty", "columns: {}\n", ("'columns'",)),
    ("schema_columns_null", "columns:\n", ("'columns'",)),
    ("schema_column_scalar", "columns:\n  sex: categorical\n", ("'sex'",)),
    ("schema_document_list", "- columns: {}\n", ()),
    ("schema_document_scalar", "just a string\n", ()),
    ("schema_document_number", "42\n", ()),
    ("schema_yaml_tab_indent", "columns:\n\tsex: {type: categorical, values: [F, M]}\n", ("YAML",)),
    ("schema_yaml_unclosed_quote", "columns:\n  sex: {type: categorical, values: ['F, M]}\n", ("YAML",)),
    ("schema_yaml_empty_file", "", ()),
    ("schema_yaml_python_tag", "columns: !!python/object/apply:os.system ['echo hi']\n", ()),
    ("schema_yaml_two_documents", SCHEMA + "---\n" + SCHEMA, ()),
    ("schema_binary_bytes", bytes(range(256)) * 4, ()),
    ("schema_non_utf8", "columns:\n  sex: {type: categorical, values: [F, M\xe9]}\n".encode("latin-1"), ()),
]:
    add(_name, _schema(_text, *_kw))


@case
def schema_json_valid(d):
    write(d, "schema.json", json.dumps({"columns": {"age": {"type": "numeric", "lower": 0, "upper": 100,
                                                            "bins": 4}}}))
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", "--quiet", schema="schema.json"), 0, check=wrote_release("age.csv"))


add("schema_json_syntax_error", _schema('{"columns": {"age": {"type": "numeric",}}', name="schema.json"))
add("schema_json_list", _schema('[{"columns": {}}]', name="schema.json"))
add("schema_json_nan_bound", _schema('{"columns": {"age": {"type": "numeric", "lower": NaN, "upper": 1, "bins": 2}}}',
                                     "'age'", name="schema.json"))


@case
def schema_date_timestamp(d):
    """A YAML timestamp as a date bound: taken as its date or refused; never a crash."""
    case = _schema(_DATE % "lower: 2020-01-01 10:00:00, upper: 2021-01-01, unit: month", "'d'", "'lower'")(d)
    return dataclasses.replace(case, code=ACCEPT_OR_REFUSE)


@case
def schema_is_directory(d):
    (d / "schema.yaml").mkdir()
    write(d, "data.csv", GOOD_CSV)
    return Case(release(), 2, ("schema.yaml",))


@case
def schema_width_does_not_divide(d):
    """0..100 in widths of 7: the last bin is cut or the schema is refused; either way no crash."""
    write(d, "schema.yaml", _NUM % "lower: 0, upper: 100, width: 7")
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", "--quiet"), ACCEPT_OR_REFUSE, ("'age'", "'width'"))


@case
def schema_date_full_range_by_year(d):
    """0001-01-01 .. 9999-12-31 in years: 9999 cells, far-off but valid dates."""
    write(d, "schema.yaml", _DATE % "lower: 0001-01-01, upper: 9999-12-31, unit: year")
    write(d, "data.csv", "d\n2020-05-05\n9999-12-30\n0001-01-01\n")
    return Case(release("data.csv", "--quiet"), 0, check=wrote_release("d.csv"))


@case
def schema_date_full_range_by_day(d):
    """0001-01-01 .. 9999-12-31 in days is 3.65 million cells: refused under --max-cells or released; no crash.
    (Slow tier: the schema's day edges alone take 10 CPU seconds to build.)"""
    write(d, "schema.yaml", _DATE % "lower: 0001-01-01, upper: 9999-12-31, unit: day")
    write(d, "data.csv", "d\n2020-05-05\n")
    return Case(release("data.csv", "--max-cells", "1000000"), 2, ("--max-cells",), timeout=60)


@case
def schema_date_range_by_day_over_max_cells(d):
    """1900-01-01 .. 2099-12-31 in days is 73,048 cells: refused under --max-cells; no crash.  (The whole calendar
    by day is the case above, in the slow tier.)"""
    write(d, "schema.yaml", _DATE % "lower: 1900-01-01, upper: 2099-12-31, unit: day")
    write(d, "data.csv", "d\n2020-05-05\n")
    return Case(release("data.csv", "--max-cells", "10000"), 2, ("--max-cells",))


@case
def schema_cells_overflow_int64(d):
    """10^20 cells over four columns: more than int64 holds."""
    cols = "".join(f"  c{i}: {{type: numeric, lower: 0, upper: 1, bins: 100000}}\n" for i in range(4))
    write(d, "schema.yaml", "columns:\n" + cols)
    write(d, "data.csv", "c0,c1,c2,c3\n0,0,0,0\n")
    return Case(release("data.csv", "--columns", "c0,c1,c2,c3"), 2, ())


@case
def schema_cells_overflow_int64_exactly(d):
    """(2^16)^4 cells: exactly 2^64, which wraps to 0 in int64 arithmetic."""
    cols = "".join(f"  c{i}: {{type: numeric, lower: 0, upper: 1, bins: {2**16}}}\n" for i in range(4))
    write(d, "schema.yaml", "columns:\n" + cols)
    write(d, "data.csv", "c0,c1,c2,c3\n0,0,0,0\n")
    return Case(release("data.csv", "--columns", "c0,c1,c2,c3"), 2, ())


@case
def schema_categories_huge_list(d):
    """A 3 MB schema (200,000 categories): read in seconds, released or refused, never minutes."""
    values = ", ".join(f"v{i}" for i in range(200_000))
    write(d, "schema.yaml", f"columns:\n  sex: {{type: categorical, values: [{values}]}}\n")
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", "--quiet", "--max-cells", "1000"), 2, ("--max-cells",), timeout=60)


@case
def schema_yaml_alias_bomb(d):
    """Nested YAML aliases (9^8 leaves if expanded): refused quickly, never expanded."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i-1}"] * 9) + "]")
    lines.append("columns:\n  sex: {type: categorical, values: *a8}")
    write(d, "schema.yaml", "\n".join(lines) + "\n")
    write(d, "data.csv", GOOD_CSV)
    return Case(release(), 2, ("schema.yaml",), timeout=30)


@case
def schema_file_missing_via_job(d):
    write(d, "data.csv", GOOD_CSV)
    write(d, "job.yaml", "input: data.csv\nschema: nosuch.yaml\nepsilon: '1'\ntables:\n  - {columns: [age]}\n")
    return Case(["release", "--spec", "job.yaml", "--out", "out"], 2, ("nosuch.yaml",))


# ---- release: bad job specs ----------------------------------------------------------------------------------------


_JOB_HEAD = "input: data.csv\nschema: schema.yaml\nepsilon: '1'\n"


def _job(body: str | bytes, *keywords: str, head: str = _JOB_HEAD, code=2, may_charge=False):
    def build(d: Path) -> Case:
        good(d)
        write(d, "job.yaml", body if isinstance(body, bytes) else head + body)
        return Case(["release", "--spec", "job.yaml", "--out", "out"], code, keywords, may_charge=may_charge)
    return build


_T = "tables:\n  - {columns: [age], %s}\n"
for _name, _body, _kw in [
    ("job_share_text", _T % "share: lots", ("share",)),
    ("job_share_nan", _T % "share: .nan", ("share",)),
    ("job_share_inf", _T % "share: .inf", ("share",)),
    ("job_share_bool", _T % "share: true", ("share",)),
    ("job_share_list", _T % "share: [1]", ("share",)),
    ("job_share_huge_exponent_text", _T % "share: '1e999999'", ("share",)),
    ("job_algorithm_unknown", _T % "algorithm: magic", ("'magic'",)),
    ("job_algorithm_number", _T % "algorithm: 7", ("algorithm",)),
    ("job_option_cap_inf", _T % "algorithm: structurefirst, options: {cap: .inf}", ("cap",)),
    ("job_option_cap_nan", _T % "algorithm: structurefirst, options: {cap: .nan}", ("cap",)),
    ("job_option_cap_text", _T % "algorithm: structurefirst, options: {cap: lots}", ("cap",)),
    ("job_option_cap_negative", _T % "algorithm: structurefirst, options: {cap: -5}", ("cap",)),
    ("job_option_branching_inf", _T % "algorithm: h, options: {branching: .inf}", ("branching",)),
    ("job_option_branching_one", _T % "algorithm: h, options: {branching: 1}", ("branching",)),
    ("job_option_unknown", _T % "algorithm: identity, options: {colour: red}", ("colour",)),
    ("job_option_dawa_ratio_one", _T % "algorithm: dawa, options: {ratio: 1}", ("dawa", "ratio")),
    ("job_option_dawa_ratio_nan", _T % "algorithm: dawa, options: {ratio: .nan}", ("dawa", "ratio")),
    ("job_option_dawa_select_unknown", _T % "algorithm: dawa, options: {select: best}", ("dawa", "select")),
    ("job_option_dawa_threshold_negative", _T % "algorithm: dawa, options: {threshold: -1}", ("threshold",)),
    ("job_option_dawa_penalty_text", _T % "algorithm: dawa, options: {penalty: lots}", ("penalty",)),
    ("job_option_dawa_fit_unknown", _T % "algorithm: dawa, options: {fit: maybe}", ("dawa", "fit")),
    ("job_option_mwem_rounds_zero", _T % "algorithm: mwem, options: {rounds: 0}", ("mwem", "rounds")),
    ("job_option_dpcube_penalty_zero", _T % "algorithm: dpcube, options: {penalty: 0}", ("dpcube", "penalty")),
    ("job_option_dpcube_penalty_nan", _T % "algorithm: dpcube, options: {penalty: .nan}", ("penalty",)),
    ("job_option_dpcube_max_side_zero", _T % "algorithm: dpcube, options: {max_side: 0}", ("max_side",)),
    ("job_option_mwem_scale_fit_unknown", _T % "algorithm: mwem, options: {scale_fit: maybe}", ("scale_fit",)),
    ("job_table_workload_unknown", _T % "workload: queries", ("workload", "queries")),
    ("job_table_workload_list", _T % "workload: [cells]", ("workload",)),
    ("job_workload_unknown", "workload: everything\ntables:\n  - {columns: [age]}\n", ("workload", "everything")),
    ("job_workload_number", "workload: 3\ntables:\n  - {columns: [age]}\n", ("workload",)),
    ("job_option_auto_workload_unknown", _T % "algorithm: auto, options: {workload: rows}", ("workload",)),
    ("job_options_list", _T % "options: [cap, 5]", ("options",)),
    ("job_columns_nested", "tables:\n  - {columns: [[age]]}\n", ("columns",)),
    ("job_name_path_traversal", "tables:\n  - {name: ../evil, columns: [age]}\n", ("../evil",)),
    ("job_tables_empty", "tables: []\n", ("tables",)),
    ("job_tables_mapping", "tables: {age: 1}\n", ("tables",)),
    ("job_tables_and_marginals", "tables:\n  - {columns: [age]}\nmarginals: [[age, sex]]\n", ("marginals",)),
    ("job_marginals_empty_set", "marginals: [[]]\n", ("marginals",)),
    ("job_marginal_strategy_unknown", "marginals: [[age], [sex]]\nmarginal_strategy: best\n",
     ("strategy",)),
    ("job_format_unknown", "format: xlsx\ntables:\n  - {columns: [age]}\n", ("xlsx",)),
    ("job_unknown_top_key", "tables:\n  - {columns: [age]}\nepsilom: 2\n", ("'epsilom'",)),
    ("job_out_boolean", "out: true\ntables:\n  - {columns: [age]}\n", ("out",)),
    ("job_input_list", "tables:\n  - {columns: [age]}\n", ("input",)),
]:
    add(_name, _job(_body, *_kw, head=_JOB_HEAD if _name != "job_input_list" else
                    "input: [a.csv, b.csv]\nschema: schema.yaml\nepsilon: '1'\n"))

for _name, _body in [("job_columns_string", "tables:\n  - {columns: age}\n"),
                     ("job_name_empty", "tables:\n  - {name: '', columns: [age]}\n"),
                     ("job_marginals_malformed", "marginals: [age, [sex]]\n")]:
    # Read as the obvious intent (one column, the default name, [[age], [sex]]) or refused: both are fine.
    add(_name, _job(_body, code=ACCEPT_OR_REFUSE))

for _name, _head, _kw in [
    ("job_epsilon_text", "input: data.csv\nschema: schema.yaml\nepsilon: plenty\n", ("epsilon",)),
    ("job_epsilon_zero", "input: data.csv\nschema: schema.yaml\nepsilon: 0\n", ("epsilon",)),
    ("job_epsilon_nan", "input: data.csv\nschema: schema.yaml\nepsilon: .nan\n", ("epsilon",)),
    ("job_epsilon_inf", "input: data.csv\nschema: schema.yaml\nepsilon: .inf\n", ("epsilon",)),
    ("job_epsilon_list", "input: data.csv\nschema: schema.yaml\nepsilon: [1]\n", ("epsilon",)),
]:
    add(_name, _job("tables:\n  - {columns: [age]}\n", head=_head))

add("job_document_list", _job(b"- tables: []\n"))
add("job_document_scalar", _job(b"release everything\n"))
add("job_yaml_syntax_error", _job(b"tables:\n  - {columns: [age\n"))
add("job_empty_file", _job(b""))
add("job_binary", _job(bytes(range(256))))


@case
def job_shares_not_adding_up(d):
    """Shares are weights: 0.3 and 0.3 are normalised (or refused); the run spends exactly epsilon either way."""
    case = _job("tables:\n  - {columns: [age], share: 0.3}\n  - {columns: [sex], share: 0.3}\n")(d)
    return dataclasses.replace(case, code=ACCEPT_OR_REFUSE, check=wrote_release("age.csv", "sex.csv"))


@case
def job_input_missing(d):
    good(d)
    write(d, "job.yaml", "input: nosuch.csv\nschema: schema.yaml\nepsilon: '1'\ntables:\n  - {columns: [age]}\n")
    return Case(["release", "--spec", "job.yaml", "--out", "out"], 1, ("nosuch.csv",))


@case
def job_spec_is_directory(d):
    good(d)
    (d / "job.yaml").mkdir()
    return Case(["release", "--spec", "job.yaml", "--out", "out"], 2, ("job.yaml",))


# ---- release: bad options ---------------------------------------------------------------------------------------


def _opt(*extra: str, code=2, keywords=(), epsilon: str | None = "1", timeout=None, schema="schema.yaml",
         data: str = GOOD_CSV):
    def build(d: Path) -> Case:
        good(d, data=data)
        return Case(release("data.csv", *extra, epsilon=epsilon, schema=schema), code, keywords, timeout=timeout)
    return build


for _name, _value, _timeout in [
    ("epsilon_zero_decimal", "0.000", None),
    ("epsilon_minus_one", "-1", None),
    ("epsilon_minus_zero", "-0", None),
    ("epsilon_nan_capital", "NaN", None),
    ("epsilon_minus_inf", "-inf", None),
    ("epsilon_infinity_word", "Infinity", None),
    ("epsilon_empty", "", None),
    ("epsilon_blank", "   ", None),
    ("epsilon_text", "half", None),
    ("epsilon_hex", "0x10", None),
    ("epsilon_divide_by_zero", "1/0", None),
    ("epsilon_two_numbers", "1 2", None),
    ("epsilon_underscore_text", "1_0_", None),
    # Python reads 1_0 as 10: a budget typed '1_0' for '1.0' must not spend ten times as much.
    ("epsilon_underscore_digits", "1_0", None),
    ("epsilon_tiny_exponent", "1e-999999999", 20),
    ("epsilon_huge_exponent", "1e999999999", 20),
]:
    add(_name, _opt(f"--epsilon={_value}", epsilon=None, keywords=("epsilon",), timeout=_timeout))

add("epsilon_fraction_is_fine", _changed(_opt("--quiet", "--columns", "age", epsilon="1/3", code=0),
                                        check=wrote_release("age.csv")))

for _name, _value, _timeout in [
    ("delta_negative", "-0.1", None),
    ("delta_one", "1", None),
    ("delta_two", "2", None),
    ("delta_nan", "nan", None),
    ("delta_text", "tiny", None),
    ("delta_tiny_exponent", "1e-999999999", 20),
    ("delta_huge_exponent", "1e999999999", 20),
]:
    add(_name, _opt(f"--delta={_value}", keywords=("delta",), timeout=_timeout))

for _name, _pair, _kw in [
    ("option_superscript_two", "cap=\u00b2", ("cap",)),
    ("option_no_equals", "cap", ("cap",)),
    ("option_empty_key", "=5", ()),
    ("option_empty_value", "cap=", ("cap",)),
    ("option_unknown_key", "colour=red", ("colour",)),
    ("option_cap_huge_exponent", "cap=1e999", ("cap",)),
    ("option_cap_nan", "cap=nan", ("cap",)),
    ("option_cap_negative", "cap=-3", ("cap",)),
    ("option_arabic_indic_digits", "cap=\u0663", ("cap",)),
    ("option_fullwidth_digits", "cap=\uff11\uff10", ("cap",)),
]:
    add(_name, _opt("--algorithm", "auto", "--option", _pair, keywords=_kw))

for _name, _pair in [("dpcube_penalty_negative", "penalty=-3"), ("dpcube_penalty_huge", "penalty=1e999"),
                     ("dpcube_penalty_text", "penalty=high"), ("dpcube_max_side_float", "max_side=2.5"),
                     ("dpcube_max_side_negative", "max_side=-1"), ("dpcube_significance_maybe", "significance=maybe")]:
    add(_name, _opt("--algorithm", "dpcube", "--option", _pair, keywords=(_pair.split("=")[0],)))
add("dawa_fit_maybe", _opt("--algorithm", "dawa", "--option", "fit=maybe", keywords=("fit",)))

# One-column algorithms refuse a two-way table before any data is read (DAWA takes two columns, along the Hilbert
# curve, and UGrid and AGrid need exactly two).
for _algo in ("mwem", "efpa"):
    add(f"{_algo}_two_columns", _opt("--algorithm", _algo, "--columns", "age,sex",
                                     keywords=(_algo, "one-column")))

for _name, _value in [("branching_zero", "0"), ("branching_one", "1"), ("branching_negative", "-2"),
                      ("branching_text", "wide"), ("branching_float", "2.5")]:
    add(_name, _opt("--algorithm", "h", "--columns", "age", f"--branching={_value}", keywords=("branching",)))
add("branching_huge", _opt("--algorithm", "h", "--columns", "age", "--branching=1000000000", "--quiet",
                           code=ACCEPT_OR_REFUSE, keywords=("branching",)))

add("max_cells_zero", _opt("--max-cells", "0", keywords=("--max-cells",)))
add("max_cells_below_table", _opt("--max-cells", "3", keywords=("--max-cells",)))
add("max_cells_text", _opt("--max-cells", "many", keywords=("--max-cells",)))
add("columns_empty", _opt("--columns=", keywords=("columns",)))
add("columns_only_commas", _opt("--columns", ",,", keywords=("columns",)))
add("columns_duplicate", _opt("--columns", "age,age", keywords=("twice",)))
add("columns_unknown_and_missing", _opt("--columns", "age,nosuch", code=1, keywords=("'nosuch'",)))
add("marginals_empty", _opt("--marginals=", keywords=("marginals",)))
add("marginals_empty_set", _opt("--marginals", "age;;sex", "--quiet", code=ACCEPT_OR_REFUSE, keywords=("marginals",)))
add("marginals_only_separators", _opt("--marginals", ";,;", keywords=("marginals",)))
add("marginals_with_columns", _opt("--marginals", "age;sex", "--columns", "age", keywords=("--marginals",)))
add("marginals_unknown_column", _opt("--marginals", "age;nosuch", code=ANY_FAILURE, keywords=("'nosuch'",)))
add("marginal_strategy_alone", _opt("--marginal-strategy", "full", keywords=("--marginal",)))
add("marginals_epsilon_past_the_samplers", _opt("--marginals", "age;sex", epsilon="1e-13",
                                               keywords=("too small for exact noise",)))
add("marginals_rho_past_the_samplers", _opt("--rho", "1e-30", "--marginals", "age;sex", epsilon=None,
                                            keywords=("too small for exact noise",)))
add("marginal_strategy_residual_other_algorithm", _opt("--rho", "0.5", "--marginals", "age;sex", "--marginal-strategy",
                                                       "residual", "--algorithm", "hb", epsilon=None,
                                                       keywords=("residual", "'hb'")))
add("marginal_strategy_residual_tiny_rho", _opt("--rho", "1e-18", "--marginals", "age;sex", "--marginal-strategy",
                                                "residual", epsilon=None, keywords=("residual", "2^60")))
add("privacy_unit_without_k", _opt("--privacy-unit", "sex", keywords=("--max-rows-per-unit",)))
add("max_rows_per_unit_without_unit", _opt("--max-rows-per-unit", "2", keywords=("--privacy-unit",)))
add("max_rows_per_unit_zero", _opt("--privacy-unit", "sex", "--max-rows-per-unit", "0",
                                   keywords=("--max-rows-per-unit",)))
add("privacy_unit_unknown_column", _opt("--privacy-unit", "nosuch", "--max-rows-per-unit", "2", code=1,
                                        keywords=("'nosuch'",)))
add("group_size_zero", _opt("--group-size", "0", keywords=("--group-size",)))
add("group_size_text", _opt("--group-size", "two", keywords=("--group-size",)))
for _name, _value in [("discovery_share_zero", "0"), ("discovery_share_one", "1"), ("discovery_share_negative", "-0.5"),
                      ("discovery_share_nan", "nan"), ("discovery_share_text", "some")]:
    add(_name, _opt("--columns", "age,note", "--delta", "1e-6", f"--discovery-share={_value}",
                    keywords=("discovery share",)))
add("discovery_bins_zero", _opt("--columns", "age,score", "--discovery-bins", "0", keywords=("--discovery-bins",)))
add("format_unknown", _opt("--format", "xlsx", keywords=("--format",)))
add("ugrid_one_column", _opt("--algorithm", "ugrid", "--columns", "age", keywords=("ugrid", "2 columns")))
add("agrid_one_column", _opt("--algorithm", "agrid", "--columns", "age", keywords=("agrid", "2 columns")))
add("workload_unknown", _opt("--workload", "queries", keywords=("--workload",)))
add("workload_empty", _opt("--workload=", keywords=("--workload",)))
add("workload_option_for_auto_unknown", _opt("--algorithm", "auto", "--option", "workload=rows",
                                             keywords=("workload",)))
add("algorithm_empty", _opt("--algorithm=", "--quiet", code=ACCEPT_OR_REFUSE, keywords=("algorithm",)))
add("algorithm_unknown_with_columns", _opt("--algorithm", "../../etc", "--columns", "age", keywords=("algorithm",)))
add("budget_split_unknown", _opt("--algorithm", "h", "--budget-split", "random", keywords=("--budget-split",)))
add("seed_negative", _opt("--seed=-1", keywords=("--seed",)))
add("seed_text", _opt("--seed", "lucky", keywords=("--seed",)))
add("lock_timeout_negative", _opt("--lock-timeout=-1", keywords=("--lock-timeout",)))
add("lock_timeout_nan", _opt("--lock-timeout", "nan", keywords=("--lock-timeout",)))
add("engine_unknown", _opt("--engine", "gpu", keywords=("--engine",)))
# zCDP and Gaussian noise (issue 21): a budget in one definition only, and every value checked before reading
for _name, _value in [("rho_zero", "0"), ("rho_negative", "-0.5"), ("rho_nan", "nan"), ("rho_inf", "inf"),
                      ("rho_text", "half"), ("rho_empty", ""), ("rho_huge_exponent", "1e999999999")]:
    add(_name, _opt(f"--rho={_value}", epsilon=None, keywords=("rho",),
                    timeout=20 if _name == "rho_huge_exponent" else None))
add("rho_with_epsilon", _opt("--rho", "0.5", keywords=("--rho",)))
add("rho_with_delta", _opt("--rho", "0.5", "--delta", "1e-6", epsilon=None, keywords=("delta",)))
add("rho_with_noise_laplace", _opt("--rho", "0.5", "--noise", "laplace", epsilon=None, keywords=("Laplace",)))
add("noise_gaussian_without_delta", _opt("--noise", "gaussian", keywords=("--delta",)))
add("noise_gaussian_delta_one", _opt("--noise", "gaussian", "--delta", "1", keywords=("delta",)))
add("noise_unknown", _opt("--noise", "cauchy", keywords=("--noise",)))
add("rho_undeclared_column", _opt("--rho", "0.5", "--columns", "age,note", epsilon=None,
                                  keywords=("declare",)))
add("noise_gaussian_undeclared_column", _opt("--noise", "gaussian", "--delta", "1e-6", "--columns", "age,note",
                                             keywords=("declare",)))
add("unknown_option", _opt("--epsilom", "1", keywords=("--epsilom",)))
add("two_inputs", _opt("other.csv", keywords=()))


@case
def out_empty_string(d):
    """--out= (an unset variable in a cron line) must not fall back to ./release."""
    good(d)
    return Case(release("data.csv", "--out=", out=None), 2, ("out",))

add("run_key_empty", _opt("--run-key=", code=ACCEPT_OR_REFUSE, keywords=("run",)))
add("dataset_id_empty", _opt("--dataset-id=", code=ACCEPT_OR_REFUSE, keywords=("dataset",)))


# ---- release: --out destinations --------------------------------------------------------------------------------


@case
def out_is_the_input_file(d):
    good(d)
    return Case(release("data.csv", out="data.csv"), 2, ("data.csv",), frozen=("data.csv",))


@case
def out_is_the_input_folder(d):
    good(d)
    return Case(release("data.csv", out="."), 2, (), frozen=("data.csv", "schema.yaml"))


@case
def out_is_the_input_folder_with_overwrite(d):
    """--overwrite must never delete the input: refused before reading."""
    good(d)
    return Case(release("data.csv", "--overwrite", out="."), 2, (), frozen=("data.csv", "schema.yaml"))


@case
def out_is_the_input_directory_with_overwrite(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "in/a.csv", GOOD_CSV)
    return Case(release("in", "--overwrite", out="in"), 2, ("in",), frozen=("in/a.csv",))


@case
def out_holds_the_ledger_with_overwrite(d):
    """--overwrite into the ledger's folder would delete the ledger and with it the cap."""
    good(d)
    write(d, "state/old.txt", "previous\n")
    return Case(release("data.csv", "--overwrite", "--ledger", "state/ledger.sqlite", out="state"), 2,
                ("state",), ledger="state/ledger.sqlite", frozen=("state/old.txt",))


@case
def out_not_a_release_with_overwrite(d):
    """A folder with files that are not an earlier dphist release: --overwrite must refuse to delete them."""
    good(d)
    write(d, "out/thesis.tex", "years of work\n")
    return Case(release("data.csv", "--overwrite"), 2, ("out",), frozen=("out/thesis.tex",))


@case
def out_symlink_to_empty_folder(d):
    good(d)
    (d / "target").mkdir()
    os.symlink("target", d / "out")

    def check(d: Path) -> None:
        # Written through the link (or the link replaced); never a stale link beside a new folder.
        assert (d / "out" / "report.json").is_file()
        assert not [p.name for p in d.iterdir() if p.name.startswith(".")]
        if (d / "out").is_symlink():
            assert (d / "target" / "report.json").is_file()
    return Case(release("data.csv", "--quiet"), ACCEPT_OR_REFUSE, ("out",), check=check)


@case
def out_dangling_symlink(d):
    good(d)
    os.symlink("nowhere", d / "out")
    return Case(release("data.csv", "--quiet"), ACCEPT_OR_REFUSE, ("out",), check=wrote_release("age.csv"))


@case
def out_in_missing_parent(d):
    good(d)
    return Case(release("data.csv", "--quiet", out="a/b/out"), ACCEPT_OR_REFUSE, ("a/b",))


@case
def out_parent_is_a_file(d):
    good(d)
    write(d, "file.txt", "x\n")
    return Case(release("data.csv", out="file.txt/out"), 2, ("file.txt",))


@case
def out_in_read_only_parent(d):
    if os.geteuid() == 0:
        import pytest
        pytest.skip("root ignores permission bits")
    good(d)
    (d / "ro").mkdir()
    os.chmod(d / "ro", stat.S_IRUSR | stat.S_IXUSR)
    return Case(release("data.csv", out="ro/out"), 2, ("ro",))


@case
def out_existing_file_with_overwrite(d):
    good(d)
    write(d, "out", "not a folder\n")
    return Case(release("data.csv", "--overwrite"), 2, ("out",), frozen=("out",))


# ---- release: discovery of undeclared columns with hostile content ------------------------------------------------


def _discover(data: str, *extra: str, code=0, keywords=(), check_files=(), may_charge=True, schema=None,
              delta=True, epsilon="10"):
    def build(d: Path) -> Case:
        write(d, "data.csv", data)
        if schema is not None:
            write(d, "schema.yaml", schema)
        args = release("data.csv", "--quiet", *extra, schema="schema.yaml" if schema else None, epsilon=epsilon)
        if delta:
            args[-2:-2] = ["--delta", "1e-6"]
        return Case(args, code, keywords, may_charge=may_charge,
                    check=wrote_release(*check_files) if check_files else None)
    return build


_DATES = "\n".join(["2020-01-%02d" % (1 + i % 28) for i in range(2000)] + ["9999-12-31"] * 200) + "\n"
add("discover_all_null_numeric", _discover("x,y\n,1\n,2\n,3\n", "--columns", "x", code=(0, 1)))
add("discover_one_row", _discover("x\n5\n", "--columns", "x", code=(0, 1)))
# Too few rows for the discovered bounds' budget, even for the coarse look: one data error, charged.  The
# column's kind is itself a noisy choice, so the error may instead be that no category has enough records.
add("discover_too_few_records", _discover("x\n" + "".join(f"{1 + i * 67}\n" for i in range(30)), "--columns", "x",
                                          code=1, keywords=("records",), epsilon="1"))
add("discover_far_off_dates", _discover("d\n" + _DATES, "--columns", "d", code=(0, 1)))
add("discover_year_one_dates", _discover("d\n" + _DATES.replace("9999-12-31", "0001-01-01"), "--columns", "d",
                                         code=(0, 1)))
add("discover_iso_timestamps_z", _discover(
    "t\n" + "".join("2024-03-%02dT10:00:00Z\n" % (1 + i % 28) for i in range(2000)), "--columns", "t",
    check_files=("t.csv",)))
add("discover_iso_timestamps_offset", _discover(
    "t\n" + "".join("2024-03-%02dT10:00:00+05:00\n" % (1 + i % 28) for i in range(2000)), "--columns", "t",
    check_files=("t.csv",)))
add("discover_mixed_offsets", _discover(
    "t\n" + "".join(("2024-03-%02dT10:00:00Z\n" if i % 2 else "2024-03-%02dT10:00:00-08:00\n") % (1 + i % 28)
                    for i in range(2000)), "--columns", "t", code=(0, 1)))
add("discover_text_in_numeric_without_delta", _discover(
    "x\n" + "".join(f"{i}\n" for i in range(200)) + f"{SECRET}\n", "--columns", "x", code=(0, 1, 2), may_charge=True))
add("discover_text_without_delta", _discover(f"name\n{SECRET}\nbob\n", "--columns", "name", code=2,
                                             keywords=("delta",), may_charge=False, delta=False))
# 2,000 columns (10,000 work too, exit 0) take ~15 CPU seconds of discovery: in the slow tier; 500 on every change.
add("discover_wide_no_schema", lambda d: _timed(_discover(
    ",".join(f"c{i}" for i in range(2_000)) + "\n" + ",".join("1" for _ in range(2_000)) + "\n", code=(0, 1, 2))(d)))
add("discover_500_columns_no_schema", lambda d: _timed(_discover(
    ",".join(f"c{i}" for i in range(500)) + "\n" + ",".join("1" for _ in range(500)) + "\n", code=(0, 1, 2))(d)))
add("discover_undeclared_beside_schema", _discover(
    "age,sex,score\n10,F,1.5\n20,M,2.5\n", "--columns", "age,score", schema=SCHEMA, code=(0, 1)))
add("discover_seeded_timestamps", _changed(_discover(
    "t\n" + "".join("2024-03-%02dT10:00:00Z\n" % (1 + i % 28) for i in range(2000)), "--columns", "t", "--seed", "3",
    check_files=("t.csv",)), seeded=True))


# ---- release: budget and lock (exit 3, 4) --------------------------------------------------------------------


def _set_cap(path: Path, dataset: str, epsilon: str) -> None:
    from dphist.publishing.ledger import ROW_UNIT, Ledger
    ledger = Ledger(path)
    ledger.set_cap(dataset, ROW_UNIT, epsilon)
    ledger.close()


@case
def budget_exhausted(d):
    good(d)
    _set_cap(d / "ledger.sqlite", "census", "1/2")
    return Case(release("data.csv", "--ledger", "ledger.sqlite", "--dataset-id", "census"), 3, ("census",),
                ledger="ledger.sqlite")


@case
def budget_exhausted_json(d):
    case = budget_exhausted(d)
    return dataclasses.replace(case, args=case.args + ["--log-format", "json"])


@case
def ledger_locked(d):
    """Another process holds the ledger's write lock: exit 4 with nothing read, spent or written."""
    good(d)
    _set_cap(d / "ledger.sqlite", "census", "10")
    holder = sqlite3.connect(d / "ledger.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    _HELD_LOCKS.append(holder)  # released by the test after the run
    return Case(release("data.csv", "--ledger", "ledger.sqlite", "--dataset-id", "census", "--lock-timeout", "0"),
                4, ("ledger",), ledger="ledger.sqlite")


_HELD_LOCKS: list[sqlite3.Connection] = []


def release_locks() -> None:
    while _HELD_LOCKS:
        conn = _HELD_LOCKS.pop()
        conn.execute("ROLLBACK")
        conn.close()


# ---- the ledger under faults, for every command that opens it -------------------------------------------------------


def _valid_ledger_bytes() -> bytes:
    """A small, real ledger file with a cap (made once)."""
    if "ledger" not in _CACHE:
        from dphist.publishing.ledger import ROW_UNIT, Ledger
        path = Path(_scratch()) / "valid.sqlite"
        ledger = Ledger(path)
        for i in range(30):
            ledger.set_cap("census", ROW_UNIT, str(10 + i), 0, "reason " + "x" * 200)
        ledger._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        ledger.close()
        _CACHE["ledger"] = path.read_bytes()
    return _CACHE["ledger"]


def _fault(d: Path, kind: str) -> tuple[str, bool]:
    """Damage (or misplace) the ledger; returns its path and whether it must stay byte-identical."""
    path = "ledger.sqlite"
    if kind == "random":
        write(d, path, np.random.default_rng(7).integers(0, 256, 8192, dtype=np.uint8).tobytes())
    elif kind == "truncated":
        data = _valid_ledger_bytes()
        write(d, path, data[: len(data) // 2 + 100])
    elif kind == "header_only":
        write(d, path, _valid_ledger_bytes()[:100])
    elif kind == "text":
        write(d, path, f"this is my diary {SECRET}\n" * 50)
    elif kind == "directory":
        (d / path).mkdir()
        write(d, "ledger.sqlite/keep.txt", "x\n")
    elif kind == "missing_folder":
        return "nodir/ledger.sqlite", False
    elif kind == "parent_is_file":
        write(d, "afile", "x\n")
        return "afile/ledger.sqlite", False
    return path, True


_LEDGER_FAULTS = ["random", "truncated", "header_only", "text", "directory", "missing_folder", "parent_is_file"]


def _ledger_command(command: str, ledger: str) -> list[str]:
    return {
        "release": release("data.csv", "--ledger", ledger, "--dataset-id", "census"),
        "budget_show": ["budget", "show", "--ledger", ledger],
        "budget_history": ["budget", "history", "census", "--ledger", ledger],
        "budget_verify": ["budget", "verify", "--ledger", ledger],
        "budget_set": ["budget", "set", "census", "--epsilon", "2", "--ledger", ledger],
        "schema_private": ["schema", "data.csv", "--private", "--epsilon", "1", "--delta", "1e-6", "--columns",
                           "age", "--ledger", ledger, "--dataset-id", "census"],
    }[command]


def _ledger_fault(command: str, kind: str):
    def build(d: Path) -> Case:
        good(d, data="age,sex\n" + "".join(f"{i % 90},F\n" for i in range(3000)))
        ledger, damaged = _fault(d, kind)
        args = _ledger_command(command, ledger)
        writes = command in ("release", "budget_set", "schema_private")
        if kind in ("missing_folder", "parent_is_file"):
            # A writer may create its ledger (and folder); a reader must not, and finds nothing or refuses.
            if not writes:
                code = (0, 1, 2)  # a reader finds no ledger (nothing spent) or refuses, creating nothing
            else:
                code = (0,) if kind == "missing_folder" else ANY_FAILURE
            return Case(args, code, ("ledger",), ledger=ledger,
                        may_create=("nodir", "nodir/ledger.sqlite") if writes else ())
        if command == "budget_verify":
            code = 1 if damaged else (1, 2)
        else:
            code = ANY_FAILURE
        return Case(args, code, ("ledger",), ledger=ledger, damaged_ledger=damaged)
    return build


for _command in ["release", "budget_show", "budget_history", "budget_verify", "budget_set", "schema_private"]:
    for _kind in _LEDGER_FAULTS:
        if _command in ("budget_history", "schema_private") and _kind in ("header_only", "parent_is_file"):
            continue  # the same code path as another fault for these commands
        add(f"ledger_{_kind}_{_command}", _ledger_fault(_command, _kind))


@case
def ledger_zero_byte_file_show(d):
    """SQLite treats an empty file as an empty database: nothing spent, nothing to show."""
    write(d, "ledger.sqlite", b"")
    return Case(["budget", "show", "--ledger", "ledger.sqlite"], (0, 1, 2), ("ledger",), ledger="ledger.sqlite")


@case
def ledger_read_only_release(d):
    if os.geteuid() == 0:
        import pytest
        pytest.skip("root ignores permission bits")
    good(d)
    write(d, "ledger.sqlite", _valid_ledger_bytes())
    os.chmod(d / "ledger.sqlite", stat.S_IRUSR)
    return Case(release("data.csv", "--ledger", "ledger.sqlite", "--dataset-id", "census"), ANY_FAILURE,
                ("ledger",), ledger="ledger.sqlite", damaged_ledger=True)


# ---- budget: bad arguments --------------------------------------------------------------------------------------


for _name, _args, _code, _timeout in [
    ("budget_set_epsilon_text", ["budget", "set", "census", "--epsilon", "lots"], 2, None),
    ("budget_set_epsilon_negative", ["budget", "set", "census", "--epsilon=-1"], 2, None),
    ("budget_set_epsilon_nan", ["budget", "set", "census", "--epsilon", "nan"], 2, None),
    ("budget_set_epsilon_inf", ["budget", "set", "census", "--epsilon", "inf"], 2, None),
    ("budget_set_epsilon_huge_exponent", ["budget", "set", "census", "--epsilon", "1e999999999"], 2, 20),
    ("budget_set_delta_tiny_exponent", ["budget", "set", "census", "--epsilon", "1", "--delta", "1e-999999999"],
     ACCEPT_OR_REFUSE, 20),
    ("budget_set_delta_one", ["budget", "set", "census", "--epsilon", "1", "--delta", "1"], 2, None),
    ("budget_set_delta_nan", ["budget", "set", "census", "--epsilon", "1", "--delta", "nan"], 2, None),
    ("budget_set_delta_text", ["budget", "set", "census", "--epsilon", "1", "--delta", "small"], 2, None),
    ("budget_set_missing_epsilon", ["budget", "set", "census"], 2, None),
    ("budget_set_rho_text", ["budget", "set", "census", "--rho", "half"], 2, None),
    ("budget_set_rho_nan", ["budget", "set", "census", "--rho", "nan"], 2, None),
    ("budget_set_rho_zero", ["budget", "set", "census", "--rho", "0"], 2, None),
    ("budget_set_rho_and_epsilon", ["budget", "set", "census", "--rho", "0.5", "--epsilon", "1"], 2, None),
    ("budget_show_unknown_dataset", ["budget", "show", "nosuch"], 2, None),
    ("budget_show_format_unknown", ["budget", "show", "--format", "xml"], 2, None),
    ("budget_history_unknown_dataset", ["budget", "history", "nosuch"], 2, None),
    ("budget_history_missing_argument", ["budget", "history"], 2, None),
    ("budget_verify_extra_argument", ["budget", "verify", "census"], 2, None),
    ("budget_unknown_subcommand", ["budget", "spend", "census"], 2, None),
]:
    add(_name, (lambda a, c, t: lambda d: Case(a + ["--ledger", "ledger.sqlite"], c, (), ledger="ledger.sqlite",
                                                timeout=t))(_args, _code, _timeout))


# ---- schema (draft and --private) ------------------------------------------------------------------------------


def _cmd(args: list[str], code, *keywords: str, data: str | bytes | None = GOOD_CSV, timeout=None, seeded=False,
         may_charge=False):
    def build(d: Path) -> Case:
        if data is not None:
            write(d, "data.csv", data)
        write(d, "schema.yaml", SCHEMA)
        return Case(list(args), code, keywords, timeout=timeout, seeded=seeded, may_charge=may_charge)
    return build


for _name, _args, _code, _kw, _data in [
    ("draft_missing_input", ["schema", "nosuch.csv"], 1, ("nosuch.csv",), None),
    ("draft_zero_bytes", ["schema", "data.csv"], 1, ("data.csv",), ""),
    ("draft_binary", ["schema", "data.csv"], 1, ("data.csv",), bytes(range(256)) * 40),
    ("draft_ragged", ["schema", "data.csv"], 1, ("data.csv",), f"a,b\n1,2\n3,4,{SECRET}\n"),
    ("draft_out_exists", ["schema", "data.csv", "-o", "schema.yaml"], 2, ("schema.yaml",), GOOD_CSV),
    ("draft_out_missing_folder", ["schema", "data.csv", "-o", "nodir/s.yaml"], (0, 1, 2), ("nodir",), GOOD_CSV),
    ("draft_out_is_directory", ["schema", "data.csv", "-o", "."], 2, (), GOOD_CSV),
    ("draft_epsilon_without_private", ["schema", "data.csv", "--epsilon", "1"], 2, ("--private",), GOOD_CSV),
    ("draft_bins_zero", ["schema", "data.csv", "--bins", "0"], 2, ("--bins",), GOOD_CSV),
    ("draft_max_categories_zero", ["schema", "data.csv", "--max-categories", "0"], 2, ("--max-categories",),
     GOOD_CSV),
    ("draft_far_off_dates", ["schema", "data.csv"], 0, (), "d\n2020-01-01\n9999-12-31\n0001-01-01\n"),
    ("draft_timestamps_with_offsets", ["schema", "data.csv"], 0, (),
     "t\n2024-01-01T00:00:00Z\n2024-02-01T00:00:00+05:00\n"),
    ("private_without_epsilon", ["schema", "data.csv", "--private"], 2, ("--epsilon",), GOOD_CSV),
    ("private_epsilon_zero", ["schema", "data.csv", "--private", "--epsilon", "0"], 2, ("epsilon",), GOOD_CSV),
    ("private_epsilon_nan", ["schema", "data.csv", "--private", "--epsilon", "nan"], 2, ("epsilon",), GOOD_CSV),
    ("private_delta_two", ["schema", "data.csv", "--private", "--epsilon", "1", "--delta", "2"], 2, ("delta",),
     GOOD_CSV),
    ("private_unknown_column", ["schema", "data.csv", "--private", "--epsilon", "1", "--columns", "nosuch"], 1,
     ("'nosuch'",), GOOD_CSV),
    ("private_unit_without_k", ["schema", "data.csv", "--private", "--epsilon", "1", "--privacy-unit", "sex"], 2,
     ("--max-rows-per-unit",), GOOD_CSV),
    ("private_lock_timeout_nan", ["schema", "data.csv", "--private", "--epsilon", "1", "--lock-timeout", "nan"], 2,
     ("--lock-timeout",), GOOD_CSV),
    ("private_missing_input", ["schema", "nosuch.csv", "--private", "--epsilon", "1"], 1, ("nosuch.csv",), None),
    ("private_out_exists", ["schema", "data.csv", "--private", "--epsilon", "1", "-o", "schema.yaml"], 2,
     ("schema.yaml",), GOOD_CSV),
    ("private_out_missing_folder", ["schema", "data.csv", "--private", "--epsilon", "1", "--delta", "1e-6",
                                    "-o", "nodir/s.yaml"], (0, 2), ("nodir",), GOOD_CSV),
]:
    add(_name, _cmd(_args, _code, *_kw, data=_data))

add("private_far_off_dates", _cmd(["schema", "data.csv", "--private", "--epsilon", "10", "--delta", "1e-6"], (0, 1),
                                  "data.csv", data="d\n" + _DATES, may_charge=True))
add("private_iso_timestamps", _cmd(["schema", "data.csv", "--private", "--epsilon", "10", "--delta", "1e-6"], 0,
                                   data="t\n" + "".join("2024-03-%02dT10:00:00+05:00\n" % (1 + i % 28)
                                                         for i in range(2000))))
add("private_epsilon_tiny_exponent", _cmd(["schema", "data.csv", "--private", "--epsilon", "1e-999999999"],
                                          ACCEPT_OR_REFUSE, "epsilon", timeout=20))


@case
def private_fifo_input(d):
    _fifo(d, "data.csv")
    return Case(["schema", "data.csv", "--private", "--epsilon", "1", "--delta", "1e-6"], 1, ("data.csv",),
                timeout=20)


# ---- synth / plot on damaged releases ------------------------------------------------------------------------------


_CACHE: dict[str, object] = {}


def _scratch() -> str:
    if "scratch" not in _CACHE:
        path = tempfile.mkdtemp(prefix="dphist-corpus-")
        atexit.register(shutil.rmtree, path, True)
        _CACHE["scratch"] = path
    return _CACHE["scratch"]


def _template_release(fmt: str) -> Path:
    """A real test-mode release of age and sex (made once per format, then copied into each case)."""
    key = f"release-{fmt}"
    if key not in _CACHE:
        from cli_harness import invoke
        root = Path(_scratch())
        write(root, "schema.yaml", SCHEMA)
        write(root, "data.csv", "age,sex\n" + "".join(f"{i % 100},{'FM'[i % 2]}\n" for i in range(500)))
        out = root / f"rel-{fmt}"
        result = invoke(["release", str(root / "data.csv"), "--schema", str(root / "schema.yaml"),
                         "--epsilon", "1", "--seed", "1", "--quiet", "--format", fmt, "--out", str(out)])
        assert result.exit_code == 0, result.output
        _CACHE[key] = out
    return _CACHE[key]


def _copy_release(d: Path, fmt: str = "csv") -> Path:
    return Path(shutil.copytree(_template_release(fmt), d / "rel"))


def _damaged(damage: Callable[[Path], None], args: list[str], code, *keywords: str, fmt: str = "csv"):
    def build(d: Path) -> Case:
        damage(_copy_release(d, fmt))
        return Case(list(args), code, keywords)
    return build


def _report_edit(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(rel: Path) -> None:
        report = json.loads((rel / "report.json").read_text())
        (rel / "report.json").write_text(json.dumps(edit(report)))
    return damage


def _count_text(rel: Path) -> None:
    lines = (rel / "age.csv").read_text().splitlines()
    header = lines[0].split(",")
    i = header.index("count")
    row = lines[1].split(",")
    row[i] = "many"
    lines[1] = ",".join(row)
    (rel / "age.csv").write_text("\n".join(lines) + "\n")


def _count_negative(rel: Path) -> None:
    text = (rel / "age.csv").read_text().splitlines()
    header = text[0].split(",")
    i = header.index("count")
    for k in range(1, len(text)):
        row = text[k].split(",")
        row[i] = "-5"
        text[k] = ",".join(row)
    (rel / "age.csv").write_text("\n".join(text) + "\n")


def _column_text(column: str, value: str) -> Callable[[Path], None]:
    """Damage: every row's ``column`` of the age table set to ``value`` (a hand-edited or foreign file)."""
    def damage(rel: Path) -> None:
        text = (rel / "age.csv").read_text().splitlines()
        i = text[0].split(",").index(column)
        for k in range(1, len(text)):
            row = text[k].split(",")
            row[i] = value
            text[k] = ",".join(row)
        (rel / "age.csv").write_text("\n".join(text) + "\n")
    return damage


def _nested_parquet(rel: Path) -> None:
    pq.write_table(pa.table({"age_lower": [[0.0]] * 4, "age_upper": [[25.0]] * 4, "count": [[1]] * 4,
                             "noisy_count": [[1.0]] * 4}), rel / "age.parquet")


_SYNTH = ["synth", "rel", "--table", "age", "-n", "10", "-o", "s.csv"]
_PLOT = ["plot", "rel", "--table", "age", "-o", "chart.png"]

for _prefix, _args in [("synth", _SYNTH), ("plot", _PLOT)]:
    for _name, _damage, _code in [
        ("report_not_json", lambda rel: (rel / "report.json").write_text("{" + SECRET), 1),
        ("report_missing", lambda rel: (rel / "report.json").unlink(), ANY_FAILURE),
        ("report_is_list", lambda rel: (rel / "report.json").write_text("[1, 2]"), 1),
        ("report_tables_wrong_type", _report_edit(lambda r: {**r, "tables": "age"}), 1),
        ("report_shape_wrong", _report_edit(lambda r: {**r, "tables": [{**t, "shape": [999]} for t in r["tables"]]}),
         1),
        ("report_unknown_column_type", _report_edit(lambda r: {**r, "tables": [
            {**t, "domain": {k: {**v, "type": "colour"} for k, v in t["domain"].items()}} for t in r["tables"]]}), 1),
        ("table_file_missing", lambda rel: (rel / "age.csv").unlink(), 1),
        ("count_is_text", _count_text, 1),
        ("table_file_binary", lambda rel: (rel / "age.csv").write_bytes(bytes(range(256)) * 8), 1),
        ("table_file_empty", lambda rel: (rel / "age.csv").write_bytes(b""), 1),
    ]:
        add(f"{_prefix}_{_name}", _damaged(_damage, _args, _code))
    add(f"{_prefix}_nested_parquet", _damaged(_nested_parquet, _args, 1, fmt="parquet"))
    add(f"{_prefix}_release_dir_missing", lambda d, a=_args: Case(list(a), ANY_FAILURE, ("rel",)))
    add(f"{_prefix}_release_dir_is_file", _damaged(lambda rel: (shutil.rmtree(rel), rel.write_text("x\n")), _args,
                                                   ANY_FAILURE, "rel"))
    add(f"{_prefix}_table_unknown", _damaged(lambda rel: None, [("nosuch" if a == "age" else a) for a in _args],
                                             ANY_FAILURE, "nosuch"))

# dphist review: the same damaged releases, and its own page's refusals (one line, no page left).
_REVIEW = ["review", "rel", "-o", "page.html"]
for _name, _damage, _code in [
    ("report_not_json", lambda rel: (rel / "report.json").write_text("{" + SECRET), 1),
    ("report_missing", lambda rel: (rel / "report.json").unlink(), ANY_FAILURE),
    ("report_is_list", lambda rel: (rel / "report.json").write_text("[1, 2]"), 1),
    ("report_tables_wrong_type", _report_edit(lambda r: {**r, "tables": "age"}), 1),
    ("report_shape_wrong", _report_edit(lambda r: {**r, "tables": [{**t, "shape": [999]} for t in r["tables"]]}), 1),
    ("table_file_missing", lambda rel: (rel / "age.csv").unlink(), 1),
    ("count_is_text", _count_text, 1),
    ("table_file_binary", lambda rel: (rel / "age.csv").write_bytes(bytes(range(256)) * 8), 1),
    ("ci_covers_unknown", _column_text("ci_covers", "everything"), 1),
]:
    add(f"review_{_name}", _damaged(_damage, _REVIEW, _code))
add("review_release_dir_missing", lambda d: Case(list(_REVIEW), ANY_FAILURE, ("rel",)))
add("review_release_dir_is_file", _damaged(lambda rel: (shutil.rmtree(rel), rel.write_text("x\n")), _REVIEW,
                                           ANY_FAILURE, "rel"))
add("review_not_a_release", lambda d: (d.joinpath("rel").mkdir(), Case(list(_REVIEW), 2, ("not a dphist release",)))[1])
add("review_out_exists", _damaged(lambda rel: write(rel.parent, "page.html", "old\n"), _REVIEW, 2, "page.html"))
add("review_out_inside_release", _damaged(lambda rel: None, ["review", "rel", "-o", "rel/page.html"], 2,
                                          "inside a release folder"))
add("review_out_unwritable", _damaged(lambda rel: write(rel.parent, "afile", "x\n"),
                                      ["review", "rel", "-o", "afile/page.html"], 2, "afile"))
add("review_out_unknown_extension", _damaged(lambda rel: None, _REVIEW[:-1] + ["page.txt"], 2, "page.txt"))

add("synth_negative_counts", _damaged(_count_negative, _SYNTH, (0, 1)))
add("synth_out_unknown_extension", _damaged(lambda rel: None, _SYNTH[:-1] + ["s.xlsx"], 2, "s.xlsx"))
add("synth_out_missing_folder", _damaged(lambda rel: None, _SYNTH[:-1] + ["nodir/s.csv"], (0, 2), "nodir"))
add("synth_out_exists", _damaged(lambda rel: write(rel.parent, "s.csv", "old\n"), _SYNTH, 2, "s.csv"))
add("synth_out_is_directory", _damaged(lambda rel: (rel.parent / "s.csv").mkdir(), _SYNTH, 2, "s.csv"))
add("synth_rows_negative", _damaged(lambda rel: None, ["synth", "rel", "-t", "age", "-n", "-1", "-o", "s.csv"], 2,
                                    "--rows"))
add("synth_rows_huge", _damaged(lambda rel: None, ["synth", "rel", "-t", "age", "-n", "10000000000", "-o", "s.csv"],
                                2, "--rows"))
add("synth_rows_text", _damaged(lambda rel: None, ["synth", "rel", "-t", "age", "-n", "ten", "-o", "s.csv"], 2,
                                "--rows"))
add("synth_table_and_joint", _damaged(lambda rel: None, _SYNTH + ["--joint"], 2, "--joint"))
add("synth_two_tables_no_choice", _damaged(lambda rel: None, ["synth", "rel", "-n", "5", "-o", "s.csv"], 2,
                                           "--table"))
add("plot_ci_covers_unknown", _damaged(_column_text("ci_covers", "everything"), _PLOT, 1, "ci_covers"))
add("plot_bucket_not_a_number", _damaged(_column_text("bucket", "first"), _PLOT, 1, "bucket"))
add("plot_out_unknown_extension", _damaged(lambda rel: None, _PLOT[:-1] + ["chart.xyz"], 2, "chart.xyz"))
add("plot_out_no_extension", _damaged(lambda rel: None, _PLOT[:-1] + ["chart"], (0, 2), "chart"))
add("plot_out_missing_folder", _damaged(lambda rel: None, _PLOT[:-1] + ["nodir/chart.png"], (0, 2), "nodir"))
add("plot_out_exists", _damaged(lambda rel: write(rel.parent, "chart.png", "old\n"), _PLOT, 2, "chart.png"))


# ---- evaluate, bench, algorithms, top level ------------------------------------------------------------------------


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=array.dtype == object)
    return buf.getvalue()


_EVAL = ["evaluate", "data.csv", "--schema", "schema.yaml", "--columns", "age", "--trials", "1"]
for _name, _args, _code, _kw in [
    ("evaluate_missing_input", ["evaluate", "nosuch.csv", "-e", "1", "-s", "schema.yaml", "-c", "age"], 1,
     ("nosuch.csv",)),
    ("evaluate_epsilon_zero", _EVAL + ["-e", "0"], 2, ("epsilon",)),
    ("evaluate_epsilon_text", _EVAL + ["-e", "much"], 2, ("epsilon",)),
    ("evaluate_unknown_column", ["evaluate", "data.csv", "-e", "1", "-s", "schema.yaml", "-c", "nosuch"], (1, 2),
     ("'nosuch'",)),
    ("evaluate_unknown_algorithm", _EVAL + ["-e", "1", "-a", "magic"], 2, ("'magic'",)),
    # In the data but not in the schema: evaluate would have scored a placeholder domain (issue 20).
    ("evaluate_undeclared_column", ["evaluate", "data.csv", "-e", "1", "-s", "schema.yaml", "-c", "note"], 2,
     ("'note'", "not declared")),
    ("evaluate_trials_zero", ["evaluate", "data.csv", "-e", "1", "-s", "schema.yaml", "-c", "age", "-k", "0"], 2,
     ("--trials",)),
    ("evaluate_option_superscript", _EVAL + ["-e", "1", "-a", "structurefirst", "--option", "cap=\u00b2"], 2,
     ("cap",)),
    ("evaluate_option_unknown_key", _EVAL + ["-e", "1", "-a", "identity", "--option", "colour=red"], 2,
     ("colour",)),
    ("evaluate_workload_unknown", _EVAL + ["-e", "1", "-w", "everything"], 2, ("--workload",)),
    ("evaluate_schema_missing", ["evaluate", "data.csv", "-e", "1", "-s", "nosuch.yaml", "-c", "age"], 2,
     ("nosuch.yaml",)),
    ("evaluate_bad_data", _EVAL + ["-e", "1"], 1, ("data.csv",)),
    ("bench_missing_file", ["bench", "nosuch.npy"], 1, ("nosuch.npy",)),
    ("bench_text_file", ["bench", "data.csv"], 1, ("data.csv",)),
    ("bench_epsilon_zero", ["bench", "h.csv", "-e", "0"], 2, ("epsilon",)),
    ("bench_unknown_algorithm", ["bench", "h.csv", "-a", "magic"], 2, ("'magic'",)),
    ("bench_scale_zero", ["bench", "h.csv", "--scale", "0"], 2, ("--scale",)),
    ("bench_no_files", ["bench"], 2, ("FILE",)),
    ("bench_npy_with_nan", ["bench", "h.npy"], 1, ("h.npy",)),
    ("bench_npy_object_array", ["bench", "obj.npy"], 1, ("obj.npy",)),
    ("bench_ragged_grid", ["bench", "g.csv"], 1, ("g.csv",)),
    ("algorithms_extra_argument", ["algorithms", "identity"], 2, ()),
    ("algorithms_unknown_option", ["algorithms", "--verbose"], 2, ("--verbose",)),
    ("unknown_command", ["publish", "data.csv"], 2, ("publish",)),
    ("no_arguments_at_all_release", ["release"], 2, ("INPUT",)),
]:
    def _build(d, a=_args, c=_code, k=_kw, n=_name):
        write(d, "schema.yaml", SCHEMA)
        write(d, "data.csv", f"age,sex\n10,F\n{SECRET},M\n" if n == "evaluate_bad_data" else GOOD_CSV)
        write(d, "h.csv", "5\n3\n8\n")
        write(d, "g.csv", "1,2\n3\n")
        write(d, "h.npy", _npy(np.array([1.0, np.nan, 3.0])))
        write(d, "obj.npy", _npy(np.array([{"a": SECRET}], dtype=object)))
        return Case(list(a), c, k, may_charge=False)
    add(_name, _build)


# ---- --log-format json: every stderr line is one JSON object --------------------------------------------------------


def _json(builder: Callable[[Path], Case]) -> Callable[[Path], Case]:
    def build(d: Path) -> Case:
        case = builder(d)
        return dataclasses.replace(case, args=case.args + ["--log-format", "json"])
    return build


for _name in ["csv_missing_file", "csv_ragged_long_row", "csv_text_in_numeric_column", "parquet_truncated_half",
              "schema_bounds_reversed", "schema_yaml_tab_indent", "job_option_cap_inf", "epsilon_text",
              "epsilon_minus_one", "option_superscript_two", "format_unknown", "unknown_option", "seed_negative",
              "max_cells_below_table", "out_is_the_input_folder_with_overwrite", "ledger_random_release",
              "discover_far_off_dates", "discover_iso_timestamps_offset", "path_with_brackets_exists",
              "csv_utf8_bom_is_fine", "two_inputs"]:
    add(f"json_{_name}", _json(CASES[_name]))


@case
def json_log_format_first_then_click_error(d):
    """--log-format json comes first; the bad option after it is a click parse error: still JSON."""
    good(d)
    return Case(["release", "--log-format", "json", "data.csv", "--schema", "schema.yaml", "--epsilon", "1",
                 "--nosuch"], 2, ("--nosuch",))


@case
def json_missing_epsilon_value(d):
    good(d)
    return Case(["release", "data.csv", "--log-format", "json", "--schema", "schema.yaml", "--epsilon"], 2,
                ("--epsilon",))


@case
def json_seeded_data_error(d):
    good(d, data=f"age,sex\n10,F\n{SECRET},M\n")
    return Case(release("data.csv", "--seed", "1", "--log-format", "json"), 1, ("data.csv", "'age'"), seeded=True)


@case
def json_seeded_success(d):
    good(d)
    return Case(release("data.csv", "--seed", "1", "--log-format", "json"), 0, seeded=True,
                check=wrote_release("age.csv", "sex.csv"))


@case
def json_seeded_schema_error(d):
    write(d, "schema.yaml", _NUM % "lower: 100, upper: 0, bins: 4")
    write(d, "data.csv", GOOD_CSV)
    return Case(release("data.csv", "--seed", "1", "--log-format", "json"), 2, ("'age'",), seeded=True)


@case
def json_success_not_quiet(d):
    good(d)
    return Case(release("data.csv", "--log-format", "json"), 0, check=wrote_release("age.csv", "sex.csv"))


@case
def json_overflowing_numbers(d):
    """Numbers that overflow float arithmetic must not leak numpy RuntimeWarnings as plain lines."""
    good(d, data="age,sex\n1e308,F\n-1e308,M\n1e308,F\n")
    return Case(release("data.csv", "--log-format", "json"), (0, 1), ("data.csv",), may_charge=True,
                check=wrote_release("age.csv", "sex.csv"))


# --- recovery ---------------------------------------------------------------------------------------------------------
# A run key whose committed release is not at its destination as committed, retried: exit 3 naming what is wrong,
# nothing drawn under the key, nothing read, spent, written or deleted.  The earlier run is a real release
# transaction (dphist.publishing.transaction.charged_run, in a process of its own, killed at a checkpoint where the case says so)
# at epsilon 0 with a two-file release, so that the ledger's spend stays 0 for the contract's no-charge check; the
# retry is a release of the case's data under the same data set id and key.

_RK_RUN = """\
import sys
from pathlib import Path
from types import SimpleNamespace
from dphist.publishing.destination import Destination
from dphist.publishing.ledger import Ledger
from dphist.publishing.transaction import FileRelease, charged_run

ledger, out, key = sys.argv[1:4]

def write(value, staging):
    (staging / "sex.csv").write_text("sex,noisy_count\\nF,2\\nM,1\\n")
    (staging / "report.json").write_text("{}\\n")
    return ["sex.csv", "report.json"]

plan = SimpleNamespace(epsilon=0, delta=0, source=SimpleNamespace(public_name="census"))
charged_run(plan, lambda info: None, Ledger(ledger), "census", key, files=FileRelease(Destination(Path(out)), write))
"""


def _rk_earlier_run(d: Path, fault: str | None = None) -> None:
    """The earlier run with key 'nightly' to d/out, killed at ``fault`` if given (then its process has ended)."""
    from cli_harness import start
    done = start(["-c", _RK_RUN, d / "ledger.sqlite", d / "out", "nightly"], cwd=d,
                 env={"DPHIST_FAULT_AT": fault}).wait(60)
    assert done.exit_code == (-9 if fault else 0), done.stderr


def _rk_staging(d: Path) -> Path:
    (staging,) = [p for p in d.iterdir() if ".dphist-staging." in p.name]
    return staging


def _rk_retry(*keywords: str, frozen: tuple[str, ...] = ()) -> Case:
    return Case(release("data.csv", "--ledger", "ledger.sqlite", "--dataset-id", "census", "--run-key", "nightly"),
                3, ("run key 'nightly'", "spent nothing", *keywords), ledger="ledger.sqlite", frozen=frozen)


@case
def run_key_release_gone_after_recovery(d):
    """Killed after its commit, its staging folder deleted, recovered: the retry must not say 'already committed
    to out' (out does not exist)."""
    good(d)
    _rk_earlier_run(d, "committed")
    shutil.rmtree(_rk_staging(d))
    from dphist.publishing.ledger import Ledger
    from dphist.publishing.transaction import recover
    ledger = Ledger(d / "ledger.sqlite")
    assert [r.line for r in recover(ledger)] and not ledger.open_runs()
    ledger.close()
    return _rk_retry("does not exist")


@case
def run_key_release_file_changed(d):
    """Published, then a file of the release changed: --out is occupied, and the run key's release is not there."""
    good(d)
    _rk_earlier_run(d)
    (d / "out" / "sex.csv").write_text("sex,noisy_count\nF,9\n")
    return _rk_retry("'sex.csv' changed", frozen=("out",))


@case
def run_key_staging_stray_file_after_commit(d):
    """Killed after its commit, a file put into its staging folder: recovery publishes nothing, deletes nothing."""
    good(d)
    _rk_earlier_run(d, "committed")
    (_rk_staging(d) / "stray.txt").write_text("not part of the release")
    return _rk_retry("'stray.txt'", "move what is not part of the release", frozen=(_rk_staging(d).name,))


@case
def run_key_staging_stray_file_before_commit(d):
    """Killed with its release complete in staging, not yet committed, a file put in: the key is held by a run
    that ended, not by 'another run that has not finished' (exit 4)."""
    good(d)
    _rk_earlier_run(d, "staged")
    (_rk_staging(d) / "stray.txt").write_text("not part of the release")
    return _rk_retry("'stray.txt'", frozen=(_rk_staging(d).name,))


@case
def run_key_moved_release_changed(d):
    """Killed once its release was moved into place, then a file of it changed: not recorded as published."""
    good(d)
    _rk_earlier_run(d, "moved")
    (d / "out" / "report.json").write_text("{\"edited\": true}\n")
    return _rk_retry("'report.json' changed", frozen=("out",))

# --- declare ---
# YAML that cannot crash or explode, specs that carry what is protected, options that cannot conflict.  Every
# schema and job spec is read by dphist/declare/yamlfile.py: keys are text, each once; aliases, nesting and endless
# values are bounded before a value is built.  A budget on the command line replaces the spec's as a whole.  An
# option is given once and is never the release's workload.  A spec may name its ledger and what it protects.


def _spec_case(body: str, *keywords: str, code=2, args: tuple[str, ...] = (), ledger: str | None = None,
               check: Callable[[Path], None] | None = None, timeout: float | None = None):
    """A job spec over the good data and schema (``body`` after input and schema: a budget, tables, ...)."""
    def build(d: Path) -> Case:
        good(d)
        write(d, "job.yaml", "input: data.csv\nschema: schema.yaml\n" + body)
        return Case(["release", "--spec", "job.yaml", *args, "--out", "out"], code, keywords, ledger=ledger,
                    check=check, timeout=timeout)
    return build


def _report_says(**expected) -> Callable[[Path], None]:
    """After exit 0: out/report.json has these top-level values (None: the field is absent)."""
    def check(d: Path) -> None:
        report = json.loads((d / "out" / "report.json").read_text())
        assert {k: report.get(k) for k in expected} == expected, {k: report.get(k) for k in expected}
    return check


def _alias_bomb(indent: str) -> str:
    """9 levels of 9 aliases: 9**9 (387 million) leaves once expanded."""
    items = [f"{indent}- &a0 [x, x, x, x, x, x, x, x, x]"]
    items += [f"{indent}- &a{k} [{', '.join([f'*a{k - 1}'] * 9)}]" for k in range(1, 9)]
    return "\n".join(items) + "\n"


_ONE_TABLE = "tables:\n  - {columns: [age]}\n"
_EPS = "epsilon: '1'\n"

# Keys that are not text: a list or mapping as a key, a merge key.
add("job_key_list_in_table", _spec_case(_EPS + "tables:\n  - {columns: [age], ? [a, b]: 1}\n",
                                        "job.yaml", "line 5", "key"))
add("job_key_mapping_at_top", _spec_case(_EPS + "? {a: 1}\n: 2\n" + _ONE_TABLE, "job.yaml", "line 4", "key"))
add("job_merge_key", _spec_case("base: &b {columns: [age]}\n" + _EPS + "tables:\n  - <<: *b\n",
                                "job.yaml", "merge key"))
add("schema_key_list_in_column", _schema("columns:\n  age: {type: numeric, lower: 0, upper: 100, bins: 4, "
                                         "? [x]: 1}\n", "line 2", "key"))
add("schema_key_list_in_hierarchy", _schema(_CAT % "values: [F, M], hierarchy: {? [W]: [F, M]}", "line 2", "key"))
add("schema_key_number_and_text_twice", _schema("columns:\n  1: {type: categorical, values: [a]}\n"
                                                "  '1': {type: categorical, values: [b]}\n", "line 3", "twice"))

# Alias bombs in each place a spec holds a value, and in a table's options: refused while counting.
_BOMBS = {
    "job_alias_bomb_rho": "rho:\n" + _alias_bomb("  ") + _ONE_TABLE,
    "job_alias_bomb_workload": _EPS + "workload:\n" + _alias_bomb("  ") + _ONE_TABLE,
    "job_alias_bomb_noise": _EPS + "noise:\n" + _alias_bomb("  ") + _ONE_TABLE,
    "job_alias_bomb_share": _EPS + "tables:\n  - columns: [age]\n    share:\n" + _alias_bomb("      "),
    "job_alias_bomb_marginals": _EPS + "marginals:\n" + _alias_bomb("  "),
    "job_alias_bomb_options": (_EPS + "tables:\n  - columns: [age]\n    options:\n      cap:\n"
                               + _alias_bomb("        ")),
}
for _name, _body in _BOMBS.items():
    add(_name, _spec_case(_body, "job.yaml", "aliases are expanded", timeout=30))
add("schema_alias_bomb_hierarchy", _changed(_schema(
    "columns:\n  sex:\n    type: categorical\n    values: [F, M]\n    hierarchy:\n      W:\n" + _alias_bomb("        "),
    "aliases are expanded"), timeout=30))
add("job_alias_endless", _spec_case("rho: &a [1, *a]\n" + _ONE_TABLE, "job.yaml", "contains it"))
add("job_nested_too_deep", _spec_case("rho: " + "[" * 150 + "]" * 150 + "\n" + _ONE_TABLE, "job.yaml", "deep"))
add("schema_yaml_huge_integer", _schema(_NUM % ("lower: 0, upper: " + "9" * 5000 + ", bins: 4"), "line 2", "number"))
add("schema_json_huge_integer", _schema('{"columns": {"age": {"type": "numeric", "lower": 0, "upper": '
                                        + "9" * 5000 + ', "bins": 4}}}', "number", name="schema.json"))
add("schema_json_nested_too_deep", _schema('{"columns": ' + "[" * 5000 + "]" * 5000 + "}", "deep",
                                           name="schema.json"))
add("schema_json_key_twice", _schema('{"columns": {"age": {"type": "numeric", "lower": 0, "upper": 100, "bins": 4}, '
                                     '"age": {"type": "categorical", "values": ["a"]}}}', "twice", name="schema.json"))
PROCESS.update({*_BOMBS, "schema_alias_bomb_hierarchy"})

# A budget on the command line replaces the spec's as a whole (epsilon, rho, delta, noise).
_APPROX = "epsilon: '1'\ndelta: '1e-6'\nnoise: gaussian\n"
add("job_approx_with_cli_rho", _spec_case(_APPROX + _ONE_TABLE, args=("--rho", "0.01", "--quiet"), code=0,
                                          check=_report_says(definition="zcdp", rho_spent="0.01",
                                                             delta_spent=None)))
add("job_approx_with_cli_epsilon", _spec_case(_APPROX + _ONE_TABLE, args=("--epsilon", "2", "--quiet"), code=0,
                                              check=_report_says(definition="pure", epsilon_spent="2",
                                                                 delta_spent="0")))
add("job_approx_with_cli_epsilon_gaussian_no_delta", _spec_case(
    _APPROX + _ONE_TABLE, "--delta", args=("--epsilon", "2", "--noise", "gaussian")))

# One setting each: a repeated --option, --option beside its own flag, an option named workload.
add("option_key_twice", _opt("-a", "dawa", "--option", "ratio=0.3", "--option", "ratio=0.4",
                             keywords=("ratio", "twice")))
add("option_key_twice_spelled_apart", _opt("-a", "dpcube", "--option", "max-side=3", "--option", "max_side=4",
                                           keywords=("max_side", "twice")))
add("option_beside_its_flag", _opt("-a", "h", "--branching", "4", "--option", "branching=8",
                                   keywords=("--branching", "--option branching")))
add("option_workload_beside_workload_flag", _opt("--workload", "ranges", "--option", "workload=cells",
                                                 keywords=("'workload'", "--workload")))
add("job_option_workload_for_mwem", _spec_case(_EPS + "tables:\n  - {columns: [age], algorithm: mwem, options: "
                                               "{workload: dyadic}}\n", "job.yaml", "'workload'", "queries"))

# What is protected and where it is charged, in the spec: invalid values refused as their options are.
for _name, _line, _kw in [
    ("job_ledger_number", "ledger: 5", "'ledger' must be"),
    ("job_ledger_empty", "ledger: ''", "'ledger' must be"),
    ("job_privacy_unit_list", "privacy_unit: [person]", "'privacy_unit' must be"),
    ("job_privacy_unit_blank", "privacy_unit: ' '", "'privacy_unit' must be"),
    ("job_max_rows_per_unit_zero", "privacy_unit: sex\nmax_rows_per_unit: 0", "'max_rows_per_unit' must be"),
    ("job_max_rows_per_unit_fraction", "privacy_unit: sex\nmax_rows_per_unit: 2.5", "'max_rows_per_unit' must be"),
    ("job_max_rows_per_unit_bool", "privacy_unit: sex\nmax_rows_per_unit: true", "'max_rows_per_unit' must be"),
    ("job_max_rows_per_unit_text", "privacy_unit: sex\nmax_rows_per_unit: five", "'max_rows_per_unit' must be"),
    ("job_group_size_zero", "group_size: 0", "'group_size' must be"),
    ("job_group_size_negative", "group_size: -2", "'group_size' must be"),
    ("job_require_cap_text", "require_cap: 'yes'", "'require_cap' must be"),
    ("job_require_cap_number", "require_cap: 1", "'require_cap' must be"),
]:
    add(_name, _spec_case(_EPS + _line + "\n" + _ONE_TABLE, "job.yaml", _kw))
add("job_privacy_unit_without_bound", _spec_case(_EPS + "privacy_unit: sex\n" + _ONE_TABLE, "--max-rows-per-unit"))
add("job_privacy_unit_not_in_input", _spec_case(_EPS + "privacy_unit: person\nmax_rows_per_unit: 2\n" + _ONE_TABLE,
                                                "person", code=1))


@case
def job_ledger_is_a_directory(d):
    """The spec's ledger names a folder: refused as --ledger would be, before reading, the folder untouched."""
    case = _spec_case(_EPS + "ledger: books\n" + _ONE_TABLE, "books")(d)
    (d / "books").mkdir()
    return case


@case
def job_ledger_damaged(d):
    """The spec's ledger is not SQLite: exit 2 naming it, before reading, the file left byte-identical."""
    case = _spec_case(_EPS + "ledger: books/ledger.sqlite\n" + _ONE_TABLE, "ledger", ledger="books/ledger.sqlite")(d)
    write(d, "books/ledger.sqlite", b"not a ledger " * 100)
    return dataclasses.replace(case, damaged_ledger=True)


@case
def job_names_its_ledger_and_unit(d):
    """The spec's ledger (relative to the spec, in its folder) is charged, in the unit the spec protects."""
    good(d)
    write(d, "specs/job.yaml", "input: ../data.csv\nschema: ../schema.yaml\nepsilon: '1'\n"
                               "ledger: books/ledger.sqlite\nprivacy_unit: sex\nmax_rows_per_unit: 2\ngroup_size: 2\n"
          + _ONE_TABLE)

    def check(d: Path) -> None:
        from dphist.publishing.ledger import Ledger

        ledger = Ledger(d / "specs" / "books" / "ledger.sqlite", readonly=True)
        rows = [(r["unit"], r["epsilon_spent"]) for r in ledger.status()]
        ledger.close()
        assert rows == [("unit:sex", "1")], rows
        report = json.loads((d / "out" / "report.json").read_text())
        # 49/50 of ε for the tables (a fiftieth measures what the unit cap dropped), over 2 rows x 2 units.
        assert report["tables"][0]["epsilon_per_row"] == "0.245", report["tables"][0]
        assert report["unit_cap"]["epsilon"] == "0.02", report["unit_cap"]
    return Case(["release", "--spec", "specs/job.yaml", "--out", "out", "--quiet"], 0,
                ledger="specs/books/ledger.sqlite", check=check)

# --- accounts ---
# Data set ids and run keys are one line of visible text (empty, whitespace-only or padded, unprintable, too long:
# exit 2 before anything is read), from the command line, a job spec and the budget commands alike; the same files
# count against one account however they are named; reading a ledger that is not there is an error; and
# --require-cap refuses an uncapped data set with exit 3, nothing read or charged.


def _id_case(option: str, value: str, *keywords: str, extra: tuple[str, ...] = (), seeded: bool = False):
    def build(d: Path) -> Case:
        good(d)
        return Case(release("data.csv", option, value, *extra), 2, (option, *keywords), seeded=seeded)
    return build


for _name, _option, _value, _kw in [
    ("accounts_dataset_id_empty", "--dataset-id", "", ("empty",)),  # cron's --dataset-id "$DATASET", unset
    ("accounts_dataset_id_only_spaces", "--dataset-id", "   ", ("only whitespace",)),
    ("accounts_dataset_id_newline", "--dataset-id", "census\nother", ("U+000A",)),
    ("accounts_dataset_id_trailing_space", "--dataset-id", "census ", ("whitespace",)),
    ("accounts_dataset_id_zero_width_space", "--dataset-id", "cen\u200bsus", ("U+200B",)),
    ("accounts_dataset_id_too_long", "--dataset-id", "c" * 201, ("201 characters",)),
    ("accounts_run_key_empty", "--run-key", "", ("empty",)),
    ("accounts_run_key_newline", "--run-key", "nightly\n2026", ("U+000A",)),
    ("accounts_run_key_seven_megabytes", "--run-key", "k" * 7_000_000, ("7,000,000 characters",)),
]:
    add(_name, _id_case(_option, _value, *_kw))
add("accounts_dataset_id_empty_in_test_mode", _id_case("--dataset-id", "", "empty", extra=("--seed", "1"),
                                                       seeded=True))
add("accounts_spec_dataset_id_newline", _job(_T % "share: 1" + 'dataset_id: "census\\nother"\n', "dataset_id",
                                             "U+000A"))
add("accounts_spec_run_key_too_long", _job(_T % "share: 1" + f"run_key: {'k' * 300}\n", "run_key",
                                           "300 characters"))
add("accounts_spec_dataset_id_bidi_override", _job(_T % "share: 1" + 'dataset_id: "census\\u202e"\n', "dataset_id",
                                                   "U+202E"))

for _name, _args, _kw in [
    ("accounts_budget_set_empty_id", ["budget", "set", "", "--rho", "0.01"], ("empty",)),
    ("accounts_budget_set_only_spaces_id", ["budget", "set", "   ", "--epsilon", "1"], ("only whitespace",)),
    ("accounts_budget_set_newline_id", ["budget", "set", "a\nb", "--epsilon", "1"], ("U+000A",)),
    ("accounts_budget_show_padded_id", ["budget", "show", " census"], ("whitespace",)),
    ("accounts_budget_history_empty_id", ["budget", "history", ""], ("empty",)),
]:
    add(_name, (lambda a, k: lambda d: Case(a + ["--ledger", "ledger.sqlite"], 2, ("data set id", *k),
                                            ledger="ledger.sqlite"))(_args, _kw))

# A --ledger that names no file: reading it is an error, never an empty answer, and creates nothing.
for _name, _args in [("accounts_budget_show_missing_ledger", ["budget", "show"]),
                     ("accounts_budget_show_id_missing_ledger", ["budget", "show", "census"]),
                     ("accounts_budget_history_missing_ledger", ["budget", "history", "census"]),
                     ("accounts_budget_verify_missing_ledger", ["budget", "verify"])]:
    add(_name, (lambda a: lambda d: Case(a + ["--ledger", "typo.sqlite"], 2, ("typo.sqlite", "no such file")))(_args))


@case
def accounts_require_cap_uncapped(d):
    good(d)
    return Case(release("data.csv", "--dataset-id", "census", "--require-cap"), 3, ("'census' has no cap",
                                                                                    "nothing was read"))


@case
def accounts_require_cap_uncapped_json(d):
    return dataclasses.replace(_json(accounts_require_cap_uncapped)(d), keywords=("no cap",))


@case
def accounts_require_cap_per_person_account_uncapped(d):
    """The per-row account is capped, the per-person one (--privacy-unit) is not: a separate account."""
    good(d)
    _set_cap(d / "ledger.sqlite", "census", "10")
    return Case(release("data.csv", "--dataset-id", "census", "--require-cap", "--privacy-unit", "sex",
                        "--max-rows-per-unit", "1", "--ledger", "ledger.sqlite"), 3, ("--privacy-unit sex",),
                ledger="ledger.sqlite")


def _capped_by_real_path(layout: Callable[[Path], None], named: str, capped: str):
    """Files laid out by ``layout``, a cap of 0.5 on the real path of ``capped``, and a release of 1 naming the
    files as ``named``: refused (exit 3), because the default id is the same however the files are named."""
    def build(d: Path) -> Case:
        write(d, "schema.yaml", SCHEMA)
        layout(d)
        _set_cap(d / "ledger.sqlite", os.path.realpath(d / capped), "1/2")
        return Case(release(named, "--ledger", "ledger.sqlite"), 3, ("cap",), ledger="ledger.sqlite")
    return build


def _two_files(d: Path) -> None:
    write(d, "data/a.csv", GOOD_CSV)
    write(d, "data/2026/b.csv", GOOD_CSV)
    (d / "linked").symlink_to(d / "data", target_is_directory=True)


def _one_file(d: Path) -> None:
    write(d, "data.csv", GOOD_CSV)
    (d / "sub").mkdir()
    (d / "link.csv").symlink_to(d / "data.csv")


for _name, _layout, _named, _capped in [
    ("accounts_default_id_glob_counts_against_the_directory", _two_files, "data/*.csv", "data"),
    ("accounts_default_id_double_star_glob_counts_against_the_directory", _two_files, "data/**/*.csv", "data"),
    ("accounts_default_id_linked_directory_counts_against_the_directory", _two_files, "linked", "data"),
    ("accounts_default_id_link_to_the_file_counts_against_the_file", _one_file, "link.csv", "data.csv"),
    ("accounts_default_id_dot_dot_counts_against_the_file", _one_file, "sub/../data.csv", "data.csv"),
]:
    add(_name, _capped_by_real_path(_layout, _named, _capped))


@case
def accounts_dataset_id_decomposed_counts_against_the_composed_cap(d):
    good(d)
    _set_cap(d / "ledger.sqlite", "caf\u00e9", "1/2")
    return Case(release("data.csv", "--dataset-id", "cafe\u0301", "--ledger", "ledger.sqlite"), 3, ("cap",),
                ledger="ledger.sqlite")


@case
def accounts_input_path_with_a_line_break_needs_an_id(d):
    """Its real path cannot be a data set id: name the data set."""
    write(d, "schema.yaml", SCHEMA)
    write(d, "new\nline.csv", GOOD_CSV)
    return Case(release("new\nline.csv"), 2, ("--dataset-id",))


@case
def accounts_input_path_with_a_line_break_and_an_id(d):
    write(d, "schema.yaml", SCHEMA)
    write(d, "new\nline.csv", GOOD_CSV)
    return Case(release("new\nline.csv", "--dataset-id", "census", "--quiet"), 0, check=wrote_release("age.csv"))

# --- messages: hostile values and column types, long input echoed in messages ---------------------------------------
# Every column type through release, schema and schema --private (tests/cli/test_arrow_types.py has the full table
# of types); int64's and float64's extremes beside infinities and nan; and input of a megabyte (a file, column or
# table name, an option's value) in a message, which quotes at most about 200 characters of it.

_EXTREMES_CSV = "big,flt,cat\n" + "".join(
    f"{(9223372036854775807, -9223372036854775808, i)[i % 3]},{('nan', 'inf', '-inf', '1.7e308', '-1.7e308', i)[i % 6]},"
    f"{SECRET if i == 7 else 'abc'[i % 3]}\n" for i in range(3000))
# Without --delta a CSV column may turn out to be text: refused before reading (exit 2), nothing charged.
add("csv_int64_extremes_beside_nan_inf_floats", _discover(_EXTREMES_CSV, code=2, keywords=("delta",), delta=False,
                                                          epsilon="1", may_charge=False))
add("csv_int64_extremes_beside_nan_inf_floats_delta", _discover(_EXTREMES_CSV, code=(0, 1), epsilon="1"))
add("csv_float64_extremes_discovered", _discover(
    "x\n" + "".join(f"{('1.7e308', '-1.7e308', '1e300')[i % 3]}\n" for i in range(3000)), "--columns", "x",
    code=(0, 1)))
_NESTED_TYPES = {"list": pa.array([[1, 2], [3], [4]]), "struct": pa.array([{"a": 1}, {"a": 2}, {"a": 3}]),
                 "map": pa.array([[("k", 1)], [("k", 2)], [("k", 3)]], type=pa.map_(pa.string(), pa.int64())),
                 "binary": pa.array([SECRET.encode(), b"\xff", b"x"])}


def _typed(kind: str, args: list[str], code, keywords=(), schema: str | None = None, column=None):
    """A Parquet file with a column ``col`` of ``kind`` (a nested type, bytes, float64's extremes) and ``age``."""
    def build(d: Path) -> Case:
        column_values = column if column is not None else _NESTED_TYPES[kind]
        parquet(d, "data.parquet", pa.table({"col": column_values, "age": pa.array([10, 20, 30])}))
        if schema is not None:
            write(d, "schema.yaml", schema)
        return Case(list(args), code, keywords, may_charge=False)
    return build


for _kind in _NESTED_TYPES:
    add(f"parquet_{_kind}_column_draft", _typed(_kind, ["schema", "data.parquet"], 0))
    add(f"parquet_{_kind}_column_release", _typed(_kind, release("data.parquet", "--columns", "col", schema=None),
                                                 1, ("'col'", "cannot be counted")))
    add(f"parquet_{_kind}_column_private_schema", _typed(
        _kind, ["schema", "data.parquet", "--private", "--epsilon", "1", "--delta", "1e-6"], 1,
        ("'col'", "cannot be counted")))
    add(f"parquet_{_kind}_column_declared_categorical", _typed(
        _kind, release("data.parquet", "--columns", "col"), 1, ("'col'", "declared categorical but holds"),
        schema="columns:\n  col: {type: categorical, values: [a, b]}\n"))
add("parquet_float_extremes_declared_categorical", _typed(
    "floats", release("data.parquet", "--columns", "col"), 0,
    schema="columns:\n  col: {type: categorical, values: ['1', inf]}\n",
    column=pa.array([float("inf"), float("nan"), 1.7e308])))
add("parquet_half_floats_declared_numeric", _typed(
    "half", release("data.parquet", "--columns", "col"), 0,
    schema="columns:\n  col: {type: numeric, lower: 0, upper: 10, bins: 2}\n",
    column=pa.array(np.array([1, 2.5, 9], np.float16))))
add("parquet_half_floats_draft", _typed("half", ["schema", "data.parquet"], 0,
                                        column=pa.array(np.array([1, 2.5, 9], np.float16))))

_LONG = "n" * 1_000_000


def _long(args: list[str], code, *keywords: str, files: dict[str, str | bytes] | None = None,
          table: pa.Table | None = None):
    """A command line with a megabyte of input in it: the error line quotes a bounded part (the corpus checks its
    length) and says how long the input was."""
    def build(d: Path) -> Case:
        good(d)
        for name, content in (files or {}).items():
            write(d, name, content)
        if table is not None:
            parquet(d, "data.parquet", table)
        return Case(list(args), code, keywords)
    return build


add("long_column_name_in_csv_header", _long(release("long.csv", "--columns", "zz", schema=None), 1, "(100,000 characters)",
                                            files={"long.csv": f"{_LONG[:100_000]},b\n1,2\n"}))
add("long_column_name_in_parquet", _long(release("data.parquet", "--columns", "zz", schema=None), 1,
                                         "(1,000,000 characters)", table=pa.table({_LONG: [1, 2]})))
add("long_nested_column_name_in_parquet", _long(release("data.parquet", "--columns", _LONG, schema=None), 1,
                                                "(1,000,000 characters)", "cannot be counted",
                                                table=pa.table({_LONG: [[1], [2]]})))
add("long_columns_option", _long(release("data.csv", "--columns", _LONG), (1, 2), "(1,000,000 characters)"))
add("long_table_name_in_spec", _long(release("data.csv", "--spec", "spec.yaml", epsilon=None), 2,
                                     "(1,000,000 characters)",
                                     files={"spec.yaml": f"epsilon: 1\ntables:\n  - {{name: {_LONG}, columns: [age]}}\n"}))
add("long_field_name_in_spec", _long(release("data.csv", "--spec", "spec.yaml", epsilon=None), 2,
                                     "(1,000,000 characters)",
                                     files={"spec.yaml": f"epsilon: 1\n? {_LONG}\n: 1\ntables:\n  - {{columns: [age]}}\n"}))
add("long_category_label_in_schema", _long(release("data.csv"), 2, "(1,000,000 characters)", files={
    "schema.yaml": f"columns:\n  sex: {{type: categorical, values: [{_LONG}, {_LONG}]}}\n"}))
add("long_option_key", _long(release("data.csv", "--columns", "age", "--option", f"{_LONG}=1"), 2,
                             "(1,000,000 characters)"))
add("long_algorithm_name", _long(release("data.csv", "--columns", "age", "--algorithm", _LONG), 2,
                                 "(1,000,000 characters)"))
add("long_choice_value_for_click", _long(release("data.csv", "--noise", _LONG), 2, "--noise", "characters)"))
add("long_unknown_option_for_click", _long(release("data.csv", "--" + _LONG), 2, "characters)"))
add("long_input_path", _long(release(_LONG), 1, "characters)"))
add("long_schema_path", _long(release("data.csv", schema=_LONG), 2, "characters)"))
add("long_out_path", _long(release("data.csv", "--columns", "age", out=_LONG), 2, "characters)"))
add("long_draft_out_path", _long(["schema", "data.csv", "--out", _LONG + ".yaml"], 2, "characters)"))
add("newline_in_column_name_is_escaped", _long(release("data.csv", "--columns", "a\nb\x1b[31m"), (1, 2), "'a\\nb\\x1b[31m'"))

# --- precharge: nothing charged without a reason (every check that can fail runs before the reservation) ---


def _numbers_parquet(d: Path, name: str = "num.parquet") -> str:
    """A Parquet file whose columns are all numeric (stored types: no column can be text)."""
    rng = np.random.default_rng(5)
    n = 5_000  # enough records for discovery to find a range at epsilon 0.25
    return parquet(d, name, pa.table({"age": rng.integers(17, 90, n), "income": rng.gamma(2.0, 2e4, n),
                                      "hours": rng.integers(1, 80, n)}))


def _ledger_rows(d: Path) -> list[dict]:
    from dphist.publishing.ledger import Ledger
    ledger = Ledger(d / "ledger.sqlite")
    try:
        return ledger.status()
    finally:
        ledger.close()


def _delta_charged_as_zero(d: Path) -> None:
    """After exit 0: the report and the ledger agree that none of the unneeded delta was charged."""
    wrote_release()(d)
    report = json.loads((d / "out" / "report.json").read_text())
    assert report["delta_spent"] == "0" and report["delta_requested"] == "0.000001", report
    assert "delta_note" in report
    assert [(r["epsilon_spent"], r["delta_spent"]) for r in _ledger_rows(d)] == [("1", "0")]


@case
def precharge_delta_numbers_only_parquet_no_schema(d):
    """The README's no-schema recipe on a Parquet file of numbers: its delta is needed by no step."""
    _numbers_parquet(d)
    return Case(["release", "num.parquet", "-e", "1", "--delta", "1e-6", "-c", "age", "--discovery-share",
                 "0.5", "--ledger", "ledger.sqlite", "--out", "out", "--quiet"], 0, ledger="ledger.sqlite",
                check=_delta_charged_as_zero)


@case
def precharge_delta_every_column_declared(d):
    good(d)
    return Case(release("data.csv", "-c", "age", "--delta", "1e-6", "--ledger", "ledger.sqlite", "--quiet"), 0,
                ledger="ledger.sqlite", check=_delta_charged_as_zero)


def _schema_charged_no_delta(d: Path) -> None:
    assert "# Spent: epsilon 1, delta 0." in (d / "s.yaml").read_text()
    assert [(r["epsilon_spent"], r["delta_spent"]) for r in _ledger_rows(d)] == [("1", "0")]


@case
def precharge_private_schema_delta_numbers_only(d):
    _numbers_parquet(d)
    return Case(["schema", "num.parquet", "--private", "-e", "1", "--delta", "1e-6", "-c", "age", "--ledger",
                 "ledger.sqlite", "-o", "s.yaml"], 0, ledger="ledger.sqlite", check=_schema_charged_no_delta)


def _engine_case(engine: str, master: str, *modules: str):
    """A release on ``engine`` whose ``--master`` cannot be used: refused before the reservation (exit 2)."""
    def build(d: Path) -> Case:
        import importlib.util
        if any(importlib.util.find_spec(m) is None for m in modules):
            import pytest
            pytest.skip(f"the {engine} extra is not installed")
        good(d)
        return Case(release("data.csv", "-c", "age", "--engine", engine, "--master", master), 2, ("--master",))
    return build


add("precharge_dask_master_not_an_address", _engine_case("dask", "bogus", "dask", "distributed"))
add("precharge_dask_master_refused", _engine_case("dask", "tcp://127.0.0.1:1", "dask", "distributed"))
add("precharge_dask_master_unknown_scheme", _engine_case("dask", "inproc://nowhere", "dask", "distributed"))
add("precharge_spark_master_not_a_master", _engine_case("spark", "bogus://", "pyspark"))
add("precharge_spark_master_refused", _engine_case("spark", "spark://127.0.0.1:1", "pyspark"))
add("precharge_spark_master_long", _engine_case("spark", "x" * 5000, "pyspark"))

_BINS = "columns:\n  x: {type: numeric, lower: 0, upper: %d, bins: %d}\n"


def _costly(bins: int, algorithm: str, *options: str, keywords: tuple[str, ...] = ("ceiling",)):
    """A release whose algorithm options ask for more work than its ceiling: refused before reading (exit 2)."""
    def build(d: Path) -> Case:
        write(d, "schema.yaml", _BINS % (bins, bins))
        write(d, "data.csv", "x,note\n" + "".join(f"{i % bins},{SECRET}\n" for i in range(50)))
        args = release("data.csv", "-c", "x", "-a", algorithm)
        for o in options:
            args[-2:-2] = ["--option", o]
        return Case(args, 2, (algorithm, *keywords))
    return build


add("precharge_mwem_replay_huge", _costly(64, "mwem", "replay=100000000", keywords=("replay", "ceiling")))
add("precharge_mwem_rounds_on_4096_cells", _costly(4096, "mwem", "rounds=400", keywords=("rounds", "ceiling")))
add("precharge_mwem_rounds_and_replay_at_max", _costly(4096, "mwem", "rounds=4096", "replay=9007199254740992",
                                                       keywords=("ceiling",)))
add("precharge_noisefirst_grid_past_memory", _costly(10_000, "noisefirst", "grid=10000", keywords=("grid",)))
add("precharge_structurefirst_grid_past_memory", _costly(20_000, "structurefirst", "cap=1", "grid=20000",
                                                         keywords=("grid",)))
add("precharge_dpcube_max_depth_huge", _costly(200_000, "dpcube", "max_depth=9007199254740992",
                                               keywords=("max_depth", "ceiling")))


def _starved(algorithm: str, *options: str, budget: tuple[str, ...] = ("--epsilon", "1"), bins: int = 64,
             keywords: tuple[str, ...] = ()):
    """A release whose options leave one of its algorithm's steps too little budget for exact noise: refused
    before reading (exit 2), not after the data were read."""
    def build(d: Path) -> Case:
        write(d, "schema.yaml", _BINS % (bins, bins))
        write(d, "data.csv", "x,note\n" + "".join(f"{i % bins},{SECRET}\n" for i in range(50)))
        args = ["release", "data.csv", "--schema", "schema.yaml", *budget, "-c", "x", "-a", algorithm,
                "--out", "out"]
        for o in options:
            args[-2:-2] = ["--option", o]
        return Case(args, 2, (algorithm, *keywords))
    return build


add("precharge_ahp_ratio_tiny", _starved("ahp", "ratio=1e-30", keywords=("ratio",)))
add("precharge_ahp_ratio_near_one", _starved("ahp", "ratio=0.999999999999", budget=("--epsilon", "1e-6")))
add("precharge_mwem_total_share_tiny_rho", _starved("mwem", "total_share=1e-30", budget=("--rho", "0.5")))
add("precharge_dpcube_alpha_tiny", _starved("dpcube", "alpha=1e-30"))
add("precharge_privtree_structure_share_tiny", _starved("privtree", "structure_share=1e-30"))
add("precharge_dawa_ratio_tiny", _starved("dawa", "ratio=1e-30"))
add("precharge_auto_total_share_tiny", _starved("auto", "total_share=1e-30"))
add("precharge_efpa_epsilon_too_small_for_its_cells", _starved("efpa", budget=("--epsilon", "1e-6"), bins=16384))
add("precharge_privelet_l2_weights_under_pure_epsilon", _starved("privelet", "weights=l2", keywords=("l2",)))


@case
def precharge_csv_wrong_type_mid_file(d):
    """A declared numeric column with a text value half-way through: found only while reading, after the charge;
    the line says the run read data and its budget stays spent."""
    write(d, "schema.yaml", SCHEMA)
    write(d, "data.csv", "age,sex\n" + "30,F\n" * 500 + f"{SECRET},M\n" + "40,M\n" * 500)
    return Case(release("data.csv", "-c", "age"), 1, ("data.csv", "'age'", "stays spent", "dphist budget show"),
                may_charge=True)


add("precharge_csv_wrong_type_mid_file_json", _json(CASES["precharge_csv_wrong_type_mid_file"]))


# --- schema --private and the cap -----------------------------------------------------------------------------
# schema --private charges the ledger like a release: --require-cap refuses an uncapped data set before reading.


@case
def schema_private_require_cap_uncapped(d):
    good(d)
    return Case(["schema", "data.csv", "--private", "-e", "1", "--delta", "1e-6", "--columns", "age",
                 "--dataset-id", "census", "--require-cap", "-o", "s.yaml"], 3, ("'census' has no cap", "nothing was read"))


@case
def schema_draft_require_cap_flag(d):
    good(d)
    return Case(["schema", "data.csv", "--require-cap", "-o", "s.yaml"], 2, ("--require-cap", "--private only"))


# --- check: the schema against the data (spends nothing, writes nothing; its findings exit 6, not listed here) ---


def _check(*extra: str, data: str = "data.csv", schema: str = "schema.yaml") -> list[str]:
    return ["check", data, "--schema", schema, *extra]


@case
def check_fits(d):
    good(d)
    return Case(_check(), 0)


@case
def check_missing_input(d):
    write(d, "schema.yaml", SCHEMA)
    return Case(_check(data="nosuch.csv"), 1, ("nosuch.csv",))


@case
def check_random_binary_input(d):
    good(d)
    write(d, "data.csv", np.random.default_rng(23).integers(0, 256, 20_000, dtype=np.uint8).tobytes()
          + SECRET.encode())
    return Case(_check(), 1, ("data.csv",))


@case
def check_ragged_row(d):
    good(d, data=f"age,sex\n10,F\n20,M,{SECRET}\n")
    return Case(_check(), 1, ("data.csv", "line 3"))


@case
def check_schema_not_yaml(d):
    good(d)
    write(d, "schema.yaml", f"columns: [{SECRET}\n")
    return Case(_check(), 2, ("schema.yaml",))


@case
def check_schema_missing_file(d):
    good(d)
    return Case(_check(schema="nosuch.yaml"), 2, ("nosuch.yaml",))


@case
def check_without_schema(d):
    good(d)
    return Case(["check", "data.csv"], 2, ("--schema",))


@case
def check_columns_undeclared(d):
    good(d)
    return Case(_check("--columns", "age,note"), 2, ("'note'", "not declared"))


@case
def check_unit_without_cap(d):
    good(d)
    return Case(_check("--privacy-unit", "note"), 2, ("--max-rows-per-unit",))


@case
def check_unit_cap_zero(d):
    good(d)
    return Case(_check("--privacy-unit", "note", "--max-rows-per-unit", "0"), 2, ("--max-rows-per-unit",))


@case
def check_unit_column_missing(d):
    good(d)
    return Case(_check("--privacy-unit", "who", "--max-rows-per-unit", "1"), 1, ("'who'", "not found"))


@case
def check_unknown_format(d):
    good(d)
    return Case(_check("--format", "xml"), 2, ("--format",))
