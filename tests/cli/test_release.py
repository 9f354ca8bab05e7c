"""The release command end to end (``dphist release``, in-process through cli_harness): layouts, formats, job
specs, the report and what it must never contain, test mode, --overwrite and algorithm options (and the
``algorithms`` and ``schema`` commands beside it); ρ-zCDP (--rho) and (ε, δ) with discrete Gaussian noise
(--noise gaussian): the report's budget fields, job specs, the ledger, and every refusal (one line, non-zero exit,
nothing written, nothing charged); workloads, marginal sets, a release without a schema, the cell limit, and the
real UCI Adult table from ../shared (skipped when it is absent)."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

import dphist
from dphist.publishing.ledger import Ledger
from dphist.publishing.assemble import DELTA_REFERENCE
from dphist.privacy import discrete_gaussian_halfwidth, discrete_gaussian_variance, format_fraction
from dphist.privacy.conversions import delta_for, epsilon_for, rho_for

from marginal_files import largest_shared_difference, read_marginals, six_binary_columns
from cli_harness import Outcome, invoke
from conftest import ROOT, SAMPLE
from workload_data import WORKLOAD_SCHEMA, workload_frame as _frame

DATA, PARQUET, SCHEMA = (str(SAMPLE / "census.csv"), str(SAMPLE / "census.parquet"),
                         str(SAMPLE / "census.schema.yaml"))
ARGS = ["--schema", SCHEMA, "--epsilon", "1"]
ADULT_SCHEMA = ROOT / "bench" / "adult.schema.yaml"


def run(*args) -> Outcome:
    """``dphist ARGS`` in-process; an exception escaping the CLI fails the test."""
    result = invoke(args)
    assert not result.crash, result.crash
    return result


# ---- layouts, formats, job specs and the report ---------------------------------------------------------------------


def test_two_way_table_layout_and_post_processing(tmp_path):
    out = tmp_path / "rel"
    result = run("release", DATA, *ARGS, "--columns", "age,sex", "--out", str(out),
                 "--algorithm", "identity")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dphist-release.json", "age_sex.csv", "report.json"]
    table = pd.read_csv(out / "age_sex.csv", keep_default_na=False)
    assert list(table.columns) == ["age_lower", "age_upper", "sex", "count", "noisy_count", "ci_lower", "ci_upper",
                                   "ci_covers", "bucket"]
    assert len(table) == 16 * 2
    assert (table["ci_covers"] == "count").all() and (table["bucket"] == "").all()  # identity: every cell's count
    assert table["age_lower"].tolist()[:4] == [15, 15, 20, 20] and table["sex"].tolist()[:2] == ["F", "M"]
    assert (table["count"] >= 0).all() and table["count"].dtype == np.int64
    assert table["count"].sum() == max(table["noisy_count"].sum(), 0)
    assert (table["ci_lower"] <= table["noisy_count"]).all() and (table["noisy_count"] <= table["ci_upper"]).all()
    assert "released 1 table" in result.stderr and "epsilon 1 spent of 1" in result.stderr


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_formats(tmp_path, fmt):
    out = tmp_path / fmt
    result = run("release", PARQUET, *ARGS, "-c", "education,sex", "-f", fmt, "-o", str(out),
                 "--seed", "5")
    assert result.exit_code == 0, result.stderr
    path = out / f"education_sex.{fmt}"
    if fmt == "csv":
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    elif fmt == "parquet":
        table = pq.read_table(path).to_pandas()
    else:
        table = pd.DataFrame(json.loads(path.read_text()))
    assert len(table) == 9 * 2  # 8 levels + the declared null category, times 2
    assert table["education"].isna().sum() == 2  # the null category cells
    assert list(table.columns)[2:] == ["count", "noisy_count", "ci_lower", "ci_upper", "ci_covers", "bucket"]
    assert (table["ci_covers"] == "count").all() and table["bucket"].isna().all()


def test_report_contents_and_no_true_counts(tmp_path):
    out = tmp_path / "r"
    result = run("release", DATA, *ARGS, "-c", "sex", "-o", str(out), "--raw", "-a", "identity")
    assert result.exit_code == 0
    report = json.loads((out / "report.json").read_text())
    for key in ("dphist_version", "input", "privacy_unit", "neighbouring", "epsilon_requested", "epsilon_spent",
                "delta_requested", "delta_spent", "composition", "test_mode", "tables"):
        assert key in report
    assert report["neighbouring"] == "add/remove one record" and report["test_mode"] is False
    table = report["tables"][0]
    assert table["cells"] == 2 and table["algorithm"] == "identity"
    step = table["steps"][0]
    assert step["mechanism"] == "discrete Laplace" and step["sensitivity"] == 1 and step["scale"] == "1"
    assert step["epsilon"] == "1" and step["noise_sd"] == pytest.approx(1.3566, abs=1e-3)
    assert table["expected_cell_sd"] == pytest.approx(1.3566, abs=1e-3)
    # Nothing the data decides without noise: the true counts, the row count, the file size.
    text = (out / "report.json").read_text()
    truth = pd.read_csv(DATA)["sex"].value_counts()
    for secret in [60000, *truth.tolist(), (shutil.os.path.getsize(DATA))]:
        assert str(secret) not in text


def test_job_spec_with_shares_and_date(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "input": "data.parquet", "schema": "schema.yaml", "epsilon": "1.5", "out": "out/{date}", "format": "json",
        "tables": [{"name": "age_by_sex", "columns": ["age", "sex"], "share": 2},
                   {"columns": ["income"], "algorithm": "identity", "share": 1}],
    }))
    shutil.copy(SCHEMA, tmp_path / "schema.yaml")
    shutil.copy(PARQUET, tmp_path / "data.parquet")
    result = run("release", "--spec", str(spec), "--seed", "1")
    assert result.exit_code == 0, result.stderr
    outs = list((tmp_path / "out").iterdir())
    assert len(outs) == 1 and len(outs[0].name) == 10  # YYYY-MM-DD
    report = json.loads((outs[0] / "report.json").read_text())
    assert [(t["name"], t["epsilon"]) for t in report["tables"]] == [("age_by_sex", "1"), ("income", "0.5")]
    assert (outs[0] / "age_by_sex.json").exists() and report["test_mode"] is True
    assert "NOT differentially private" in result.stderr


def test_overwrite_replaces_previous_release(tmp_path):
    out = tmp_path / "o"
    assert run("release", DATA, *ARGS, "-c", "sex", "-o", str(out)).exit_code == 0
    result = run("release", DATA, *ARGS, "-c", "age", "-o", str(out), "--overwrite")
    assert result.exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [".dphist-release.json", "age.csv", "report.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging or backup left


def test_algorithms_and_schema_commands(tmp_path):
    result = run("algorithms")
    assert result.exit_code == 0 and "identity" in result.output
    for name in ("noisefirst", "structurefirst", "dpcube", "kdtree"):
        assert any(line.startswith(f"{name} ") for line in result.output.splitlines())
    assert "option cap (required): public upper bound" in result.output
    assert "option alpha (default 9/10): share of ε" in result.output
    draft = tmp_path / "draft.yaml"
    result = run("schema", DATA, "-o", str(draft))
    assert result.exit_code == 0 and "NOT private" in result.stderr
    text = draft.read_text()
    assert "COPIED FROM THE DATA" in text
    schema = dphist.declare.schema.load_schema(draft)  # the draft is a valid schema
    assert schema["sex"].values == ("F", "M") and schema["income"].null_cell
    again = run("schema", DATA, "-o", str(draft))
    assert again.exit_code == 2  # refuses to overwrite without --overwrite


def test_test_mode_stamps_the_release_directory(tmp_path):
    out = tmp_path / "t"
    result = run("release", DATA, *ARGS, "-c", "sex", "-o", str(out), "--seed", "3")
    assert result.exit_code == 0
    assert "NOT differentially private" in (out / "NOT_PRIVATE.txt").read_text()
    assert result.stderr.count("NOT differentially private") == 1  # one banner, not two
    plain = tmp_path / "p"
    assert run("release", DATA, *ARGS, "-c", "sex", "-o", str(plain)).exit_code == 0
    assert not (plain / "NOT_PRIVATE.txt").exists()


def test_usage_errors_are_reported_before_the_output_directory_check(tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    result = run("release", DATA, "--schema", SCHEMA,
                 "--epsilon", "0", "-c", "sex", "-o", str(out))
    assert result.exit_code == 2 and "epsilon" in result.stderr and "not empty" not in result.stderr


def test_option_flag_sets_algorithm_options(tmp_path):
    out = tmp_path / "o"
    result = run("release", DATA, *ARGS, "-c", "income", "-a", "dpcube", "--option", "alpha=0.25",
                 "--option", "block=1",
                 "--option", "release=gls", "-o", str(out), "--seed", "1")
    assert result.exit_code == 0, result.stderr
    report = json.loads((out / "report.json").read_text())["tables"][0]
    assert report["structure"]["alpha"] == "1/4" and [s["epsilon"] for s in report["steps"]] == ["0.25", "0.75"]
    bad = run("release", DATA, *ARGS, "-c", "income", "-a", "dpcube", "--option", "alpha=2",
              "-o", str(tmp_path / "b"))
    assert bad.exit_code == 2 and "alpha" in bad.stderr
    assert run("release", DATA, *ARGS, "-c", "income", "--option", "oops").exit_code == 2


# ---- ρ-zCDP (--rho) and (ε, δ) with Gaussian noise ------------------------------------------------------------------


def _implied_is_rounded_up(text: str, exact: float) -> None:
    """``epsilon_implied`` is ``exact`` rounded UP to 6 significant digits (never smaller: it is a claim)."""
    value = float(text)
    assert value >= exact and value - exact <= 1e-5 * exact


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


def test_epsilon_delta_gaussian_through_the_cli_json_log(tmp_path):
    result = run("release", DATA, "--schema", SCHEMA, "--epsilon", "1", "--delta", "1e-6", "--noise", "gaussian",
                 "--columns", "sex", "--seed", "1", "--out", tmp_path / "r", "--log-format", "json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stderr.splitlines()[-1])
    assert record["definition"] == "approximate" and record["epsilon_spent"] == "1"
    assert record["rho_spent"] == format_fraction(rho_for(1, Fraction(1, 10**6)))


def _job(tmp_path, budget: str) -> str:
    """A job spec of two identity tables (shares 1 and 3) with ``budget``; paths absolute (a spec's relative
    paths are taken relative to it)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(f"input: {DATA}\nschema: {SCHEMA}\n{budget}\ntables:\n"
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


def test_job_spec_refusals(tmp_path):
    for budget, message in [('epsilon: 1\nrho: "0.5"', "give 'epsilon' or 'rho', not both"),
                            ("rho: 1\nnoise: normal", "'noise' must be laplace or gaussian")]:
        result = run("release", "--spec", _job(tmp_path, budget), "--seed", "1", "--out", tmp_path / "o")
        assert result.exit_code == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


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


# ---- workloads ------------------------------------------------------------------------------------------------------






@pytest.mark.time_limit(20)  # several releases whose reports simulate hdmm's expected error: ~3.5 s alone
def test_cli_workload_flag_and_job_spec(tmp_path):
    frame = _frame(3000)
    frame.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(WORKLOAD_SCHEMA))
    out = tmp_path / "out"
    result = invoke(["release", str(tmp_path / "d.csv"), "--epsilon", "1", "--schema",
                     str(tmp_path / "s.json"), "--columns", "x", "--workload", "cells", "--seed", "1",
                     "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["tables"][0]["workload"] == "cells"
    assert "for cells, exact:" in result.output  # auto gives the cells workload identity: its figures are exact
    (tmp_path / "job.yaml").write_text(
        f"input: {tmp_path / 'd.csv'}\nschema: {tmp_path / 's.json'}\nepsilon: '1'\nworkload: marginals\n"
        "tables:\n  - {name: a, columns: [x, g]}\n  - {name: b, columns: [x], workload: ranges}\n")
    result = invoke(["release", "--spec", str(tmp_path / "job.yaml"), "--seed", "1", "--out",
                     str(tmp_path / "out2")])
    assert result.exit_code == 0, result.output
    tables = json.loads((tmp_path / "out2" / "report.json").read_text())["tables"]
    assert [t["workload"] for t in tables] == ["marginals", "ranges"]
    bad = invoke(["release", str(tmp_path / "d.csv"), "--epsilon", "1", "--schema",
                  str(tmp_path / "s.json"), "--workload", "rows", "--out", str(tmp_path / "o3")])
    assert bad.exit_code == 2 and "--workload" in bad.output and not (tmp_path / "o3").exists()


# ---- marginal sets --------------------------------------------------------------------------------------------------


def test_job_spec_with_marginals(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"input: {SAMPLE / 'census.csv'}\nschema: {SAMPLE / 'census.schema.yaml'}\nepsilon: 1\n"
                    "marginals: [[age, sex], [sex, income]]\nmarginal_strategy: full\n")
    out = tmp_path / "out"
    ok = invoke(["release", "--spec", str(spec), "-o", str(out), "-q", "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    report = json.loads((out / "report.json").read_text())
    assert [t["name"] for t in report["tables"]] == ["age_sex", "sex_income"]
    assert report["marginals"]["strategy"] == "full"
    spec.write_text(spec.read_text() + "tables: [{columns: [age]}]\n")
    both = invoke(["release", "--spec", str(spec), "-o", str(tmp_path / "x")])
    assert both.exit_code == 2 and "not both" in both.stderr


def test_cli_marginals_and_errors(tmp_path):
    args = ["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "-e", "1"]
    out = tmp_path / "m"
    for strategy in ("full", "separate", "residual", "auto"):
        out = tmp_path / strategy
        ok = invoke([*args, "--marginals", "age,sex;sex,income", "-o", str(out), "-q",
                     "--marginal-strategy", strategy])
        assert ok.exit_code == 0, ok.output
        assert sorted(p.name for p in out.iterdir()) == [".dphist-release.json", "age_sex.csv", "report.json", "sex_income.csv"]
        report = json.loads((out / "report.json").read_text())["marginals"]
        assert ("full_table" in report) == (report["strategy"] == "full")
        # under pure ε auto takes the Laplace residual plan here (its expected error is the lowest)
        assert report["strategy"] == ("residual" if strategy == "auto" else strategy)
    alone = invoke([*args, "-c", "age", "--marginal-strategy", "full", "-o", str(tmp_path / "x")])
    assert alone.exit_code == 2 and "--marginals only" in alone.stderr
    both = invoke([*args, "--marginals", "age,sex", "-c", "age", "-o", str(tmp_path / "x")])
    assert both.exit_code == 2 and "not more than one" in both.stderr
    raw = invoke([*args, "--marginals", "age,sex", "--raw", "-o", str(tmp_path / "y")])
    assert raw.exit_code == 2 and "--raw does not apply" in raw.stderr
    unknown = invoke([*args, "--marginals", "age,nosuch", "-o", str(tmp_path / "z")])
    assert unknown.exit_code == 2 and "nosuch" in unknown.stderr
    assert not any((tmp_path / d).exists() for d in "xyz")


def test_cli_residual_marginals_under_zcdp_agree_exactly_for_a_separable_set(tmp_path):
    """--rho, default strategy: residual; a separable set keeps every shared sub-table and the grand total exact;
    the bases' ρ add up to the requested ρ exactly; intervals and expected errors are the records' own."""
    marginals = [("age", "sex"), ("sex", "income"), ("age", "income")]
    out = tmp_path / "r"
    ok = invoke(["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "--rho", "0.3",
                 "--marginals", ";".join(",".join(m) for m in marginals), "-o", str(out), "-q", "--seed", "4"])
    assert ok.exit_code == 0, ok.output
    report = json.loads((out / "report.json").read_text())
    block = report["marginals"]
    assert block["strategy"] == "residual" and block["chosen_by"].startswith("auto: residual")
    assert {"full", "separate", "residual"} <= set(block["expected_error"])
    assert block["rounded_agreement"] == {"exact": True, "max_difference": 0, "why": block["rounded_agreement"]["why"]}
    assert report["rho_spent"] == report["rho_requested"] == "0.3"
    assert sum(Fraction(s["rho"]) for s in block["steps"]) == Fraction(3, 10)
    assert len(block["steps"]) == block["expected_error"]["residual"]["bases"] == 7  # ∅, 3 columns, 3 pairs
    tables = read_marginals(out, marginals)
    assert largest_shared_difference(tables) == 0
    for m, table in zip(marginals, report["tables"]):
        frame = pd.read_csv(out / f"{'_'.join(m)}.csv")
        assert table["algorithm"] == "residual" and (frame["count"] >= 0).all()
        sd = table["expected_cell_sd"]
        assert sd == pytest.approx(block["expected_error"]["residual"]["rmse_per_cell"]["_".join(m)], rel=1e-3)
        # the interval is the noisy value ± 1.96 sd, rounded outward to 2 decimals
        assert np.all(frame["ci_lower"] <= np.maximum(frame["noisy_count"] - 1.959 * sd, 0) + 1e-9)
        assert np.all(frame["ci_upper"] >= frame["noisy_count"] + 1.959 * sd - 1e-9)
        assert np.all(frame["ci_upper"] - frame["noisy_count"] <= 1.96 * sd + 0.011)
        assert set(frame["ci_covers"]) == {"count"}


def test_cli_separate_refuses_all_three_way_of_six_binary_columns(tmp_path):
    _, args = six_binary_columns(tmp_path, "--rho", "0.05")
    refused = invoke([*args, "--marginal-strategy", "separate", "-o", str(tmp_path / "x")])
    assert refused.exit_code == 2 and "three fixed margins" in refused.stderr


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cli_residual_marginals_all_three_way_of_six_binary_columns(tmp_path, seed):
    """A set separate refuses (three fixed margins): residual releases it, and the max_difference it reports is
    the one recomputed from the written files."""
    marginals, args = six_binary_columns(tmp_path, "--rho", "0.05")
    out = tmp_path / f"r{seed}"
    ok = invoke([*args, "--seed", str(seed), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    report = json.loads((out / "report.json").read_text())
    agreement = report["marginals"]["rounded_agreement"]
    assert report["marginals"]["strategy"] == "residual" and agreement["exact"] is False
    assert report["rho_spent"] == "0.05" and sum(Fraction(s["rho"]) for s in report["marginals"]["steps"]) == \
        Fraction(1, 20)
    tables = read_marginals(out, marginals)
    assert agreement["max_difference"] == largest_shared_difference(tables)
    assert len({int(t["count"].sum()) for t in tables.values()}) == 1  # one rounded grand total
    assert agreement["max_difference"] <= 5  # rounding moves each sum by a few units at most


@pytest.mark.parametrize("strategy", ["separate", "full"])
def test_cli_marginal_strategies_separate_and_full_still_work_under_zcdp(tmp_path, strategy):
    out = tmp_path / strategy
    ok = invoke(["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "--rho", "0.3",
                 "--marginals", "age,sex;sex,income", "--marginal-strategy", strategy, "-o", str(out), "-q",
                 "--seed", "2"])
    assert ok.exit_code == 0, ok.output
    report = json.loads((out / "report.json").read_text())
    assert report["marginals"]["strategy"] == strategy and "rounded_agreement" not in report["marginals"]
    assert report["rho_spent"] == "0.3"
    assert largest_shared_difference(read_marginals(out, [("age", "sex"), ("sex", "income")])) == 0


def test_cli_residual_refusals_read_nothing(tmp_path):
    args = ["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "--marginals",
            "age,sex;sex,income", "--marginal-strategy", "residual", "-o", str(tmp_path / "o")]
    for extra, words in [(["-e", "1", "-a", "hb"], "not with algorithm"),
                         (["--rho", "0.5", "-a", "hb"], "not with algorithm"),
                         (["--rho", "1e-18"], "above the sampler's 2^60")]:
        refused = invoke([*args, *extra])
        assert refused.exit_code == 2 and words in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert not (tmp_path / "o").exists()


# ---- without a schema, and the cell limit ---------------------------------------------------------------------------


def test_cli_release_without_a_schema(tmp_path):
    out = tmp_path / "out"
    result = invoke(["release", str(SAMPLE / "census.csv"), "-e", "1", "--delta", "1e-6",
                     "-c", "age,sex", "--seed", "1", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert [c["column"] for c in report["discovery"]["columns"]] == ["age", "sex"]
    table = pd.read_csv(out / "age_sex.csv")
    assert set(table["sex"].dropna()) == {"F", "M"}


def test_cell_limit_refuses_before_reading(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("x,y\n1,2\n")
    schema = tmp_path / "s.yaml"
    schema.write_text("columns:\n  x: {type: numeric, lower: 0, upper: 1, bins: 5000}\n"
                      "  y: {type: numeric, lower: 0, upper: 1, bins: 5000}\n")
    args = ["release", str(csv), "--schema", str(schema), "--columns", "x,y", "-e", "1", "--seed", "1"]
    res = invoke([*args, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == ("Error: table 'x_y': 25,000,000 cells is more than the limit of "
                                                   "16,777,216 (--max-cells); use coarser bins or fewer columns")
    assert not (tmp_path / "o").exists()
    res = invoke([*args, "--max-cells", "100", "--columns", "x", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "5,000 cells is more than the limit of 100" in res.output


# ---- the real Adult table -------------------------------------------------------------------------------------------


def test_adult_cli_all_columns(shared_real, tmp_path):
    out = tmp_path / "adult"
    result = invoke(["release", str(shared_real / "adult.parquet"), "--schema", str(ADULT_SCHEMA),
                     "--epsilon", "2", "--out", str(out), "--format", "parquet"])
    assert result.exit_code == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert len(report["tables"]) == 8 and report["epsilon_spent"] == "2"
    assert all(t["epsilon"] == "0.25" for t in report["tables"])
    ages = pd.read_parquet(out / "age.parquet")
    rows = len(pd.read_parquet(shared_real / "adult.parquet", columns=["age"]))
    # The post-processed total is the noisy total: 16 cells of sd ~5.6 each; 200 is > 8 sd of their sum.
    assert ages["count"].sum() == pytest.approx(rows, abs=200)
    assert np.all(ages["count"] >= 0)
