"""A job spec merged with the command line (``dphist release --spec``, in-process through cli_harness).

- A budget on the command line (--epsilon or --rho) replaces the spec's budget as a whole (epsilon, rho, delta,
  noise); without one, --noise and --delta replace the spec's: every combination, by the report's budget fields
  or by the refusal it must give.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

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
    # Laplace noise in place of the spec's Gaussian, with the spec's delta: a delta a pure release cannot use.
    (APPROX, ["--noise", "laplace"], "delta is only used to discover categories"),
])
def test_budget_contradictions_on_the_command_line_are_refused(tmp_path, spec_budget, flags, message):
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    result = _run("--spec", _spec(tmp_path, spec_budget), *flags, "--out", out, "--ledger", ledger)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and not out.exists() and not ledger.exists()
