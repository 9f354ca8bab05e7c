"""The ledger from the command line: ``budget set`` (in ε with δ, or in ρ) with ``show``, ``history`` and ``verify``;
releases recorded and refused at the cap (exit 3, one line, no output) in each budget definition, a run key that
spends once, hand edits caught, test mode kept out, a held lock (exit 4), a job spec's dated output and run key.
The ``release`` runs here are real processes with the test's private ledger, forked from a server that has already
imported dphist (cli_harness.run_forked; a release that reserves, reads and fails in a new interpreter, imports and
all, is test_cli_errors.py's non_numeric_value)."""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction

import yaml

from dphist.publishing.ledger import REFERENCE_DELTA, Ledger
from dphist.privacy.conversions import epsilon_for

import cli_harness
from cli_harness import Outcome, invoke, run_forked
from conftest import ROOT
from ledger_steps import D, ROW, kinds, release, row

cli_harness.start_fork_server()  # it imports while the tests before these run

CENSUS = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml"),
          "-c", "sex"]


def dphist(*args: str) -> Outcome:
    """``python -m dphist ARGS`` as a real (forked) process in the repository, with the test's private ledger."""
    return run_forked(args, cwd=ROOT)




def _rounded_up_ok(text: str, rho, delta) -> None:
    """The shown ε is the tight conversion's, never below it, and rounded up by less than 1e-5 relative."""
    exact = epsilon_for(rho, delta)
    assert float(text) >= exact and float(text) <= exact * (1 + 1e-5)


def cli(*args, ledger_path):
    result = invoke([*args, "--ledger", str(ledger_path)])
    return result


# ---- budget set, show and history in each definition ----------------------------------------------------------------


def test_budget_set_rho_and_show(tmp_path):
    path = tmp_path / "l.sqlite"
    done = cli("budget", "set", "census", "--rho", "0.5", "--reason", "annual", ledger_path=path)
    assert done.exit_code == 0, done.output
    assert "cap rho 0.5" in done.output and "at delta 0.000001" in done.output
    release(Ledger(path), rho="0.125", dataset="census")
    shown = cli("budget", "show", "census", "--format", "json", ledger_path=path)
    (r,) = json.loads(shown.stdout)
    assert (r["definition"], r["rho_spent"], r["rho_cap"], r["rho_remaining"]) == ("zcdp", "0.125", "0.5", "0.375")
    _rounded_up_ok(r["epsilon_spent_at_delta"], Fraction(1, 8), REFERENCE_DELTA)
    text = cli("budget", "show", "census", ledger_path=path)
    assert text.exit_code == 0
    assert "rho spent 0.125, cap 0.5, remaining 0.375" in text.stdout
    assert f"epsilon {r['epsilon_spent_at_delta']} of {r['epsilon_cap_at_delta']} at delta 0.000001" in text.stdout
    history = cli("budget", "history", "census", ledger_path=path)
    assert history.exit_code == 0 and "rho 1/2" not in history.stdout and "rho 0.125" in history.stdout


def test_budget_set_needs_exactly_one_of_epsilon_and_rho(tmp_path):
    path = tmp_path / "l.sqlite"
    both = cli("budget", "set", "x", "--rho", "0.5", "--epsilon", "1", ledger_path=path)
    neither = cli("budget", "set", "x", ledger_path=path)
    bad = cli("budget", "set", "x", "--rho", "-1", ledger_path=path)
    for result, words in ((both, "not both"), (neither, "missing --epsilon E or --rho R"), (bad, "--rho")):
        assert result.exit_code == 2 and words in result.stderr and result.stderr.count("\n") == 1
    assert not path.exists() or Ledger(path).status() == []


def test_budget_set_warns_when_earlier_releases_do_not_fit_the_cap(tmp_path):
    path = tmp_path / "l.sqlite"
    release(Ledger(path), rho="0.01")
    result = cli("budget", "set", D, "--epsilon", "1", ledger_path=path)
    assert result.exit_code == 0 and "spent rho alone" in result.stderr
    shown = cli("budget", "show", D, ledger_path=path)
    assert "spent rho alone" in shown.stdout and "epsilon spent n/a" in shown.stdout


