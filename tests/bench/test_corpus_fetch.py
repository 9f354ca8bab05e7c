"""The real-table corpus's column kinds (bench/corpus/fetch.py): what the discovery bench judges per kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bench_scripts


@pytest.fixture(scope="module")
def fetch():
    return bench_scripts.load("corpus/fetch.py")


@pytest.mark.parametrize("values, kind", [
    (pd.Series([2013] * 5 + [None]), "constant"),
    (pd.Series([0, 1, 1, 0, None]), "flag"),
    (pd.Series([1.0, 2.0, 3.0, 5.0, 4.0]), "code"),
    (pd.Series(np.arange(21)), "numeric"),          # one more whole value than a code may have
    (pd.Series([0.5, 1.0, 2.0]), "numeric"),         # not whole
    (pd.Series(pd.to_datetime(["2020-01-01", "2021-06-01"])), "date"),
    (pd.Series(["a", "b", None]), "categorical"),
    (pd.Series([True, False, True]), "categorical"),
    (pd.Series([-1, 9999, 3, 3]), "code"),           # sentinels among few whole values
])
def test_each_column_gets_its_kind(fetch, values, kind):
    assert fetch.kind_of(values) == kind


def test_the_summary_counts_every_column_once(fetch):
    frame = pd.DataFrame({"x": np.arange(100) * 0.5, "flag": [0, 1] * 50, "c": ["u", "v", "w", "z"] * 25})
    manifest = {"t1": {"source": "s1", "rows": 100, **fetch.describe(frame)},
                "t2": {"source": "s2", "rows": 100, **fetch.describe(frame[["c"]])}}
    last = fetch.summary(manifest).splitlines()[-1]
    assert last.startswith("| **2 tables** | 2 sources | 200 |")
    # numeric, date, code, flag, constant, categorical
    assert last.endswith("| 1 | 0 | 0 | 1 | 0 | 2 |")
