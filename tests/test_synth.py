"""`dphist synth`: records drawn from a release re-histogram to the released counts within multinomial error.

χ² tests use fixed seeds and p > 1e-6 (false alarm below 1e-6 each).
"""

from __future__ import annotations

import datetime as dt
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from dphist.cli import main
from dphist.errors import UsageError
from dphist.synth import synthesize

from conftest import ROOT

ARGS = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml")]


def release(tmp_path, *extra, name="rel"):
    out = tmp_path / name
    result = CliRunner().invoke(main, ["release", *ARGS, "-e", "1", "-o", str(out), "--seed", "5", "-q", *extra])
    assert result.exit_code == 0, result.output
    return out


def rebin(records: pd.DataFrame, table: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Count the records into the released table's cells (matching labels or bin bounds), in table order."""
    index = pd.Series(0, index=records.index)
    inside = np.ones((len(records), len(table)), dtype=bool)
    for column in columns:
        if column in table:  # categorical
            inside &= records[column].to_numpy(object)[:, None] == table[column].to_numpy(object)[None, :]
        else:
            low, high = table[f"{column}_lower"].to_numpy(), table[f"{column}_upper"].to_numpy()
            values = records[column].to_numpy()
            if isinstance(low[0], str):
                values = np.array([v.isoformat() for v in values])
            inside &= (values[:, None] >= low[None, :]) & (values[:, None] < high[None, :])
    assert (inside.sum(axis=1) == 1).all()  # every record falls in exactly one released cell
    index[:] = inside.argmax(axis=1)
    return np.bincount(index, minlength=len(table))


@pytest.mark.parametrize("columns", [["age", "sex"], ["education"], ["interview_date"]])
def test_synthetic_records_follow_the_released_counts(tmp_path, columns):
    out = release(tmp_path, "-c", ",".join(columns))
    table = pd.read_csv(out / f"{'_'.join(columns)}.csv", keep_default_na=False, na_values=[""])
    records = synthesize(out, 40_000, rng=np.random.default_rng(1))
    assert list(records.columns) == columns and len(records) == 40_000
    p = table["count"].to_numpy(float) / table["count"].sum()
    if "education" in columns:  # the null category comes back as a missing value
        null = table["education"].isna().to_numpy()
        assert records["education"].isna().sum() == pytest.approx(40_000 * p[null].sum(), abs=5 * 200 ** 0.5 + 50)
        records, table, p = records.dropna(), table[~null].reset_index(drop=True), p[~null] / p[~null].sum()
    observed = rebin(records, table, columns)
    keep = p > 0
    assert observed[~keep].sum() == 0  # cells released as 0 never appear
    expected = p[keep] * observed.sum()
    assert stats.chisquare(observed[keep], expected).pvalue > 1e-6
    # The same test tells a different distribution apart (it can fail): a third of the largest cell's mass
    # moved to another released cell.
    wrong = p.copy()
    largest, other = int(np.argmax(p)), int(np.flatnonzero(keep)[0])
    other = other if other != largest else int(np.flatnonzero(keep)[1])
    wrong[other] += p[largest] / 3
    wrong[largest] -= p[largest] / 3
    assert stats.chisquare(observed[keep], wrong[keep] * observed.sum()).pvalue < 1e-6


def test_values_are_inside_their_bins_and_the_release_is_all_it_needs(tmp_path):
    out = release(tmp_path, "-c", "age,interview_date")
    moved = tmp_path / "elsewhere"
    shutil.copytree(out, moved)  # only the release directory: no input, no schema
    records = synthesize(moved, 2000, rng=np.random.default_rng(2))
    assert records["age"].between(15, 95, inclusive="left").all()
    dates = records["interview_date"]
    assert all(dt.date(2023, 1, 1) <= d < dt.date(2026, 1, 1) for d in dates)
    assert records["age"].round(6).nunique() > 1000  # spread within bins, not bin edges


def test_cli_writes_parquet_and_refuses_unclear_requests(tmp_path):
    out = release(tmp_path, "--spec", str(_spec(tmp_path)))
    runner = CliRunner()
    target = tmp_path / "s.parquet"
    ok = runner.invoke(main, ["synth", str(out), "-n", "500", "-t", "sex", "-o", str(target), "--seed", "1"])
    assert ok.exit_code == 0, ok.output
    assert pd.read_parquet(target).shape == (500, 1)
    several = runner.invoke(main, ["synth", str(out), "-n", "5", "-o", str(tmp_path / "x.csv")])
    assert several.exit_code == 2 and "--table" in several.stderr and not (tmp_path / "x.csv").exists()
    again = runner.invoke(main, ["synth", str(out), "-n", "5", "-t", "sex", "-o", str(target)])
    assert again.exit_code == 2 and "exists" in again.stderr
    bad = runner.invoke(main, ["synth", str(tmp_path), "-n", "5", "-o", str(tmp_path / "y.csv")])
    assert bad.exit_code == 2 and "not a dphist release" in bad.stderr
    with pytest.raises(UsageError, match="no table 'nope'"):
        synthesize(out, 5, "nope")


def _spec(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("tables:\n  - {columns: [sex]}\n  - {columns: [age]}\n")
    return spec
