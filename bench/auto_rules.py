"""Learn and evaluate the rule tables behind ``--algorithm auto`` on the DPBench grid, one per workload.

    .venv/bin/python bench/auto_rules.py --grid       # run the grid: every candidate, every domain size
    .venv/bin/python bench/auto_rules.py --fit        # fit the tables, write dphist/algorithms/auto/rules.py
    .venv/bin/python bench/auto_rules.py --evaluate   # run `auto` per workload on the DPBench grid, write the regret

A rule table maps public facts to an algorithm: the number of dimensions, the number of cells, and the signal
decade round(log10(N·ε)), N the table's total (the DPBench protocol's "scale"; `auto` sees it only through a
noisy total).  There is one table per workload, the questions the steward says the table will answer
(``--workload``): ``ranges`` (DPBench's: the prefixes in 1-D, 2000 random rectangles in 2-D), ``cells`` (every
single cell) and ``marginals`` (the one-way marginals; the cells themselves in 1-D).  Each run of the grid scores
the same released table on all three.  DPBench's own domains are 4096 cells (1-D) and 256×256 (2-D); to learn
how the choice moves with the domain size, the same data sets are also summed into coarser domains (1-D: 1024,
256, 64, 16 cells; 2-D: 128², 64², 32², 16²).  Error and regret follow the DPBench protocol (dphist.evaluation.benchmark).
For every (workload, dimensions, cells, decade) the table keeps the algorithm with the lowest mean regret over
the data sets; regret is against the best of ours and, for ranges at ε = 0.1 on the full domains, the reference
implementation's best algorithm on that data set.

The evaluation runs `auto` itself per workload (noisy total included, so its budget share is paid) on the
full-size domains with the grid's data samples, and divides its error by the best in the grid's records (and
the reference's, as above) in the same setting (regret).  A leave-one-data-set-out variant refits the table
without each data set and scores the choice on that data set, the honest figure for data the table never saw.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dpbench import DATA, manifest  # noqa: E402
from records import read_records, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.algorithms.auto.choice import Auto, as_learned, low_signal_options  # noqa: E402
from dphist.evaluation.benchmark import load_histogram, run_benchmark  # noqa: E402

RESULTS = HERE / "results"
GRID = RESULTS / "auto-grid.jsonl"
EVALUATION = RESULTS / "auto-evaluation.jsonl"
RULES = HERE.parent / "dphist" / "algorithms" / "auto_rules.py"
# The algorithms auto may pick: those that need no public policy number from the steward (StructureFirst
# needs a cap) and are not dominated by construction (NoiseFirst's range error is identity's).
CANDIDATES = {1: ["identity", "h", "hb", "privelet", "dpcube", "kdtree", "ahp", "privtree", "mwem", "efpa", "dawa"],
              2: ["identity", "hb", "quadtree", "privelet", "dpcube", "kdtree", "privtree", "ugrid", "agrid", "dawa"]}
DOMAINS = {1: [(4096,), (1024,), (256,), (64,), (16,)], 2: [(256, 256), (128, 128), (64, 64), (32, 32), (16, 16)]}
SCALES, EPSILONS = [1_000, 100_000, 10_000_000], ["0.1", "1"]
# Settings left out of the grid: MWEM at 1e7 records takes seconds a run and is 5-40 times the best there (its
# few rounds cannot resolve a high-signal table; bench/RESULTS.md, section low-signal).
SKIP = {("mwem", 10_000_000)}
WORKLOADS = {"ranges": "error", "cells": "error_cells", "marginals": "error_marginals"}
# Near-ties go to the simpler algorithm: a candidate within TIE of the lowest mean regret wins if it comes first
# in PREFERENCE (data-independent first: exact expected errors, no variance from a noisy structure).  The grid's
# means carry several per cent of sampling noise, and without this the choice flips between identity and hb from
# one decade to the next on 16 cells.
TIE = 0.05
PREFERENCE = ["identity", "hb", "h", "quadtree", "privelet"]


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


def per_setting(frame: pd.DataFrame, workload: str = "ranges") -> pd.DataFrame:
    """Mean error on ``workload`` per (dims, cells, decade, data set) and algorithm (rows: settings; columns:
    algorithms), with a column ``reference``: for ranges, the reference's best algorithm's mean error where it
    was measured (ε = 0.1, the full domain), else NaN.  Regret is taken against the best of ours and the
    reference's."""
    frame = frame.assign(decade=decade(frame))
    table = frame.groupby(["dims", "cells", "decade", "dataset", "algorithm"])[WORKLOADS[workload]].mean().unstack()
    ref = reference_best() if workload == "ranges" else pd.Series(dtype=float)
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
    """Whether the algorithm takes tables of several columns as a grid (a one-column rule's choice may meet a table
    with categorical slices, which needs one that does; DAWA reads two columns as one sequence, see
    dphist.algorithms.auto.choice.SEQUENCE_ONLY)."""
    from dphist.algorithms import get_algorithm
    from dphist.algorithms.auto.choice import SEQUENCE_ONLY
    from dphist.errors import UsageError
    if name in SEQUENCE_ONLY:
        return False
    try:
        get_algorithm(name).check_shape((8, 8))
    except UsageError:
        return False
    return True


