"""Planning, execution and output as separate steps: the options value checked once, the plan made before any
row is read, and the one execution path (test mode or the ledger) shared by the API and the CLI."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest
from click.testing import CliRunner

import dphist
from dphist.cli import main
from dphist.errors import UsageError
from dphist.execution import execute
from dphist.job import TableRequest
from dphist.planning import ReleaseOptions, make_plan

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


@pytest.mark.parametrize("command", [["release"], ["schema"], ["budget", "show"], ["budget", "set"],
                                     ["budget", "history"], ["budget", "verify"], ["budget", "recover"]])
def test_every_ledger_option_names_the_sqlite_file(command):
    text = CliRunner().invoke(main, [*command, "--help"]).output
    assert "ledger.sqlite" in " ".join(text.split()) and "jsonl" not in text


def test_shared_options_are_declared_once_with_one_meaning():
    """--privacy-unit, --max-rows-per-unit, --delta, --seed, --ledger, --dataset-id and --lock-timeout are the same
    options in release and schema (schema's apply with --private); the algorithm options the same in release and
    evaluate."""
    commands = {c: main.commands[c] for c in ("release", "schema", "evaluate")}
    params = {c: {p.name: p for p in cmd.params} for c, cmd in commands.items()}

    def same(a, b, name):
        pa, pb = params[a][name], params[b][name]
        assert pa.opts == pb.opts and pa.default == pb.default and type(pa.type) is type(pb.type)
        assert pb.help.endswith(pa.help[1:]) or pa.help.endswith(pb.help[1:]), (name, pa.help, pb.help)
    for name in ("privacy_unit", "max_rows_per_unit", "seed", "ledger_path", "dataset_id", "lock_timeout"):
        same("release", "schema", name)
    for name in ("branching", "budget_split", "options"):
        same("release", "evaluate", name)
    # --delta is the same option, but a release's has a second meaning: under --noise gaussian it is the δ of the
    # release itself, which schema --private (pure ε only) does not have.
    release_delta, schema_delta = params["release"]["delta"], params["schema"]["delta"]
    assert release_delta.opts == schema_delta.opts and release_delta.default == schema_delta.default
    assert "--noise gaussian" in release_delta.help and "--noise" not in schema_delta.help
    assert "categories of text columns" in release_delta.help and "categories of text columns" in schema_delta.help


def test_schema_options_of_private_only_are_refused_without_it(tmp_path):
    data = tmp_path / "d.csv"
    FRAME.to_csv(data, index=False)
    for flag, value in (("--lock-timeout", "5"), ("--dataset-id", "d"), ("--seed", "1")):
        result = CliRunner().invoke(main, ["schema", str(data), flag, value])
        assert result.exit_code == 2 and f"{flag} applies to --private only" in result.output
