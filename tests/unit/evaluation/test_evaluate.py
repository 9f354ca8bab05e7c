"""Evaluating algorithms on the steward's own table (dphist/evaluation/evaluate.py): a tuning aid on true counts that scores
what a release runs (the declared columns, the release's budget definition), and refuses undeclared columns before
reading.  (The ``evaluate`` and ``bench`` commands: cli/test_evaluate_command.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dphist.algorithms import REGISTRY
from dphist.errors import UsageError
from dphist.evaluation.evaluate import evaluate

from conftest import ROOT

ARGS = [str(ROOT / "sample_data" / "census.parquet"), "-s", str(ROOT / "sample_data" / "census.schema.yaml")]


def test_errors_rank_as_expected_on_ranges():
    # On a long 1-D domain, trees beat identity on all ranges by a wide margin (docs/algorithms.md §8).
    frame = pd.DataFrame({"v": np.random.default_rng(0).integers(0, 1024, 20_000)})
    schema = {"columns": {"v": {"type": "numeric", "lower": 0, "upper": 1024, "bins": 1024}}}
    table, info = evaluate(frame, "0.1", schema, "v", ["identity", "hb"], trials=5, seed=2)
    scores = dict(zip(table["algorithm"], table["scaled_l1_mean"]))
    assert scores["hb"] < 0.5 * scores["identity"]
    assert info["queries"] == 1024 * 1025 // 2


def test_release_workload_names_score_their_queries():
    """The release's --workload names work here too: cells (identity beats the tree on single cells), ranges
    (the default queries) and marginals (one-way)."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"v": rng.integers(0, 256, 20_000), "w": rng.integers(0, 8, 20_000)})
    schema = {"columns": {"v": {"type": "numeric", "lower": 0, "upper": 256, "bins": 256},
                          "w": {"type": "numeric", "lower": 0, "upper": 8, "bins": 8}}}
    table, info = evaluate(frame, "0.5", schema, "v", ["identity", "hb"], trials=5, seed=3, workload="cells")
    scores = dict(zip(table["algorithm"], table["scaled_l1_mean"]))
    assert info["queries"] == 256 and scores["identity"] < scores["hb"]
    _, info = evaluate(frame, "0.5", schema, "v", ["identity"], trials=1, seed=3, workload="ranges")
    assert info["queries"] == 256 * 257 // 2
    _, info = evaluate(frame, "0.5", schema, "v,w", ["identity"], trials=1, seed=3, workload="marginals")
    assert info["queries"] == 256 + 8


@pytest.mark.parametrize("kwargs, message", [({"workload": "prefix", "columns": "income,age"}, "one-column"),
                                             ({"workload": "nope"}, "unknown workload"),
                                             ({"trials": 0}, "trials")])
def test_bad_arguments(kwargs, message):
    args = {"columns": "income", **kwargs}
    with pytest.raises(UsageError, match=message):
        evaluate(ROOT / "sample_data" / "census.parquet", "1", ROOT / "sample_data" / "census.schema.yaml",
                 algorithms=["identity"], **args)


# ---- evaluate scores what a release runs ----------------------------------------------------------------------


def _no_counting(monkeypatch):
    """Reading rows from here on fails the test: a refusal must come before any data is read."""
    def refuse(*args, **kwargs):
        raise AssertionError("evaluate read the data before refusing")
    monkeypatch.setattr("dphist.evaluation.evaluate.count_tables", refuse)


def test_undeclared_column_is_refused_before_reading(monkeypatch):
    # 'hours_per_week' is in the input but not in this schema.  A release would discover its domain privately;
    # evaluate used to score the placeholder domain planned for discovery instead.
    _no_counting(monkeypatch)
    schema = {"columns": {"age": {"type": "numeric", "lower": 15, "upper": 95, "width": 5}}}
    source = ROOT / "sample_data" / "census.parquet"
    for columns in ("hours_per_week", "age,hours_per_week", ["age", "hours_per_week"]):
        with pytest.raises(UsageError, match="column 'hours_per_week' is not declared in the schema"):
            evaluate(source, "1", schema, columns, ["identity"], trials=1, seed=0)
    with pytest.raises(UsageError, match="column 'age' is not declared"):
        evaluate(source, "1", None, "age", ["identity"], trials=1, seed=0)
    with pytest.raises(UsageError, match="needs a schema"):  # else every input column would be discovered
        evaluate(source, "1", None, None, ["identity"], trials=1, seed=0)


