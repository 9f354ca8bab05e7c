"""The Python API end to end (``dphist.release``, dphist/api.py): one histogram per column by default with exact
shares, every kind of source giving the same table, the report (naming the input without its directories),
options that apply only where they fit; ρ-zCDP (``rho``) and (ε, δ) releases with discrete Gaussian noise, their
report's budget fields and the noise measured against 1/(2ρ); and a release of the real UCI Adult table from
../shared (skipped when it is absent)."""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import yaml

import dphist
from dphist.errors import UsageError
from dphist.privacy import discrete_gaussian_variance, discrete_laplace_halfwidth, format_fraction
from dphist.privacy.conversions import epsilon_for, loose_rho, rho_for

from conftest import ROOT, SAMPLE

DATA, PARQUET, SCHEMA = (str(SAMPLE / "census.csv"), str(SAMPLE / "census.parquet"),
                         str(SAMPLE / "census.schema.yaml"))
ADULT_SCHEMA = ROOT / "bench" / "adult.schema.yaml"


def _implied_is_rounded_up(text: str, exact: float) -> None:
    """``epsilon_implied`` is ``exact`` rounded UP to 6 significant digits (never smaller: it is a claim)."""
    value = float(text)
    assert value >= exact and value - exact <= 1e-5 * exact


# ---- releases -------------------------------------------------------------------------------------------------------


def test_release_counts_are_close_to_truth_on_sample(tmp_path):
    truth = pd.read_csv(DATA)["sex"].value_counts()
    result = dphist.release(DATA, epsilon="1", schema=SCHEMA,
                            columns="sex", seed=3, raw=True)
    table = result.tables["sex"].set_index("sex")
    halfwidth = dphist.privacy.discrete_laplace_halfwidth(1) * 6  # far outside any plausible noise draw
    for label in ("F", "M"):
        assert abs(table.loc[label, "count"] - truth[label]) <= halfwidth


def test_default_is_one_histogram_per_column_with_equal_split(tmp_path):
    result = dphist.release(PARQUET, epsilon="0.8", schema=SCHEMA,
                            seed=1)
    names = list(yaml.safe_load(open(SCHEMA))["columns"])
    assert list(result.tables) == names
    eps = [Fraction(t["epsilon"]) for t in result.report["tables"]]
    assert sum(eps) == Fraction("0.8") and len(set(eps)) == 1
    assert result.report["epsilon_spent"] == "0.8"


def test_thirds_are_exact_fractions():
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4},
                          "b": {"type": "categorical", "values": ["x", "y"]},
                          "c": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2}}}
    result = dphist.release(frame, epsilon="1", schema=schema, seed=0, algorithm="identity")
    assert [t["epsilon"] for t in result.report["tables"]] == ["1/3"] * 3
    assert result.report["epsilon_spent"] == "1"
    assert result.report["tables"][0]["steps"][0]["scale"] == "3"


def test_csv_parquet_directory_and_glob_agree(tmp_path):
    (tmp_path / "parts").mkdir()
    frame = pd.read_parquet(PARQUET)
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[part].to_parquet(tmp_path / "parts" / f"p{i}.parquet")
    kwargs = dict(epsilon="1", schema=SCHEMA, columns="state,education", seed=9)
    tables = [dphist.release(src, **kwargs).tables["state_education"] for src in (
        DATA, PARQUET, tmp_path / "parts",
        str(tmp_path / "parts" / "p*.parquet"), frame)]
    for other in tables[1:]:
        pd.testing.assert_frame_equal(tables[0], other)


def test_header_only_csv_gives_full_shape_release(tmp_path):
    data = tmp_path / "empty.csv"
    data.write_text("age,sex\n")
    result = dphist.release(data, epsilon="1", schema=SCHEMA, columns="age,sex")
    assert len(result.tables["age_sex"]) == 32


