"""Options shared by the commands: declared once with one meaning (--privacy-unit, --delta, --seed, --ledger and
the others in release and schema; the algorithm options in release and evaluate), the ledger option naming the
SQLite file in every command's help, and the options of ``schema --private`` refused without it."""

from __future__ import annotations

import pandas as pd
import pytest

from dphist.cli import main

from cli_harness import invoke

FRAME = pd.DataFrame({"a": [0, 1, 2, 3] * 5, "b": ["x", "y"] * 10})


@pytest.mark.parametrize("command", [["release"], ["schema"], ["budget", "show"], ["budget", "set"],
                                     ["budget", "history"], ["budget", "verify"], ["budget", "recover"]])
def test_every_ledger_option_names_the_sqlite_file(command):
    text = invoke([*command, "--help"]).output
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
        result = invoke(["schema", str(data), flag, value])
        assert result.exit_code == 2 and f"{flag} applies to --private only" in result.output
