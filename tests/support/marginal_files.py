"""Released marginal sets read back from their files: the tables, their sums onto shared columns, and the largest
difference rounding left between two tables' sums (recomputed from the files alone, to check the report's
``rounded_agreement``); and a set separate refuses (all 3-way marginals of six binary columns)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd


def label_frame(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A released marginal's count column with one label column per data column (a bin's lower edge, or the
    category), as written to its CSV."""
    labels = {c: (f"{c}_lower" if f"{c}_lower" in frame else c) for c in columns}
    return frame.rename(columns={v: k for k, v in labels.items()})[columns + ["count"]]


def read_marginals(out: Path, marginals: list[tuple[str, ...]]) -> dict[tuple[str, ...], pd.DataFrame]:
    return {m: label_frame(pd.read_csv(Path(out) / f"{'_'.join(m)}.csv"), list(m)) for m in marginals}


def sums(frame: pd.DataFrame, onto: list[str]) -> pd.Series:
    """The table's counts summed onto the columns ``onto`` (the grand total for none)."""
    if not onto:
        return pd.Series([int(frame["count"].sum())])
    return frame.groupby(sorted(onto))["count"].sum().astype(np.int64)


def largest_shared_difference(tables: dict[tuple[str, ...], pd.DataFrame]) -> int:
    """Over every pair of marginals and every column set inside both (the empty set too), the largest absolute
    difference of their sums onto it."""
    worst = 0
    names = list(tables)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = [c for c in a if c in b]
            for r in range(len(shared) + 1):
                for onto in itertools.combinations(shared, r):
                    left, right = sums(tables[a], list(onto)), sums(tables[b], list(onto))
                    assert left.index.equals(right.index)
                    worst = max(worst, int((left - right).abs().max()))
    return worst


def six_binary_columns(tmp_path: Path, *budget: str) -> tuple[list, list]:
    """3,000 rows of six binary columns with their schema, and the CLI arguments releasing all 20 of their 3-way
    marginals (three fixed margins: separate refuses them) with ``budget`` (e.g. "--rho", "0.05")."""
    rng = np.random.default_rng(5)
    columns = [f"b{i}" for i in range(6)]
    pd.DataFrame(rng.integers(0, 2, (3000, 6)), columns=columns).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "s.yaml").write_text("columns:\n" + "".join(f"  {c}: {{type: categorical, values: [0, 1]}}\n"
                                                             for c in columns))
    marginals = list(itertools.combinations(columns, 3))
    args = ["release", str(tmp_path / "d.csv"), "-s", str(tmp_path / "s.yaml"), *budget,
            "--marginals", ";".join(",".join(m) for m in marginals), "-q"]
    return marginals, args
