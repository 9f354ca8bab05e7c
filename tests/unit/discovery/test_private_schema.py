"""A schema found with differential privacy (dphist/discovery/private_schema.py): its declarations round-trip, it spends its
ε exactly, and later releases reuse it for free.  (``dphist schema --private``: cli/test_schema_command.py.)"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pandas as pd
import yaml

import dphist
from dphist.discovery.private_schema import plan_private_schema, run_private_schema
from dphist.declare.schema import declaration, parse_schema


def people(n: int = 20_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "income": rng.gamma(2.0, 20_000, n),
                         "city": rng.choice(["north", "south", "east", "west"], n),
                         "visit": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 600, n), "D")})


def test_declarations_round_trip():
    schema = parse_schema({"columns": {
        "a": {"type": "numeric", "lower": 0, "upper": 10, "bins": 4, "nulls": "category"},
        "b": {"type": "numeric", "edges": [0, 1, 5, 50], "out_of_domain": "drop"},
        "c": {"type": "numeric", "lower": 3, "upper": 40, "width": 5},
        "d": {"type": "categorical", "values": ["x", "y z", "10"]},
        "e": {"type": "date", "lower": "2020-01-01", "upper": "2021-07-01", "unit": "quarter", "width": 2}}})
    again = parse_schema(yaml.safe_load(yaml.safe_dump({"columns": {n: declaration(c)
                                                                    for n, c in schema.columns.items()}})))
    assert again.columns == schema.columns


def test_private_schema_spends_epsilon_exactly_and_is_reused_for_free(tmp_path):
    frame = people()
    plan = plan_private_schema(frame, "0.6", delta="1e-6", seed=3)
    result = run_private_schema(plan)
    assert result.report["epsilon"] == "0.6" and Fraction(result.report["delta"]) == Fraction(1, 10 ** 6)
    assert set(result.columns) == {"age", "income", "city", "visit"}
    assert sum(Fraction(r["epsilon"]) for r in result.report["columns"]) == Fraction("0.6")
    assert result.columns["city"].values == ("east", "north", "south", "west")
    lo, hi = result.columns["age"].edges[0], result.columns["age"].edges[-1]
    # True range [18, 90): DP bounds at the 1/400 and 399/400 quantiles, which at this budget (2/ε = 53 rows
    # of rank for each bound) fall a little outward rather than cut.
    assert 0 <= lo <= 19 and 89 <= hi <= 110 and result.columns["age"].open_ends
    assert result.columns["visit"].unit == "month"
    schema = yaml.safe_load(result.text)
    assert "TEST MODE" in result.text and "epsilon 0.6" in result.text
    # The frozen schema: a release that uses it spends nothing on discovery and keeps its domains.
    released = dphist.release(frame, "1", schema, columns=["age", "city"], seed=1)
    assert "discovery" not in released.report and released.report["epsilon_spent"] == "1"
    table = released.report["tables"][0]
    # The frozen file declares the same bins; a declared domain's end bins are labelled closed.
    assert table["domain"]["age"] == dataclasses.replace(result.columns["age"], open_ends=False).describe()
    assert table["domain"]["city"] == result.columns["city"].describe()


def test_private_schema_with_a_privacy_unit(tmp_path):
    frame = people(6_000)
    frame["person"] = np.arange(len(frame)) // 3
    plan = plan_private_schema(frame, "1", delta="1e-6", columns="age,city", privacy_unit="person",
                               max_rows_per_unit=3, seed=2)
    result = run_private_schema(plan)
    assert plan.ledger_unit == "unit:person" and result.report["max_rows_per_unit"] == 3
    assert result.report["epsilon"] == "1"
    assert "privacy unit person, at most 3 rows each" in result.text
    assert result.columns["city"].values == ("east", "north", "south", "west")