def fit(errors: pd.DataFrame, leave_out: str | None = None) -> dict:
    """{(dims, cells): {decade: (algorithm, mean regret, data sets, the best algorithm that takes several
    columns)}} from one workload's per-setting errors."""
    table: dict = {}
    for (dims, cells, dec), group in errors.groupby(level=["dims", "cells", "decade"]):
        if leave_out is not None:
            group = group[group.index.get_level_values("dataset") != leave_out]
        candidates = [a for a in CANDIDATES[dims] if a in group.columns and group[a].notna().all()]
        best = group[candidates + ["reference"]].min(axis=1)  # NaN references are skipped
        regret = group[candidates].div(best, axis=0).mean()
        best = _preferred(regret)
        several = _preferred(regret[[a for a in regret.index if takes_columns(a)]])
        table.setdefault((int(dims), int(cells)), {})[int(dec)] = (best, round(float(regret[best]), 3),
                                                                   int(group.shape[0]), several)
    return table


def _preferred(regret: pd.Series) -> str:
    """The lowest mean regret, or a candidate within TIE of it that comes earlier in PREFERENCE."""
    near = regret[regret <= regret.min() * (1 + TIE)]
    ranked = sorted(near.index, key=lambda a: (PREFERENCE.index(a) if a in PREFERENCE else len(PREFERENCE),
                                               near[a]))
    return ranked[0]


def lookup(table: dict, dims: int, cells: int, signal: float) -> str:
    """The rule table's choice (the same lookup as dphist.algorithms.auto.choice, for the leave-one-out scores)."""
    from dphist.algorithms.auto.choice import nearest_rule
    return nearest_rule(table, dims, cells, signal)[0]


def load(path: Path) -> pd.DataFrame:
    frame = pd.DataFrame(read_records(path))
    frame["epsilon"] = frame.epsilon.astype(str)
    return frame


def as_run_by_auto(name: str, shape: tuple[int, ...], scale: int, epsilon) -> dict:
    """The options auto runs ``name`` with on a table of ``shape``, ``scale`` records and budget ``epsilon``:
    :func:`as_learned` and, at the signal N·ε₁ (ε₁ = ε less the noisy total's share), :func:`low_signal_options`."""
    share = Auto.options["total_share"][0]
    return {**as_learned(name), **low_signal_options(name, shape, scale * float(epsilon) * float(1 - share))}


