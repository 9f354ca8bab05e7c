"""Marginal sets from one measurement of the full table: exact agreement, one ε, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dphist
from dphist.cli import main
from dphist.errors import UsageError
from dphist.marginals import derive_marginal, parse_marginals, union_of

from conftest import ROOT

SAMPLE = ROOT / "sample_data"
ADULT_SCHEMA = ROOT / "bench" / "adult.schema.yaml"


def one_way(frame: pd.DataFrame, column: str) -> pd.Series:
    """A marginal table summed down to one column (numeric columns are keyed by their lower edge)."""
    key = column if column in frame else f"{column}_lower"
    return frame.groupby(key, dropna=False)["count"].sum().sort_index()


def check_agreement(tables: dict[str, pd.DataFrame], marginals: list[tuple[str, ...]]) -> None:
    totals = {name: int(t["count"].sum()) for name, t in tables.items()}
    assert len(set(totals.values())) == 1, totals  # one grand total
    for column in union_of(marginals):
        having = [dphist.job.table_name_for(m) for m in marginals if column in m]
        sums = [one_way(tables[name], column) for name in having]
        for other in sums[1:]:
            pd.testing.assert_series_equal(sums[0], other, check_names=False)  # identical 1-D marginals
    for t in tables.values():
        assert (t["count"] >= 0).all() and np.issubdtype(t["count"].dtype, np.integer)


def test_derive_marginal_sums_and_reorders_axes():
    full = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("c", "a")), full.sum(axis=1).T)
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("b",)), full.sum(axis=(0, 2)))
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("a", "b", "c")), full)


def test_parse_marginals():
    assert parse_marginals("age,sex; sex,income") == [("age", "sex"), ("sex", "income")]
    assert parse_marginals([["a"], "b"]) == [("a",), ("b",)]
    assert union_of(parse_marginals("age,sex;income,sex;education")) == ("age", "sex", "income", "education")
    for bad, message in [("", "at least one"), ("a,,b", "column names"), ("a,a", "listed twice"),
                         ("a,b;a,b", "listed twice")]:
        with pytest.raises(UsageError, match=message):
            parse_marginals(bad)


@pytest.mark.parametrize("algorithm", ["identity", "hb", "privelet", "dpcube"])
def test_sample_marginals_agree_exactly_and_cost_epsilon_once(algorithm, tmp_path):
    marginals = "age,sex;sex,education;education,marital_status"
    result = dphist.release(SAMPLE / "census.csv", "0.5", SAMPLE / "census.schema.yaml", marginals=marginals,
                            algorithm=algorithm, ledger=tmp_path / "l.sqlite")
    assert list(result.tables) == ["age_sex", "sex_education", "education_marital_status"]
    check_agreement(result.tables, parse_marginals(marginals))
    report = result.report
    assert report["epsilon_spent"] == "0.5"
    full = report["marginals"]["full_table"]
    assert full["columns"] == ["age", "sex", "education", "marital_status"]
    assert sum(float(s["epsilon"]) for s in full["steps"]) == pytest.approx(0.5)
    assert all(t["derived_from"] == full["name"] for t in report["tables"])


def test_cli_marginals_and_errors(tmp_path):
    runner = CliRunner()
    args = ["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "-e", "1"]
    out = tmp_path / "m"
    ok = runner.invoke(main, [*args, "--marginals", "age,sex;sex,income", "-o", str(out), "-q"])
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in out.iterdir()) == ["age_sex.csv", "report.json", "sex_income.csv"]
    assert json.loads((out / "report.json").read_text())["marginals"]["full_table"]["name"] == "age_sex_income"
    both = runner.invoke(main, [*args, "--marginals", "age,sex", "-c", "age", "-o", str(tmp_path / "x")])
    assert both.exit_code == 2 and "not more than one" in both.stderr
    raw = runner.invoke(main, [*args, "--marginals", "age,sex", "--raw", "-o", str(tmp_path / "y")])
    assert raw.exit_code == 2 and "--raw does not apply" in raw.stderr
    unknown = runner.invoke(main, [*args, "--marginals", "age,nosuch", "-o", str(tmp_path / "z")])
    assert unknown.exit_code == 2 and "nosuch" in unknown.stderr
    assert not any((tmp_path / d).exists() for d in "xyz")


def test_adult_marginals_agree(shared_real, tmp_path):
    """The issue's check on the Adult table: {age×sex, sex×income, age×income, education×income}."""
    marginals = "age,sex;sex,income;age,income;education_num,income"
    result = dphist.release(shared_real / "adult.csv", "1", ADULT_SCHEMA, marginals=marginals,
                            ledger=tmp_path / "l.sqlite")
    check_agreement(result.tables, parse_marginals(marginals))
    truth = pd.read_csv(shared_real / "adult.csv")
    assert abs(int(result.tables["age_sex"]["count"].sum()) - len(truth)) < 0.01 * len(truth)
