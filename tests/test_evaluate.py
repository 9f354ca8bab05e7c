"""`dphist evaluate`: a tuning aid on true counts, clearly labelled as not private."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dphist.cli import main
from dphist.errors import UsageError
from dphist.evaluate import evaluate

from conftest import ROOT

ARGS = [str(ROOT / "sample_data" / "census.parquet"), "-s", str(ROOT / "sample_data" / "census.schema.yaml")]


def test_cli_compares_algorithms_and_warns():
    result = CliRunner().invoke(main, ["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-k", "3", "--seed", "1"])
    assert result.exit_code == 0, result.stderr
    assert "NOT PRIVATE" in result.stderr and "never publish" in result.stderr
    for name in ("identity", "h", "hb", "quadtree"):
        assert name in result.output
    assert "all_ranges(25)" in result.output and "epsilon 0.5" in result.output
    # StructureFirst needs a public cap: by default it is left out, and the user is told why.
    assert "skipped structurefirst" in result.stderr and "cap" in result.stderr
    assert not any(line.startswith("structurefirst") for line in result.stdout.splitlines())
    with_cap = CliRunner().invoke(main, ["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-k", "2", "--seed", "1",
                                         "-a", "structurefirst,identity", "--option", "cap=50"])
    assert with_cap.exit_code == 0, with_cap.stderr
    assert "structurefirst" in with_cap.output
    named = CliRunner().invoke(main, ["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-a", "structurefirst"])
    assert named.exit_code == 2 and "needs a public cap" in named.stderr


def test_errors_rank_as_expected_on_ranges():
    # On a long 1-D domain, trees beat identity on all ranges by a wide margin (algorithms.md §8).
    frame = pd.DataFrame({"v": np.random.default_rng(0).integers(0, 1024, 20_000)})
    schema = {"columns": {"v": {"type": "numeric", "lower": 0, "upper": 1024, "bins": 1024}}}
    table, info = evaluate(frame, "0.1", schema, "v", ["identity", "hb"], trials=5, seed=2)
    scores = dict(zip(table["algorithm"], table["scaled_l1_mean"]))
    assert scores["hb"] < 0.5 * scores["identity"]
    assert info["queries"] == 1024 * 1025 // 2


@pytest.mark.parametrize("kwargs, message", [({"workload": "prefix", "columns": "income,age"}, "one-column"),
                                             ({"workload": "nope"}, "unknown workload"),
                                             ({"trials": 0}, "trials")])
def test_bad_arguments(kwargs, message):
    args = {"columns": "income", **kwargs}
    with pytest.raises(UsageError, match=message):
        evaluate(ROOT / "sample_data" / "census.parquet", "1", ROOT / "sample_data" / "census.schema.yaml",
                 algorithms=["identity"], **args)


def test_unknown_algorithm_is_a_usage_error():
    result = CliRunner().invoke(main, ["evaluate", *ARGS, "-c", "income", "-e", "1", "-a", "nosuch"])
    assert result.exit_code == 2 and "unknown algorithm" in result.stderr


def test_bench_command_on_own_histograms(tmp_path):
    np.save(tmp_path / "h1.npy", np.random.default_rng(0).integers(0, 50, 64))
    (tmp_path / "h2.csv").write_text("\n".join(",".join(str(v) for v in row)
                                               for row in np.random.default_rng(1).integers(0, 9, (8, 8))))
    out = tmp_path / "runs.jsonl"
    result = CliRunner().invoke(main, ["bench", str(tmp_path / "h1.npy"), str(tmp_path / "h2.csv"), "-a",
                                       "identity,hb", "--scale", "1000", "-e", "1", "--samples", "2", "--runs", "1",
                                       "--jsonl", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "1-D, scale 1,000" in result.output and "2-D, scale 1,000" in result.output
    assert "NOT PRIVATE" in result.stderr
    assert len(out.read_text().splitlines()) == 2 * 2 * 2  # files x algorithms x samples


def test_bench_command_rejects_bad_histograms(tmp_path):
    (tmp_path / "bad.csv").write_text("1,-2\n3,4\n")
    result = CliRunner().invoke(main, ["bench", str(tmp_path / "bad.csv")])
    assert result.exit_code == 1 and "non-negative" in result.stderr
