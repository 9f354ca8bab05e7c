"""Coverage of the released 95 % intervals, algorithm by algorithm: how often a cell's interval holds what it says
it covers.

    .venv/bin/python bench/intervals.py                      # the grid below (tens of minutes); part of `make bench`
    .venv/bin/python bench/intervals.py --quick              # 3 + 2 data sets, 20 corpus columns, fewer runs
    .venv/bin/python bench/intervals.py --from-records       # rebuild the RESULTS.md section only

Data (a bench, not a release: the grids below are public by construction, the records are sampled):

* DPBench 1-D (18 data sets, 4,096 cells coarsened to 1,024) and 2-D (10 data sets, 256 × 256 coarsened to 64 × 64),
  from ../shared/data/dpbench;
* the corpus (bench/corpus/data, fetched by bench/corpus/fetch.py; ``--corpus`` to read it elsewhere): every numeric
  column of every table, as a histogram of 256 equal bins between the column's least and greatest value.

Each histogram is a shape: tables of 1,000 and 100,000 records are drawn from it (the DPBench protocol,
:func:`~dphist.evaluation.benchmark.sample_from_shape`, one sample per data set and size), and released at ε 0.1 and
1 (pure ε, seeded noise) by every algorithm of the catalogue that runs on the shape with its example options, and in
2-D by the marginal sets of the two 1-D marginals (strategies separate and full, through the release pipeline).  Runs
per algorithm and setting: at least 200 in all, spread evenly over the data sets of a family; algorithms that are
not data-adaptive draw them at once (a replicated budget: the same structure, independent noise).

Coverage: the share of the cells whose [ci_lower, ci_upper], computed as the publishing layer computes it
(:mod:`dphist.publishing.intervals`: from Estimate.halfwidth or 1.96·√variance, rounded outward, cut at 0), holds
what Estimate.groups says it covers (the cell's true count, or its bucket's true total ÷ its cells).  The standard
error is over runs (each run's share of cells covered; a run's cells are correlated).  An algorithm that gives no
interval on a data set's first run is not run further there, and its reason is listed.

Writes bench/results/intervals[-quick].jsonl (one record per family, data set, size, ε and algorithm) and the
``intervals`` section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import RESULTS, read_records, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.algorithms import REGISTRY, get_algorithm  # noqa: E402
from dphist.api import plan_release, run_plan  # noqa: E402
from dphist.errors import UsageError  # noqa: E402
from dphist.evaluation.benchmark import derived_seed, load_histogram, sample_from_shape  # noqa: E402
from dphist.privacy import PrivacyBudget, SeededBits  # noqa: E402
from dphist.publishing import intervals  # noqa: E402
from dphist_audit.replication import ReplicatedBudget  # noqa: E402

DPBENCH = HERE.parent.parent / "shared" / "data" / "dpbench"
CORPUS = HERE / "corpus" / "data"
SCALES = (1_000, 100_000)
EPSILONS = ("0.1", "1")
RUNS = 200  # at least this many runs per algorithm and setting, over a family's data sets
CORPUS_BINS = 256
QUICK = {"1D": ["ADULT", "HEPTH", "SEARCHLOGS"], "2D": ["ADULT-2D", "GOWALLA"]}
QUICK_COLUMNS = 20
QUICK_RUNS = 40
MARGINALS = ("marginal (separate)", "marginal (full)")
BAND = (0.93, 0.975)  # what 95 % intervals should cover (the brief's band)


# ---- data ------------------------------------------------------------------------------------------------------------

def coarsen(x: np.ndarray) -> np.ndarray:
    """A DPBench histogram at bench size: 1-D to 1,024 cells, 2-D to 64 × 64 (sums of neighbouring cells)."""
    if x.ndim == 1:
        return x.reshape(1024, -1).sum(axis=1)
    return x.reshape(64, x.shape[0] // 64, 64, x.shape[1] // 64).sum(axis=(1, 3))


def dpbench_families(quick: bool) -> dict[str, dict[str, np.ndarray]]:
    """{"DPBench 1-D": {name: shape}, "DPBench 2-D": {...}} from the DPBench manifest ({} when absent)."""
    if not (DPBENCH / "MANIFEST.txt").exists():
        return {}
    out: dict[str, dict[str, np.ndarray]] = {"DPBench 1-D": {}, "DPBench 2-D": {}}
    for line in (DPBENCH / "MANIFEST.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        name, dims, path = cells[0], cells[1], cells[7]
        if quick and name not in QUICK.get(dims, []):
            continue
        out[f"DPBench {dims[0]}-D"][name] = coarsen(load_histogram(DPBENCH / path))
    return out


def corpus_family(folder: Path, quick: bool) -> dict[str, np.ndarray]:
    """{"table.column": histogram} of the corpus's numeric columns on 256 equal bins from min to max ({} when the
    corpus is absent).  Columns with fewer than two distinct values are left out."""
    manifest = folder / "MANIFEST.json"
    if not manifest.exists():
        return {}
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = {}
    for table, entry in json.loads(manifest.read_text()).items():
        names = [c for c, facts in entry["columns"].items() if facts["kind"] == "numeric"]
        if not names:
            continue
        path = Path(entry["path"])  # relative to bench/corpus, or a table read in place (absolute)
        data = pq.read_table(path if path.is_absolute() else folder.parent / path, columns=names)
        for name in names:
            values = np.asarray(data.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
            values = values[np.isfinite(values)]
            if values.size == 0 or values.min() == values.max():
                continue
            out[f"{table}.{name}"] = np.histogram(values, bins=CORPUS_BINS, range=(values.min(), values.max()))[0]
    if quick:
        out = dict(list(out.items())[::max(1, len(out) // QUICK_COLUMNS)][:QUICK_COLUMNS])
    return out


# ---- coverage of one release -----------------------------------------------------------------------------------------

def targets(counts: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    """Per cell (flat), what its interval says it covers: its count, or its bucket's total ÷ its cells."""
    x = np.asarray(counts, dtype=np.float64).ravel()
    if groups is None:
        return x
    _, bucket = np.unique(np.asarray(groups).ravel(), return_inverse=True)
    bucket = bucket.ravel()
    return (np.bincount(bucket, weights=x) / np.bincount(bucket))[bucket]


