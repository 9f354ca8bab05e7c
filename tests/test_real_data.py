"""Releases on the real UCI Adult table from ../shared (skipped when it is absent)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import dphist
from dphist.cli import main
from dphist.privacy import discrete_laplace_halfwidth

from conftest import ROOT

SCHEMA = ROOT / "bench" / "adult.schema.yaml"


@pytest.mark.parametrize("name", ["adult.csv", "adult.parquet"])
def test_adult_release_matches_truth_within_noise(shared_real, name):
    source = shared_real / name
    result = dphist.release(source, epsilon="1", schema=SCHEMA, columns="race,sex,income", seed=17, raw=True)
    table = result.tables["race_sex_income"]
    assert len(table) == 5 * 2 * 2
    frame = pd.read_csv(shared_real / "adult.csv")
    truth = frame.groupby(["race", "sex", "income"]).size()
    merged = table.set_index(["race", "sex", "income"])["count"]
    # With a fixed seed, every cell is within 3x the 95% half-width (a per-cell false alarm far below 1e-6).
    bound = 3 * discrete_laplace_halfwidth(1)
    for key, value in merged.items():
        assert abs(value - truth.get(key, 0)) <= bound


def test_adult_cli_all_columns(shared_real, tmp_path):
    out = tmp_path / "adult"
    result = CliRunner().invoke(main, ["release", str(shared_real / "adult.parquet"), "--schema", str(SCHEMA),
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
