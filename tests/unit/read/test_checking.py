"""dphist.read.checking: the schema against the data, read as a release reads it.

The check must report what a release would count, so its figures are compared with the release's own counting
pass (``count_tables`` over the source's batches, with the unit cap where there is one), and its conversion of
CSV text with Arrow's CSV reader, value by value."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE
from dphist.declare.schema import load_schema, parse_schema
from dphist.errors import DataError, UsageError
from dphist.privacy import SeededBits
from dphist.read import checking
from dphist.read.checking import check_data, csv_numbers, suggestion, text_dates
from dphist.read.contribution import UnitBound, UnitColumn
from dphist.read.counting import TableShape, count_tables
from dphist.read.sources import open_source


def released_total(source, schema, names, unit: UnitBound | None = None) -> int:
    """The rows a release's counting pass puts in the table over ``names`` (the sum of its true counts)."""
    columns = {n: schema[n] for n in names}
    readers = dict(columns)
    if unit is not None and unit.column not in readers:
        readers[unit.column] = UnitColumn(unit.column)
    src = open_source(source)
    (counts,) = count_tables(src.batches(readers), [TableShape("t", tuple(columns.values()))], src.name, unit,
                             SeededBits(1))
    return int(counts.sum())


def one(report, name):
    (found,) = [c for c in report.columns if c.name == name]
    return found


# ---- reading text as the release does -----------------------------------------------------------------------

NUMBER_TEXTS = [" 12 ", "12", "1e3", "+5", "-5", "inf", "-Inf", "nan", "NaN", "0x10", "1_000", "１２", "12.", ".5",
                "1,5", "12,5", " ", "", "\t3", "5\t", "null", "n/a", "N/A", "1.5E+2", "1e400", "-0", "3 4", "٣",
                "infinity", "\u00a05", "5\u00a0", "\x0b5", "1.2.3", "e5", "5e", "- 1", "nan(abc)", "NaN(x y)",
                "nan(", "infinit", "+nan", "1e+", "0x1p3"]


@pytest.mark.parametrize("text", NUMBER_TEXTS)
def test_csv_numbers_read_each_value_as_the_csv_reader_does(text):
    """The quoted value, so that every text reaches the reader as written (an empty one included)."""
    data = ('x\n"' + text.replace('"', '""') + '"\n').encode()
    options = dict(null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False)
    try:
        expected = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
            column_types={"x": pa.float64()}, **options)).column(0).to_pylist()[0]
    except pa.ArrowInvalid:
        expected = "refused"
    text_column = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
        column_types={"x": pa.dictionary(pa.int32(), pa.string())}, **options)).column(0).combine_chunks()
    values, refused = csv_numbers(text_column)
    got = "refused" if refused[0] else values[0].as_py()
    if isinstance(expected, float) and np.isnan(expected):
        assert got != got
    else:
        assert got == expected


def test_csv_numbers_find_the_refused_among_many_distinct_values():
    """Values known to convert or to be refused are not tried one by one; the result is the same."""
    texts = [str(i) for i in range(500)] + [f"{i},5" for i in range(500)] + ["nan(q)", "Inf", "1e3", "n/a"]
    values, refused = csv_numbers(pa.array(texts * 2).dictionary_encode())
    expected = [t.endswith(",5") or t == "n/a" for t in texts] * 2
    assert refused.tolist() == expected
    assert values.to_pylist()[:3] == [0.0, 1.0, 2.0] and values.to_pylist()[1001:1004] == [float("inf"), 1000.0, None]
    assert values.null_count == sum(expected)


def test_csv_numbers_mark_only_the_refused_rows_and_keep_nulls():
    text = pa.array(["1", None, "n/a", "2.5", "n/a", " 7 ", "12,5"]).dictionary_encode()
    values, refused = csv_numbers(text)
    assert refused.tolist() == [False, False, True, False, True, False, True]
    assert values.to_pylist() == [1.0, None, None, 2.5, None, 7.0, None]


