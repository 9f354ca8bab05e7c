"""`--workload`: does auto serve the questions the steward names?  Against identity, on 4096-bin tables.

    .venv/bin/python bench/workload.py                  # run and write the section `workload` of RESULTS.md
    .venv/bin/python bench/workload.py --from-records   # rewrite the section only

Issue 23's case: a 4096-bin histogram of 1M rows at ε = 0.5, where auto tuned for ranges picks a tree whose single
cells are 3× worse than identity's.  Here the 18 DPBench 1-D data sets, sampled at 1M rows (and, to see the
whole signal range, 1e3 to 1e7), ε = 0.5, fresh samples (seed 2027, unseen by the rule fit).  Per data set: the
mean absolute error of the single cells of `auto --workload cells` ÷ identity's (target ≤ 1.15), and the mean
absolute prefix error of `auto --workload ranges` ÷ identity's (target ≤ 0.5).  auto pays its noisy total.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dpbench import manifest  # noqa: E402
from records import RESULTS, read_records, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.evaluation.benchmark import load_histogram, run_benchmark  # noqa: E402

RECORDS = RESULTS / "workload.jsonl"
COMMAND = ".venv/bin/python bench/workload.py"  # writes RECORDS
SCALES = [1_000, 10_000, 100_000, 1_000_000, 10_000_000]
EPSILON = "0.5"
SEED = 2027


def run(samples: int, runs: int) -> list[dict]:
    sets = {name: load_histogram(path) for name, (d, path) in manifest(quick=False).items() if d == 1}
    records = run_benchmark(sets, ["identity"], SCALES, [EPSILON], samples, runs, seed=SEED)
    for workload in ("cells", "ranges"):
        part = run_benchmark(sets, ["auto"], SCALES, [EPSILON], samples, runs, seed=SEED,
                             options=lambda name, scale, eps, w=workload: {"workload": w} if name == "auto" else {})
        records += [{**r, "algorithm": f"auto-{workload}"} for r in part]
    return records


def section(records: list[dict], minutes: float | None) -> str:
    frame = pd.DataFrame(records)
    mean = frame.groupby(["scale", "dataset", "algorithm"])[["error", "error_cells"]].mean()
    took = f" Run took {minutes:.1f} min." if minutes is not None else ""
    lines = ["## The workload: auto against identity on single cells and on prefixes", "",
             f"The 18 DPBench 1-D data sets at 4096 cells, ε = {EPSILON}, fresh samples (seed {SEED}), "
             f"{frame['sample'].nunique()} samples × {frame['run'].nunique()} runs per data set and scale. "
             "*cells* = mean absolute error of the single cells of `auto --workload cells` ÷ identity's (target: "
             "at most 1.15); *ranges* = mean absolute prefix error of `auto --workload ranges` ÷ identity's "
             "(at most 0.5). auto pays its noisy total. Ratios per data set, then their mean and worst over the "
             f"18. {records_note(RECORDS, COMMAND)}{took}", "",
             "| rows | cells: mean ratio | cells: worst (data set) | auto chose (cells) | ranges: mean ratio | "
             "ranges: worst (data set) | auto chose (ranges) |", "|---|---|---|---|---|---|---|"]
    for scale in sorted(frame.scale.unique()):
        m = mean.loc[scale]
        identity = m.xs("identity", level="algorithm")
        cells = m.xs("auto-cells", level="algorithm").error_cells / identity.error_cells
        ranges = m.xs("auto-ranges", level="algorithm").error / identity.error
        picks = {w: ", ".join(f"{k} {v}" for k, v in frame[(frame.scale == scale) & (frame.algorithm == f"auto-{w}")]
                              ["chosen"].value_counts().items()) for w in ("cells", "ranges")}
        lines.append(f"| {scale:,} | {cells.mean():.2f} | {cells.max():.2f} ({cells.idxmax()}) | {picks['cells']} | "
                     f"{ranges.mean():.2f} | {ranges.max():.2f} ({ranges.idxmax()}) | {picks['ranges']} |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-records", action="store_true")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    minutes = None
    if args.from_records:
        records = read_records(RECORDS, COMMAND)
    else:
        started = time.perf_counter()
        records = run(args.samples, args.runs)
        minutes = (time.perf_counter() - started) / 60
        write_records(RECORDS, records)
    text = section(records, minutes)
    replace_section("workload", text)
    print(text)


if __name__ == "__main__":
    main()
