"""Learn and evaluate the rule table behind ``--algorithm auto`` on the DPBench grid.

    .venv/bin/python bench/auto_rules.py --grid       # run the coarsened grid (the full-size grid is dpbench.py's)
    .venv/bin/python bench/auto_rules.py --fit        # fit the table, write dphist/algorithms/auto_rules.py
    .venv/bin/python bench/auto_rules.py --evaluate   # run `auto` on the DPBench grid, write the regret table

The rule table maps public facts to an algorithm: the number of dimensions, the number of cells, and the signal
decade round(log10(N·ε)), N the table's total (the DPBench protocol's "scale"; `auto` sees it only through a
noisy total).  DPBench's own domains are 4096 cells (1-D) and 256×256 (2-D); to learn how the choice moves
with the domain size, the same data sets are also summed into coarser domains (1-D: 1024, 256, 64, 16 cells;
2-D: 128², 64², 32², 16²).  Error and regret follow the DPBench protocol (dphist.benchmark).  For every
(dimensions, cells, decade) the table keeps the algorithm with the lowest mean regret over the data sets.

The evaluation runs `auto` itself (noisy total included, so its budget share is paid) on the full-size grid
with the same data samples as bench/dpbench.py, and divides its error by the best error among all algorithms
in bench/results/dpbench.jsonl in the same setting (regret).  A leave-one-data-set-out variant refits the table
without each data set and scores the choice on that data set, the honest figure for data the table never saw.
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
sys.path.insert(0, str(HERE))

from dpbench import DATA, manifest  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.benchmark import load_histogram, run_benchmark  # noqa: E402

RESULTS = HERE / "results"
FULL = RESULTS / "dpbench.jsonl"
GRID = RESULTS / "auto-grid.jsonl"
EVALUATION = RESULTS / "auto-evaluation.jsonl"
RULES = HERE.parent / "dphist" / "algorithms" / "auto_rules.py"
# The algorithms auto may pick: those that need no public policy number from the steward (StructureFirst
# needs a cap) and are not dominated by construction (NoiseFirst's range error is identity's).
CANDIDATES = {1: ["identity", "h", "hb", "privelet", "dpcube", "kdtree", "ahp", "privtree", "mwem", "efpa", "dawa"],
              2: ["identity", "hb", "quadtree", "privelet", "dpcube", "kdtree"]}
COARSE = {1: [(1024,), (256,), (64,), (16,)], 2: [(128, 128), (64, 64), (32, 32), (16, 16)]}
SCALES, EPSILONS = [1_000, 100_000, 10_000_000], ["0.1", "1"]


def coarsen(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum blocks of neighbouring cells of ``x`` into a table of ``shape`` (each axis divides evenly)."""
    blocks = []
    for n, m in zip(x.shape, shape):
        blocks += [m, n // m]
    return x.reshape(blocks).sum(axis=tuple(range(1, 2 * x.ndim, 2)))


def decade(records: pd.DataFrame) -> pd.Series:
    return np.rint(np.log10(records.scale * records.epsilon.astype(float))).astype(int)


def reference_best() -> pd.Series:
    """The reference implementation's best mean error per (dims, scale, data set) at ε = 0.1 and the full DPBench
    domain (1-D 4096 cells, 2-D 256 × 256), from ../shared/data/dpbench/reference (empty if absent)."""
    parts = []
    for dims, name, column in ((1, "full_1d.jsonl", "err_prefix"), (2, "full_2d.jsonl", "err_dpbench2000")):
        path = DATA / "reference" / name
        if not path.exists():
            continue
        ref = pd.read_json(path, lines=True)
        ref = ref[(ref.status == "ok") & np.isclose(ref.eps, 0.1)]
        best = ref.groupby(["scale", "dataset", "alg"])[column].mean().unstack().min(axis=1)
        best.index = pd.MultiIndex.from_tuples([(dims, int(s), d) for s, d in best.index],
                                               names=["dims", "scale", "dataset"])
        parts.append(best)
    return pd.concat(parts).rename("reference") if parts else pd.Series(dtype=float, name="reference")


FULL_CELLS = {1: 4096, 2: 65536}


def per_setting(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean error per (dims, cells, decade, data set) and algorithm (rows: settings; columns: algorithms), with
    a column ``reference``: the reference's best algorithm's mean error where it was measured (ε = 0.1, the
    full domain), else NaN.  Regret is taken against the best of ours and the reference's."""
    frame = frame.assign(decade=decade(frame))
    table = frame.groupby(["dims", "cells", "decade", "dataset", "algorithm"])["error"].mean().unstack()
    ref = reference_best()
    settings = frame.drop_duplicates(["dims", "cells", "decade", "dataset"]).set_index(
        ["dims", "cells", "decade", "dataset"])
    values = []
    for key, row in settings.iterrows():
        dims, cells = int(key[0]), int(key[1])
        at = (dims, int(row.scale), key[3])
        full = cells == FULL_CELLS[dims] and row.epsilon == "0.1"
        values.append(ref.get(at, np.nan) if full else np.nan)
    table["reference"] = pd.Series(values, index=settings.index).reindex(table.index)
    return table


def takes_columns(name: str) -> bool:
    """Whether the algorithm takes tables of several columns (a one-column rule's choice may meet a table with
    categorical slices, which needs one that does)."""
    from dphist.algorithms import get_algorithm
    from dphist.errors import UsageError
    try:
        get_algorithm(name).check_shape((8, 8))
    except UsageError:
        return False
    return True


def fit(errors: pd.DataFrame, leave_out: str | None = None) -> dict:
    """{(dims, cells): {decade: (algorithm, mean regret, data sets, the best algorithm that takes several
    columns)}} from per-setting errors."""
    table: dict = {}
    for (dims, cells, dec), group in errors.groupby(level=["dims", "cells", "decade"]):
        if leave_out is not None:
            group = group[group.index.get_level_values("dataset") != leave_out]
        candidates = [a for a in CANDIDATES[dims] if a in group.columns]
        best = group[candidates + ["reference"]].min(axis=1)  # NaN references are skipped
        regret = group[candidates].div(best, axis=0).mean()
        best = regret.idxmin()
        several = regret[[a for a in regret.index if takes_columns(a)]].idxmin()
        table.setdefault((int(dims), int(cells)), {})[int(dec)] = (best, round(float(regret[best]), 3),
                                                                   int(group.shape[0]), several)
    return table


def lookup(table: dict, dims: int, cells: int, signal: float) -> str:
    """The rule table's choice (the same lookup as dphist.algorithms.auto, for the leave-one-out scores)."""
    from dphist.algorithms.auto import nearest_rule
    return nearest_rule(table, dims, cells, signal)[0]


def load(path: Path) -> pd.DataFrame:
    frame = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])
    frame["epsilon"] = frame.epsilon.astype(str)
    return frame