def covered(estimate, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per run (a replicated estimate has several), the share of the cells whose published interval holds its
    target, and the same share for the interval before the cut at 0 and the rounding (value ± half-width: the
    noise distribution's own coverage); None where the estimate gives no interval."""
    half = intervals.halfwidth(estimate)
    if half is None:
        return None
    target = targets(counts, estimate.groups)
    runs = np.asarray(estimate.values, dtype=np.float64).reshape(-1, target.size)
    shares, uncut = [], []
    for values in runs:
        lower, upper = intervals.bounds(values, half)
        shares.append(float(np.mean((lower <= target) & (target <= upper))))
        uncut.append(float(np.mean(np.abs(values - target) <= half * (1 + 1e-12))))
    return np.asarray(shares), np.asarray(uncut)


def bucket_cells(estimate) -> float:
    """The share of the cells whose interval covers a bucket share (not their count)."""
    numbers = intervals.buckets(estimate.groups)
    return 0.0 if numbers is None else float(np.mean(numbers >= 0))


# ---- runs ------------------------------------------------------------------------------------------------------------

def catalogue(shape: tuple[int, ...]) -> list[str]:
    """The catalogue's algorithms that run on ``shape`` with their example options."""
    names = []
    for name in sorted(REGISTRY):
        try:
            get_algorithm(name, **REGISTRY[name].example_options).check(shape)
        except UsageError:
            continue
        names.append(name)
    return names


def algorithm_runs(family: str, data: dict[str, np.ndarray], scales, epsilons, runs: int, seed: int = 0,
                   algorithms: list[str] | None = None, progress=None) -> list[dict]:
    """One record per (data set, size, ε, algorithm): ``runs`` noise runs on one sample of each size (fewer where
    the algorithm gives no interval on the first), each run's share of cells covered, what they cover."""
    records = []
    for d_index, (name, shape) in enumerate(data.items()):
        names = [a for a in catalogue(shape.shape) if algorithms is None or a in algorithms]
        for scale in scales:
            sample = sample_from_shape(shape, scale, seed=derived_seed(seed, d_index, scale))
            for e_index, eps_text in enumerate(epsilons):
                eps = Fraction(eps_text)
                for a_index, algo_name in enumerate(names):
                    algo = get_algorithm(algo_name, **REGISTRY[algo_name].example_options)
                    record = {"family": family, "dataset": name, "cells": int(sample.size), "scale": scale,
                              "epsilon": eps_text, "algorithm": algo_name}
                    started = time.perf_counter()
                    try:
                        record.update(_runs(algo, sample, eps, runs,
                                            derived_seed(seed, d_index, scale, e_index, a_index)))
                    except UsageError as exc:  # a budget too small for its steps on this shape
                        record.update(runs=0, coverage=[], covers="refused", reason=str(exc))
                    record["seconds"] = round(time.perf_counter() - started, 3)
                    records.append(record)
                if progress:
                    progress(family, name, scale, eps_text)
    return records


def _runs(algo, sample: np.ndarray, eps: Fraction, runs: int, seed: int) -> dict:
    if not algo.data_adaptive:
        estimate = algo.run(sample, ReplicatedBudget(eps, SeededBits(seed), runs, None))
        found = covered(estimate, sample)
        if found is None:
            return _none(estimate)
        return {"runs": runs, "coverage": found[0].tolist(), "coverage_uncut": found[1].tolist(), **_what(estimate)}
    shares, uncut, what = [], [], None
    for r in range(runs):
        estimate = algo.run(sample, PrivacyBudget(eps, bits=SeededBits(derived_seed(seed, r))))
        found = covered(estimate, sample)
        if found is None:
            if r == 0:
                return _none(estimate)
            continue  # (an algorithm whose interval comes and goes: counted over the runs that have one)
        shares.append(float(found[0][0]))
        uncut.append(float(found[1][0]))
        what = _merge(what, _what(estimate))
    return {"runs": len(shares), "coverage": shares, "coverage_uncut": uncut, **what}


def _what(estimate) -> dict:
    return {"covers": intervals.covers(estimate), "bucket_cells": bucket_cells(estimate),
            "method": intervals.describe(estimate)["method"]}


def _merge(old: dict | None, new: dict) -> dict:
    if old is None:
        return {**new, "bucket_cells_sum": new["bucket_cells"], "n": 1}
    covers = old["covers"] if old["covers"] == new["covers"] else "count or bucket share"
    total = old["bucket_cells_sum"] + new["bucket_cells"]
    return {**old, "covers": covers, "bucket_cells_sum": total, "n": old["n"] + 1,
            "bucket_cells": total / (old["n"] + 1)}


def _none(estimate) -> dict:
    return {"runs": 0, "coverage": [], "coverage_uncut": [], "covers": "none",
            "reason": intervals.describe(estimate)["reason"]}


def marginal_runs(data: dict[str, np.ndarray], scales, epsilons, runs: int, seed: int = 0,
                  progress=None) -> list[dict]:
    """The two 1-D marginals of each 2-D table released as a marginal set (strategies separate and full) through
    the release pipeline (plan, run: the tables' ci columns as published), ``runs`` seeds each."""
    records = []
    for d_index, (name, shape) in enumerate(data.items()):
        n0, n1 = shape.shape
        schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": n0, "bins": n0},
                              "y": {"type": "numeric", "lower": 0, "upper": n1, "bins": n1}}}
        for scale in scales:
            sample = sample_from_shape(shape, scale, seed=derived_seed(seed, d_index, scale))
            cells = np.repeat(np.arange(sample.size), sample.ravel())
            frame = pd.DataFrame({"x": cells // n1, "y": cells % n1})
            truth = {"x": sample.sum(axis=1), "y": sample.sum(axis=0)}
            for e_index, eps_text in enumerate(epsilons):
                for strategy, label in zip(("separate", "full"), MARGINALS):
                    started = time.perf_counter()
                    shares, uncut = [], []
                    for r in range(runs):
                        plan = plan_release(frame, eps_text, schema, marginals="x;y", marginal_strategy=strategy,
                                            seed=derived_seed(seed, d_index, scale, e_index, r))
                        release = run_plan(plan)
                        hit = hit_uncut = total = 0
                        for table, column in (("x", "x"), ("y", "y")):
                            published = release.tables[table]
                            lower, upper = published["ci_lower"].to_numpy(), published["ci_upper"].to_numpy()
                            hit += int(np.sum((lower <= truth[column]) & (truth[column] <= upper)))
                            noisy = published["noisy_count"].to_numpy(dtype=np.float64)
                            half = _marginal_half(release.report, table, noisy)
                            hit_uncut += int(np.sum(np.abs(noisy - truth[column]) <= half * (1 + 1e-12)))
                            total += truth[column].size
                        shares.append(hit / total)
                        uncut.append(hit_uncut / total)
                    records.append({"family": "DPBench 2-D", "dataset": name, "cells": int(sample.size),
                                    "scale": scale, "epsilon": eps_text, "algorithm": label, "runs": runs,
                                    "coverage": shares, "coverage_uncut": uncut, "covers": "count",
                                    "bucket_cells": 0.0,
                                    "method": release.report["tables"][0]["interval"]["method"],
                                    "seconds": round(time.perf_counter() - started, 3)})
                if progress:
                    progress("marginals", name, scale, eps_text)
    return records


def _marginal_half(report: dict, table: str, noisy: np.ndarray) -> float:
    """A published marginal's half-width before the cut and rounding, as the pipeline computed it: 1.96 ×
    expected_cell_sd (separate), or 1.96·√(k·v) of the full identity table's cell variance v (full)."""
    entry = next(t for t in report["tables"] if t["name"] == table)
    if entry.get("expected_cell_sd") is not None:
        return intervals.Z_95 * entry["expected_cell_sd"]
    full = report["marginals"]["full_table"]
    return intervals.Z_95 * math.sqrt(full["cells"] // noisy.size * full["steps"][0]["noise_sd"] ** 2)


# ---- the section -----------------------------------------------------------------------------------------------------

def summary_rows(records: list[dict]) -> pd.DataFrame:
    """Per family, algorithm, size and ε: runs, coverage (over all runs' cells) and its standard error over runs,
    the share of the cells covering bucket shares, and the data sets without intervals."""
    rows = []
    frame = pd.DataFrame(records)
    for (family, algo, scale, eps), group in frame.groupby(["family", "algorithm", "scale", "epsilon"], sort=True):
        shares = np.concatenate([np.asarray(c, dtype=float) for c in group["coverage"]])
        uncut = np.concatenate([np.asarray(c, dtype=float) for c in group["coverage_uncut"]])
        with_runs = group[group["runs"] > 0]
        bucket = float(np.average(with_runs["bucket_cells"].fillna(0), weights=with_runs["runs"])) \
            if len(with_runs) and "bucket_cells" in with_runs else 0.0
        reasons = sorted({r for r in group.get("reason", pd.Series(dtype=object)).dropna()})
        rows.append({"family": family, "algorithm": algo, "scale": int(scale), "epsilon": eps,
                     "runs": int(shares.size), "datasets": int(len(group)),
                     "without": int((group["runs"] == 0).sum()),
                     "coverage": float(shares.mean()) if shares.size else math.nan,
                     "uncut": float(uncut.mean()) if uncut.size else math.nan,
                     "se": float(shares.std(ddof=1) / math.sqrt(shares.size)) if shares.size > 1 else math.nan,
                     "bucket_cells": bucket, "reasons": reasons})
    return pd.DataFrame(rows)


def section(records: list[dict], note: str) -> str:
    """The markdown of the ``intervals`` section."""
    rows = summary_rows(records)
    settings = [(s, e) for s in sorted(rows["scale"].unique()) for e in sorted(rows["epsilon"].unique(), key=float)]
    lines = ["## Interval coverage", "",
             "Share of the cells whose published 95 % interval holds what it says it covers (`ci_covers`: the cell's "
             "true count, or its bucket's true total ÷ its cells), in %, ± its standard error over runs; in "
             "brackets the same share for value ± half-width before the cut at 0 and the rounding (the noise's own "
             "coverage: cutting at 0 also covers a zero whose noise fell below −q); [runs]. Target "
             f"{BAND[0]:.0%} to {BAND[1]:.1%} (⚠ outside). Above it, two things no interval can avoid: an exact "
             "interval of integer noise covers at least 95 %, and more where the noise is coarse (identity's discrete "
             "Laplace of scale 1, at ε 1: the least half-width that reaches 95 %, 3, covers 97.3 %; 2 would cover "
             "92.7 %); and the cut at 0 covers an empty cell (or an empty bucket) whatever its noise, which weighs "
             "most where one large bucket holds the empty cells. `bucket` is the share of the cells whose interval "
             "is for a bucket share. "
             + note, ""]
    for family, group in rows.groupby("family", sort=False):
        lines += [f"### {family}", "",
                  "| algorithm | bucket | " + " | ".join(f"{s:,} records, ε {e}" for s, e in settings) + " |",
                  "|---|---|" + "---|" * len(settings)]
        reasons = {}
        for algo, part in group.groupby("algorithm", sort=True):
            cells, bucket = [], part["bucket_cells"].max()
            for s, e in settings:
                hit = part[(part["scale"] == s) & (part["epsilon"] == e)]
                if hit.empty or hit.iloc[0]["runs"] == 0:
                    cells.append("–")
                    continue
                r = hit.iloc[0]
                flag = "" if BAND[0] <= r["coverage"] <= BAND[1] else " ⚠"
                without = f", {r['without']} of {r['datasets']} sets without" if r["without"] else ""
                cells.append(f"{100 * r['coverage']:.1f} ± {100 * r['se']:.1f} ({100 * r['uncut']:.1f}) "
                             f"[{r['runs']}{without}]{flag}")
            if all(c == "–" for c in cells):
                reasons[algo] = sorted({x for rs in part["reasons"] for x in rs})
                continue
            lines.append(f"| {algo} | {bucket:.0%} | " + " | ".join(cells) + " |")
        lines.append("")
        if reasons:
            lines.append("No intervals:")
            lines += [f"- {algo}: {'; '.join(why) if why else 'none given'}" for algo, why in reasons.items()]
            lines.append("")
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------------------------------------

def command(quick: bool) -> str:
    return f".venv/bin/python bench/intervals.py{' --quick' if quick else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus folder (MANIFEST.json and tables)")
    parser.add_argument("--algorithms", nargs="*", default=None,
                        help="run only these (and 'marginal'), keeping the saved records of the others")
    parser.add_argument("--from-records", action="store_true")
    args = parser.parse_args()
    out = RESULTS / ("intervals-quick.jsonl" if args.quick else "intervals.jsonl")
    started = time.perf_counter()
    if args.from_records:
        records = read_records(out, command(args.quick))
    else:
        families = dpbench_families(args.quick)
        corpus = corpus_family(args.corpus, args.quick)
        if corpus:
            families["corpus (256 bins)"] = corpus
        if not families:
            raise SystemExit("no data: neither ../shared/data/dpbench nor the corpus (bench/corpus/fetch.py) is "
                             "present")
        keep = []
        if args.algorithms:
            keep = [r for r in read_records(out, command(args.quick), missing_ok=True)
                    if r["algorithm"] not in args.algorithms
                    and not (r["algorithm"] in MARGINALS and "marginal" in args.algorithms)]
        records = keep
        target = QUICK_RUNS if args.quick else RUNS

        def report(family, name, scale, eps):
            print(f"{family}: {name}, {scale:,} records, ε {eps} ({time.perf_counter() - started:.0f} s)", flush=True)
        for family, data in families.items():
            runs = max(2, math.ceil(target / len(data)))
            records += algorithm_runs(family, data, SCALES, EPSILONS, runs, algorithms=args.algorithms,
                                      progress=report)
            if family == "DPBench 2-D" and (not args.algorithms or "marginal" in args.algorithms):
                records += marginal_runs(data, SCALES, EPSILONS, runs, progress=report)
        write_records(out, records)
    minutes = (time.perf_counter() - started) / 60
    took = "" if args.from_records else f" Run took {minutes:.1f} min."
    note = (f"Data sizes {', '.join(f'{s:,}' for s in SCALES)} records, ε {', '.join(EPSILONS)} (pure), "
            f"{'quick mode, ' if args.quick else ''}DPBench coarsened to 1,024 cells and 64 × 64, corpus columns on "
            f"{CORPUS_BINS} bins. {records_note(out, command(args.quick))}{took}")
    replace_section("intervals", section(records, note))
    print(f"wrote the intervals section of bench/RESULTS.md from {len(records)} records")


if __name__ == "__main__":
    main()
