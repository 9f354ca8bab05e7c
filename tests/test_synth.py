"""`dphist synth`: records drawn from a release re-histogram to the released counts within multinomial error.

χ² tests use fixed seeds and p > 1e-6 (false alarm below 1e-6 each).
"""

from __future__ import annotations

import datetime as dt
import functools
import shutil

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

import dphist
from dphist import synth
from dphist.cli import main
from dphist.errors import DataError, UsageError
from dphist.ipf import fit_max_entropy
from dphist.marginals import derive_marginal
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
    assert_follows(rebin(records, table, columns), p)


def assert_follows(observed: np.ndarray, p: np.ndarray) -> None:
    """χ²: the cell counts ``observed`` are a multinomial sample of ``p`` (false alarm 1e-6), and the same test
    tells a different distribution apart (so it can fail): a third of the largest cell's mass moved to another
    released cell."""
    keep = p > 0
    assert observed[~keep].sum() == 0  # cells released as 0 never appear
    expected = p[keep] * observed.sum()
    assert stats.chisquare(observed[keep], expected).pvalue > 1e-6
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
    assert several.exit_code == 2 and "--table" in several.stderr and "--joint" in several.stderr
    assert not (tmp_path / "x.csv").exists()
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


# --- joint mode: iterative proportional fitting over all the tables --------------------------------------------


def _known_table(zeros: bool = False) -> np.ndarray:
    table = np.random.default_rng(3).integers(1, 50, size=(3, 4, 5)).astype(float)  # positive, axes a, b, c
    if zeros:
        table[0, 1, :] = 0  # a target cell ab = (0, 1) of 0
        table[:, 2, 3] = 0  # a target cell bc = (2, 3) of 0
    return table


@pytest.mark.parametrize("order", ["ab,bc", "ba,cb"])
def test_ipf_fits_the_marginals_with_the_closed_form_for_a_chain(order):
    n = _known_table()
    ab, bc, b = n.sum(axis=2), n.sum(axis=0), n.sum(axis=(0, 2))
    sizes = {"a": 3, "b": 4, "c": 5}
    if order == "ab,bc":
        axes, fit, info = fit_max_entropy([(("a", "b"), ab), (("b", "c"), bc)], sizes)
        assert axes == ("a", "b", "c")
    else:  # the same targets with their axes the other way round: the fit's axes follow first appearance
        axes, fit, info = fit_max_entropy([(("b", "a"), ab.T), (("c", "b"), bc.T)], sizes)
        assert axes == ("b", "a", "c")
        fit = fit.transpose(1, 0, 2)
    assert info.converged and info.max_deviation <= 1e-6 * n.sum() and info.iterations == 1
    np.testing.assert_allclose(fit.sum(axis=2), ab, atol=1e-6 * n.sum())
    np.testing.assert_allclose(fit.sum(axis=0), bc, atol=1e-6 * n.sum())
    # The maximum-entropy table with these marginals: a and c independent given b.
    np.testing.assert_allclose(fit, ab[:, :, None] * bc[None, :, :] / b[None, :, None], rtol=1e-9)
    assert not np.allclose(fit, n)  # ... which is not the table the marginals came from


def test_ipf_meets_a_cycle_of_consistent_marginals_within_tol():
    n = _known_table()
    targets = [(("a", "b"), n.sum(axis=2)), (("b", "c"), n.sum(axis=0)), (("c", "a"), n.sum(axis=1).T)]
    axes, fit, info = fit_max_entropy(targets, {"a": 3, "b": 4, "c": 5}, tol=1e-9 * n.sum())
    assert info.converged and info.iterations > 1  # a cycle takes several sweeps
    for (columns, target) in targets:
        np.testing.assert_allclose(derive_marginal(fit, axes, columns), target, atol=1e-9 * n.sum())


def test_ipf_keeps_zero_target_cells_at_zero_and_refuses_huge_tables():
    n = _known_table(zeros=True)
    ab, bc = n.sum(axis=2), n.sum(axis=0)
    axes, fit, info = fit_max_entropy([(("a", "b"), ab), (("b", "c"), bc)], {"a": 3, "b": 4, "c": 5})
    assert info.converged
    assert (fit[0, 1, :] == 0).all() and (fit[:, 2, 3] == 0).all()
    assert ((fit > 0) == ((ab[:, :, None] > 0) & (bc[None, :, :] > 0))).all()  # and only those cells are 0
    with pytest.raises(UsageError, match="more than the 2\\*\\*24"):  # refused before allocating 128 MiB
        fit_max_entropy([(("a",), np.ones(4096)), (("b",), np.ones(4097))], {"a": 4096, "b": 4097})


@pytest.fixture(scope="module")
def marginal_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("marginals") / "rel"
    dphist.release(ARGS[0], 1, schema=ARGS[2], seed=1, marginals="age,sex;sex,income").write(out)
    return out