def test_text_dates_mark_what_days_since_epoch_refuses():
    text = pa.array(["2024-03-01", "2024-02-30", None, "2024-03-01T23:30:00-05:00", "tomorrow", ""])
    values, refused = text_dates(text)
    assert refused.tolist() == [False, True, False, False, True, True]
    assert [v.isoformat() if v else None for v in values.to_pylist()] == ["2024-03-01", None, None, "2024-03-01",
                                                                         None, None]


@pytest.mark.parametrize("label, meant, differs", [
    ("Very Good", "Very good", "case"),
    (" Bachelors", "Bachelors", "whitespace"),
    ("Some  college", "Some college", "whitespace"),
    ("SOME COLLEGE ", "Some college", "case and whitespace"),
    ("Bachelor", "Bachelors", None),
    ("zzz", None, None),
])
def test_suggestion_names_the_declared_value_and_how_it_differs(label, meant, differs):
    assert suggestion(label, ("Very good", "Bachelors", "Some college")) == (meant, differs)


# ---- what a release would count -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["census.csv", "census.parquet"])
def test_counted_rows_are_what_the_release_counts(name):
    schema = load_schema(SAMPLE / "census.schema.yaml")
    report = check_data(SAMPLE / name, SAMPLE / "census.schema.yaml")
    assert report.rows == 60_000
    for column in report.columns:
        assert column.status == "read"
        assert column.counted == released_total(SAMPLE / name, schema, [column.name]), column.name
    # The sample's only loss: its null incomes, dropped as declared (a note, not a mismatch).
    assert report.problems() == [] and report.notes() == ["'income': 1,184 nulls, dropped as the schema says"]
    income = one(report, "income")
    assert (income.nulls, income.above, income.low, income.high) == (1_184, 742, 0, 12_836_000)


def test_a_table_over_several_columns_counts_the_rows_kept_on_every_axis(tmp_path):
    frame = pd.DataFrame({"x": [1, 2, 50, None, 3, 4], "c": ["a", "b", "a", "a", "zz", None]})
    frame.to_csv(tmp_path / "d.csv", index=False)
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 2,
                                             "out_of_domain": "drop"},
                                       "c": {"type": "categorical", "values": ["a", "b"], "nulls": "category"}}})
    report = check_data(tmp_path / "d.csv", schema, "x,c")
    assert report.table == ["x", "c"]
    assert report.table_counted == released_total(tmp_path / "d.csv", schema, ["x", "c"]) == 3
    x, c = one(report, "x"), one(report, "c")
    assert (x.counted, x.above, x.nulls, c.counted, c.undeclared_rows, c.nulls) == (4, 1, 1, 5, 1, 1)


@pytest.mark.parametrize("policy, counted", [("clamp", 10), ("drop", 5)])
def test_out_of_domain_rows_are_clamped_or_dropped_as_declared(tmp_path, policy, counted):
    (tmp_path / "d.csv").write_text("x\n-5\n-1\n0\n3\n9.5\n10\n11\ninf\n4\n5\n")
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 5,
                                             "out_of_domain": policy}}})
    x = one(check_data(tmp_path / "d.csv", schema), "x")
    assert (x.below, x.above, x.counted, x.low, x.high) == (2, 3, counted, -5, float("inf"))
    assert x.counted == released_total(tmp_path / "d.csv", schema, ["x"])
    assert (policy == "drop") == any("outside the domain" in p for p in x.notes()) and not x.problems()
    assert x.as_dict()["max"] == "inf"


@pytest.mark.parametrize("nulls, counted, problem", [("drop", 3, True), ("category", 5, False)])
def test_nulls_are_dropped_or_counted_as_declared(tmp_path, nulls, counted, problem):
    (tmp_path / "d.csv").write_text("x,d\n1,2024-01-05\n,\n2,2024-02-01\nnan,\n3,2024-03-01\n")
    schema = parse_schema({"columns": {
        "x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 5, "nulls": nulls},
        "d": {"type": "date", "lower": "2024-01-01", "upper": "2025-01-01", "unit": "month", "nulls": nulls}}})
    report = check_data(tmp_path / "d.csv", schema)
    for name in ("x", "d"):
        column = one(report, name)
        assert (column.nulls, column.counted) == (2, counted)
        assert column.counted == released_total(tmp_path / "d.csv", schema, [name])
        assert bool(column.notes()) == problem and not column.problems()
    assert one(report, "d").as_dict()["min"] == "2024-01-05"


