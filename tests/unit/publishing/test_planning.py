"""Planning, execution and output as separate steps (dphist/publishing/planning.py, dphist/publishing/execution.py): the options value
checked once, the plan made before any row is read (each table's workload resolved, a share too small for the
minimum refused), and the one execution path (test mode or the ledger) shared by the API and the CLI."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import dphist
from dphist.api import plan_release
from dphist.errors import UsageError
from dphist.publishing.execution import execute
from dphist.declare.job import TableRequest
from dphist.publishing.planning import ReleaseOptions, make_plan
from dphist.privacy.amounts import MIN_EPSILON
from workload_data import WORKLOAD_SCHEMA, workload_frame as _frame

SCHEMA = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 2},
                      "b": {"type": "categorical", "values": ["x", "y"]}}}
FRAME = pd.DataFrame({"a": [0, 1, 2, 3] * 5, "b": ["x", "y"] * 10})


def test_options_are_normalised_once():
    o = ReleaseOptions.from_keywords(epsilon="0.1", columns="a, b", delta="1e-6", discovery_share="0.2",
                                     tables=None, seed=3)
    assert o.epsilon == Fraction(1, 10) and o.delta == Fraction(1, 10**6) and o.discovery_share == Fraction(1, 5)
    assert o.columns == ("a", "b") and o.seed == 3 and o.unit is None and o.algorithm_options == {}
    # None stands for an option's default (an unset command-line flag), so the defaults live in one place.
    d = ReleaseOptions.from_keywords(epsilon=1, discovery_bins=None, max_categories=None, delta=None,
                                     marginal_strategy=None, group_size=None, max_cells=None)
    assert d == ReleaseOptions(epsilon=1)
    u = ReleaseOptions.from_keywords(epsilon=1, privacy_unit=" person ", max_rows_per_unit=3)
    assert (u.unit.column, u.unit.max_rows) == ("person", 3)
    t = ReleaseOptions.from_keywords(epsilon=1, tables=[{"columns": ["a"], "share": 2}])
    assert t.tables == (TableRequest("a", ("a",), None, Fraction(2)),)


@pytest.mark.parametrize("options, message", [
    ({"colums": "a"}, "unknown release option 'colums'"),
    ({"discovery_bins": 0}, "discovery bins must be a whole number"),
    ({"max_categories": 10**6}, "the most categories must be a whole number"),
    ({"group_size": 0}, "group size"),
    ({"max_cells": 0}, "the cell limit"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"seed": True}, "seed must be a non-negative integer"),
    ({"marginal_strategy": "some"}, "unknown marginal strategy 'some'"),
    ({"engine": "cloud"}, "unknown engine 'cloud'"),
    ({"discovery_binning": "median"}, "binning must be one of"),
    ({"discovery_share": "1"}, "the discovery share must be between 0 and 1"),
    ({"delta": "0.01"}, "delta must be between 0 and 1e-3"),
    ({"columns": "a", "tables": [{"columns": ["a"]}]}, "give either columns or tables"),
    ({"marginals": "a;b", "columns": "a"}, "give marginals, columns or tables"),
    ({"marginals": "a;b", "raw": True}, "--raw does not apply"),
    ({"max_rows_per_unit": 2}, "--max-rows-per-unit needs --privacy-unit"),
    ({"algorithm_options": [("branching", 2)]}, "algorithm options must be a mapping"),
])
def test_bad_options_are_refused_before_the_input_is_opened(options, message):
    with pytest.raises(UsageError, match=message):
        dphist.release("no/such/file.csv", "1", **options)
    with pytest.raises(UsageError, match=message):
        dphist.api.plan_release("no/such/file.csv", "1", **options)


def test_plan_then_execute_is_release():
    """release() is make_plan then execute: the same seed gives the same tables and report."""
    plan = make_plan(FRAME, ReleaseOptions(epsilon="1", schema=SCHEMA, columns="a,b", seed=5, algorithm="identity"))
    assert plan.shapes[0].shape == (2, 2) and plan.budgets == [Fraction(1)]
    done = execute(plan)
    assert done.dataset is None and done.paths == []  # test mode: no ledger, no files asked for
    again = dphist.release(FRAME, "1", SCHEMA, columns="a,b", seed=5, algorithm="identity")
    pd.testing.assert_frame_equal(done.value.tables["a_b"], again.tables["a_b"])
    assert done.value.report == again.report and "ledger" not in again.report


def test_test_mode_never_opens_the_ledger(tmp_path):
    ledger = tmp_path / "missing" / "ledger.sqlite"
    dphist.release(FRAME, "1", SCHEMA, columns="a", seed=1, ledger=ledger)
    assert not ledger.parent.exists()
    charged = dphist.release(FRAME, "1", SCHEMA, columns="a", ledger=tmp_path / "l.sqlite", dataset_id="frame")
    assert charged.report["ledger"]["dataset"] == "frame" and (tmp_path / "l.sqlite").exists()


# ---- workloads ------------------------------------------------------------------------------------------------------






def test_the_plan_resolves_each_tables_workload():
    frame = _frame()
    plan = plan_release(frame, "1", WORKLOAD_SCHEMA,
                        tables=[{"columns": ["x"]}, {"columns": ["g", "h"]},
                             {"columns": ["x", "g"], "workload": "marginals"}])
    assert [t.workload for t in plan.requests] == ["ranges", "cells", "marginals"]
    assert [a.workload() for a in plan.algorithms] == ["ranges", "cells", "marginals"]
    plan = plan_release(frame, "1", WORKLOAD_SCHEMA, columns=["x"], workload="cells", algorithm="hb")
    assert plan.requests[0].workload == "cells" and plan.algorithms[0].name == "hb"
    # A table's workload wins over the run's, and auto serves the one the table states.
    plan = plan_release(frame, "1", WORKLOAD_SCHEMA, tables=[{"columns": ["x"], "workload": "cells"}],
                        workload="ranges")
    assert plan.requests[0].workload == "cells" and plan.algorithms[0].workload() == "cells"
    with pytest.raises(UsageError, match="unknown workload 'rows'"):
        plan_release(frame, "1", WORKLOAD_SCHEMA, columns=["x"], workload="rows")


def test_the_workload_is_one_setting_never_an_algorithm_option():
    """An algorithm option named 'workload' (the run's, a table's, one from the API's TableRequest) is refused
    before reading: it could only contradict the release's workload, the one auto serves and the report states."""
    frame = _frame()
    for options in ({"algorithm_options": {"workload": "cells"}},
                    {"tables": [{"columns": ["x"], "options": {"workload": "cells"}}]},
                    {"tables": [TableRequest("x", ("x",), "mwem", options={"workload": "dyadic"})]}):
        with pytest.raises(UsageError, match="'workload' is the release's own setting"):
            plan_release(frame, "1", WORKLOAD_SCHEMA, workload="ranges", **options)
    # mwem's candidate ranges are its option 'queries'; the report's workload stays the release's.
    plan = plan_release(frame, "1", WORKLOAD_SCHEMA, tables=[{"columns": ["x"], "algorithm": "mwem",
                                                              "options": {"queries": "dyadic"}}])
    assert plan.requests[0].workload == "ranges" and plan.algorithms[0].params["queries"] == "dyadic"


# ---- budget shares --------------------------------------------------------------------------------------------------


def test_a_table_whose_share_falls_below_the_minimum_is_refused_when_planned():
    frame = pd.DataFrame({"a": [0, 1], "b": [1, 0]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2},
                          "b": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2}}}
    tables = [{"name": "tiny", "columns": ["a"], "share": 1}, {"name": "big", "columns": ["b"], "share": 10**7}]
    assert Fraction(1, 10**7 + 1) < MIN_EPSILON
    with pytest.raises(UsageError, match="table 'tiny'.*below the minimum"):
        plan_release(frame, "1", schema, tables=tables)
    # The same shares at a budget large enough for both are accepted (the check can pass).
    plan = plan_release(frame, "20", schema, tables=tables)
    assert sum(plan.budgets) == 20 and plan.budgets[0] == Fraction(20, 10**7 + 1)