def test_unneeded_columns_are_not_read(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("sex,junk\nF,1\nM,not-a-number\nF,\u00e9\n")
    result = dphist.release(data, epsilon="1", schema={"columns": {"sex": {"type": "categorical",
                                                                           "values": ["F", "M"]}}},
                            columns="sex", seed=0)
    assert len(result.tables["sex"]) == 2


def test_report_names_the_input_file_without_its_directories(tmp_path):
    result = dphist.release(SAMPLE / "census.csv", epsilon="1",
                            schema=SCHEMA, columns="sex", seed=1)
    assert result.report["input"] == {"name": "census.csv", "format": "csv"}
    assert str(ROOT) not in json.dumps(result.report)


def test_very_large_epsilon_is_accepted():
    result = dphist.release(DATA, epsilon="1000", schema=SCHEMA,
                            columns="sex", seed=1)
    table = result.tables["sex"]
    assert (table["ci_lower"] == table["ci_upper"]).all()


@pytest.mark.parametrize("columns", [{"count": {"type": "categorical", "values": ["a"]}},
                                     {"a": {"type": "numeric", "lower": 0, "upper": 1, "bins": 1},
                                      "a_lower": {"type": "categorical", "values": ["x"]}}])
def test_output_column_names_must_not_collide(columns):
    frame = pd.DataFrame({name: ["a"] for name in columns})
    with pytest.raises(dphist.errors.UsageError, match="two columns named"):
        dphist.release(frame, epsilon="1", schema={"columns": columns}, columns=list(columns), seed=1)


def test_run_wide_tree_options_apply_only_where_they_fit():
    frame = pd.DataFrame({"a": np.arange(100) % 16, "b": np.arange(100) % 7})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 16, "bins": 16},
                          "b": {"type": "numeric", "lower": 0, "upper": 7, "bins": 7}}}
    tables = [{"columns": ["a"], "algorithm": "hb"}, {"columns": ["b"], "algorithm": "identity"},
              {"name": "a4", "columns": ["a"], "algorithm": "hb", "options": {"branching": 2}}]
    result = dphist.release(frame, epsilon="1", schema=schema, tables=tables, seed=1,
                            algorithm_options={"branching": 4})
    structures = [t["structure"] for t in result.report["tables"]]
    assert structures[0]["branching"] == 4 and structures[1] == {} and structures[2]["branching"] == 2
    with pytest.raises(dphist.errors.UsageError, match="does not apply"):
        dphist.release(frame, epsilon="1", schema=schema, columns="b", seed=1, algorithm_options={"branching": 4})


# ---- ρ-zCDP and (ε, δ) with Gaussian noise --------------------------------------------------------------------------


def test_rho_parts_add_up_exactly():
    """ρ = 1/3 over one table per schema column: the parts are exact fractions adding up to 1/3."""
    result = dphist.release(DATA, schema=SCHEMA, rho="1/3", seed=1, algorithm="identity")
    parts = [Fraction(t["rho"]) for t in result.report["tables"]]
    assert len(parts) > 1 and len(set(parts)) == 1 and sum(parts) == Fraction(1, 3)
    assert result.report["rho_spent"] == result.report["rho_requested"] == "1/3"
    for table in result.report["tables"]:
        assert [s["sigma2"] for s in table["steps"]] == [format_fraction(1 / (2 * Fraction(table["rho"])))]


def test_rho_with_a_privacy_unit_scales_sigma2_by_the_square_of_its_rows():
    frame = pd.DataFrame({"person": [1, 1, 2, 3, 3, 3], "x": ["a", "b", "a", "b", "b", "a"]})
    schema = {"columns": {"x": {"type": "categorical", "values": ["a", "b"]}}}
    result = dphist.release(frame, schema=schema, rho="0.5", seed=2, columns="x", algorithm="identity",
                            privacy_unit="person", max_rows_per_unit=2)
    (table,) = result.report["tables"]
    # The table's ρ is 49/50 of the run's (a fiftieth measures what the cap dropped); ρ/K² protects one row alone.
    assert table["rho"] == "0.49" and table["rho_per_row"] == "0.1225"
    assert Fraction(table["steps"][0]["sigma2"]) == Fraction(4) / (2 * Fraction("0.49"))
    assert table["steps"][0]["l2_sensitivity_squared"] == 4


