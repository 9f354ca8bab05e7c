"""``dphist release --algorithm hdmm`` end to end (in-process through cli_harness): a release on the sample data
under ρ-zCDP and pure ε writes intervals that cover counts and reports the strategy, and a column past the
ceiling is refused with one line before any row is read, nothing written, nothing charged."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cli_harness import invoke
from conftest import SAMPLE

DATA, SCHEMA = str(SAMPLE / "census.csv"), str(SAMPLE / "census.schema.yaml")


# Under zCDP the report's simulated mean absolute error draws some 10⁵ discrete Gaussians of σ² near 2³² (the
# integer strategy's squared column norms), about 130 µs each: 25 s, so that release runs in make test-full only.
@pytest.mark.parametrize("budget", [["--rho", "0.5"], ["--epsilon", "1"]])
def test_a_release_with_hdmm_writes_intervals_that_cover_counts(tmp_path, budget):
    out = tmp_path / "rel"
    result = invoke(["release", DATA, "--schema", SCHEMA, "--columns", "age,sex", *budget, "--algorithm", "hdmm",
                     "--seed", "3", "--out", str(out), "--ledger", str(tmp_path / "l.sqlite")])
    assert result.exit_code == 0 and not result.crash, result.stderr
    table = pd.read_csv(out / "age_sex.csv", keep_default_na=False)
    assert len(table) == 16 * 2 and (table["ci_covers"] == "count").all()
    assert (table["ci_lower"] <= table["noisy_count"]).all() and (table["noisy_count"] <= table["ci_upper"]).all()
    assert (table["ci_upper"] > table["ci_lower"]).any()
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["tables"]
    assert entry["algorithm"] == "hdmm" and entry["interval"]["covers"] == "count"
    (step,) = entry["steps"]
    assert step["what"] == "optimised range strategy"
    assert entry["expected_error"]["ranges"]["rms"] > 0  # exact (no standard error beside it)
    assert "rms_relative_se" not in entry["expected_error"]["ranges"]


def test_a_column_past_the_ceiling_is_refused_before_any_row_is_read(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("x\n1\n2\n")
    schema = tmp_path / "s.yaml"
    schema.write_text("columns:\n  x: {type: numeric, lower: 0, upper: 1100, bins: 1100}\n")
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "out"
    result = invoke(["release", str(data), "--schema", str(schema), "--columns", "x", "--rho", "0.5",
                     "--algorithm", "hdmm", "--ledger", str(ledger), "--out", str(out)])
    assert result.exit_code == 2 and not result.crash, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "1,100 cells has no cached strategy" in lines[0] and "1,024" in lines[0], lines
    assert not out.exists() and not ledger.exists()
