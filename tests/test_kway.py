"""k-way tables: every algorithm that generalises releases a 4-column table of mixed types; the one-column
algorithms refuse it before reading data, with a clear message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist.algorithms import REGISTRY
from dphist.errors import UsageError

SCHEMA = {"columns": {
    "age": {"type": "numeric", "lower": 0, "upper": 80, "bins": 8},
    "hours": {"type": "numeric", "lower": 0, "upper": 60, "bins": 6},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "region": {"type": "categorical", "values": ["N", "E", "S", "W", "C"]},
}}
COLUMNS = ["age", "sex", "hours", "region"]


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    n = 20_000
    return pd.DataFrame({"age": rng.integers(0, 80, n), "hours": rng.integers(0, 60, n),
                         "sex": rng.choice(["F", "M"], n), "region": rng.choice(list("NESWC"), n)})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_four_way_tables(frame, name, tmp_path):
    options = REGISTRY[name].example_options
    if name in ("noisefirst", "structurefirst", "mwem", "efpa", "dawa"):
        with pytest.raises(UsageError, match="one-column tables"):
            dphist.api.plan_release(frame, "1", SCHEMA, columns=COLUMNS, algorithm=name, algorithm_options=options)
        return
    if name in ("ugrid", "agrid"):  # grids over two columns (Qardaji et al.)
        with pytest.raises(UsageError, match="exactly 2 columns"):
            dphist.api.plan_release(frame, "1", SCHEMA, columns=COLUMNS, algorithm=name, algorithm_options=options)
        return
    if name == "privtree":  # a split cuts every axis in two: fan-out 2^d, kept to d <= 3
        with pytest.raises(UsageError, match="1 to 3 columns"):
            dphist.api.plan_release(frame, "1", SCHEMA, columns=COLUMNS, algorithm=name, algorithm_options=options)
        return
    result = dphist.release(frame, "1", SCHEMA, columns=COLUMNS, algorithm=name, algorithm_options=options,
                            ledger=tmp_path / "l.sqlite")
    table = result.tables["age_sex_hours_region"]
    assert len(table) == 8 * 2 * 6 * 5
    counts = table["count"].to_numpy()
    assert (counts >= 0).all() and np.issubdtype(counts.dtype, np.integer)
    assert abs(counts.sum() - len(frame)) < 0.02 * len(frame)  # the noisy total of 20,000 records
    # Cells are in C order over the columns as given: the first rows vary the last column fastest.
    assert list(table["region"][:5]) == ["N", "E", "S", "W", "C"] and table["sex"][0] == "F"
    assert result.report["tables"][0]["shape"] == [8, 2, 6, 5]
