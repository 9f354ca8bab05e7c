"""Releases under ρ-zCDP (--rho) and (ε, δ)-DP with discrete Gaussian noise (--epsilon --delta --noise gaussian):
the CLI and the API end to end, the report's budget fields, the released noise measured against 1/(2ρ), job specs,
the ledger, and every refusal (one line, non-zero exit, nothing written, nothing charged)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dphist
from dphist.cli import main
from dphist.errors import UsageError
from dphist.ledger import Ledger
from dphist.output import DELTA_REFERENCE
from dphist.privacy import discrete_gaussian_halfwidth, discrete_gaussian_variance, format_fraction
from dphist.privacy.conversions import delta_for, epsilon_for, loose_rho, rho_for

SCHEMA = "sample_data/census.schema.yaml"
DATA = "sample_data/census.csv"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    from conftest import ROOT
    monkeypatch.chdir(ROOT)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _implied_is_rounded_up(text: str, exact: float) -> None:
    """``epsilon_implied`` is ``exact`` rounded UP to 6 significant digits (never smaller: it is a claim)."""
    value = float(text)
    assert value >= exact and value - exact <= 1e-5 * exact


# --------------------------------------------------------------------------------------------------------------
# --rho end to end


def test_rho_release_through_the_cli(tmp_path):
    out = tmp_path / "rel"
    result = run("release", DATA, "--schema", SCHEMA, "--rho", "0.5", "--columns", "age,sex", "--algorithm",
                 "identity", "--seed", "3", "--out", out)
    assert result.exit_code == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["definition"] == "zcdp" and "zCDP" in report["guarantee"]
    assert report["rho_requested"] == "0.5" and report["rho_spent"] == "0.5"
    assert "epsilon_requested" not in report and "epsilon_spent" not in report and "delta_spent" not in report
    assert report["delta_reference"] == format_fraction(DELTA_REFERENCE) == "0.000001"
    _implied_is_rounded_up(report["epsilon_implied"], epsilon_for(Fraction(1, 2), DELTA_REFERENCE))
    assert delta_for(Fraction(1, 2), float(report["epsilon_implied"])) <= 1e-6
    assert "rhos add" in report["composition"] and "discrete Gaussian" in report["noise"]
    (table,) = report["tables"]
    assert table["rho"] == "0.5" and "epsilon" not in table
    (step,) = table["steps"]
    # Identity: one record changes one cell by 1, so Δ₂² = 1 and σ² = Δ₂²/(2ρ) = 1.
    assert step["mechanism"] == "discrete Gaussian" and step["l2_sensitivity_squared"] == 1
    assert step["sigma2"] == "1" and step["rho"] == "0.5" and "epsilon" not in step
    assert step["noise_sd"] == pytest.approx(discrete_gaussian_variance(Fraction(1)) ** 0.5, abs=1e-4)
    # The confidence interval is the exact discrete Gaussian one (cut at 0 and rounded by output.py).
    frame = pd.read_csv(out / "age_sex.csv")
    half = discrete_gaussian_halfwidth(Fraction(1))
    assert frame["ci_lower"].notna().all() and frame["ci_upper"].notna().all()
    assert np.array_equal(frame["ci_upper"], frame["noisy_count"] + half)
    assert np.array_equal(frame["ci_lower"], np.maximum(frame["noisy_count"] - half, 0))
    assert "privacy (rho-zCDP): rho 0.5 spent of 0.5 requested" in result.stderr
    assert "rho 0.5" in result.stderr.splitlines()[-2]  # the table's line names its rho


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
    assert table["rho"] == "0.5" and table["rho_per_row"] == "0.125"  # ρ/K²: one row alone moves L2 by 1
    assert table["steps"][0]["sigma2"] == "4" and table["steps"][0]["l2_sensitivity_squared"] == 4


# --------------------------------------------------------------------------------------------------------------
# (ε, δ) with Gaussian noise


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


def test_epsilon_delta_gaussian_through_the_cli_json_log(tmp_path):
    result = run("release", DATA, "--schema", SCHEMA, "--epsilon", "1", "--delta", "1e-6", "--noise", "gaussian",
                 "--columns", "sex", "--seed", "1", "--out", tmp_path / "r", "--log-format", "json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stderr.splitlines()[-1])
    assert record["definition"] == "approximate" and record["epsilon_spent"] == "1"
    assert record["rho_spent"] == format_fraction(rho_for(1, Fraction(1, 10**6)))


# --------------------------------------------------------------------------------------------------------------
# The noise itself


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


# --------------------------------------------------------------------------------------------------------------
# Job specs


def _job(tmp_path, budget: str) -> str:
    """A job spec of two identity tables (shares 1 and 3) with ``budget``; paths absolute (a spec's relative
    paths are taken relative to it)."""
    from conftest import ROOT
    spec = tmp_path / "job.yaml"
    spec.write_text(f"input: {ROOT / DATA}\nschema: {ROOT / SCHEMA}\n{budget}\ntables:\n"
                    "  - {name: ages, columns: [age], algorithm: identity, share: 1}\n"
                    "  - {name: sexes, columns: [sex], algorithm: identity, share: 3}\n")
    return str(spec)


def test_job_spec_with_rho(tmp_path):
    spec = _job(tmp_path, 'rho: "0.25"')
    result = run("release", "--spec", spec, "--seed", "1", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["definition"] == "zcdp" and report["rho_spent"] == "0.25"
    assert [t["rho"] for t in report["tables"]] == ["0.0625", "0.1875"]
    # A budget on the command line replaces the job's as a whole (here: pure ε).
    result = run("release", "--spec", spec, "--epsilon", "1", "--seed", "1", "--out", tmp_path / "p")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "p" / "report.json").read_text())["definition"] == "pure"


def test_job_spec_with_epsilon_delta_and_gaussian_noise(tmp_path):
    spec = _job(tmp_path, "epsilon: 1\ndelta: 1e-6\nnoise: gaussian")
    result = run("release", "--spec", spec, "--seed", "1", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["definition"] == "approximate"
    assert report["rho_spent"] == format_fraction(rho_for(1, Fraction(1, 10**6)))


# --------------------------------------------------------------------------------------------------------------
# Refusals: one line, exit 2, nothing written, nothing charged


TEXT_CSV = "kind,x\na,1\nb,2\na,3\n"


@pytest.mark.parametrize("args, message", [
    (["--epsilon", "1", "--rho", "0.5"], "give --epsilon or --rho, not both"),
    ([], "missing the privacy budget"),
    (["--rho", "0"], "rho must be greater than 0"),
    (["--rho=-1"], "rho must be greater than 0"),
    (["--rho", "lots"], "rho must be a number"),
    (["--rho", "nan"], "rho must be a finite number"),
    (["--rho", "1e999999999"], "rho is out of range"),
    (["--rho", "1001"], "rho must be at most 1000"),
    (["--rho", "1e-20"], "below the minimum"),
    (["--epsilon", "1", "--noise", "gaussian"], "needs --delta D > 0"),
    (["--epsilon", "1", "--noise", "gaussian", "--delta", "0.01"], "delta must be between 0 and 1e-3"),
    (["--rho", "0.5", "--noise", "laplace"], "for Laplace noise give --epsilon"),
    (["--rho", "0.5", "--delta", "1e-6"], "--delta does not apply to --rho"),
    (["--rho", "0.5", "--noise", "uniform"], "'uniform' is not one of"),
])
def test_bad_budgets_are_refused_before_anything_is_charged(tmp_path, args, message):
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    result = run("release", DATA, "--schema", SCHEMA, "--columns", "sex", *args, "--ledger", ledger,
                 "--out", out)
    assert result.exit_code == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
    assert not out.exists() and not ledger.exists()


@pytest.mark.parametrize("budget", [["--rho", "0.5"], ["--epsilon", "1", "--delta", "1e-6", "--noise", "gaussian"]])
def test_partition_selection_and_discovery_are_refused_under_zcdp(tmp_path, budget):
    """Without a schema the domains would be found privately (partition selection needs a δ of its own): refused
    with one line before any row is read, nothing charged."""
    data = tmp_path / "d.csv"
    data.write_text(TEXT_CSV)
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    for extra in ([], ["--columns", "x"]):
        result = run("release", data, *budget, *extra, "--ledger", ledger, "--out", out)
        assert result.exit_code == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert "has no declared domain" in result.stderr and "declare the categories" in result.stderr
        assert not out.exists() and not ledger.exists()


def test_api_refusals_are_usage_errors_before_the_input_is_opened():
    for keywords, message in [({"epsilon": 1, "rho": 1}, "not both"), ({}, "missing the privacy budget"),
                              ({"rho": "0.1", "noise": "laplace"}, "Laplace"),
                              ({"epsilon": 1, "noise": "gaussian"}, "needs --delta"),
                              ({"rho": "0.1", "noise": "gauss"}, "unknown noise 'gauss'")]:
        with pytest.raises(UsageError, match=message):
            dphist.release("no/such/file.csv", **keywords)


def test_job_spec_refusals(tmp_path):
    for budget, message in [('epsilon: 1\nrho: "0.5"', "give 'epsilon' or 'rho', not both"),
                            ("rho: 1\nnoise: normal", "'noise' must be laplace or gaussian")]:
        result = run("release", "--spec", _job(tmp_path, budget), "--seed", "1", "--out", tmp_path / "o")
        assert result.exit_code == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


# --------------------------------------------------------------------------------------------------------------
# The ledger


def test_rho_release_is_charged_in_rho_and_a_rho_cap_holds(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    common = [DATA, "--schema", SCHEMA, "--columns", "sex", "--algorithm", "identity", "--ledger", ledger,
              "--dataset-id", "census", "--quiet"]
    assert run("budget", "set", "census", "--rho", "0.3", "--ledger", ledger).exit_code == 0
    first = run("release", *common, "--rho", "0.25", "--out", tmp_path / "a")
    assert first.exit_code == 0, first.stderr
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["rho_spent"] == "0.25" and report["test_mode"] is False
    assert report["ledger"]["dataset"] == "census"
    (row,) = Ledger(ledger).status("census")
    assert row["rho_spent"] == "0.25" and row["rho_cap"] == "0.3"
    # 0.25 + 0.1 > 0.3: refused (exit 3) before reading, nothing more charged, nothing written.
    second = run("release", *common, "--rho", "0.1", "--out", tmp_path / "b")
    assert second.exit_code == 3 and len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert not (tmp_path / "b").exists()
    (row,) = Ledger(ledger).status("census")
    assert row["rho_spent"] == "0.25"
    # An (ε, δ) release with Gaussian noise counts its ρ against the ρ cap: rho_for(0.1, 1e-6) is below 0.05.
    third = run("release", *common, "--epsilon", "0.1", "--delta", "1e-6", "--noise", "gaussian",
                "--out", tmp_path / "c")
    assert third.exit_code == 0, third.stderr
    (row,) = Ledger(ledger).status("census")
    assert Fraction(row["rho_spent"]) == Fraction("0.25") + rho_for("0.1", Fraction(1, 10**6))