def run_grid(samples: int, runs: int, only: list[str] | None = None, scales: list[int] | None = None,
             dims_list: tuple[int, ...] = (1, 2), path: Path = GRID) -> None:
    """Run the grid for every candidate (or ``only`` these, or only ``dims_list``, keeping the saved records of
    the others) into ``path``."""
    started = time.perf_counter()
    sets = manifest(quick=False)
    records = []
    if path.exists() and (only or scales or set(dims_list) != {1, 2}):
        records = [r for r in read_records(path)
                   if not (r["dims"] in dims_list and (not only or r["algorithm"] in only)
                           and (not scales or r["scale"] in scales))]
    for dims in dims_list:
        if only and not any(a in CANDIDATES[dims] for a in only):
            continue
        full = {name: load_histogram(path) for name, (d, path) in sets.items() if d == dims}
        for shape in DOMAINS[dims]:
            data = {name: coarsen(x, shape) for name, x in full.items()}
            for algorithm in [a for a in CANDIDATES[dims] if not only or a in only]:
                todo = [s for s in scales or SCALES if (algorithm, s) not in SKIP]
                # as auto runs it (its options for DPCube and the k-d tree differ from the stand-alone defaults,
                # and a 1-D DAWA at low signal takes low_signal_options, gated here on N·ε₁ for N̂·ε₁)
                records += run_benchmark(data, [algorithm], todo, EPSILONS, samples, runs,
                                         options=lambda name, scale, eps, sh=shape: as_run_by_auto(name, sh, scale, eps))
            print(f"{dims}-D {shape}: done ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
            write_records(path, records)
    print(f"wrote {path}")


def typical(frame: pd.DataFrame) -> dict:
    """{(dims, cells): {decade: {algorithm: (cells error, ranges error)}}}: each candidate's median over the data
    sets of its mean scaled error (a fraction of the records), for the report's expected error of data-adaptive
    algorithms (dphist.evaluation.expected_error)."""
    frame = frame.assign(decade=decade(frame))
    per_set = frame.groupby(["dims", "cells", "decade", "algorithm", "dataset"])[["error_cells", "error"]].mean()
    median = per_set.groupby(level=["dims", "cells", "decade", "algorithm"]).median()
    out: dict = {}
    for (dims, cells, dec, algorithm), row in median.iterrows():
        if algorithm in CANDIDATES[dims] and np.isfinite(row.error_cells) and np.isfinite(row.error):
            out.setdefault((int(dims), int(cells)), {}).setdefault(int(dec), {})[algorithm] = (
                float(f"{row.error_cells:.3g}"), float(f"{row.error:.3g}"))
    return out


def write_rules(tables: dict, typical_errors: dict) -> None:
    lines = ['"""The rule tables behind ``--algorithm auto``.  Generated by bench/auto_rules.py --fit from',
             "bench/results/auto-grid.jsonl; do not edit by hand.",
             "",
             "RULES[workload][(dimensions, cells)][decade] = (algorithm, mean regret on the grid, data sets, for",
             "several columns), where decade is round(log10(N·ε)) for a table of N records released at ε: the",
             "algorithm with the lowest mean error ratio on the workload (ranges, cells or one-way marginals) to the",
             "best of ours (and, for ranges, the reference implementation's) over the DPBench data sets (summed into",
             "that many cells) in that setting, and the best of those that take tables of several columns (for a",
             "one-column rule met by a table with categorical slices).",
             '"""', "", "RULES = {"]
    for workload in WORKLOADS:
        lines.append(f"    {workload!r}: {{")
        table = tables[workload]
        for key in sorted(table):
            lines.append(f"        {key}: {{")
            for dec in sorted(table[key]):
                lines.append(f"            {dec}: {table[key][dec]!r},")
            lines.append("        },")
        lines.append("    },")
    lines.append("}")
    lines += ["", "# TYPICAL[(dimensions, cells)][decade][algorithm] = (cells, ranges): the algorithm's median over the",
              "# DPBench data sets of its mean error on single cells and on the ranges, as a fraction of the records",
              "# (the report's typical error of data-adaptive algorithms, dphist.evaluation.expected_error).", "TYPICAL = {"]
    for key in sorted(typical_errors):
        lines.append(f"    {key}: {{")
        for dec in sorted(typical_errors[key]):
            lines.append(f"        {dec}: {typical_errors[key][dec]!r},")
        lines.append("    },")
    lines.append("}")
    RULES.write_text("\n".join(lines) + "\n")
    print(f"wrote {RULES}")


def errors_all(workload: str) -> pd.DataFrame:
    return per_setting(load(GRID), workload)


def evaluate(samples: int, runs: int) -> None:
    """Run auto per workload on the full-size domains, with the grid's data samples (same seed)."""
    started = time.perf_counter()
    sets = manifest(quick=False)
    records = []
    for dims in (1, 2):
        data = {name: load_histogram(path) for name, (d, path) in sets.items() if d == dims}
        for workload in WORKLOADS:
            part = run_benchmark(data, ["auto"], SCALES, EPSILONS, samples, runs,
                                 options=lambda name, scale, eps, w=workload: {"workload": w})
            records += [{**r, "workload": workload} for r in part]
    write_records(EVALUATION, records)
    minutes = (time.perf_counter() - started) / 60
    report(minutes)


def report(minutes: float | None) -> None:
    grid = load(GRID)
    auto = load(EVALUATION)
    keys = ["dims", "dataset", "scale", "epsilon"]
    full = grid[grid.cells == grid.dims.map(FULL_CELLS)]
    ref = reference_best()
    took = f" Run took {minutes:.1f} min." if minutes is not None else ""
    lines = ["## Automatic algorithm choice, per workload", "",
             "`--algorithm auto --workload W` on the DPBench grid's full-size domains (18 1-D data sets at 4096 "
             "cells, 10 2-D at 256 × 256; scales 1e3/1e5/1e7, ε 0.1 and 1; the grid's data samples). *regret* = "
             "auto's mean error on the workload (noisy total and its budget share included) ÷ the best mean error "
             "among all our algorithms on that data set and setting and, for ranges at ε = 0.1, the reference's "
             "best algorithm; *leave-one-out* = the regret when the rule table is refitted without that data set "
             "(from the recorded errors; the share for the noisy total not included). Workloads: *ranges* "
             "(prefixes in 1-D, 2000 random rectangles in 2-D), *cells* (every cell), *marginals* (one-way "
             f"marginals; the cells in 1-D). Records: `bench/results/{EVALUATION.name}`.{took}", "",
             "| workload | dims | scale | ε | mean regret | worst regret | leave-one-out mean | chosen |",
             "|---|---|---|---|---|---|---|---|"]
    overall = []
    for workload, column in WORKLOADS.items():
        ours = full.groupby(keys + ["algorithm"])[column].mean().unstack()
        best = ours.min(axis=1)
        if workload == "ranges":
            at = [ref.get((d, int(s), n), np.nan) if e == "0.1" else np.nan for d, n, s, e in ours.index]
            best = np.fmin(best, pd.Series(at, index=ours.index))
        mine = auto[auto.workload == workload]
        joined = pd.concat([best.rename("best"), mine.groupby(keys)[column].mean().rename("auto")], axis=1).dropna()
        joined["regret"] = joined.auto / joined.best
        errors = errors_all(workload)
        lodo = []
        for (dims, name, scale, eps), row in ours.iterrows():
            if (dims, name, scale, eps) not in joined.index:
                continue
            table = fit(errors, leave_out=name)
            choice = lookup(table, int(dims), FULL_CELLS[int(dims)], scale * float(eps))
            lodo.append({"dims": dims, "dataset": name, "scale": scale, "epsilon": eps,
                         "lodo": row[choice] / joined.loc[(dims, name, scale, eps), "best"]})
        joined = joined.join(pd.DataFrame(lodo).set_index(keys))
        joined = joined.join(mine.groupby(keys)["chosen"].agg(lambda s: ", ".join(sorted(set(s)))))
        for (dims, scale, eps), group in joined.groupby(level=["dims", "scale", "epsilon"]):
            picks = ", ".join(sorted(set(", ".join(group.chosen).split(", "))))
            lines.append(f"| {workload} | {dims}-D | {scale:,} | {eps} | {group.regret.mean():.3f} | "
                         f"{group.regret.max():.2f} | {group.lodo.mean():.3f} | {picks} |")
        overall.append(f"{workload} {joined.regret.mean():.3f} (worst {joined.regret.max():.2f}, leave-one-out "
                       f"{joined.lodo.mean():.3f})")
    lines += ["", "Mean regret over the whole grid: " + "; ".join(overall) + ".", ""]
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
    parser.add_argument("--dims", type=int, nargs="*", default=[1, 2], help="with --grid: only these dimensions")
    parser.add_argument("--records", default=None, help="with --grid: write the records here instead")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"DPBench data not found at {DATA}")
    if args.grid:
        run_grid(args.samples or 3, args.runs or 2, args.algorithms, args.scales, tuple(args.dims),
                 Path(args.records) if args.records else GRID)
    if args.fit:
        write_rules({workload: fit(errors_all(workload)) for workload in WORKLOADS}, typical(load(GRID)))
    if args.evaluate:
        evaluate(args.samples or 3, args.runs or 2)
    if args.from_records:
        report(None)
    if not (args.grid or args.fit or args.evaluate or args.from_records):
        parser.error("give --grid, --fit, --evaluate or --from-records")


if __name__ == "__main__":
    main()
