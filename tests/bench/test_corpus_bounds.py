"""The corpus bounds bench (bench/corpus/bounds.py): its records measure what a release's discovery cuts."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import bench_scripts


@pytest.fixture(scope="module")
def bounds():
    return bench_scripts.load("corpus/bounds.py")


def test_records_count_what_the_bounds_cut(bounds):
    """A two-column table (one of text, skipped): the numeric column's runs hold its N, its N·ε_b at the default
    share split over both columns, and the share outside the bounds recomputed from them; a far outlier (1 of
    20,000 values) is outside in every seed, so the share is at least 1/20,000 and at most the bench's 3 %."""
    values = np.append(np.random.default_rng(0).integers(100, 200, 19_999), 10 ** 9).astype(np.int64)
    table = pa.table({"x": values, "t": ["a"] * values.size})
    records = bounds.runs("t", table, Fraction(1), 2)
    assert [r["column"] for r in records] == ["x", "x"]
    for r in records:
        assert r["n"] == 20_000 and r["n_epsilon"] == pytest.approx(20_000 * 0.25 / 2)
        outside = np.mean((values < r["lower"]) | (values >= r["upper"]))
        assert r["outside"] == pytest.approx(outside) and 1 / 20_000 <= outside <= 0.03
        assert r["released"] and r["bins"] >= 1 and not r["fractional"]
    line = bounds.summary([{**r, "epsilon": "1"} for r in records], "1", None)
    assert "2 column runs, 2 released" in line and "N·ε_b ≥ 1000: 2 runs, 2 kept ≥ 97 %" in line
