"""Schemas (dphist/declare/schema.py): every mistake is reported naming the column and field, before any data is read;
bins and labels (open end bins of a discovered domain, a date domain up to the calendar's last day); big schemas
load in linear time."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import yaml

from dphist.errors import UsageError
from dphist.declare.schema import load_schema, parse_schema


def col(**decl):
    return {"columns": {"c": decl}}


@pytest.mark.parametrize("decl, field", [
    ({"type": "numeric", "lower": 0, "upper": 10}, "bins"),
    ({"type": "numeric", "lower": 0, "bins": 5}, "upper"),
    ({"type": "numeric", "lower": 10, "upper": 0, "bins": 5}, "upper"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 0}, "bins"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 2.5}, "bins"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 5, "width": 2}, "bins"),
    ({"type": "numeric", "lower": "a", "upper": 10, "bins": 5}, "lower"),
    ({"type": "numeric", "lower": 0, "upper": float("inf"), "bins": 5}, "upper"),
    ({"type": "numeric", "lower": 0, "upper": 10, "width": -1}, "width"),
    ({"type": "numeric", "edges": [0, 5, 5, 10]}, "edges"),
    ({"type": "numeric", "lower": 1e17, "upper": 1e17 + 64, "bins": 60}, "bins"),  # edges round together
    ({"type": "numeric", "lower": 1e17, "upper": 1e17 + 64, "width": 1}, "width"),
    ({"type": "numeric", "edges": [0]}, "edges"),
    ({"type": "numeric", "edges": [0, 5, 10], "lower": 1}, "lower"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 5, "out_of_domain": "wrap"}, "out_of_domain"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 5, "nulls": "keep"}, "nulls"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bin": 5}, "bin"),
    ({"type": "numeric", "lower": 0, "upper": 10, "bins": 5, "colour": 1}, "colour"),
    ({"type": "categorical"}, "values"),
    ({"type": "categorical", "values": []}, "values"),
    ({"type": "categorical", "values": ["a", "a"]}, "values"),
    ({"type": "categorical", "values": ["a", None]}, "values"),
    ({"type": "categorical", "values": ["a"], "out_of_domain": "clamp"}, "out_of_domain"),
    ({"type": "date", "lower": "2020-01-01", "upper": "2019-01-01"}, "upper"),
    ({"type": "date", "lower": "2020-13-01", "upper": "2021-01-01"}, "lower"),
    ({"type": "date", "lower": "2020-01-15", "upper": "2021-01-01", "unit": "month"}, "lower"),
    ({"type": "date", "lower": "2020-02-01", "upper": "2021-01-01", "unit": "quarter"}, "lower"),
    ({"type": "date", "lower": "2020-01-01", "upper": "2021-01-01", "unit": "fortnight"}, "unit"),
    ({"type": "histogram"}, "type"),
])
def test_bad_declarations_name_column_and_field(decl, field):
    with pytest.raises(UsageError) as err:
        parse_schema(col(**decl))
    message = str(err.value)
    assert "column 'c'" in message and f"'{field}'" in message
    assert "\n" not in message


@pytest.mark.parametrize("doc", [None, [], {"columns": {}}, {"columns": []}, {"cols": {"a": {}}},
                                 {"columns": {"a": "numeric"}}])
def test_bad_documents(doc):
    with pytest.raises(UsageError):
        parse_schema(doc)


def test_too_many_cells_refused():
    with pytest.raises(UsageError, match="at most|limit"):
        parse_schema(col(type="numeric", lower=0, upper=1, bins=200_000_000))


def test_numeric_bins_width_edges():
    s = parse_schema({"columns": {
        "a": {"type": "numeric", "lower": 0, "upper": 100, "bins": 4},
        "b": {"type": "numeric", "lower": 0, "upper": 10, "width": 3},
        "c": {"type": "numeric", "edges": [0, 18, 65, 120], "nulls": "category"},
    }})
    assert s["a"].edges == (0, 25, 50, 75, 100) and s["a"].equal_width
    assert s["b"].edges == (0, 3, 6, 9, 10) and not s["b"].equal_width  # last bin cut short at upper
    assert s["c"].n_cells == 4 and s["c"].labels()["c_lower"] == [0, 18, 65, None]


def test_categorical_labels_normalised():
    s = parse_schema(col(type="categorical", values=["Cafe\u0301", 1, 2.0]))
    assert s["c"].values == ("Caf\u00e9", "1", "2")


def test_yaml_booleans_in_values_are_refused():
    with pytest.raises(UsageError, match="quote"):
        parse_schema(yaml.safe_load("columns:\n  c: {type: categorical, values: [NO, NY]}\n"))


def test_date_units():
    s = parse_schema({"columns": {
        "m": {"type": "date", "lower": dt.date(2023, 1, 1), "upper": "2024-01-01", "unit": "month"},
        "q": {"type": "date", "lower": "2023-01-01", "upper": "2024-01-01", "unit": "quarter"},
        "w": {"type": "date", "lower": "2023-01-02", "upper": "2023-01-20", "unit": "week"},
        "y": {"type": "date", "lower": "2020-01-01", "upper": "2023-06-01", "unit": "year"},
        "d": {"type": "date", "lower": "2024-02-27", "upper": "2024-03-02", "unit": "day", "width": 2},
    }})
    assert s["m"].bins == 12 and s["m"].labels()["m_lower"][1] == "2023-02-01"
    assert s["q"].labels()["q_upper"] == ["2023-04-01", "2023-07-01", "2023-10-01", "2024-01-01"]
    assert s["w"].labels()["w_upper"] == ["2023-01-09", "2023-01-16", "2023-01-20"]
    assert s["y"].labels()["y_upper"][-1] == "2023-06-01"  # last bin cut short at upper
    assert s["d"].labels()["d_lower"] == ["2024-02-27", "2024-02-29", "2024-03-02"][:2]


def test_load_yaml_and_json_files(tmp_path):
    (tmp_path / "s.yaml").write_text("columns:\n  a: {type: categorical, values: [x, y]}\n")
    (tmp_path / "s.json").write_text('{"columns": {"a": {"type": "numeric", "lower": 0, "upper": 1, "bins": 2}}}')
    assert load_schema(tmp_path / "s.yaml")["a"].values == ("x", "y")
    assert load_schema(tmp_path / "s.json")["a"].bins == 2
    (tmp_path / "bad.yaml").write_text("columns: [\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_schema(tmp_path / "bad.yaml")
    with pytest.raises(UsageError, match="not found"):
        load_schema(tmp_path / "missing.yaml")


def test_unknown_column_lookup_lists_declared_ones():
    s = parse_schema(col(type="categorical", values=["a"]))
    with pytest.raises(UsageError, match="not declared.*declared: c"):
        s["nope"]


def test_sample_schema_is_valid(sample_schema):
    s = load_schema(sample_schema)
    assert set(s.columns) >= {"age", "sex", "state", "income", "interview_date"}
    assert all(isinstance(v, str) for v in s["state"].values) and "OR" in s["state"].values


# ---- labels ---------------------------------------------------------------------------------------------------------


def test_open_end_labels():
    """Discovered (open) end bins have an empty outer label; a declared domain keeps its labels, and so does a
    single bin (two empty labels mark the null cell)."""
    declared = parse_schema({"columns": {
        "n": {"type": "numeric", "lower": 0, "upper": 30, "bins": 3, "nulls": "category"},
        "d": {"type": "date", "lower": "2020-01-01", "upper": "2020-04-01", "unit": "month"},
        "one": {"type": "numeric", "lower": 0, "upper": 10, "bins": 1}}})
    n, d, one = (declared[k] for k in ("n", "d", "one"))
    assert n.labels() == {"n_lower": [0, 10, 20, None], "n_upper": [10, 20, 30, None]}
    opened = dataclasses.replace(n, open_ends=True)
    assert opened.labels() == {"n_lower": [None, 10, 20, None], "n_upper": [10, 20, None, None]}
    assert opened.describe()["open_ends"] is True and "open_ends" not in n.describe()
    assert dataclasses.replace(d, open_ends=True).labels() == {
        "d_lower": [None, "2020-02-01", "2020-03-01"], "d_upper": ["2020-02-01", "2020-03-01", None]}
    assert dataclasses.replace(one, open_ends=True).labels() == one.labels()
    dropping = dataclasses.replace(parse_schema({"columns": {"n": {
        "type": "numeric", "lower": 0, "upper": 30, "bins": 3, "out_of_domain": "drop"}}})["n"], open_ends=True)
    assert dropping.labels()["n_lower"][0] == 0  # values outside are dropped, not clamped: the label holds


@pytest.mark.parametrize("unit,lower", [("year", "9990-01-01"), ("month", "9999-01-01"), ("day", "9999-12-01"),
                                        ("week", "9999-11-01"), ("quarter", "9999-01-01")])
def test_declared_date_domain_may_end_at_the_calendars_last_day(unit, lower):
    column = parse_schema({"columns": {"d": {"type": "date", "lower": lower, "upper": "9999-12-31",
                                             "unit": unit}}})["d"]
    assert column.labels()["d_upper"][-1] == "9999-12-31"


# ---- big schemas ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["json", pytest.param("yaml", marks=pytest.mark.slow)])
def test_schema_with_100000_categories_and_a_hierarchy_loads_quickly(tmp_path, suffix):
    """Loading is linear: label lookups in the hierarchy used to scan the list (100,000 labels: a minute).  The
    JSON file takes the same checks in a fifth of the time (the strict YAML loader takes most of the YAML file's);
    the YAML file is marked slow."""
    import json
    import time

    from dphist.declare.schema import load_schema

    n = 100_000
    labels = [f"v{i}" for i in range(n)]
    if suffix == "json":
        hierarchy = {f"g{g}": labels[g * 100:(g + 1) * 100] for g in range(n // 100)}
        text = json.dumps({"columns": {"c": {"type": "categorical", "values": labels, "hierarchy": hierarchy}}})
    else:
        groups = "".join(f"      g{g}: [{', '.join(labels[g * 100:(g + 1) * 100])}]\n" for g in range(n // 100))
        text = ("columns:\n  c:\n    type: categorical\n    values:\n"
                + "".join(f"      - \"{v}\"\n" for v in labels) + "    hierarchy:\n" + groups)
    (tmp_path / f"s.{suffix}").write_text(text)
    start = time.monotonic()
    column = load_schema(tmp_path / f"s.{suffix}")["c"]
    assert time.monotonic() - start < 10  # about 1 s; 65 s before
    assert column.n_cells == n and column.hierarchy[0][-1] == n // 100 - 1


@pytest.mark.parametrize("declared", [
    {"lower": 0.1, "upper": 0.3, "width": 0.01},
    {"lower": 0.1, "upper": 0.3, "bins": 20},
    {"lower": -2.5, "upper": 7.3, "width": 0.7},
    {"lower": 0.2, "upper": 5.01, "bins": 481},
])
def test_bin_edges_are_the_decimals_the_steward_wrote(declared):
    """Each edge is the float nearest its decimal value, so labels print as short decimals: float steps would give
    0.16999999999999998 for 0.1 + 7 × 0.01 (and 0.7000000000000001 for 7 × 0.1)."""
    from decimal import Decimal

    column = parse_schema({"columns": {"x": {"type": "numeric", **declared}}}).columns["x"]
    lower = Decimal(str(declared["lower"]))
    step = Decimal(str(declared["width"])) if "width" in declared else \
        (Decimal(str(declared["upper"])) - lower) / declared["bins"]
    for i, edge in enumerate(column.edges[:-1]):
        assert edge == float(lower + step * i)
        assert len(repr(edge)) <= len(str(lower + step * i).rstrip("0")) + 1
    assert column.edges[-1] == declared["upper"]
    lows = column.labels()["x_lower"][1:]  # the first bin's outer label is the bound itself
    assert max(len(str(v)) for v in lows) <= 5  # e.g. -1.8, 0.17, 5.01: no float artefact in a label


def test_a_width_far_from_zero_counts_its_bins_from_the_decimals():
    """[107446.685, 107446.785) in widths of 0.005 is 20 bins: the float quotient of the span lands just above 20,
    and a count from it added a 21st bin of no width (refused as edges that coincide)."""
    column = parse_schema({"columns": {"x": {"type": "numeric", "lower": 107446.685, "upper": 107446.785,
                                             "width": 0.005}}})["x"]
    assert column.bins == 20 and column.edges[-1] == 107446.785 and repr(column.edges[1]) == "107446.69"
