"""A job spec merged with the command line (``dphist release --spec``, in-process through cli_harness).

- A budget on the command line (--epsilon or --rho) replaces the spec's budget as a whole (epsilon, rho, delta,
  noise); without one, --noise and --delta replace the spec's: every combination, by the report's budget fields
  or by the refusal it must give.
- What is protected and where it is charged (ledger, privacy_unit, max_rows_per_unit, group_size) can be in the
  spec, the ledger relative to the spec; the command line wins field by field, and --privacy-unit replaces the
  spec's unit with its bound.
- Algorithm options that would contradict each other or the release's workload are refused before reading.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from dphist.publishing.ledger import Ledger
from dphist.privacy import format_fraction
from dphist.privacy.conversions import rho_for

from cli_harness import Outcome, invoke
from conftest import SAMPLE

DATA, SCHEMA = SAMPLE / "census.csv", SAMPLE / "census.schema.yaml"

PURE = "epsilon: '1'"
APPROX = "epsilon: '1'\ndelta: '1e-6'\nnoise: gaussian"
ZCDP = "rho: '0.25'"


def _spec(d: Path, budget: str, extra: str = "") -> Path:
    """A spec releasing one identity table of sex from the sample data, with ``budget`` and ``extra`` lines."""
    spec = d / "job.yaml"
    spec.write_text(f"input: {DATA}\nschema: {SCHEMA}\n{budget}\n{extra}"
                    "tables:\n  - {columns: [sex], algorithm: identity}\n")
    return spec


def _run(*args) -> Outcome:
    result = invoke(["release", *map(str, args)])
    assert not result.crash, result.crash
    return result


def _budget(report: dict) -> tuple:
    """The report's (definition, ε spent, δ spent, ρ spent), None where a definition has no such figure."""
    return (report["definition"], report.get("epsilon_spent"), report.get("delta_spent"), report.get("rho_spent"))


RHO_1_1E6 = format_fraction(rho_for(1, Fraction(1, 10**6)))
RHO_2_1E7 = format_fraction(rho_for(2, Fraction(1, 10**7)))
RHO_1_1E7 = format_fraction(rho_for(1, Fraction(1, 10**7)))