def test_epsilon_delta_gaussian_is_rho_for_epsilon_delta():
    result = dphist.release(DATA, 1, SCHEMA, delta="1e-6", noise="gaussian", columns="age,sex",
                            algorithm="identity", seed=4)
    report = result.report
    rho = rho_for(1, Fraction(1, 10**6))
    assert report["definition"] == "approximate"
    assert report["rho_requested"] == format_fraction(rho) == report["rho_spent"]
    assert Fraction(report["rho_requested"]) >= Fraction("0.0175")  # the classic conversion's ρ, and more
    assert Fraction(report["rho_requested"]) >= Fraction(loose_rho(1, 1e-6))
    assert (report["epsilon_requested"], report["delta_requested"]) == ("1", "0.000001")
    assert (report["epsilon_spent"], report["delta_spent"]) == ("1", "0.000001")  # what the ledger charges
    assert Fraction(report["epsilon_implied"]) <= 1
    _implied_is_rounded_up(report["epsilon_implied"], epsilon_for(rho, Fraction(1, 10**6)))
    (step,) = report["tables"][0]["steps"]
    assert step["mechanism"] == "discrete Gaussian" and Fraction(step["sigma2"]) == 1 / (2 * rho)
    assert "(epsilon, delta)-DP via rho-zCDP" in result.summary()


def test_identity_noise_variance_is_one_over_two_rho():
    """20,000 cells under ρ = 0.02 (σ² = 25), seeded: the noisy counts minus the true counts have the discrete
    Gaussian's variance (≈ σ² = 25) within ±10 %, and mean 0.

    False-alarm rate: the sample variance of 20,000 draws has a relative standard error of √(2/n) ≈ 1 % (the
    discrete Gaussian's kurtosis is that of the normal to within 1e-20 at σ = 5), so ±10 % is 10 standard errors
    (probability < 1e-20); the mean's bound is 6 standard errors (< 1e-8).  Power: σ × 0.9 or × 1.1 (variance
    × 0.81 or × 1.21), or Laplace noise of the same ρ's ε = √(2ρ) = 0.2 (variance 50), would be outside."""
    cells, rho = 20_000, Fraction(1, 50)
    values = np.arange(0, cells, 7)  # one record in every 7th cell, so the true counts are known
    frame = pd.DataFrame({"x": np.repeat(values, 3)})
    schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": cells, "bins": cells}}}
    result = dphist.release(frame, schema=schema, rho=rho, columns="x", algorithm="identity", raw=True, seed=11)
    table = result.tables["x"]
    truth = np.zeros(cells)
    truth[values] = 3
    noise = table["noisy_count"].to_numpy(np.float64) - truth
    expected = discrete_gaussian_variance(1 / (2 * rho))
    assert expected == pytest.approx(25, rel=1e-12)
    assert abs(noise.var(ddof=1) / expected - 1) < 0.10
    assert abs(noise.mean()) < 6 * math.sqrt(expected / cells)
    assert np.all(noise == np.round(noise))  # integer noise
    assert result.report["tables"][0]["steps"][0]["sigma2"] == "25"


def test_api_refusals_are_usage_errors_before_the_input_is_opened():
    for keywords, message in [({"epsilon": 1, "rho": 1}, "not both"), ({}, "missing the privacy budget"),
                              ({"rho": "0.1", "noise": "laplace"}, "Laplace"),
                              ({"epsilon": 1, "noise": "gaussian"}, "needs --delta"),
                              ({"rho": "0.1", "noise": "gauss"}, "unknown noise 'gauss'")]:
        with pytest.raises(UsageError, match=message):
            dphist.release("no/such/file.csv", **keywords)


