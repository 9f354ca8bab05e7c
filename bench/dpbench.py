"""Accuracy on the DPBench data sets (Hay et al. SIGMOD 2016 protocol; see dphist.evaluation.benchmark).

    .venv/bin/python bench/dpbench.py            # full grid: all 28 data sets, scales 1e3/1e5/1e7, ε 0.1 and 1
    .venv/bin/python bench/dpbench.py --quick    # a few data sets (make bench-quick, well under 5 minutes)

Writes bench/results/dpbench[-quick].jsonl (one record per run; regenerated, not committed) and the accuracy
section of bench/RESULTS.md:
the comparison with the reference implementation (dpcomp_core) at scale 1e5, ε = 0.1, then the whole grid.
Needs ../shared/data/dpbench; noise is seeded (benchmark outputs are not private).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import RESULTS, read_records, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.evaluation.benchmark import load_histogram, run_benchmark, summarize  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "dpbench"
QUICK = {"1D": ["ADULT", "HEPTH", "SEARCHLOGS"], "2D": ["ADULT-2D", "GOWALLA"]}
ALGORITHMS = {1: ["identity", "h", "hb", "privelet", "noisefirst", "structurefirst", "dpcube", "kdtree", "ahp",
                  "privtree", "mwem", "efpa", "dawa"],
              2: ["identity", "hb", "quadtree", "privelet", "dpcube", "kdtree"]}
# Median over the 1-D data sets of the reference implementation's error at ε = 0.1, per scale (issue tracker).
REFERENCE_MEDIAN = {"dpcube": {1_000: 1.57e-1, 100_000: 2.00e-3, 10_000_000: 1.90e-4},
                    "identity": {1_000: 5.05e-1, 100_000: 5.05e-3, 10_000_000: 5.05e-5}}
# Expected error of the reference implementation (dpcomp_core) at scale 1e5, ε = 0.1, from the issue tracker.
REFERENCE = {1: {"identity": 5.05e-3, "h": 1.82e-3, "hb": 1.28e-3, "privelet": 1.73e-3},
             2: {"hb": 8.3e-3, "quadtree": 7.9e-3, "privelet": 1.42e-2}}


def options(name: str, scale: int, epsilon=None) -> dict:
    """Public policy numbers the benchmark gives algorithms that need them (whatever ε).  StructureFirst's cap F on a cell's
    count: the DPBench protocol fixes the number of records by design (it is public there), and the policy here
    is F = scale / 100, within what 4096 cells allow.  A steward sets F from policy, never from the data."""
    if name == "structurefirst":
        return {"cap": max(1, min(scale // 100, (1 << 26) // 4096))}
    return {}


def manifest(quick: bool) -> dict[str, tuple[int, Path]]:
    out = {}
    for line in (DATA / "MANIFEST.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        if not quick or cells[0] in QUICK.get(cells[1], []):
            out[cells[0]] = (int(cells[1][0]), DATA / cells[7])
    return out


def reference_table(frame: pd.DataFrame) -> list[str]:
    lines = ["### Against the reference implementation (scale 100,000, ε = 0.1)", "",
             "Mean over data sets of each data set's mean error; `released` is the published table (least squares,",
             "then non-negative integers), `least squares` the estimate before post-processing (what the reference",
             "publishes). Reference figures: dpcomp_core, as measured for the issue tracker.", "",
             "| dims | algorithm | released | least squares | reference | released ÷ reference |",
             "|---|---|---|---|---|---|"]
    at = frame[(frame.scale == 100_000) & (frame.epsilon == "0.1")]
    for (dims, algo), group in at.groupby(["dims", "algorithm"]):
        per_data = group.groupby("dataset")[["error", "error_gls"]].mean().mean()
        ref = REFERENCE.get(dims, {}).get(algo)
        ratio = f"{per_data['error'] / ref:.2f}" if ref else "–"
        lines.append(f"| {dims}-D | {algo} | {per_data['error']:.3e} | {per_data['error_gls']:.3e} | "
                     f"{ref:.2e} | {ratio} |" if ref else
                     f"| {dims}-D | {algo} | {per_data['error']:.3e} | {per_data['error_gls']:.3e} | – | – |")
    return lines + [""]


def median_table(frame: pd.DataFrame) -> list[str]:
    """1-D, ε = 0.1: per scale, the median and the worst over data sets of each data set's mean error, with the
    reference medians where known, and each algorithm's worst ratio to our identity (same data, same seeds)."""
    at = frame[(frame.dims == 1) & (frame.epsilon == "0.1")]
    lines = ["### 1-D medians over data sets (ε = 0.1)", "",
             "Identity's expected error (no post-processing) is 5.05e-1, 5.05e-3 and 5.05e-5 at the three scales.",
             "", "| scale | algorithm | median error | worst data set | reference median | worst data set ÷ identity |",
             "|---|---|---|---|---|---|"]
    for scale, group in at.groupby("scale"):
        per = group.groupby(["dataset", "algorithm"])["error"].mean().unstack()
        for algo in per.columns:
            ref = REFERENCE_MEDIAN.get(algo, {}).get(scale)
            worst = (per[algo] / per["identity"]).max() if "identity" in per else float("nan")
            lines.append(f"| {scale:,} | {algo} | {per[algo].median():.3e} | {per[algo].max():.3e} | "
                         f"{f'{ref:.2e}' if ref else '–'} | {worst:.2f} |")
    return lines + [""]


