"""The interval columns and what they cover (dphist/publishing/intervals.py, and assemble.py's use of it): the same
four columns in every table whatever the algorithm, in every format; ci_covers and bucket from Estimate.groups;
the report's interval entry per table, derived and separate marginals included; the summary's line per table whose
intervals are not for each cell's count."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import dphist
from dphist.algorithms.base import Estimate
from dphist.declare.schema import parse_schema
from dphist.publishing import intervals, tidy, writers
from dphist.publishing.assemble import tidy_table
from dphist.publishing.planning import VALUE_COLUMNS
from dphist.read.counting import TableShape

from conftest import SAMPLE

CENSUS, SCHEMA = SAMPLE / "census.csv", SAMPLE / "census.schema.yaml"
SHAPE = TableShape("t", tuple(parse_schema({"columns": {
    "a": {"type": "numeric", "lower": 0, "upper": 6, "bins": 6},
    "b": {"type": "categorical", "values": ["x", "y"]}}}).columns.values()))


def test_value_columns_end_with_the_interval_columns():
    assert VALUE_COLUMNS == ("count", "noisy_count") + intervals.COLUMNS


def test_buckets_are_numbered_in_order_of_first_appearance_and_single_cells_have_none():
    groups = np.array([[7, 7], [3, 9], [3, 5], [7, 2]])  # C order: 7 7 3 9 3 5 7 2; 9, 5 and 2 have one cell
    assert intervals.buckets(groups).tolist() == [0, 0, 1, -1, 1, -1, 0, -1]
    assert intervals.buckets(np.arange(6)) is None and intervals.buckets(None) is None


def test_bounds_round_outward_and_cut_at_zero():
    lower, upper = intervals.bounds(np.array([10.0, 1.234, -3.0, 5.0]), np.array([2.0, 0.0011, 1.0, 0.5]))
    assert lower.tolist() == [8.0, 1.23, 0.0, 4.5] and upper.tolist() == [12.0, 1.24, 0.0, 5.5]
    # a float that is a whole number of hundredths up to rounding stays put
    assert intervals.bounds(np.array([1234.57]), 0.0)[0].tolist() == [1234.57]


def estimates():
    values = np.arange(12, dtype=np.float64).reshape(6, 2)
    groups = np.repeat(np.array([4, 4, 1, 1, 1, 0]), 2).reshape(6, 2)
    groups[5, 1] = 8  # two buckets of one cell at the end
    return {
        "count_exact": Estimate(values=values, variance=np.broadcast_to(2.0, (6, 2)),
                                halfwidth=np.broadcast_to(3.0, (6, 2))),
        "count_normal": Estimate(values=values, variance=np.full((6, 2), 4.0)),
        "share": Estimate(values=values, variance=np.full((6, 2), 1.0), groups=groups),
        "none": Estimate(values=values, no_interval="a reason"),
        "silent": Estimate(values=values),
    }


@pytest.mark.parametrize("name", ["count_exact", "count_normal", "share", "none", "silent"])
def test_every_table_has_the_four_interval_columns(name):
    estimate = estimates()[name]
    frame = tidy_table(SHAPE, estimate, raw=True).frame()
    assert list(frame.columns) == ["a_lower", "a_upper", "b", *VALUE_COLUMNS]
    covers, bucket = frame["ci_covers"], frame["bucket"]
    if name.startswith("count"):
        half = 3.0 if name == "count_exact" else 1.959963984540054 * 2
        assert (covers == "count").all() and bucket.isna().all()
        assert np.allclose(frame["ci_upper"], np.ceil((frame["noisy_count"] + half) * 100) / 100)
    elif name == "share":
        assert covers.tolist() == ["bucket share"] * 10 + ["count"] * 2
        assert bucket.tolist()[:10] == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1] and bucket[10:].isna().all()
        assert frame["ci_lower"].notna().all()
    else:
        assert covers.isna().all() and bucket.isna().all()
        assert frame["ci_lower"].isna().all() and frame["ci_upper"].isna().all()


def test_the_report_says_what_the_intervals_cover():
    described = {name: intervals.describe(e) for name, e in estimates().items()}
    assert described["count_exact"]["covers"] == "count" and described["count_exact"]["method"].startswith("exact")
    assert described["count_normal"]["covers"] == "count" and "normal" in described["count_normal"]["method"]
    assert described["share"]["covers"] == "bucket share" and "bucket" in described["share"]["method"]
    assert described["none"] == {"covers": "none", "method": "none", "reason": "a reason"}
    assert described["silent"]["reason"] == intervals.NO_VARIANCE
    # a table whose buckets are all single cells covers counts
    single = Estimate(values=np.zeros(4), variance=np.ones(4), groups=np.arange(4))
    assert intervals.describe(single)["covers"] == "count"


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
@pytest.mark.parametrize("name", ["share", "none"])
def test_streamed_interval_columns_write_what_the_whole_frame_writes(tmp_path, fmt, name, monkeypatch):
    """In chunks of 5 rows (some chunks all of one kind, or all empty): the same bytes, Parquet the same table."""
    monkeypatch.setattr(tidy, "CHUNK_ROWS", 5)
    table = tidy_table(SHAPE, estimates()[name], raw=True)
    writers._write_table(tmp_path / f"streamed.{fmt}", table, fmt)
    writers._write_table(tmp_path / f"whole.{fmt}", table.frame(), fmt)
    streamed, whole = (tmp_path / f"streamed.{fmt}").read_bytes(), (tmp_path / f"whole.{fmt}").read_bytes()
    if fmt == "parquet":
        back = pq.read_table(io.BytesIO(streamed))
        assert back.equals(pq.read_table(io.BytesIO(whole)))
        assert str(back.schema.field("bucket").type) == "int64"
        assert back.column("ci_covers").to_pylist()[:1] == (["bucket share"] if name == "share" else [None])
    elif fmt == "json":
        assert streamed == whole
        rows = json.loads(streamed)
        assert rows[0]["bucket"] == (0 if name == "share" else None) and rows[-1]["bucket"] is None
    else:
        assert streamed == whole
        lines = streamed.decode().splitlines()
        assert lines[0].endswith(",ci_covers,bucket")
        assert lines[1].endswith(",bucket share,0" if name == "share" else ",,,,")


def release(tmp_path, **options):
    return dphist.release(str(CENSUS), 1, str(SCHEMA), seed=3, ledger=tmp_path / "l.sqlite", **options)


def test_summary_has_a_line_for_tables_without_count_intervals(tmp_path):
    result = release(tmp_path, columns="age", algorithm="ahp")
    (table,) = result.report["tables"]
    assert table["interval"]["covers"] == "bucket share" and table["expected_cell_sd"] is None
    assert "intervals cover bucket shares" in result.summary()
    result = release(tmp_path, columns="age", algorithm="mwem")
    (table,) = result.report["tables"]
    assert table["interval"]["covers"] == "none" and "multiplicative-weights" in table["interval"]["reason"]
    assert f"no intervals: {table['interval']['reason']}" in result.summary()
    result = release(tmp_path, columns="age", algorithm="identity")
    assert result.report["tables"][0]["interval"]["covers"] == "count"
    assert "intervals" not in result.summary().split("\n", 2)[-1]
    (note,) = [n for n in result.report["notes"] if n.startswith("ci_lower/ci_upper")]
    assert "ci_covers" in note and "bucket share" in note


def test_derived_marginals_of_an_identity_table_cover_counts_and_of_others_say_why_not(tmp_path):
    """Strategy full: a marginal cell sums k cells of the full table; under identity its noise variance is k times
    a cell's (independent noise), so its interval is noisy_count ± 1.96·√(k·v) (outward to 2 decimals)."""
    marginals = "age,sex;sex,education"
    result = release(tmp_path, marginals=marginals, marginal_strategy="full")
    full = result.report["marginals"]["full_table"]
    variance = full["steps"][0]["noise_sd"] ** 2
    for report in result.report["tables"]:
        frame = result.tables[report["name"]]
        assert list(frame.columns)[-6:] == list(VALUE_COLUMNS)
        assert report["interval"]["covers"] == "count" and (frame["ci_covers"] == "count").all()
        k = full["cells"] // report["cells"]
        half = 1.959963984540054 * np.sqrt(k * variance)
        assert np.allclose(frame["ci_upper"], frame["noisy_count"] + half, atol=0.011)
    hb = release(tmp_path, marginals=marginals, marginal_strategy="full", algorithm="hb")
    for report in hb.report["tables"]:
        frame = hb.tables[report["name"]]
        assert report["interval"]["covers"] == "none" and "hb" in report["interval"]["reason"]
        assert frame["ci_lower"].isna().all() and frame["ci_covers"].isna().all()


def test_separate_marginals_cover_counts(tmp_path):
    result = release(tmp_path, marginals="age,sex;sex,education", marginal_strategy="separate")
    for report in result.report["tables"]:
        frame = result.tables[report["name"]]
        assert list(frame.columns)[-6:] == list(VALUE_COLUMNS)
        assert report["interval"]["covers"] == "count" and "least-squares" in report["interval"]["method"]
        assert (frame["ci_covers"] == "count").all() and frame["bucket"].isna().all()
        half = 1.959963984540054 * report["expected_cell_sd"]
        assert np.all(frame["ci_upper"] >= frame["noisy_count"] + half - 1e-6)
        assert np.all(frame["ci_upper"] <= frame["noisy_count"] + half + 0.01 + 1e-4)
