"""``dphist evaluate`` and ``dphist bench``: tuning aids on true counts, clearly labelled as not private; they
compare algorithms, skip or refuse what needs a public cap, refuse undeclared columns in one line, evaluate under ρ
and refuse a missing budget; ``bench`` scores the steward's own histograms and refuses bad ones."""

from __future__ import annotations

import numpy as np

from cli_harness import invoke
from conftest import ROOT

ARGS = [str(ROOT / "sample_data" / "census.parquet"), "-s", str(ROOT / "sample_data" / "census.schema.yaml")]


def test_cli_compares_algorithms_and_warns():
    result = invoke(["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-k", "2", "--seed", "1"])  # 2 runs: an sd
    assert result.exit_code == 0, result.stderr
    assert "NOT PRIVATE" in result.stderr and "never publish" in result.stderr
    for name in ("identity", "h", "hb", "quadtree"):
        assert name in result.output
    assert "all_ranges(25)" in result.output and "epsilon 0.5" in result.output
    # StructureFirst needs a public cap: by default it is left out, and the user is told why.
    assert "skipped structurefirst" in result.stderr and "cap" in result.stderr
    assert not any(line.startswith("structurefirst") for line in result.stdout.splitlines())
    with_cap = invoke(["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-k", "2", "--seed", "1",
                       "-a", "structurefirst,identity", "--option", "cap=50"])
    assert with_cap.exit_code == 0, with_cap.stderr
    assert "structurefirst" in with_cap.output
    named = invoke(["evaluate", *ARGS, "-c", "income", "-e", "0.5", "-a", "structurefirst"])
    assert named.exit_code == 2 and "needs a public cap" in named.stderr


def test_unknown_algorithm_is_a_usage_error():
    result = invoke(["evaluate", *ARGS, "-c", "income", "-e", "1", "-a", "nosuch"])
    assert result.exit_code == 2 and "unknown algorithm" in result.stderr


def test_bench_command_on_own_histograms(tmp_path):
    np.save(tmp_path / "h1.npy", np.random.default_rng(0).integers(0, 50, 64))
    (tmp_path / "h2.csv").write_text("\n".join(",".join(str(v) for v in row)
                                               for row in np.random.default_rng(1).integers(0, 9, (8, 8))))
    out = tmp_path / "runs.jsonl"
    result = invoke(["bench", str(tmp_path / "h1.npy"), str(tmp_path / "h2.csv"), "-a",
                     "identity,hb", "--scale", "1000", "-e", "1", "--samples", "2", "--runs", "1",
                     "--jsonl", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "1-D, scale 1,000" in result.output and "2-D, scale 1,000" in result.output
    assert "NOT PRIVATE" in result.stderr
    assert len(out.read_text().splitlines()) == 2 * 2 * 2  # files x algorithms x samples


def test_bench_command_rejects_bad_histograms(tmp_path):
    (tmp_path / "bad.csv").write_text("1,-2\n3,4\n")
    result = invoke(["bench", str(tmp_path / "bad.csv")])
    assert result.exit_code == 1 and "non-negative" in result.stderr


def test_cli_refuses_undeclared_column_in_one_line(tmp_path):
    (tmp_path / "schema.yaml").write_text("columns:\n  age: {type: numeric, lower: 15, upper: 95, width: 5}\n")
    # Parquet stores income's type, so the old evaluate planned its discovery and scored the placeholder.
    result = invoke(["evaluate", str(ROOT / "sample_data" / "census.parquet"), "-s",
                     str(tmp_path / "schema.yaml"), "-c", "age,income", "-e", "1", "-k", "1"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [result.stderr.strip()]  # one line, and no NOT PRIVATE banner before it
    assert "'income'" in result.stderr and "not declared" in result.stderr
    assert result.stdout == ""


def test_cli_evaluates_under_rho_and_refuses_a_missing_budget():
    result = invoke(["evaluate", *ARGS, "-c", "income", "--rho", "0.01", "-a", "identity,hb",
                     "-k", "2", "--seed", "1"])
    assert result.exit_code == 0, result.stderr
    assert "rho 0.01" in result.output and "hb" in result.output
    missing = invoke(["evaluate", *ARGS, "-c", "income", "-k", "2"])
    assert missing.exit_code == 2 and "--rho" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