def dataset_tables(frame: pd.DataFrame) -> list[str]:
    """1-D, ε = 0.1: every data set's mean error per algorithm, one table per scale, with run times."""
    at = frame[(frame.dims == 1) & (frame.epsilon == "0.1")]
    lines = ["### 1-D, every data set (ε = 0.1)", "",
             "Mean error over the samples and runs of each data set; the last row is the median run time.", ""]
    for scale, group in at.groupby("scale"):
        per = group.groupby(["dataset", "algorithm"])["error"].mean().unstack()
        order = [a for a in ALGORITHMS[1] if a in per.columns]
        per = per.reindex(index=[d for d in dict.fromkeys(group.dataset)], columns=order)
        ms = group.groupby("algorithm")["seconds"].median() * 1000
        lines += [f"#### scale {scale:,}", "", "| data set | " + " | ".join(order) + " |",
                  "|---" * (len(order) + 1) + "|"]
        lines += [f"| {name} | " + " | ".join(f"{row[a]:.2e}" for a in order) + " |" for name, row in per.iterrows()]
        lines += ["| ms per run | " + " | ".join(f"{ms[a]:.1f}" for a in order) + " |", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scales", type=int, nargs="*", default=[1_000, 100_000, 10_000_000])
    parser.add_argument("--epsilons", nargs="*", default=["0.1", "1"])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--algorithms", nargs="*", default=None,
                        help="run only these algorithms and keep the saved records of the others")
    parser.add_argument("--dims", type=int, nargs="*", default=[1, 2], help="table dimensions to run")
    parser.add_argument("--from-records", action="store_true",
                        help="rebuild the RESULTS.md section from the saved records instead of running")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"DPBench data not found at {DATA}")
    started = time.perf_counter()
    sets = manifest(args.quick)
    out = RESULTS / ("dpbench-quick.jsonl" if args.quick else "dpbench.jsonl")
    if args.from_records:
        records = read_records(out, command(args.quick))
        write_section(records, sets, args, out, minutes=None)
        return
    records = []
    if args.algorithms:
        # keep every other record, the named algorithms' too in the dimensions not rerun
        records = [r for r in read_records(out, command(args.quick), missing_ok=True)
                   if r["algorithm"] not in args.algorithms or r["dims"] not in args.dims]
    for dims in args.dims:
        data = {name: load_histogram(path) for name, (d, path) in sets.items() if d == dims}
        todo = [a for a in ALGORITHMS[dims] if not args.algorithms or a in args.algorithms]
        records += run_benchmark(data, todo, args.scales, args.epsilons, args.samples, args.runs,
                                 progress=lambda name, scale, s: print(f"{name} scale {scale:,} sample {s}",
                                                                       flush=True), options=options)
    write_records(out, records)
    write_section(records, sets, args, out, minutes=(time.perf_counter() - started) / 60)


def command(quick: bool) -> str:
    """The command that runs the grid (quick or full) and writes its records."""
    return f".venv/bin/python bench/dpbench.py{' --quick' if quick else ''}"


def write_section(records: list[dict], sets: dict, args, out: Path, minutes: float | None) -> None:
    frame = pd.DataFrame(records)
    took = f"Run took {minutes:.1f} min. " if minutes is not None else ""
    text = [f"## Accuracy{' (quick mode)' if args.quick else ''}", "",
            f"Data sets: {', '.join(sets)}. Scales {', '.join(f'{s:,}' for s in args.scales)}; ε "
            f"{', '.join(args.epsilons)}; {args.samples} data samples × {args.runs} noise runs per setting; "
            f"scaled average per-query L1 error (prefix workload in 1-D, 2000 random boxes in 2-D). "
            f"{took}{records_note(out, command(args.quick))}", ""]
    text += reference_table(frame) + median_table(frame) + dataset_tables(frame)
    text += ["### The grid", "", summarize(records)]
    replace_section("accuracy", "\n".join(text))
    print(f"wrote bench/RESULTS.md from {out}" + (f" ({minutes:.1f} min)" if minutes is not None else ""))


if __name__ == "__main__":
    main()