def test_the_api_checks_the_data_set_id_and_can_require_a_cap(tmp_path):
    from dphist.publishing.ledger import CapRequired, Ledger

    ledger = tmp_path / "l.sqlite"
    common = dict(schema=SAMPLE / "census.schema.yaml", columns="sex", ledger=ledger)
    for bad in ["", "   ", "a\nb", "x" * 201]:
        with pytest.raises(UsageError, match="^dataset_id "):
            dphist.release(SAMPLE / "census.csv", "0.5", dataset_id=bad, **common)
    with pytest.raises(CapRequired, match="'census' has no cap"):
        dphist.release(SAMPLE / "census.csv", "0.5", dataset_id="census", require_cap=True, **common)
    assert Ledger(ledger).status() == []  # nothing was charged
    Ledger(ledger).set_cap("census", "row", 1)
    dphist.release(SAMPLE / "census.csv", "0.5", dataset_id="census", require_cap=True, **common)
    assert Ledger(ledger).status("census")[0]["epsilon_spent"] == "0.5"


# ---- job specs ------------------------------------------------------------------------------------------------------


def _spec(tmp_path, text: str) -> str:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"input: {DATA}\nschema: {SCHEMA}\nledger: l.sqlite\n{text}")
    return str(spec)


TWO_TABLES = "tables:\n  - {name: by_sex, columns: [sex], share: 3}\n  - {columns: [age], share: 1}\n"


def test_a_spec_releases_its_tables_with_its_budget_split_by_their_shares(tmp_path):
    result = dphist.release(spec=_spec(tmp_path, "epsilon: '0.8'\n" + TWO_TABLES), dataset_id="census")
    assert list(result.tables) == ["by_sex", "age"]
    assert [t["epsilon"] for t in result.report["tables"]] == ["0.6", "0.2"]
    # Charged to the spec's ledger, relative to the spec, under the data set id given.
    assert dphist.publishing.ledger.Ledger(tmp_path / "l.sqlite").status("census")[0]["epsilon_spent"] == "0.8"


def test_a_budget_argument_replaces_the_specs_budget_as_a_whole(tmp_path):
    spec = _spec(tmp_path, "epsilon: '1'\ndelta: '1e-6'\nnoise: gaussian\ntables: [{columns: [sex]}]\n")
    assert dphist.release(spec=spec, seed=1).report["definition"] == "approximate"
    # epsilon alone: pure epsilon, the spec's delta and noise left out.
    report = dphist.release(spec=spec, epsilon="0.5", seed=1).report
    assert (report["definition"], report["epsilon_spent"], report["delta_spent"]) == ("pure", "0.5", "0")
    # rho never meets the spec's delta.
    report = dphist.release(spec=spec, rho="0.25", seed=1).report
    assert (report["definition"], report["rho_spent"]) == ("zcdp", "0.25")


def test_arguments_replace_the_specs_fields_and_the_source_its_input(tmp_path):
    spec = _spec(tmp_path, "epsilon: '1'\nalgorithm: identity\n" + TWO_TABLES)
    report = dphist.release(PARQUET, spec=spec, algorithm="h", seed=1).report
    assert report["input"]["name"] == "census.parquet"
    assert {t["algorithm"] for t in report["tables"]} == {"h"}


@pytest.mark.parametrize("text, keywords, message", [
    ("epsilon: '1'\nbogus: 1\n" + TWO_TABLES, {}, "unknown field 'bogus'"),
    ("epsilon: '1'\nrho: '1'\n" + TWO_TABLES, {}, "give 'epsilon' or 'rho', not both"),
    ("epsilon: '1'\ntables: []\n", {}, "'tables' must be a non-empty list"),
    ("epsilon: '1'\n" + TWO_TABLES, {"columns": "sex"}, "give columns or a job spec"),
    ("epsilon: '1'\n" + TWO_TABLES, {"marginals": "age,sex;sex"}, "give marginals or a job spec"),
])
def test_a_bad_spec_is_a_usage_error_before_any_row_is_read(tmp_path, monkeypatch, text, keywords, message):
    def no_reading(*args, **kwargs):
        raise AssertionError("a row was read")
    monkeypatch.setattr(dphist.publishing.execution, "run_plan", no_reading)
    with pytest.raises(UsageError, match=message):
        dphist.release(spec=_spec(tmp_path, text), **keywords)
    assert not (tmp_path / "l.sqlite").exists()  # nothing charged either