def test_values_a_release_cannot_read_are_counted_with_examples(tmp_path):
    rows = ["12", "n/a", "7", '"12,5"', "", "n/a", "abc", "40", "n/a", "9"]
    (tmp_path / "d.csv").write_text("x,d\n" + "".join(f"{v},2024-01-0{i % 9 + 1}\n" for i, v in enumerate(rows)))
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 100, "bins": 10},
                                       "d": {"type": "date", "lower": "2024-01-01", "upper": "2024-02-01"}}})
    x = one(check_data(tmp_path / "d.csv", schema), "x")
    assert (x.type_errors, x.first_type_error, x.nulls, x.counted, x.dropped) == (5, 2, 1, 4, 1)
    assert x.type_examples == ["n/a", "12,5", "abc"]
    assert x.problems()[0] == ("'x': 5 values a release cannot read as numeric (it would stop at the first, after "
                               "charging the budget)")
    # What the release does with the same file: it stops, at that row.
    with pytest.raises(DataError, match="line 3, column 'x': value is not a number"):
        released_total(tmp_path / "d.csv", schema, ["x"])


def test_text_dates_in_parquet_that_a_release_cannot_read_are_counted(tmp_path):
    pq.write_table(pa.table({"d": ["2024-01-02", "someday", "2024-01-03", None]}), tmp_path / "d.parquet")
    schema = parse_schema({"columns": {"d": {"type": "date", "lower": "2024-01-01", "upper": "2024-02-01"}}})
    d = one(check_data(tmp_path / "d.parquet", schema), "d")
    assert (d.type_errors, d.type_examples, d.counted, d.nulls) == (1, ["someday"], 2, 1)
    with pytest.raises(DataError, match="not a date"):
        released_total(tmp_path / "d.parquet", schema, ["d"])


def test_a_label_spanning_a_line_break_is_a_value_a_release_cannot_read(tmp_path):
    (tmp_path / "d.csv").write_text('c\na\n"a\nb"\nb\n')
    schema = parse_schema({"columns": {"c": {"type": "categorical", "values": ["a", "b"]}}})
    c = one(check_data(tmp_path / "d.csv", schema), "c")
    assert (c.type_errors, c.type_examples, c.counted, c.nulls, c.undeclared_rows) == (1, ["a\nb"], 2, 0, 0)
    with pytest.raises(DataError, match="spans a line break"):
        released_total(tmp_path / "d.csv", schema, ["c"])


def test_undeclared_labels_are_counted_by_label_most_frequent_first(tmp_path):
    labels = ["Very Good"] * 5 + ["Fair "] * 3 + ["good"] * 2 + ["Excellent", "Poor"]
    pd.DataFrame({"q": labels}).to_parquet(tmp_path / "d.parquet")
    schema = parse_schema({"columns": {"q": {"type": "categorical", "values": ["Very good", "Fair", "Poor"]}}})
    q = one(check_data(tmp_path / "d.parquet", schema), "q")
    assert q.counted == released_total(tmp_path / "d.parquet", schema, ["q"]) == 1
    assert q.top_labels() == [
        {"label": "Very Good", "rows": 5, "suggestion": "Very good", "differs": "case"},
        {"label": "Fair ", "rows": 3, "suggestion": "Fair", "differs": "whitespace"},
        {"label": "good", "rows": 2, "suggestion": "Very good", "differs": None},  # difflib's closest
        {"label": "Excellent", "rows": 1, "suggestion": None, "differs": None}]


