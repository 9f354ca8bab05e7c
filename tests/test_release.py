"""End-to-end releases through the CLI (click's runner) and the Python API: layouts, formats, job specs, the
report, and what the report must never contain."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

import dphist
from dphist.cli import main

from conftest import ROOT as ROOT_ABS

ARGS = ["--schema", "sample_data/census.schema.yaml", "--epsilon", "1"]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    from conftest import ROOT
    monkeypatch.chdir(ROOT)


def run(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def test_two_way_table_layout_and_post_processing(tmp_path):
    out = tmp_path / "rel"
    result = run("release", "sample_data/census.csv", *ARGS, "--columns", "age,sex", "--out", str(out),
                 "--algorithm", "identity")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dphist-release.json", "age_sex.csv", "report.json"]
    table = pd.read_csv(out / "age_sex.csv", keep_default_na=False)
    assert list(table.columns) == ["age_lower", "age_upper", "sex", "count", "noisy_count", "ci_lower", "ci_upper"]
    assert len(table) == 16 * 2
    assert table["age_lower"].tolist()[:4] == [15, 15, 20, 20] and table["sex"].tolist()[:2] == ["F", "M"]
    assert (table["count"] >= 0).all() and table["count"].dtype == np.int64
    assert table["count"].sum() == max(table["noisy_count"].sum(), 0)
    assert (table["ci_lower"] <= table["noisy_count"]).all() and (table["noisy_count"] <= table["ci_upper"]).all()
    assert "released 1 table" in result.stderr and "epsilon 1 spent of 1" in result.stderr


def test_release_counts_are_close_to_truth_on_sample(tmp_path):
    truth = pd.read_csv("sample_data/census.csv")["sex"].value_counts()
    result = dphist.release("sample_data/census.csv", epsilon="1", schema="sample_data/census.schema.yaml",
                            columns="sex", seed=3, raw=True)
    table = result.tables["sex"].set_index("sex")
    halfwidth = dphist.privacy.discrete_laplace_halfwidth(1) * 6  # far outside any plausible noise draw
    for label in ("F", "M"):
        assert abs(table.loc[label, "count"] - truth[label]) <= halfwidth


def test_default_is_one_histogram_per_column_with_equal_split(tmp_path):
    result = dphist.release("sample_data/census.parquet", epsilon="0.8", schema="sample_data/census.schema.yaml",
                            seed=1)
    names = list(yaml.safe_load(open("sample_data/census.schema.yaml"))["columns"])
    assert list(result.tables) == names
    eps = [Fraction(t["epsilon"]) for t in result.report["tables"]]
    assert sum(eps) == Fraction("0.8") and len(set(eps)) == 1
    assert result.report["epsilon_spent"] == "0.8"


def test_thirds_are_exact_fractions():
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4},
                          "b": {"type": "categorical", "values": ["x", "y"]},
                          "c": {"type": "numeric", "lower": 0, "upper": 2, "bins": 2}}}
    result = dphist.release(frame, epsilon="1", schema=schema, seed=0, algorithm="identity")
    assert [t["epsilon"] for t in result.report["tables"]] == ["1/3"] * 3
    assert result.report["epsilon_spent"] == "1"
    assert result.report["tables"][0]["steps"][0]["scale"] == "3"


def test_csv_parquet_directory_and_glob_agree(tmp_path):
    (tmp_path / "parts").mkdir()
    frame = pd.read_parquet("sample_data/census.parquet")
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[part].to_parquet(tmp_path / "parts" / f"p{i}.parquet")
    kwargs = dict(epsilon="1", schema="sample_data/census.schema.yaml", columns="state,education", seed=9)
    tables = [dphist.release(src, **kwargs).tables["state_education"] for src in (
        "sample_data/census.csv", "sample_data/census.parquet", tmp_path / "parts",
        str(tmp_path / "parts" / "p*.parquet"), frame)]
    for other in tables[1:]:
        pd.testing.assert_frame_equal(tables[0], other)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_formats(tmp_path, fmt):
    out = tmp_path / fmt
    result = run("release", "sample_data/census.parquet", *ARGS, "-c", "education,sex", "-f", fmt, "-o", str(out),
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
    assert set(table.columns) >= {"education", "sex", "count", "noisy_count", "ci_lower", "ci_upper"}


def test_report_contents_and_no_true_counts(tmp_path):
    out = tmp_path / "r"
    result = run("release", "sample_data/census.csv", *ARGS, "-c", "sex", "-o", str(out), "--raw", "-a", "identity")
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
    truth = pd.read_csv("sample_data/census.csv")["sex"].value_counts()
    for secret in [60000, *truth.tolist(), (shutil.os.path.getsize("sample_data/census.csv"))]:
        assert str(secret) not in text


def test_job_spec_with_shares_and_date(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "input": "data.parquet", "schema": "schema.yaml", "epsilon": "1.5", "out": "out/{date}", "format": "json",
        "tables": [{"name": "age_by_sex", "columns": ["age", "sex"], "share": 2},
                   {"columns": ["income"], "algorithm": "identity", "share": 1}],
    }))
    shutil.copy("sample_data/census.schema.yaml", tmp_path / "schema.yaml")
    shutil.copy("sample_data/census.parquet", tmp_path / "data.parquet")
    result = run("release", "--spec", str(spec), "--seed", "1")
    assert result.exit_code == 0, result.stderr
    outs = list((tmp_path / "out").iterdir())
    assert len(outs) == 1 and len(outs[0].name) == 10  # YYYY-MM-DD
    report = json.loads((outs[0] / "report.json").read_text())
    assert [(t["name"], t["epsilon"]) for t in report["tables"]] == [("age_by_sex", "1"), ("income", "0.5")]
    assert (outs[0] / "age_by_sex.json").exists() and report["test_mode"] is True
    assert "NOT differentially private" in result.stderr


def test_header_only_csv_gives_full_shape_release(tmp_path):
    data = tmp_path / "empty.csv"
    data.write_text("age,sex\n")
    result = dphist.release(data, epsilon="1", schema="sample_data/census.schema.yaml", columns="age,sex")
    assert len(result.tables["age_sex"]) == 32


def test_unneeded_columns_are_not_read(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("sex,junk\nF,1\nM,not-a-number\nF,\u00e9\n")
    result = dphist.release(data, epsilon="1", schema={"columns": {"sex": {"type": "categorical",
                                                                           "values": ["F", "M"]}}},
                            columns="sex", seed=0)
    assert len(result.tables["sex"]) == 2


def test_overwrite_replaces_previous_release(tmp_path):
    out = tmp_path / "o"
    assert run("release", "sample_data/census.csv", *ARGS, "-c", "sex", "-o", str(out)).exit_code == 0
    result = run("release", "sample_data/census.csv", *ARGS, "-c", "age", "-o", str(out), "--overwrite")
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
    result = run("schema", "sample_data/census.csv", "-o", str(draft))
    assert result.exit_code == 0 and "NOT private" in result.stderr
    text = draft.read_text()
    assert "COPIED FROM THE DATA" in text
    schema = dphist.schema.load_schema(draft)  # the draft is a valid schema
    assert schema["sex"].values == ("F", "M") and schema["income"].null_cell
    again = run("schema", "sample_data/census.csv", "-o", str(draft))
    assert again.exit_code == 2  # refuses to overwrite without --overwrite


def test_test_mode_stamps_the_release_directory(tmp_path):
    out = tmp_path / "t"
    result = run("release", "sample_data/census.csv", *ARGS, "-c", "sex", "-o", str(out), "--seed", "3")
    assert result.exit_code == 0
    assert "NOT differentially private" in (out / "NOT_PRIVATE.txt").read_text()
    assert result.stderr.count("NOT differentially private") == 1  # one banner, not two
    plain = tmp_path / "p"
    assert run("release", "sample_data/census.csv", *ARGS, "-c", "sex", "-o", str(plain)).exit_code == 0
    assert not (plain / "NOT_PRIVATE.txt").exists()


def test_report_names_the_input_file_without_its_directories(tmp_path):
    result = dphist.release(ROOT_ABS / "sample_data" / "census.csv", epsilon="1",
                            schema="sample_data/census.schema.yaml", columns="sex", seed=1)
    assert result.report["input"] == {"name": "census.csv", "format": "csv"}
    assert str(ROOT_ABS) not in json.dumps(result.report)


def test_very_large_epsilon_is_accepted():
    result = dphist.release("sample_data/census.csv", epsilon="1000", schema="sample_data/census.schema.yaml",
                            columns="sex", seed=1)
    table = result.tables["sex"]
    assert (table["ci_lower"] == table["ci_upper"]).all()


def test_usage_errors_are_reported_before_the_output_directory_check(tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    result = run("release", "sample_data/census.csv", "--schema", "sample_data/census.schema.yaml",
                 "--epsilon", "0", "-c", "sex", "-o", str(out))
    assert result.exit_code == 2 and "epsilon" in result.stderr and "not empty" not in result.stderr


@pytest.mark.parametrize("columns", [{"count": {"type": "categorical", "values": ["a"]}},
                                     {"a": {"type": "numeric", "lower": 0, "upper": 1, "bins": 1},
                                      "a_lower": {"type": "categorical", "values": ["x"]}}])
def test_output_column_names_must_not_collide(columns):
    frame = pd.DataFrame({name: ["a"] for name in columns})
    with pytest.raises(dphist.errors.UsageError, match="two columns named"):
        dphist.release(frame, epsilon="1", schema={"columns": columns}, columns=list(columns), seed=1)


def test_run_wide_tree_options_apply_only_where_they_fit():
    frame = pd.DataFrame({"a": np.arange(100) % 16, "b": np.arange(100) % 7})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 16, "bins": 16},
                          "b": {"type": "numeric", "lower": 0, "upper": 7, "bins": 7}}}
    tables = [{"columns": ["a"], "algorithm": "hb"}, {"columns": ["b"], "algorithm": "identity"},
              {"name": "a4", "columns": ["a"], "algorithm": "hb", "options": {"branching": 2}}]
    result = dphist.release(frame, epsilon="1", schema=schema, tables=tables, seed=1,
                            algorithm_options={"branching": 4})
    structures = [t["structure"] for t in result.report["tables"]]
    assert structures[0]["branching"] == 4 and structures[1] == {} and structures[2]["branching"] == 2
    with pytest.raises(dphist.errors.UsageError, match="does not apply"):
        dphist.release(frame, epsilon="1", schema=schema, columns="b", seed=1, algorithm_options={"branching": 4})


def test_option_flag_sets_algorithm_options(tmp_path):
    out = tmp_path / "o"
    result = run("release", "sample_data/census.csv", *ARGS, "-c", "income", "-a", "dpcube", "--option", "alpha=0.25",
                 "--option", "block=1",
                 "--option", "release=gls", "-o", str(out), "--seed", "1")
    assert result.exit_code == 0, result.stderr
    report = json.loads((out / "report.json").read_text())["tables"][0]
    assert report["structure"]["alpha"] == "1/4" and [s["epsilon"] for s in report["steps"]] == ["0.25", "0.75"]
    bad = run("release", "sample_data/census.csv", *ARGS, "-c", "income", "-a", "dpcube", "--option", "alpha=2",
              "-o", str(tmp_path / "b"))
    assert bad.exit_code == 2 and "alpha" in bad.stderr
    assert run("release", "sample_data/census.csv", *ARGS, "-c", "income", "--option", "oops").exit_code == 2