def test_releases_in_each_definition_against_caps_end_to_end(tmp_path, private_ledger):
    """The release command reserves in its definition: under a ρ cap a --rho, a pure and a --noise gaussian
    release count ρ, ε²/2 and ρ; a refusal exits 3 with one line and no output; under an ε cap --rho is refused."""
    from conftest import ROOT

    census = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml"),
              "-c", "sex", "--dataset-id", "census", "-q"]

    def run(*args, out):
        return run_forked(["release", *census, *args, "-o", str(tmp_path / out)], cwd=ROOT)

    book = Ledger(private_ledger)
    book.set_cap("census", ROW, rho="0.05")
    assert run("--rho", "0.02", out="a").exit_code == 0
    assert run("-e", "0.2", out="b").exit_code == 0  # counts 0.2²/2 = 0.02
    too_much = run("-e", "1", "--delta", "1e-6", "--noise", "gaussian", out="c")
    assert too_much.exit_code == 3 and too_much.stderr.count("\n") == 1 and "only rho 0.01 of the cap 0.05" in \
        too_much.stderr and not (tmp_path / "c").exists()
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["ledger"]["rho_cap"] == "0.05" and report["ledger"]["rho_spent_before"] == "0"
    assert row(book, "census")["rho_spent"] == "0.04"
    book.set_cap("other", ROW, "1", "1e-5")
    refusal = run_forked(["release", *census[:-3], "--dataset-id", "other", "--rho", "0.01", "-o", str(tmp_path / "d")],
                         cwd=ROOT)
    assert refusal.exit_code == 3 and "--noise gaussian" in refusal.stderr and not (tmp_path / "d").exists()
    assert row(book, "other")["releases"] == 0 and kinds(book, "other") == ["CAP"]
    assert book.verify() == []


# ---- releases against the ledger ------------------------------------------------------------------------------------


def test_release_is_recorded_and_cap_refusal_exits_3_without_output(tmp_path, private_ledger):
    assert dphist("budget", "set", "census", "--epsilon", "1", "--reason", "test").exit_code == 0
    first = dphist("release", *CENSUS, "-e", "0.6", "--dataset-id", "census", "-o", str(tmp_path / "a"))
    assert first.exit_code == 0, first.stderr
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["ledger"]["dataset"] == "census" and len(report["ledger"]["reservation_entry"]) == 64
    second = dphist("release", *CENSUS, "-e", "0.6", "--dataset-id", "census", "-o", str(tmp_path / "b"))
    assert second.exit_code == 3
    assert second.stderr.count("\n") == 1 and "only epsilon 0.4 of the cap 1 is left" in second.stderr
    assert not (tmp_path / "b").exists()
    shown = json.loads(dphist("budget", "show", "census", "--format", "json").stdout)
    assert shown[0]["epsilon_spent"] == "0.6" and shown[0]["releases"] == 1
    history = json.loads(dphist("budget", "history", "census", "--format", "json").stdout)
    assert [e["kind"] for e in history] == ["CAP", "RESERVE", "READ", "COMMIT", "PUBLISH"]
    assert history[-2]["detail"]["files"]["sex.csv"]  # the published files' hashes
    assert dphist("budget", "verify").exit_code == 0


def test_same_run_key_twice_spends_once_and_leaves_the_files_alone(tmp_path):
    out = tmp_path / "nightly"
    args = ["release", *CENSUS, "-e", "0.5", "--dataset-id", "census", "-o", str(out), "--run-key", "n-2026-11-21"]
    assert dphist(*args).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = dphist(*args, "--log-format", "json")
    assert again.exit_code == 0, again.stderr
    record = json.loads(again.stderr.strip().splitlines()[-1])
    assert record["status"] == "exists" and record["out"] == str(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads(dphist("budget", "show", "census", "--format", "json").stdout)[0]["epsilon_spent"] == "0.5"


def test_editing_the_ledger_by_hand_is_caught_by_verify(tmp_path, private_ledger):
    assert dphist("release", *CENSUS, "-e", "0.5", "--dataset-id", "c", "-o", str(tmp_path / "a")).exit_code == 0
    db = sqlite3.connect(private_ledger)
    db.execute("UPDATE entries SET epsilon='1/1000' WHERE kind='RESERVE'")
    db.commit()
    result = dphist("budget", "verify")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "edited" in result.stderr and "edited" in result.stdout


def test_test_mode_never_touches_the_ledger(tmp_path, private_ledger):
    assert dphist("release", *CENSUS, "-e", "0.5", "-o", str(tmp_path / "t"), "--seed", "1").exit_code == 0
    assert not private_ledger.exists() or Ledger(private_ledger).status() == []


def test_a_held_lock_exits_4_without_reading(tmp_path, private_ledger):
    Ledger(private_ledger)  # create it
    holder = sqlite3.connect(private_ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = dphist("release", *CENSUS, "-e", "0.5", "-o", str(tmp_path / "x"), "--lock-timeout", "0.5",
                        "--log-format", "json")
    finally:
        holder.execute("ROLLBACK")
    assert result.exit_code == 4
    record = json.loads(result.stderr.strip())
    assert record == {"event": "error", "exit_code": 4, "message": record["message"]}
    assert "still locked" in record["message"] and not (tmp_path / "x").exists()


def test_job_spec_with_dated_output_and_run_key(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "input": str(ROOT / "sample_data" / "census.csv"), "schema": str(ROOT / "sample_data" / "census.schema.yaml"),
        "epsilon": "0.5", "out": "out/{date}", "dataset_id": "census", "run_key": "nightly-{date}",
        "tables": [{"columns": ["sex"]}, {"columns": ["age"], "share": 2}]}))
    first = dphist("release", "--spec", str(spec), "--log-format", "json")
    assert first.exit_code == 0, first.stderr
    record = json.loads(first.stderr.strip().splitlines()[-1])
    assert record["status"] == "ok" and record["run_key"].startswith("nightly-20")
    assert (tmp_path / "out" / record["run_key"][len("nightly-"):] / "report.json").exists()
    assert dphist("release", "--spec", str(spec), "-q").exit_code == 0  # the cron retry: nothing new
    assert json.loads(dphist("budget", "show", "census", "--format", "json").stdout)[0]["epsilon_spent"] == "0.5"