# ---- the real Adult table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["adult.csv", "adult.parquet"])
def test_adult_release_matches_truth_within_noise(shared_real, name):
    source = shared_real / name
    result = dphist.release(source, epsilon="1", schema=ADULT_SCHEMA, columns="race,sex,income", seed=17, raw=True)
    table = result.tables["race_sex_income"]
    assert len(table) == 5 * 2 * 2
    frame = pd.read_csv(shared_real / "adult.csv")
    truth = frame.groupby(["race", "sex", "income"]).size()
    merged = table.set_index(["race", "sex", "income"])["count"]
    # With a fixed seed, every cell is within 3x the 95% half-width (a per-cell false alarm far below 1e-6).
    bound = 3 * discrete_laplace_halfwidth(1)
    for key, value in merged.items():
        assert abs(value - truth.get(key, 0)) <= bound


# ---- arguments checked like the command line's ------------------------------------------------------------------------


class _Neither:
    """An object of no type any argument takes."""


# keyword -> bad values; each must be a UsageError before any row is read (dataset_id and run keys are checked with
# the ledger's identifiers, tests/unit/test_ledger.py)
BAD_ARGUMENTS = {
    "source": [5, None, 3.5, pd.Series([1, 2]), np.arange(3), [DATA], {"a": 1}, b"data.csv", _Neither(),
               pd.DataFrame({0: [1, 2]})],
    "epsilon": [[1], {}, _Neither(), b"1", np.array([1.0]), complex(1, 1), -1, float("nan"), "", "1e999999"],
    "schema": [5, 3.5, ["a"], b"x.yaml", _Neither(), pd.DataFrame(), {"columns": 5}],
    "rho": [[1], _Neither(), "x", 0],
    "noise": [5, ["laplace"], _Neither(), "gauss"],
    "ledger": [5, 3.5, ["x"], _Neither(), b"/tmp/ledger.sqlite"],
    "columns": [5, [5], [["age"]], {"age": 1}, _Neither(), [], "", [None], b"age"],
    "tables": [5, "age", [5], [{"columns": 5}], [{"columns": ["age"], "share": "x"}], {}, _Neither()],
    "algorithm": [5, ["h"], _Neither(), "nosuch"],
    "algorithm_options": [5, "x", [1], {5: 1}, {"branching": _Neither()}],
    "seed": ["x", -1, 1.5, True, _Neither(), [1]],
    "raw": ["yes", 5, _Neither()],
    "marginals": [5, [5], _Neither(), "age;age"],
    "marginal_strategy": [5, "x", _Neither()],
    "privacy_unit": [5, ["sex"], _Neither(), ""],
    "max_rows_per_unit": ["x", 0, 1.5, _Neither(), True],
    "group_size": ["x", 0, 1.5, _Neither()],
    "delta": ["x", [1], _Neither(), 2],
    "discovery_share": ["x", 5, _Neither(), [0.1]],
    "discovery_bins": ["x", 0, _Neither(), 1.5],
    "max_categories": ["x", 0, _Neither()],
    "discovery_binning": [5, "x", _Neither()],
    "engine": [5, "x", _Neither(), ["local"]],
    "master": [5, _Neither(), ["x"]],
    "max_cells": ["x", 0, _Neither(), 1.5],
    "workload": [5, "x", _Neither(), ["ranges"]],
    "no_such_option": [1],
}