@pytest.mark.parametrize("spec_budget, flags, expected", [
    # The spec's budget alone.
    (APPROX, [], ("approximate", "1", "0.000001", RHO_1_1E6)),
    (ZCDP, [], ("zcdp", None, None, "0.25")),
    (PURE, [], ("pure", "1", "0", None)),
    # --rho replaces the spec's epsilon, delta and noise: no "--delta does not apply to --rho".
    (APPROX, ["--rho", "0.01"], ("zcdp", None, None, "0.01")),
    (PURE, ["--rho", "0.01"], ("zcdp", None, None, "0.01")),
    # --epsilon alone is pure epsilon with Laplace noise: the spec's delta and Gaussian noise are left out.
    (APPROX, ["--epsilon", "2"], ("pure", "2", "0", None)),
    (ZCDP, ["--epsilon", "2"], ("pure", "2", "0", None)),
    # ... unless the command line gives them too.
    (APPROX, ["--epsilon", "2", "--delta", "1e-7", "--noise", "gaussian"], ("approximate", "2", "0.0000001",
                                                                             RHO_2_1E7)),
    # Without a budget on the command line, --delta and --noise replace the spec's own.
    (APPROX, ["--delta", "1e-7"], ("approximate", "1", "0.0000001", RHO_1_1E7)),
    (PURE, ["--noise", "gaussian", "--delta", "1e-6"], ("approximate", "1", "0.000001", RHO_1_1E6)),
    # Laplace noise in place of the spec's Gaussian keeps the spec's delta, which no step of this declared table
    # can use: charged as 0, like any delta no step uses.
    (APPROX, ["--noise", "laplace"], ("pure", "1", "0", None)),
])
def test_a_command_line_budget_replaces_the_specs_as_a_whole(tmp_path, spec_budget, flags, expected):
    out = tmp_path / "out"
    result = _run("--spec", _spec(tmp_path, spec_budget), *flags, "--seed", "1", "--out", out, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert _budget(json.loads((out / "report.json").read_text())) == expected


@pytest.mark.parametrize("spec_budget, flags, message", [
    # The command line's budget is all there is: Gaussian noise needs its delta there too.
    (APPROX, ["--epsilon", "2", "--noise", "gaussian"], "needs --delta D > 0"),
    # A delta given on the command line with the spec's rho is a contradiction the user wrote.
    (ZCDP, ["--delta", "1e-6"], "--delta does not apply to --rho"),
])
def test_budget_contradictions_on_the_command_line_are_refused(tmp_path, spec_budget, flags, message):
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    result = _run("--spec", _spec(tmp_path, spec_budget), *flags, "--out", out, "--ledger", ledger)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and not out.exists() and not ledger.exists()


UNIT = "ledger: books/ledger.sqlite\nprivacy_unit: state\nmax_rows_per_unit: 2\ngroup_size: 2\n"


def test_the_spec_names_its_ledger_and_what_is_protected(tmp_path):
    """The spec's ledger (relative to the spec, created there) is charged in the unit the spec protects, ahead of
    $DPHIST_LEDGER; the report states the unit, its bound and the group."""
    spec = _spec(tmp_path, PURE, UNIT)
    elsewhere = tmp_path / "env-ledger.sqlite"
    out = tmp_path / "out"
    result = invoke(["release", "--spec", str(spec), "--out", str(out), "--quiet"],
                    env={"DPHIST_LEDGER": str(elsewhere)})
    assert result.exit_code == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["contribution_bounding"]["unit_column"] == "state"
    assert report["contribution_bounding"]["max_rows_per_unit"] == 2
    # 49/50 of ε for the table (a fiftieth measures what the unit cap dropped), over 2 rows x 2 units.
    assert report["group_privacy"]["group_size"] == 2 and report["tables"][0]["epsilon_per_row"] == "0.245"
    assert not elsewhere.exists()
    (row,) = Ledger(tmp_path / "books" / "ledger.sqlite").status()
    assert row["unit"] == "unit:state" and row["epsilon_spent"] == "1"


def test_the_command_line_wins_over_the_specs_protection_field_by_field(tmp_path):
    spec = _spec(tmp_path, PURE, UNIT)
    ledger = tmp_path / "cli-ledger.sqlite"
    # --ledger, --max-rows-per-unit and --group-size replace the spec's; the unit stays the spec's.
    result = _run("--spec", spec, "--ledger", ledger, "--max-rows-per-unit", "3", "--group-size", "1",
                  "--out", tmp_path / "a", "--quiet")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["contribution_bounding"]["unit_column"] == "state"
    assert report["contribution_bounding"]["max_rows_per_unit"] == 3 and "group_privacy" not in report
    assert not (tmp_path / "books").exists() and Ledger(ledger).status()[0]["unit"] == "unit:state"
    # --privacy-unit replaces the spec's unit together with its bound: a bound chosen for states is not one for
    # another column, so it must be given again.
    result = _run("--spec", spec, "--ledger", ledger, "--privacy-unit", "education", "--out", tmp_path / "b")
    assert result.exit_code == 2 and "--max-rows-per-unit" in result.stderr, result.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("flags, message", [
    (["-a", "dawa", "--option", "ratio=0.3", "--option", "ratio=0.4"], "--option ratio is given twice"),
    (["-a", "dawa", "--option", "ratio=0.3", "--option", " ratio =0.3"], "--option ratio is given twice"),
    (["-a", "dpcube", "--option", "max-side=3", "--option", "max_side=4"], "--option max_side is given twice"),
    (["-a", "h", "--branching", "4", "--option", "branching=8"], "--branching and --option branching"),
    (["-a", "h", "--budget-split", "uniform", "--option", "budget_split=geometric"], "--budget-split and --option"),
    (["--workload", "ranges", "--option", "workload=cells"], "'workload' is the release's own setting"),
    (["-a", "mwem", "--option", "workload=dyadic"], "'workload' is the release's own setting"),
])
def test_algorithm_options_that_would_conflict_are_refused(tmp_path, flags, message):
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    result = _run(DATA, "--schema", SCHEMA, "--epsilon", "1", "--columns", "income", *flags, "--out", out,
                  "--ledger", ledger)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and not out.exists() and not ledger.exists()


def test_the_reports_workload_is_the_releases(tmp_path):
    """mwem's candidate ranges (option 'queries') are not the table's workload: the report states the release's."""
    spec = tmp_path / "job.yaml"
    spec.write_text(f"input: {DATA}\nschema: {SCHEMA}\nepsilon: '1'\nworkload: cells\ntables:\n"
                    "  - {columns: [income], algorithm: mwem, options: {queries: dyadic}}\n")
    result = _run("--spec", spec, "--seed", "1", "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.stderr
    (table,) = json.loads((tmp_path / "out" / "report.json").read_text())["tables"]
    assert table["workload"] == "cells" and table["structure"]["queries"] == "dyadic"


def test_a_spec_that_requires_a_cap_is_refused_for_an_uncapped_data_set_and_runs_under_one(tmp_path):
    """``require_cap: true`` in the spec does what --require-cap does: exit 3 before reading, nothing charged,
    while the data set has no cap; once capped, the same spec releases."""
    spec = _spec(tmp_path, PURE, "dataset_id: census\nrequire_cap: true\n")
    ledger = tmp_path / "ledger.sqlite"
    refused = _run("--spec", spec, "--out", tmp_path / "out", "--ledger", ledger, "--quiet")
    assert refused.exit_code == 3 and "no cap" in refused.stderr, refused.stderr
    assert not (tmp_path / "out").exists()
    assert all(r["epsilon_spent"] in (None, "0") for r in Ledger(ledger).status())
    Ledger(ledger).set_cap("census", "row", epsilon=5)
    done = _run("--spec", spec, "--out", tmp_path / "out", "--ledger", ledger, "--quiet")
    assert done.exit_code == 0, done.stderr
    (row,) = Ledger(ledger).status()
    assert row["epsilon_spent"] == "1"