def test_labels_past_the_tracked_number_are_counted_together(tmp_path, monkeypatch):
    monkeypatch.setattr(checking, "TRACKED_LABELS", 2)
    pd.DataFrame({"q": ["u", "v", "v", "w", "x", "u"]}).to_parquet(tmp_path / "d.parquet")
    schema = parse_schema({"columns": {"q": {"type": "categorical", "values": ["a"]}}})
    q = one(check_data(tmp_path / "d.parquet", schema), "q")
    assert dict(q.undeclared) == {"u": 2, "v": 2} and q.undeclared_untracked == 2 and q.undeclared_rows == 6


def test_the_unit_cap_drops_each_units_rows_past_k(tmp_path):
    """50 units of 4 rows and 100 of 1 row, at most 2 each: 100 of the 300 rows are dropped, a third."""
    units = [f"u{i}" for i in range(50) for _ in range(4)] + [f"v{i}" for i in range(100)]
    pd.DataFrame({"person": units, "x": np.arange(300) % 10}).to_csv(tmp_path / "d.csv", index=False)
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 10}}})
    report = check_data(tmp_path / "d.csv", schema, privacy_unit="person", max_rows_per_unit=2)
    assert (report.rows, report.unit_dropped, report.units_over, report.unit_missing) == (300, 100, 50, 0)
    assert report.as_dict()["unit"]["share_dropped"] == pytest.approx(1 / 3)
    assert 300 - report.unit_dropped == released_total(tmp_path / "d.csv", schema, ["x"], UnitBound("person", 2))


def test_rows_without_a_unit_are_dropped_by_the_cap(tmp_path):
    pd.DataFrame({"person": ["a", None, "a", None, "b"], "x": [1, 2, 3, 4, 5]}).to_parquet(tmp_path / "d.parquet")
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 10}}})
    report = check_data(tmp_path / "d.parquet", schema, privacy_unit="person", max_rows_per_unit=1)
    assert (report.unit_dropped, report.units_over, report.unit_missing) == (3, 1, 2)
    assert 5 - report.unit_dropped == released_total(tmp_path / "d.parquet", schema, ["x"], UnitBound("person", 1))


def test_missing_columns_and_stored_types_are_found_without_reading_them(tmp_path):
    pq.write_table(pa.table({"x": ["1", "2"], "c": ["a", "b"], "extra": [1, 2]}), tmp_path / "d.parquet")
    schema = parse_schema({"columns": {"x": {"type": "numeric", "lower": 0, "upper": 10, "bins": 2},
                                       "c": {"type": "categorical", "values": ["a", "b"]},
                                       "gone": {"type": "categorical", "values": ["a"]}}})
    report = check_data(tmp_path / "d.parquet", schema)
    assert [(c.name, c.status, c.stored) for c in report.columns] == [("x", "stored type", "text"),
                                                                     ("c", "read", None), ("gone", "missing", None)]
    assert report.not_in_schema == ["extra"] and one(report, "c").counted == 2
    assert len(report.problems()) == 2


def test_nothing_to_read_reads_nothing(tmp_path):
    (tmp_path / "d.csv").write_text("a\n1\n")
    report = check_data(tmp_path / "d.csv", parse_schema({"columns": {"b": {"type": "categorical", "values": ["x"]}}}))
    assert report.rows is None and report.columns[0].status == "missing" and report.not_in_schema == ["a"]
    assert "rows not read" in report.text()


@pytest.mark.parametrize("kwargs, message", [
    ({"columns": "age,nosuch"}, "'nosuch' is not declared"),
    ({"columns": "age,age"}, "'age' twice"),
    ({"columns": " , "}, "non-empty"),
    ({"privacy_unit": "sex"}, "needs --max-rows-per-unit"),
    ({"max_rows_per_unit": 2}, "needs --privacy-unit"),
])
def test_bad_options_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        check_data(SAMPLE / "census.csv", SAMPLE / "census.schema.yaml", **kwargs)


def test_a_unit_column_the_data_lacks_is_a_data_error():
    with pytest.raises(DataError, match="privacy-unit column 'nosuch' not found"):
        check_data(SAMPLE / "census.csv", SAMPLE / "census.schema.yaml", privacy_unit="nosuch", max_rows_per_unit=1)
