"""Synthetic records from a release (dphist/products/synth.py): they re-histogram to the released counts within multinomial
error, one table or all of them at once (joint: iterative proportional fitting), drawn and yielded in bounded
chunks, inside their bins and never in a cell released as 0.  (The ``synth`` command: cli/test_output_commands.py.)

χ² tests use fixed seeds and p > 1e-6 (false alarm below 1e-6 each).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dphist
from dphist.products import synth
from dphist.errors import DataError, UsageError
from dphist.inference.ipf import fit_max_entropy
from dphist.algorithms.marginal_sets import derive_marginal
from dphist.products.synth import synthesize

from census_releases import census_releases
from cli_harness import invoke
from conftest import SAMPLE

ARGS = [str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml")]


def release(tmp_path, *extra, name="rel"):
    out = tmp_path / name
    result = invoke(["release", *ARGS, "-e", "1", "-o", str(out), "--seed", "5", "-q", *extra])
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
    result = invoke(["synth", str(out), "-n", "10", "--joint", "-o", str(tmp_path / "s.csv")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ")
    assert not (tmp_path / "s.csv").exists()


def test_a_fit_that_does_not_converge_still_draws_with_a_one_line_warning(tmp_path, monkeypatch):
    out = tmp_path / "cycle"
    dphist.release(ARGS[0], 1, schema=ARGS[2], seed=1, marginals="age,sex;sex,income;income,age").write(out)
    monkeypatch.setattr(synth, "fit_max_entropy", functools.partial(fit_max_entropy, max_iter=1))
    with pytest.warns(RuntimeWarning, match="did not converge in 1 sweeps"):
        assert len(synthesize(out, 50, rng=np.random.default_rng(5), joint=True)) == 50
    result = invoke(["synth", str(out), "-n", "50", "--joint", "-o", str(tmp_path / "s.csv")])
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


# ---- drawn in chunks: memory bounded by one chunk, whatever the number of rows --------------------------------------


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """Test-mode releases of the census (census_releases.census_releases), keyed csv, parquet, json, nulls-csv,
    nulls-parquet and raw."""
    return census_releases(tmp_path_factory.mktemp("releases"))


class CountingRng:
    """A generator that records the size of every multinomial draw (the records drawn at once)."""

    def __init__(self, seed):
        self.rng, self.sizes = np.random.default_rng(seed), []

    def multinomial(self, n, p):
        self.sizes.append(n)
        return self.rng.multinomial(n, p)

    def __getattr__(self, name):
        return getattr(self.rng, name)


@pytest.mark.parametrize("joint", [False, True])
def test_the_sampler_draws_and_yields_bounded_chunks_that_add_up(releases, marginal_release, joint):
    plan = synth.plan_synthesis(marginal_release if joint else releases["csv"], 10_500, joint=joint, chunk_rows=1000)
    rng = CountingRng(1)
    chunks = plan.chunks(rng)
    first = next(chunks)
    assert len(first) == 1000 and rng.sizes == [1000]  # lazy: one chunk drawn when one is asked for
    sizes = [len(first)] + [len(c) for c in chunks]
    assert sizes == [1000] * 10 + [500] and rng.sizes == sizes  # never more than a chunk at once, total exact
    assert list(first.columns) == (["age", "sex", "income"] if joint else ["age", "sex"])


def test_no_rows_is_one_empty_chunk_with_the_columns(releases, tmp_path):
    chunks = list(synth.plan_synthesis(releases["json"], 0).chunks(np.random.default_rng(0)))
    assert len(chunks) == 1 and chunks[0].empty and list(chunks[0].columns) == ["interview_date", "education"]
    for fmt in ("csv", "parquet", "json"):
        out = tmp_path / f"e.{fmt}"
        assert invoke(["synth", str(releases["json"]), "-n", "0", "-o", str(out)]).exit_code == 0
        back = {"csv": pd.read_csv, "parquet": pd.read_parquet, "json": pd.read_json}[fmt](out)
        assert len(back) == 0 and (fmt == "json" or list(back.columns) == ["interview_date", "education"])


@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("chunk_rows", [997, 20])  # 20: fewer rows than cells, so cells come from the cdf
def test_records_drawn_in_chunks_follow_the_released_counts(marginal_release, joint, chunk_rows):
    plan = synth.plan_synthesis(marginal_release, 40_000, None if joint else "age_sex", joint=joint,
                                chunk_rows=chunk_rows)
    assert (plan.weights.size > chunk_rows) == (chunk_rows == 20)
    records = pd.concat(plan.chunks(np.random.default_rng(7)), ignore_index=True)
    assert len(records) == 40_000
    for name, columns in [("age_sex", ["age", "sex"])] + ([("sex_income", ["sex", "income"])] if joint else []):
        table = pd.read_csv(marginal_release / f"{name}.csv", keep_default_na=False, na_values=[""])
        assert_follows(rebin(records, table, columns), table["count"].to_numpy(float) / table["count"].sum())


@pytest.mark.parametrize("u, cell", [(0.0, 1), (np.nextafter(1.0, 0.0), 5)])
def test_the_cdf_draw_never_lands_on_a_cell_of_weight_0(releases, u, cell):
    """The extreme uniforms land on the first and the last cell of positive weight, not on the 0s around."""
    plan = synth.plan_synthesis(releases["csv"], 30, chunk_rows=10)  # 32 cells > 10 rows: the cdf draw
    weights = np.zeros(plan.weights.shape)
    weights.flat[[1, 5]] = [1, 2]
    plan = dataclasses.replace(plan, weights=weights)

    class Extreme:
        def random(self, m):
            return np.full(m, u)

    records = pd.concat(plan.chunks(Extreme()), ignore_index=True)
    age, sex = np.unravel_index(cell, weights.shape)
    assert len(records) == 30 and (records["sex"] == ["F", "M"][sex]).all()
    assert records["age"].between(15 + 5 * age, 20 + 5 * age, inclusive="left").all()


def test_a_uniform_near_1_stays_inside_the_bin(releases):
    """lower + (upper - lower)·u rounds up to upper for u near 1: numbers and days stay below upper."""
    class NearOne:
        def random(self, m):
            return np.full(m, np.nextafter(1.0, 0.0))

    for rel, column in [(releases["csv"], "age"), (releases["json"], "interview_date")]:
        plan = synth.plan_synthesis(rel, 5, chunk_rows=1)  # fewer rows than cells: only random() is used
        k = np.unravel_index(np.flatnonzero(plan.weights.ravel() > 0)[-1], plan.weights.shape)[0]
        axis = plan.axes[0]
        values = pd.concat(plan.chunks(NearOne()))[column]
        if column == "interview_date":
            values = values.map(lambda day: (day - dt.date(1970, 1, 1)).days)
        assert not axis.null[k] and len(values) == 5
        assert ((axis.lower[k] <= values) & (values < axis.upper[k])).all()


@pytest.mark.parametrize("kind", ["nulls-csv", "nulls-parquet", "json"])
def test_every_format_with_a_null_category_draws_and_plots(releases, tmp_path, kind):
    """education has a null category: Parquet reads it as pd.NA, which must compare as missing, not crash."""
    table = synth.read_table(releases[kind], synth.load_report(releases[kind])["tables"][0])
    assert table.axes[1].null.any()
    records = synth.synthesize(releases[kind], 4000, rng=np.random.default_rng(2))
    share = table.weights.sum(axis=0)[table.axes[1].null].sum() / table.weights.sum()
    assert abs(records["education"].isna().mean() - share) < 5 * (share / 4000) ** 0.5 + 1e-3
    out = tmp_path / "p.png"
    assert invoke(["plot", str(releases[kind]), "-o", str(out)]).exit_code == 0