def _keywords(key: str, value) -> tuple[object, dict]:
    """(source, keywords) of a test-mode release that is valid but for ``key`` = ``value``."""
    keywords = {"epsilon": "0.1", "schema": SCHEMA, "columns": ["age"], "seed": 1, key: value}
    if key == "source":
        return keywords.pop("source"), keywords
    if key == "rho":
        keywords.pop("epsilon")
    if key in ("tables", "marginals"):
        keywords.pop("columns")
    if key == "privacy_unit":
        keywords["max_rows_per_unit"] = 1
    if key == "max_rows_per_unit":
        keywords["privacy_unit"] = "sex"
    return DATA, keywords


@pytest.mark.parametrize("key, value", [(k, v) for k, values in BAD_ARGUMENTS.items() for v in values],
                         ids=[f"{k}-{i}" for k, values in BAD_ARGUMENTS.items() for i in range(len(values))])
def test_bad_arguments_are_usage_errors_before_any_row_is_read(monkeypatch, key, value):
    from dphist.read.sources import Source

    def no_rows(*args, **kwargs):
        raise AssertionError("a row was read")
    for method in ("batches", "inferred_batches", "piece_batches"):
        monkeypatch.setattr(Source, method, no_rows)
    source, keywords = _keywords(key, value)
    with pytest.raises(UsageError) as raised:
        dphist.release(source, **keywords)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 600, message


def test_the_argument_errors_name_what_to_do():
    cases = [(pd.Series([1, 2]), "to_frame()"), (np.arange(3), "pandas.DataFrame(array"), ([DATA], "glob"),
             (5, "not int"), (pd.DataFrame({0: [1]}), "rename(columns=str)")]
    for source, hint in cases:
        with pytest.raises(UsageError, match=re.escape(hint)):
            dphist.release(source, epsilon=1, seed=1)
    with pytest.raises(UsageError, match="the schema must be a path to a YAML or JSON file, a mapping"):
        dphist.release(DATA, epsilon=1, schema=5, seed=1)
    with pytest.raises(UsageError, match=r"ledger must be a path \(str or os.PathLike\) or a dphist.publishing.ledger.Ledger"):
        dphist.release(DATA, epsilon=1, ledger=5, seed=1)


def test_unreadable_data_is_a_data_error(tmp_path):
    from dphist.errors import DataError

    (tmp_path / "bad.csv").write_text("age,sex\n10,F\nabc,M\n")
    for source in [tmp_path / "nosuch.csv", tmp_path / "bad.csv"]:
        with pytest.raises(DataError):
            dphist.release(source, epsilon=1, schema=SCHEMA, columns="age", seed=1)


def test_good_arguments_of_every_accepted_type_work(tmp_path):
    from pathlib import Path

    from dphist.publishing.ledger import Ledger
    from dphist.declare.schema import load_schema

    frame = pd.read_csv(DATA, nrows=2000)
    # Each argument in each of its forms, the others in one form.
    runs = [(source, SCHEMA, "age,sex") for source in (Path(DATA), frame)]
    runs += [(frame, schema, "age,sex") for schema in (Path(SCHEMA), load_schema(SCHEMA), yaml.safe_load(open(SCHEMA)))]
    runs += [(frame, SCHEMA, columns) for columns in (["age", "sex"], ("age", "sex"), frame.columns[:2])]
    for source, schema, columns in runs:
        result = dphist.release(source, epsilon="0.5", schema=schema, columns=columns, seed=1, raw=np.True_)
        assert list(result.tables) == ["age_sex"]
    for ledger in (tmp_path / "a.sqlite", str(tmp_path / "b.sqlite"), Ledger(tmp_path / "c.sqlite")):
        dphist.release(frame, epsilon="0.01", schema=SCHEMA, columns="age", ledger=ledger)
    result = dphist.release(frame, epsilon="0.5", schema=SCHEMA, columns="age", seed=1)
    for out in (5, None, b"out"):
        with pytest.raises(UsageError, match="out must be a path"):
            result.write(out)
    with pytest.raises(UsageError, match="overwrite must be True or False"):
        result.write(tmp_path / "out", overwrite="yes")
