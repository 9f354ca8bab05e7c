"""What the discovered bounds cut, column by column of the real-table corpus, as a function of N·ε.

    .venv/bin/python bench/corpus/fetch.py             # first: the corpus
    .venv/bin/python bench/corpus/bounds.py [--epsilons 1,5] [--seeds 3] [--rows N]

For every numeric and date column of every corpus table, every ε and seed: the column's domain found by
:func:`~dphist.discovery.numeric.numeric_domain` on the budget a release with no schema gives it (the default
discovery share of ε, split equally among the table's columns; Parquet stores the types, so there is no type
step), in test mode (seeded noise).  Per run: N (the column's values), N·ε_b, the share of the values outside the
bounds (clamped into an end bin), the bins, whether a whole-valued column got fractional bins, and how many bins
hold at least 2 % of the values.  The summary gives, over the runs with N·ε_b ≥ 1,000 (the regime the docs'
guarantee covers, docs/algorithms.md §9.2), how many kept at least 97 % of the values, and over all runs how many
were released and of use (at least 3 bins holding 2 % each, at most 10 % outside).  Faster than
``discovery.py`` (no release, no CLI): a minute for three seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dphist.discovery.kinds import kind_of, numbers_of
from dphist.discovery.numeric import numeric_domain
from dphist.discovery.plan import DEFAULT_SHARE, DiscoveryPlan
from dphist.privacy import PrivacyBudget, SeededBits

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "data" / "MANIFEST.json"


def runs(name: str, table: pa.Table, epsilon: Fraction, seeds: int) -> list[dict]:
    """One record per numeric or date column and seed of ``table``."""
    column_epsilon = epsilon * DEFAULT_SHARE / table.num_columns
    out = []
    for column in table.column_names:
        kind = kind_of(table.schema.field(column).type)
        if kind in (None, "categorical"):
            continue
        data = numbers_of(table.column(column), kind, column)
        values = data[np.isfinite(data)]
        for seed in range(seeds):
            plan = DiscoveryPlan({column: kind}, column_epsilon, Fraction(0))
            found, report = numeric_domain(column, kind, data, plan, PrivacyBudget(column_epsilon,
                                                                                   bits=SeededBits(seed)))
            record = {"table": name, "column": column, "seed": seed, "n": int(values.size),
                      "n_epsilon": float(values.size * column_epsilon), "released": found is not None}
            if found is not None:
                edges = np.asarray(found.edges, dtype=float)
                lower, upper = edges[0], edges[-1]
                inside = np.clip(values, lower, np.nextafter(upper, -np.inf))
                counts = np.histogram(inside, bins=edges)[0] if values.size else np.zeros(1)
                whole = values.size and np.all(values == np.round(values))
                record.update(lower=float(lower), upper=float(upper), bins=int(edges.size - 1),
                              coarse=report["method"].startswith("coarse"),
                              outside=float(np.mean((values < lower) | (values >= upper))) if values.size else 0.0,
                              fractional=bool(whole and np.any(edges != np.round(edges))),
                              held=int(np.sum(counts >= 0.02 * max(values.size, 1))))
            out.append(record)
    return out


def summary(records: list[dict], epsilon: str, rows: int | None) -> str:
    released = [r for r in records if r["released"]]
    big = [r for r in records if r["n_epsilon"] >= 1000]
    kept = [r for r in big if r["released"] and r["outside"] <= 0.03]
    outside = [r["outside"] for r in big if r["released"]]
    useful = [r for r in released if r["held"] >= 3 and r["outside"] <= 0.1]
    return (f"ε {epsilon}, {'whole tables' if rows is None else f'first {rows} rows'}: {len(records)} column runs, "
            f"{len(released)} released ({sum(r['coarse'] for r in released)} by the coarse look), {len(useful)} of "
            f"use; N·ε_b ≥ 1000: {len(big)} runs, {len(kept)} kept ≥ 97 % of the values"
            + (f" (outside: mean {statistics.mean(outside):.2%}, worst {max(outside):.2%})" if outside else "")
            + f"; fractional bins on whole values: {sum(r.get('fractional', False) for r in released)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilons", default="1,5")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=None, help="each table cut to its first N rows")
    parser.add_argument("--out", type=Path, default=None, help="also write the records here (JSON lines)")
    args = parser.parse_args()
    manifest = json.loads(MANIFEST.read_text())
    records = []
    for epsilon in args.epsilons.split(","):
        these = []
        for name, entry in manifest.items():
            path = Path(entry["path"])
            frame = pd.read_parquet(path if path.is_absolute() else HERE / path)
            if args.rows:
                frame = frame.iloc[:args.rows]
            these += [{**r, "epsilon": epsilon} for r in runs(name, pa.Table.from_pandas(frame, preserve_index=False),
                                                              Fraction(epsilon), args.seeds)]
        print(summary(these, epsilon, args.rows))
        records += these
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in records))


if __name__ == "__main__":
    main()