def _spy(monkeypatch, name: str) -> list:
    """Record each run's ``columns`` argument and the estimate it returned, for algorithm ``name``."""
    cls = REGISTRY[name]
    runs, original = [], cls.run

    def run(self, counts, *args, **kwargs):
        estimate = original(self, counts, *args, **kwargs)
        runs.append((kwargs.get("columns"), estimate))
        return estimate
    monkeypatch.setattr(cls, "run", run)
    return runs


REGIONS = {"type": "categorical", "values": ["CA", "OR", "WA", "NY", "NJ", "TX"],
           "hierarchy": {"West": ["CA", "OR", "WA"], "East": ["NY", "NJ"], "South": ["TX"]}}


def _regions_frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"region": rng.choice(REGIONS["values"], 5000),
                         "age": rng.integers(15, 95, 5000)})


def test_privelet_uses_the_declared_hierarchy_as_a_release_does(monkeypatch):
    # With the column's declaration privelet runs the nominal wavelet over the hierarchy; without it (what
    # evaluate used to do) Haar over the label order, an algorithm no release runs on this table.
    import dphist

    frame, schema = _regions_frame(), {"columns": {"region": REGIONS}}
    runs = _spy(monkeypatch, "privelet")
    evaluate(frame, "1", schema, "region", ["privelet"], trials=2, seed=0)
    assert len(runs) == 2
    for columns, estimate in runs:
        assert estimate.structure["transforms"] == ["nominal"]
        assert [c.name for c in columns] == ["region"] and columns[0].hierarchy
    released = dphist.release(frame, "1", schema, columns="region", algorithm="privelet", seed=0)
    assert released.report["tables"][0]["structure"] == runs[0][1].structure


def test_auto_sees_categorical_columns_as_a_release_does(monkeypatch):
    # auto treats a categorical column (no hierarchy) as unordered: a table of categorical columns only gets
    # identity, and a categorical x numeric table is looked up per slice.  Without the columns (the old
    # evaluate) auto took every axis as ordered and looked up the rules for the whole table.
    import dphist

    frame = _regions_frame()
    schema = {"columns": {"region": {"type": "categorical", "values": REGIONS["values"]},
                          "age": {"type": "numeric", "lower": 15, "upper": 95, "width": 5}}}
    for columns in ("region", "region,age"):
        runs = _spy(monkeypatch, "auto")
        evaluate(frame, "1", schema, columns, ["auto"], trials=1, seed=0)
        ((given, estimate),) = runs
        choice = estimate.choices["algorithm_choice"]
        if columns == "region":
            assert choice["chosen"] == "identity" and "every column is categorical" in choice["reason"]
        else:
            assert "per slice of the 6 categories" in choice["reason"]
        released = dphist.release(frame, "1", schema, columns=columns, seed=0).report["tables"][0]
        assert choice["chosen"] == released["algorithm"] and choice["reason"] == released["algorithm_choice"]["reason"]
        assert [c.name for c in given] == columns.split(",")


def test_evaluate_runs_each_algorithm_on_the_release_budget_of_its_definition(monkeypatch):
    from fractions import Fraction

    from dphist.algorithms.identity import Identity
    from dphist.privacy import ZCDPBudget, rho_for

    seen = []
    original = Identity.run

    def spy(self, counts, budget, columns=None):
        seen.append((type(budget), budget.amount, budget.noise))
        return original(self, counts, budget, columns)

    monkeypatch.setattr(Identity, "run", spy)
    source, schema = ARGS[0], ARGS[2]
    _, info = evaluate(source, None, schema, "income", ["identity"], trials=2, seed=1, rho="1/50")
    assert info["definition"] == "zcdp" and info["rho"] == "0.02" and info["epsilon"] is None
    assert seen == [(ZCDPBudget, Fraction(1, 50), "gaussian")] * 2
    seen.clear()
    _, info = evaluate(source, "1", schema, "income", ["identity"], trials=1, seed=1, delta="1e-6", noise="gaussian")
    assert info["definition"] == "approximate" and seen == [(ZCDPBudget, rho_for(1, Fraction(1, 10**6)), "gaussian")]
    seen.clear()
    evaluate(source, "1", schema, "income", ["identity"], trials=1, seed=1)
    assert [s[2] for s in seen] == ["laplace"]