def test_joint_records_reproduce_every_released_marginal(marginal_release):
    records = synthesize(marginal_release, 40_000, rng=np.random.default_rng(1), joint=True)
    assert list(records.columns) == ["age", "sex", "income"] and len(records) == 40_000
    for name, columns in [("age_sex", ["age", "sex"]), ("sex_income", ["sex", "income"])]:
        table = pd.read_csv(marginal_release / f"{name}.csv", keep_default_na=False, na_values=[""])
        assert_follows(rebin(records, table, columns), table["count"].to_numpy(float) / table["count"].sum())


def test_joint_on_one_table_is_the_plain_draw(tmp_path):
    out = release(tmp_path, "-c", "age,education")
    plain = synthesize(out, 500, rng=np.random.default_rng(4))
    pd.testing.assert_frame_equal(synthesize(out, 500, rng=np.random.default_rng(4), joint=True), plain)


def _edit(path, column, changes):
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    for row, value in changes.items():
        frame.loc[row, column] = value if isinstance(value, str) else frame.loc[row, column] + value
    frame.to_csv(path, index=False)


@pytest.mark.parametrize("edit, message", [
    (("age_sex.csv", "count", {0: 1}), "do not agree \\(their grand totals differ\\)"),
    (("age_sex.csv", "count", {0: 1, 1: -1}), "do not agree \\(their counts over sex differ\\)"),
    (("sex_income.csv", "sex", {i: "X" for i in range(25)}), "column 'sex' has different bins"),  # F -> X
])
def test_joint_refuses_tables_that_disagree(marginal_release, tmp_path, edit, message):
    out = tmp_path / "rel"
    shutil.copytree(marginal_release, out)
    _edit(out / edit[0], edit[1], edit[2])
    with pytest.raises(DataError, match=message) as caught:
        synthesize(out, 10, joint=True)
    assert "'age_sex' and 'sex_income'" in str(caught.value)
    result = CliRunner().invoke(main, ["synth", str(out), "-n", "10", "--joint", "-o", str(tmp_path / "s.csv")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert not (tmp_path / "s.csv").exists()


def test_cli_joint_writes_the_union_of_the_columns_and_refuses_a_table(marginal_release, tmp_path):
    runner = CliRunner()
    target = tmp_path / "joint.csv"
    ok = runner.invoke(main, ["synth", str(marginal_release), "-n", "300", "--joint", "-o", str(target), "--seed", "2"])
    assert ok.exit_code == 0, ok.output
    assert "Warning" not in ok.stderr
    written = pd.read_csv(target)
    assert list(written.columns) == ["age", "sex", "income"] and len(written) == 300
    both = runner.invoke(main, ["synth", str(marginal_release), "-n", "5", "--joint", "-t", "age_sex",
                                "-o", str(tmp_path / "x.csv")])
    assert both.exit_code == 2 and "--joint" in both.stderr and not (tmp_path / "x.csv").exists()
    with pytest.raises(UsageError, match="--joint"):
        synthesize(marginal_release, 5, "age_sex", joint=True)


def test_a_fit_that_does_not_converge_still_draws_with_a_one_line_warning(tmp_path, monkeypatch):
    out = tmp_path / "cycle"
    dphist.release(ARGS[0], 1, schema=ARGS[2], seed=1, marginals="age,sex;sex,income;income,age").write(out)
    monkeypatch.setattr(synth, "fit_max_entropy", functools.partial(fit_max_entropy, max_iter=1))
    with pytest.warns(RuntimeWarning, match="did not converge in 1 sweeps"):
        assert len(synthesize(out, 50, rng=np.random.default_rng(5), joint=True)) == 50
    result = CliRunner().invoke(main, ["synth", str(out), "-n", "50", "--joint", "-o", str(tmp_path / "s.csv")])
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert len(warning) == 1 and "did not converge" in warning[0] and "Traceback" not in result.stderr


def test_open_ended_end_bins_of_a_discovered_domain_are_drawn_between_its_bounds(tmp_path):
    """A release without a schema labels its clamped end bins with an empty outer bound (open_ends); synth reads
    them as the domain's bounds, and the same file without open_ends in report.json is refused as damaged."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.integers(1, 2161, 20_000)})
    release = dphist.release(frame, epsilon=1, columns=["x"], seed=5)
    release.write(tmp_path / "rel")
    domain = release.report["tables"][0]["domain"]["x"]
    assert domain["open_ends"] is True
    table = pd.read_csv(tmp_path / "rel" / "x.csv")
    assert pd.isna(table["x_lower"].iloc[0]) and pd.isna(table["x_upper"].iloc[domain["bins"] - 1])
    values = synthesize(tmp_path / "rel", 5_000, rng=np.random.default_rng(1))["x"].dropna()
    assert values.min() >= domain["lower"] and values.max() < domain["upper"]

    import json
    report = json.loads((tmp_path / "rel" / "report.json").read_text())
    del report["tables"][0]["domain"]["x"]["open_ends"]
    (tmp_path / "rel" / "report.json").write_text(json.dumps(report))
    with pytest.raises(DataError, match="is empty, not both"):
        synthesize(tmp_path / "rel", 10, rng=np.random.default_rng(1))
