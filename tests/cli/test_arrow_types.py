"""Every kind of Parquet column through every command that reads one: the draft (``dphist schema``), private
discovery (``schema --private``), a release that discovers the column, and releases that declare it numeric,
categorical or date.  Types no table can count (lists, structs, maps, bytes) are one clear line naming the column
and its type (exit 1, before any row is read; the draft leaves them out with a comment); the others work, whatever
their values (int64's and float64's extremes, infinities, nan).  Nothing ends in an internal error.

The table below states what each type can be counted as, independently of ``dphist.read.sources.kinds_of``, which
the last test checks against it.
"""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_harness import invoke
from dphist.read.sources import kinds_of

N = 2000
_I = np.arange(N) % 50
_INT64 = np.iinfo(np.int64)

NUMBER, DATE, LABEL = "numeric", "date", "categorical"
# name, column, the kinds it can be declared as
TYPES = [
    ("list", pa.array([[int(i), 1] for i in _I]), set()),
    ("large_list", pa.array([[int(i)] for i in _I], type=pa.large_list(pa.int64())), set()),
    ("fixed_size_list", pa.array([[int(i), 2] for i in _I], type=pa.list_(pa.int64(), 2)), set()),
    ("struct", pa.array([{"a": int(i), "b": "x"} for i in _I]), set()),
    ("map", pa.array([[("k", int(i))] for i in _I], type=pa.map_(pa.string(), pa.int64())), set()),
    ("binary", pa.array([b"\xff%d" % (i % 5) for i in _I], type=pa.binary()), set()),
    ("large_binary", pa.array([b"x%d" % (i % 5) for i in _I], type=pa.large_binary()), set()),
    ("fixed_size_binary", pa.array([bytes([i % 5, 255]) for i in _I], type=pa.binary(2)), set()),
    ("dictionary_of_text", pa.array([f"c{i % 5}" for i in _I]).dictionary_encode(), {LABEL, DATE}),
    ("dictionary_of_int", pa.array(_I).dictionary_encode(), {NUMBER, LABEL}),
    ("decimal128", pa.array([decimal.Decimal(int(i)) / 4 for i in _I], type=pa.decimal128(10, 2)), {NUMBER, LABEL}),
    ("decimal256_huge", pa.array([decimal.Decimal(10**30 + int(i)) for i in _I], type=pa.decimal256(40, 0)),
     {NUMBER, LABEL}),
    ("timestamp_with_zone", pa.array([dt.datetime(2024, 1, 1 + i % 28, tzinfo=dt.timezone.utc) for i in _I],
                                     type=pa.timestamp("us", tz="Europe/Paris")), {DATE, LABEL}),
    ("timestamp_ns", pa.array([dt.datetime(2024, 1, 1 + i % 28) for i in _I], type=pa.timestamp("ns")), {DATE, LABEL}),
    ("date64", pa.array([dt.date(2024, 1, 1 + i % 28) for i in _I], type=pa.date64()), {DATE, LABEL}),
    ("time64", pa.array([dt.time(i % 24) for i in _I], type=pa.time64("us")), {LABEL}),
    ("duration", pa.array([int(i % 5) for i in _I], type=pa.duration("s")), {LABEL}),
    ("boolean", pa.array([bool(i % 2) for i in _I]), {LABEL}),
    ("large_string", pa.array([f"c{i % 5}" for i in _I], type=pa.large_string()), {LABEL, DATE}),
    ("nulls_only", pa.nulls(N), {NUMBER, DATE, LABEL}),
    ("uint64_max", pa.array([np.iinfo(np.uint64).max - int(i) for i in _I], type=pa.uint64()), {NUMBER, LABEL}),
    ("int64_extremes", pa.array([int(_INT64.max) if i % 2 else int(_INT64.min) for i in _I]), {NUMBER, LABEL}),
    ("float64_extremes", pa.array([1.7e308 if i % 2 else -1.7e308 for i in _I]), {NUMBER, LABEL}),
    ("float64_inf_nan", pa.array([(np.inf, np.nan, -np.inf, 1.0)[i % 4] for i in _I]), {NUMBER, LABEL}),
    ("float16", pa.array(_I.astype(np.float16), type=pa.float16()), {NUMBER, LABEL}),
]
DECLARED = {NUMBER: "{type: numeric, lower: 0, upper: 100, bins: 4}",
            LABEL: "{type: categorical, values: ['1', c1, 'true', x]}",
            DATE: "{type: date, lower: 2000-01-01, upper: 2030-01-01, unit: year}"}


def _error(outcome) -> str:
    """The one error line of a failed run (after the test-mode banner)."""
    assert not outcome.crash, outcome.crash
    lines = [line for line in outcome.stderr.splitlines() if "TEST MODE" not in line]
    assert len(lines) == 1 and lines[0].startswith("Error: "), outcome.stderr
    assert "internal error" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name, column, kinds", TYPES, ids=[t[0] for t in TYPES])
def test_each_type_through_each_command(tmp_path, name, column, kinds):
    data = tmp_path / "data.parquet"
    pq.write_table(pa.table({"col": column, "k": pa.array(_I)}), data)
    # Discovery finds the categories of what is neither a number nor a date by partition selection (needs δ).
    labels = pa.types.is_null(column.type) or not kinds & {NUMBER} and not (
        pa.types.is_date(column.type) or pa.types.is_timestamp(column.type))
    delta = ["--delta", "1e-6"] if labels else []

    draft = invoke(["schema", str(data)])
    assert draft.exit_code == 0, draft.stderr
    if kinds:
        assert "\n  col: {type: " in draft.stdout, draft.stdout
    else:
        assert "# 'col': holds " in draft.stdout and "which no table can count" in draft.stdout, draft.stdout

    discovering = [["schema", str(data), "--private", "--epsilon", "10", "--seed", "1", "--columns", "col", *delta],
                   ["release", str(data), "--epsilon", "10", "--seed", "1", "--columns", "col", *delta,
                    "--out", str(tmp_path / "discovered")]]
    for args in discovering:
        outcome = invoke(args)
        if kinds:
            # Discovery may find too few records to release (nulls only): one clear line, never a crash.
            assert outcome.exit_code == 0 or "records" in _error(outcome), (args[0], outcome.stderr)
        else:
            assert outcome.exit_code == 1, (args[0], outcome.stderr)
            line = _error(outcome)
            assert "'col'" in line and "cannot be counted" in line, line

    for kind, declaration in DECLARED.items():
        (tmp_path / f"{kind}.yaml").write_text(f"columns:\n  col: {declaration}\n")
        outcome = invoke(["release", str(data), "--schema", str(tmp_path / f"{kind}.yaml"), "--epsilon", "1",
                          "--seed", "1", "--out", str(tmp_path / kind)])
        if kind in kinds:
            # Text declared as dates is read row by row: labels that are not dates are a data error there.
            assert outcome.exit_code == 0 or (kind == DATE and "not a date" in _error(outcome)), (kind, outcome.stderr)
        else:
            assert outcome.exit_code == 1, (kind, outcome.stderr)
            line = _error(outcome)
            assert f"'col' is declared {kind} but holds" in line, line


@pytest.mark.parametrize("name, column, kinds", TYPES, ids=[t[0] for t in TYPES])
def test_kinds_of_agrees_with_the_table(name, column, kinds):
    assert set(kinds_of(column.type)) == kinds