# ---- accounts: checked ids, a missing ledger, runs that require a cap -----------------------------------------------


def test_reading_a_ledger_that_is_not_there_is_an_error_and_an_empty_one_says_so(tmp_path):
    missing = tmp_path / "typo.sqlite"
    for args in (["budget", "show"], ["budget", "show", "census"], ["budget", "history", "census"],
                 ["budget", "verify"]):
        result = cli(*args, ledger_path=missing)
        assert result.exit_code == 2 and result.stdout == "", (args, result.output)
        assert f"ledger {missing}" in result.stderr and "no such file" in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and "restore" not in result.stderr
    assert not missing.exists()  # reading never creates one
    (tmp_path / "empty.sqlite").write_bytes(b"")
    shown = cli("budget", "show", ledger_path=tmp_path / "empty.sqlite")
    assert shown.exit_code == 0 and "no entries; nothing has been recorded there yet" in shown.stdout


def test_budget_commands_take_the_ids_releases_take(tmp_path):
    path = tmp_path / "l.sqlite"
    for dataset in ["", "  ", "a\nb", " census"]:
        for args in (["budget", "set", dataset, "--epsilon", "1"], ["budget", "show", dataset],
                     ["budget", "history", dataset]):
            result = cli(*args, ledger_path=path)
            assert result.exit_code == 2 and result.stderr.startswith("Error: the data set id "), result.output
    assert not path.exists()
    assert cli("budget", "set", "cafe\u0301", "--epsilon", "1", ledger_path=path).exit_code == 0
    assert json.loads(cli("budget", "show", "caf\u00e9", "--format", "json", ledger_path=path).stdout)[0]["dataset"] \
        == "caf\u00e9"


def test_a_cap_set_on_a_path_as_typed_warns_where_its_releases_go(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "l.sqlite"
    done = cli("budget", "set", "sample_data/census.csv", "--epsilon", "1", ledger_path=path)
    assert done.exit_code == 0
    assert f"recorded as '{ROOT / 'sample_data' / 'census.csv'}' unless they give --dataset-id" in done.stderr
    missing = cli("budget", "show", "sample_data", ledger_path=path)
    assert missing.exit_code == 2 and f"recorded as '{ROOT / 'sample_data'}'" in missing.stderr


def test_require_cap_refuses_an_uncapped_data_set_before_reading(tmp_path, private_ledger):
    release = ["release", *CENSUS, "-e", "0.5", "--dataset-id", "census"]
    for how, extra, env in (("flag", ["--require-cap"], {}), ("variable", [], {"DPHIST_REQUIRE_CAP": "1"})):
        out = tmp_path / how
        refused = invoke([*release, "-o", str(out), *extra], env=env)
        assert refused.exit_code == 3 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.output
        assert "'census' has no cap" in refused.stderr and "nothing was read or charged" in refused.stderr
        assert "dphist budget set census --epsilon E" in refused.stderr and not out.exists()
    assert not private_ledger.exists() or Ledger(private_ledger).status() == []
    assert invoke([*release, "-o", str(tmp_path / "x"), "-q"], env={"DPHIST_REQUIRE_CAP": "maybe"}).exit_code == 2
    assert invoke(["budget", "set", "census", "--epsilon", "1"]).exit_code == 0
    done = invoke([*release, "-o", str(tmp_path / "capped"), "--require-cap"])
    assert done.exit_code == 0 and "Warning" not in done.stderr, done.output


def test_an_uncapped_release_warns_unless_quiet(tmp_path):
    release = ["release", *CENSUS, "-e", "0.5", "--dataset-id", "census"]
    loud = invoke([*release, "-o", str(tmp_path / "a")])
    assert loud.exit_code == 0
    (warning,) = [line for line in loud.stderr.splitlines() if line.startswith("Warning: ")]
    assert "'census' has no cap" in warning and "--require-cap" in warning
    assert loud.stderr.splitlines()[-1].startswith("wrote ")  # the result stays the last line
    logged = invoke([*release, "-o", str(tmp_path / "b"), "--log-format", "json"])
    events = [json.loads(line) for line in logged.stderr.splitlines()]
    assert [e["event"] for e in events] == ["warning", "release"] and events[0]["dataset"] == "census"
    quiet = invoke([*release, "-o", str(tmp_path / "c"), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    seeded = invoke([*release, "-o", str(tmp_path / "d"), "--seed", "1"])  # test mode charges nothing
    assert seeded.exit_code == 0 and "no cap" not in seeded.stderr
