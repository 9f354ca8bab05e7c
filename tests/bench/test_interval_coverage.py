"""The interval coverage bench (bench/intervals.py) on a tiny setting: its records count what the published intervals
cover, algorithm by algorithm, and its section lists each algorithm's coverage or why it has none."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bench_scripts
from interval_checks import dpbench_like


@pytest.fixture(scope="module")
def bench():
    return bench_scripts.load("intervals.py")


@pytest.fixture(scope="module")
def tiny(bench):
    """30 runs of identity, AHP and MWEM on one DPBench-like table of 64 cells (1,000 records, ε = 1), and 3 runs
    of each marginal-set strategy on an 8 × 8 one."""
    one = bench.algorithm_runs("tiny 1-D", {"t": dpbench_like(64, 5_000, 1)}, (1_000,), ("1",), 30,
                               algorithms=["identity", "ahp", "mwem"])
    two = bench.marginal_runs({"s": dpbench_like(64, 5_000, 2).reshape(8, 8)}, (1_000,), ("1",), 3)
    return one, two


def test_targets_are_counts_or_bucket_shares(bench):
    counts = np.array([4, 0, 2, 6])
    assert bench.targets(counts, None).tolist() == [4, 0, 2, 6]
    assert bench.targets(counts, np.array([5, 5, 1, 1])).tolist() == [2, 2, 4, 4]


def test_records_hold_each_runs_coverage_or_the_reason(tiny):
    """Identity's exact interval at ε = 1 covers at least 95 % of the counts (97.3 % by the noise, more where a
    zero count's interval is cut at 0); 30 runs of 64 cells give a standard error below 1 %, so 93 % is a safe
    floor.  AHP's intervals are for its clusters' shares (the big cluster of empty cells at least); MWEM has none
    and says why."""
    by_name = {r["algorithm"]: r for r in tiny[0]}
    assert set(by_name) == {"identity", "ahp", "mwem"}
    identity, ahp, mwem = by_name["identity"], by_name["ahp"], by_name["mwem"]
    assert identity["runs"] == len(identity["coverage"]) == len(identity["coverage_uncut"]) == 30
    assert identity["covers"] == "count" and identity["bucket_cells"] == 0
    assert 0.93 <= np.mean(identity["coverage"]) <= 1 and np.mean(identity["coverage_uncut"]) <= np.mean(
        identity["coverage"])
    assert ahp["runs"] == 30 and ahp["covers"] in ("bucket share", "count or bucket share")
    assert 0 < ahp["bucket_cells"] <= 1 and 0.8 <= np.mean(ahp["coverage"]) <= 1
    assert mwem["runs"] == 0 and mwem["covers"] == "none" and "multiplicative-weights" in mwem["reason"]


def test_marginal_records_read_the_published_tables(tiny):
    strategies = {r["algorithm"]: r for r in tiny[1]}
    assert set(strategies) == {"marginal (separate)", "marginal (full)"}
    for record in strategies.values():
        assert record["runs"] == len(record["coverage"]) == 3 and record["covers"] == "count"
        assert all(0.5 <= c <= 1 for c in record["coverage"])
    assert "least-squares" in strategies["marginal (separate)"]["method"]
    assert "identity" in strategies["marginal (full)"]["method"]


def test_the_section_gives_coverage_per_setting_and_the_reasons(bench, tiny):
    text = bench.section(tiny[0] + tiny[1], "A note.")
    assert text.startswith("## Interval coverage") and "A note." in text
    assert "### tiny 1-D" in text and "### DPBench 2-D" in text
    identity = next(line for line in text.splitlines() if line.startswith("| identity |"))
    assert "[30]" in identity and "0%" in identity
    assert "- mwem: MWEM's estimate is a multiplicative-weights fit" in text
    assert not any(line.startswith("| mwem |") for line in text.splitlines())


def test_corpus_columns_become_histograms_of_256_bins(bench, tmp_path):
    """Numeric columns only, on 256 equal bins from min to max (every finite value counted); a constant column is
    left out; a table's path is relative to the corpus folder's parent, or absolute."""
    folder = tmp_path / "corpus" / "data"
    folder.mkdir(parents=True)
    values = np.random.default_rng(0).normal(size=500)
    pq.write_table(pa.table({"x": values, "k": np.ones(500), "t": ["a"] * 500}), folder / "one.parquet")
    pq.write_table(pa.table({"y": np.arange(10.0)}), tmp_path / "two.parquet")
    manifest = {"one": {"path": "data/one.parquet", "columns": {"x": {"kind": "numeric"}, "k": {"kind": "numeric"},
                                                                "t": {"kind": "categorical"}}},
                "two": {"path": str(tmp_path / "two.parquet"), "columns": {"y": {"kind": "numeric"}}}}
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))
    found = bench.corpus_family(folder, quick=False)
    assert sorted(found) == ["one.x", "two.y"]
    assert found["one.x"].shape == (256,) and found["one.x"].sum() == 500
    assert found["two.y"].sum() == 10 and found["two.y"][0] == 1 and found["two.y"][-1] == 1
    assert bench.corpus_family(tmp_path / "absent", quick=False) == {}