def run_grid(samples: int, runs: int, only: list[str] | None = None, scales: list[int] | None = None) -> None:
    """Run the coarsened grid for every candidate (or ``only`` these, keeping the saved records of the others)."""
    started = time.perf_counter()
    sets = manifest(quick=False)
    records = []
    if only:
        records = [r for r in map(json.loads, GRID.read_text().splitlines()) if r["algorithm"] not in only]
    for dims in (1, 2):
        if only and not any(a in CANDIDATES[dims] for a in only):
            continue
        full = {name: load_histogram(path) for name, (d, path) in sets.items() if d == dims}
        for shape in COARSE[dims]:
            data = {name: coarsen(x, shape) for name, x in full.items()}
            todo = [a for a in CANDIDATES[dims] if not only or a in only]
            records += run_benchmark(data, todo, scales or SCALES, EPSILONS, samples, runs,
                                     progress=lambda name, scale, s: None)
            print(f"{dims}-D {shape}: done ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
    RESULTS.mkdir(exist_ok=True)
    GRID.write_text("".join(json.dumps(r) + "\n" for r in records))
    print(f"wrote {GRID}")


def write_rules(table: dict) -> None:
    lines = ['"""The rule table behind ``--algorithm auto``.  Generated by bench/auto_rules.py --fit from',
             "bench/results/dpbench.jsonl and bench/results/auto-grid.jsonl; do not edit by hand.",
             "",
             "RULES[(dimensions, cells)][decade] = (algorithm, mean regret on the grid, data sets, for several",
             "columns), where decade is round(log10(N·ε)) for a table of N records released at ε: the algorithm with",
             "the lowest mean error ratio to the best of ours and the reference implementation's over the DPBench",
             "data sets (summed into that many cells) in that setting, and the best of those that take tables of",
             "several columns (for a one-column rule met by a table with categorical slices).",
             '"""', "", "RULES = {"]
    for key in sorted(table):
        lines.append(f"    {key}: {{")
        for dec in sorted(table[key]):
            lines.append(f"        {dec}: {table[key][dec]!r},")
        lines.append("    },")
    lines.append("}")
    RULES.write_text("\n".join(lines) + "\n")
    print(f"wrote {RULES}")


def errors_all() -> pd.DataFrame:
    frames = [load(FULL)] + ([load(GRID)] if GRID.exists() else [])
    frame = pd.concat(frames, ignore_index=True)
    return per_setting(frame)


def evaluate(samples: int, runs: int) -> None:
    started = time.perf_counter()
    sets = manifest(quick=False)
    records = []
    for dims in (1, 2):
        data = {name: load_histogram(path) for name, (d, path) in sets.items() if d == dims}
        records += run_benchmark(data, ["auto"], SCALES, EPSILONS, samples, runs, progress=None)
    EVALUATION.write_text("".join(json.dumps(r) + "\n" for r in records))
    minutes = (time.perf_counter() - started) / 60
    report(minutes)


def report(minutes: float | None) -> None:
    full = load(FULL)
    auto = load(EVALUATION)
    keys = ["dims", "dataset", "scale", "epsilon"]
    ours = full.groupby(keys + ["algorithm"])["error"].mean().unstack().min(axis=1)
    ref = reference_best()
    at = [ref.get((d, int(s), n), np.nan) if e == "0.1" else np.nan for d, n, s, e in ours.index]
    best = np.fmin(ours, pd.Series(at, index=ours.index)).rename("best")
    mean_auto = auto.groupby(keys)["error"].mean().rename("auto")
    joined = pd.concat([best, mean_auto], axis=1).dropna()
    joined["regret"] = joined.auto / joined.best
    # Leave one data set out: refit without it, score the choice by the grid's recorded error.
    errors = errors_all()
    per_alg = full.groupby(keys + ["algorithm"])["error"].mean().unstack()
    lodo = []
    for (dims, name, scale, eps), row in per_alg.iterrows():
        table = fit(errors, leave_out=name)
        cells = int(full[(full.dataset == name)].cells.iloc[0])
        choice = lookup(table, int(dims), cells, scale * float(eps))
        lodo.append({"dims": dims, "dataset": name, "scale": scale, "epsilon": eps,
                     "lodo": row[choice] / joined.loc[(dims, name, scale, eps), "best"]
                     if (dims, name, scale, eps) in joined.index else np.nan})
    joined = joined.join(pd.DataFrame(lodo).set_index(keys))
    chosen = auto.groupby(keys)["chosen"].agg(lambda s: ", ".join(sorted(set(s))))
    joined = joined.join(chosen)
    took = f" Run took {minutes:.1f} min." if minutes is not None else ""
    lines = ["## Automatic algorithm choice", "",
             "`--algorithm auto` on the DPBench grid (28 data sets, scales 1e3/1e5/1e7, ε 0.1 and 1; the samples and",
             "runs of the accuracy section). *regret* = auto's mean error (noisy total and its budget share included)",
             "÷ the best mean error among all our algorithms and, where measured (ε = 0.1), the reference's",
             "algorithms on that data set and setting; *leave-one-out* = the",
             "regret when the rule table is refitted without that data set (from the recorded errors; the share for",
             f"the noisy total not included). Records: `bench/results/{EVALUATION.name}`.{took}", "",
             "| dims | scale | ε | mean regret | worst regret | leave-one-out mean | chosen |", "|---|---|---|---|---|---|---|"]
    for (dims, scale, eps), group in joined.groupby(level=["dims", "scale", "epsilon"]):
        picks = ", ".join(sorted(set(", ".join(group.chosen).split(", "))))
        lines.append(f"| {dims}-D | {scale:,} | {eps} | {group.regret.mean():.3f} | {group.regret.max():.2f} | "
                     f"{group.lodo.mean():.3f} | {picks} |")
    lines += ["", f"Over the whole grid ({len(joined)} settings): mean regret **{joined.regret.mean():.3f}**, "
              f"worst {joined.regret.max():.2f}; leave-one-data-set-out mean {joined.lodo.mean():.3f}.", ""]
    replace_section("auto", "\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", action="store_true", help="run the coarsened grid")
    parser.add_argument("--fit", action="store_true", help="fit the rule table and write it")
    parser.add_argument("--evaluate", action="store_true", help="run auto on the DPBench grid")
    parser.add_argument("--from-records", action="store_true", help="rewrite the results section only")
    parser.add_argument("--algorithms", nargs="*", default=None, help="with --grid: run only these candidates")
    parser.add_argument("--scales", type=int, nargs="*", default=None, help="with --grid: only these scales")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"DPBench data not found at {DATA}")
    if args.grid:
        run_grid(args.samples or 3, args.runs or 1, args.algorithms, args.scales)
    if args.fit:
        write_rules(fit(errors_all()))
    if args.evaluate:
        evaluate(args.samples or 5, args.runs or 2)
    if args.from_records:
        report(None)
    if not (args.grid or args.fit or args.evaluate or args.from_records):
        parser.error("give --grid, --fit, --evaluate or --from-records")


if __name__ == "__main__":
    main()
