"""Marginal sets on Adult: dphist's residual bases beside OpenDP's contingency table (Private-PGM), at the same ρ.

    PYTHONPATH=. .venv/bin/python bench/opendp_marginals.py                 # 10 releases a side per workload
    PYTHONPATH=. .venv/bin/python bench/opendp_marginals.py --runs 20 --rho 0.1 --rho 0.01
    PYTHONPATH=. .venv/bin/python bench/opendp_marginals.py --opendp-python /path/to/venv/bin/python

OpenDP is never a dependency of dphist: its side runs in a separate interpreter (``--opendp-python``, else
``$DPHIST_OPENDP_PYTHON``, else ``../odp-venv/bin/python`` beside the repository) with ``opendp[mbi]`` installed,
as a child process.  Without that interpreter, or without ../shared/data/real/adult.parquet, the script says so
and exits 0.

The same release on both sides:

* the table: ../shared/data/real/adult.parquet (48,842 rows); ``age`` in 10-year bins [15, 25), ..., [85, 95) (8),
  ``education_num`` one bin per value 1..16 in workload (a) and 4-wide bins [1, 5), ..., [13, 17) in (b), ``sex``,
  ``race`` and ``income`` as their categories.  Both sides get these domains as public facts (dphist from a schema,
  OpenDP as ``keys`` of pre-binned integer codes), so neither spends budget finding them;
* the privacy: ρ-zCDP with the same ρ for the whole set of marginals, under the same neighbour relation, one record
  (row) added or removed (dphist's default unit; OpenDP ``unit_of(contributions=1)``, the symmetric distance 1).
  Neither needs the row count: dphist measures its grand total, and OpenDP's contingency table with every
  column keyed releases no separate count and no δ;
* dphist: ``python -m dphist release ADULT --schema S --rho R --marginals ...`` (strategy auto = residual bases,
  discrete Gaussian noise, least-squares consistent, non-negative integers out);
* OpenDP 0.16: ``Context.compositor(...).query().contingency_table(keys=..., algorithm=dp.mbi.Fixed(queries=[Count
  per marginal]))``: every marginal measured once with discrete Gaussian noise of one common scale (found by
  OpenDP's binary search to spend ρ), then a Markov random field fitted by Private-PGM's mirror descent, whose
  projections are the released marginals.  OpenDP adds a null category to every keyed column (values outside the
  keys); the true data has none, so its null cells are dropped before the error is computed and their mass is
  reported.

Error: the RMSE per cell over all the workload's cells (every marginal's cells together, against the true counts
of the same bins), a mean over ``--runs`` releases each side (dphist in test mode, ``--seed``; OpenDP draws from
the OS).  dphist's published ``count`` (non-negative integers) and its ``noisy_count`` (the consistent estimate
before rounding) are both scored.  Wall time: one whole command each (a fresh process, start-up included), side by
side, dphist in real (ledgered, temporary ledger) mode.  The table also says whether each side's marginals agree
on their shared margins (largest difference of a shared one-way margin summed from two released marginals) and
what per-cell uncertainty each publishes.  Writes the ``marginals-opendp`` section of bench/RESULTS.md and prints
it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ADULT = ROOT.parent / "shared" / "data" / "real" / "adult.parquet"
DEFAULT_OPENDP = ROOT.parent / "odp-venv" / "bin" / "python"

#: Each attribute: (its binning as (source column, minus, divisor, largest code), None for a category; the schema
#: line dphist gets; the number of values).  Code = min(max((value − minus) // divisor, 0), largest).
ATTRIBUTES = {
    "age": (("age", 15, 10, 7), "{type: numeric, lower: 15, upper: 95, width: 10}", 8),
    "sex": (None, "{type: categorical, values: [Female, Male]}", 2),
    "race": (None, "{type: categorical, values: [White, Black, Asian-Pac-Islander, Amer-Indian-Eskimo, Other]}", 5),
    "income": (None, "{type: categorical, values: [\"<=50K\", \">50K\"]}", 2),
    "education_num": (("education_num", 1, 1, 15), "{type: numeric, lower: 1, upper: 17, width: 1}", 16),
    "education_num4": (("education_num", 1, 4, 3), "{type: numeric, lower: 1, upper: 17, width: 4}", 4),
}
CATEGORIES = {"sex": ["Female", "Male"], "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
              "income": ["<=50K", ">50K"]}
#: (label, marginals); an attribute named education_num4 is education_num in 4-wide bins (dphist reads the column
#: education_num under a schema that bins it so).
WORKLOADS = {
    "(a) age×sex, sex×income, age×income, education_num×income":
        [("age", "sex"), ("sex", "income"), ("age", "income"), ("education_num", "income")],
    "(b) all 3-way of sex, race, income, education_num (4 bins)":
        [("sex", "race", "income"), ("sex", "race", "education_num4"), ("sex", "income", "education_num4"),
         ("race", "income", "education_num4")],
}

# The OpenDP side, run as `python -c OPENDP_CHILD ARGS.json OUT.json`: ARGS holds the parquet path, the columns
# (name, polars code expression or None for a category, the keys), the marginals, ρ and the number of releases.
OPENDP_CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
import numpy as np
import polars as pl
import opendp.prelude as dp

dp.enable_features("contrib")
args = json.load(open(sys.argv[1]))
def coded(name, binning):
    if binning is None:
        return pl.col(name)
    source, minus, divisor, largest = binning
    return ((pl.col(source) - minus) // divisor).clip(0, largest).cast(pl.Int32).alias(name)

frame = pl.read_parquet(args["parquet"]).select([coded(name, binning) for name, binning, keys in args["columns"]])
keys = {name: keys for name, binning, keys in args["columns"]}
cliques = [tuple(m) for m in args["marginals"]]
out = {"releases": [], "std": [], "scales": [], "null_mass": [], "seconds": []}
for _ in range(args["runs"]):
    t0 = time.perf_counter()
    context = dp.Context.compositor(data=frame.lazy(), privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=dp.loss_of(rho=args["rho"]), split_evenly_over=1)
    query = context.query().contingency_table(
        keys=keys, algorithm=dp.mbi.Fixed(queries=[dp.mbi.Count(c) for c in cliques]))
    table = query.release()
    release, null_mass, full_tables = [], 0.0, []
    for c in cliques:
        full = np.asarray(table.project(c), dtype=np.float64)
        full_tables.append(full)
        inner = full[tuple(slice(0, len(keys[a])) for a in c)]  # the null category is the last key of each column
        null_mass += float(full.sum() - inner.sum())
        release.append(inner.ravel().tolist())
    out["releases"].append(release)
    gap = 0.0  # shared one-way margins of the model's projections, null cells included
    for i, a in enumerate(cliques):
        for j in range(i + 1, len(cliques)):
            for attr in set(a) & set(cliques[j]):
                sa = full_tables[i].sum(axis=tuple(k for k, x in enumerate(a) if x != attr))
                sb = full_tables[j].sum(axis=tuple(k for k, x in enumerate(cliques[j]) if x != attr))
                gap = max(gap, float(np.abs(sa - sb).max()))
    out.setdefault("full_gap", []).append(gap)
    out["null_mass"].append(null_mass / len(cliques))
    out["std"].append([float(table.std(c)) for c in cliques])
    out["scales"].append(sorted({float(m.stddev) for m in table.marginals.flatten()}))
    out["seconds"].append(time.perf_counter() - t0)
import importlib.metadata
out["version"] = importlib.metadata.version("opendp")
out["process_seconds"] = time.perf_counter() - t_start
json.dump(out, open(sys.argv[2], "w"))
"""


def codes(frame: dict, name: str) -> np.ndarray:
    """The 0-based codes of ``name`` over the table's rows, binned as both sides bin it."""
    binning = ATTRIBUTES[name][0]
    if binning is not None:
        source, minus, divisor, largest = binning
        return np.clip((frame[source] - minus) // divisor, 0, largest)
    lookup = {v: i for i, v in enumerate(CATEGORIES[name])}
    return np.array([lookup[v] for v in frame[name]])


def truth(marginals: list[tuple[str, ...]]) -> list[np.ndarray]:
    """The true counts of each marginal, axes in the marginal's order."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = pq.read_table(ADULT, columns=["age", "sex", "race", "income", "education_num"])
    frame = {c: table[c].to_numpy(zero_copy_only=False) for c in table.column_names}
    out = []
    for m in marginals:
        dims = tuple(ATTRIBUTES[a][2] for a in m)
        flat = np.ravel_multi_index([codes(frame, a) for a in m], dims)
        out.append(np.bincount(flat, minlength=int(np.prod(dims))).reshape(dims).astype(np.float64))
    return out


def column_of(name: str) -> str:
    return "education_num" if name == "education_num4" else name


def schema_for(marginals: list[tuple[str, ...]]) -> str:
    names = sorted({a for m in marginals for a in m})
    return "columns:\n" + "".join(f"  {column_of(a)}: {ATTRIBUTES[a][1]}\n" for a in names)


def dphist_command(marginals, schema: Path, rho: str, out: Path, seed: int | None, ledger: Path) -> list[str]:
    spec = ";".join(",".join(column_of(a) for a in m) for m in marginals)
    command = [sys.executable, "-m", "dphist", "release", str(ADULT), "--schema", str(schema), "--rho", rho,
               "--marginals", spec, "--out", str(out), "--overwrite", "--format", "csv", "--quiet",
               "--ledger", str(ledger)]
    return command + (["--seed", str(seed)] if seed is not None else [])


def read_dphist(out: Path, marginals) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(published counts, noisy counts) of each marginal, axes in the marginal's order, from its CSV."""
    published, noisy = [], []
    for m in marginals:
        name = "_".join(column_of(a) for a in m)
        dims = tuple(ATTRIBUTES[a][2] for a in m)
        counts, raw = np.zeros(dims), np.zeros(dims)
        with open(out / f"{name}.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                index = []
                for a in m:
                    if a in CATEGORIES:
                        index.append(CATEGORIES[a].index(row[a]))
                    else:
                        lower = int(float(row[f"{column_of(a)}_lower"]))
                        _, minus, divisor, _ = ATTRIBUTES[a][0]
                        index.append((lower - minus) // divisor)
                counts[tuple(index)] = float(row["count"])
                raw[tuple(index)] = float(row["noisy_count"])
        published.append(counts)
        noisy.append(raw)
    return published, noisy


def rmse(release: list[np.ndarray], true: list[np.ndarray]) -> float:
    cells = sum(t.size for t in true)
    return float(np.sqrt(sum(((r - t) ** 2).sum() for r, t in zip(release, true)) / cells))


def margin_gap(release: list[np.ndarray], marginals) -> float:
    """The largest difference between two released marginals' sums onto an attribute they share (0: consistent)."""
    gap = 0.0
    for i, a in enumerate(marginals):
        for j in range(i + 1, len(marginals)):
            b = marginals[j]
            for attr in set(a) & set(b):
                sa = release[i].sum(axis=tuple(k for k, x in enumerate(a) if x != attr))
                sb = release[j].sum(axis=tuple(k for k, x in enumerate(b) if x != attr))
                gap = max(gap, float(np.abs(sa - sb).max()))
    return gap


def run_opendp(python: Path, marginals, rho: str, runs: int, work: Path) -> tuple[dict, float]:
    """OpenDP's releases (one child process doing ``runs`` of them) and the child's wall time."""
    names = sorted({a for m in marginals for a in m})
    columns = [(a, ATTRIBUTES[a][0], CATEGORIES.get(a, list(range(ATTRIBUTES[a][2])))) for a in names]
    args, out = work / "opendp-args.json", work / "opendp-out.json"
    args.write_text(json.dumps({"parquet": str(ADULT), "columns": columns, "marginals": marginals, "rho": float(rho),
                                "runs": runs}))
    start = time.perf_counter()
    done = subprocess.run([str(python), "-c", OPENDP_CHILD, str(args), str(out)], capture_output=True, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the OpenDP child failed: {done.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.read_text())
    shapes = [tuple(ATTRIBUTES[a][2] for a in m) for m in marginals]
    result["releases"] = [[np.asarray(r).reshape(s) for r, s in zip(rel, shapes)] for rel in result["releases"]]
    return result, seconds


def run_dphist(marginals, rho: str, runs: int, work: Path) -> dict:
    schema = work / "schema.yaml"
    schema.write_text(schema_for(marginals))
    out, ledger = work / "dphist-out", work / "ledger.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    published, noisy, stated = [], [], []
    for seed in range(runs):
        done = subprocess.run(dphist_command(marginals, schema, rho, out, seed, ledger), capture_output=True,
                              text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"dphist failed: {done.stderr.strip()}")
        p, n = read_dphist(out, marginals)
        published.append(p)
        noisy.append(n)
        agreement = json.loads((out / "report.json").read_text())["marginals"].get("rounded_agreement", {})
        stated.append(0 if agreement.get("exact", True) else agreement["max_difference"])
    start = time.perf_counter()
    done = subprocess.run(dphist_command(marginals, schema, rho, out, None, ledger), capture_output=True, text=True,
                          env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"dphist (real run) failed: {done.stderr.strip()}")
    return {"published": published, "noisy": noisy, "seconds": seconds, "stated": max(stated)}


def mean_se(values: list[float]) -> str:
    v = np.asarray(values)
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return f"{v.mean():.2f} ± {se:.2f}"


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="releases a side per workload and ρ [10]")
    parser.add_argument("--rho", action="append", help="ρ of the whole set (repeatable) [0.1]")
    parser.add_argument("--opendp-python", type=Path,
                        default=Path(os.environ.get("DPHIST_OPENDP_PYTHON", DEFAULT_OPENDP)))
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    rhos = args.rho or ["0.1"]
    if not ADULT.exists():
        print(f"skipped: {ADULT} is absent (the shared data folder beside the repository)")
        return []
    if not args.opendp_python.exists():
        print(f"skipped: no OpenDP interpreter at {args.opendp_python} (python3 -m venv ../odp-venv && "
              "../odp-venv/bin/pip install 'opendp[mbi]', or pass --opendp-python)")
        return []
    rows, version = [], "?"
    for rho in rhos:
        for label, marginals in WORKLOADS.items():
            true = truth(marginals)
            with tempfile.TemporaryDirectory() as tmp:
                ours = run_dphist(marginals, rho, args.runs, Path(tmp))
                theirs, _ = run_opendp(args.opendp_python, marginals, rho, args.runs, Path(tmp))
                _, one_seconds = run_opendp(args.opendp_python, marginals, rho, 1, Path(tmp))
            version = theirs["version"]
            rows.append({
                "workload": label, "rho": rho, "cells": sum(t.size for t in true),
                "dphist": mean_se([rmse(r, true) for r in ours["published"]]),
                "dphist_noisy": mean_se([rmse(r, true) for r in ours["noisy"]]),
                "opendp": mean_se([rmse(r, true) for r in theirs["releases"]]),
                "dphist_s": ours["seconds"], "opendp_s": one_seconds,
                "opendp_release_s": float(np.median(theirs["seconds"])),
                "dphist_gap": max(margin_gap(r, marginals) for r in ours["published"]),
                "dphist_noisy_gap": max(margin_gap(r, marginals) for r in ours["noisy"]),
                "dphist_stated_gap": ours["stated"],
                "opendp_gap": max(margin_gap(r, marginals) for r in theirs["releases"]),
                "opendp_full_gap": max(theirs["full_gap"]),
                "opendp_std": np.mean(theirs["std"], axis=0).round(2).tolist(),
                "opendp_scales": theirs["scales"][0],
                "opendp_null": float(np.mean(theirs["null_mass"])),
            })
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    lines = [f"## Marginal sets vs OpenDP (contingency table through Private-PGM)", "",
             f"Adult (48,842 rows), ρ-zCDP, one row added or removed on both sides; {args.runs} releases a side "
             f"for the error (dphist test mode; OpenDP {version}, `opendp[mbi]` in its own venv), one whole command "
             "a side for the time (a fresh process, start-up included; dphist in real mode with a ledger). "
             "RMSE per cell over all the workload's cells against the true counts, mean ± one standard error over "
             "the releases.  Regenerate: `PYTHONPATH=. python bench/opendp_marginals.py`.", "",
             "| workload | ρ | cells | dphist RMSE (published counts) | dphist RMSE (noisy_count) | OpenDP RMSE | "
             f"dphist s | OpenDP s (median of its {args.runs} releases in one process) | shared-margin gap: dphist "
             "published / noisy_count / OpenDP (with its null cells) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['rho']} | {r['cells']} | {r['dphist']} | {r['dphist_noisy']} | "
                     f"{r['opendp']} | {r['dphist_s']:.1f} | {r['opendp_s']:.1f} ({r['opendp_release_s']:.1f}) | "
                     f"{r['dphist_gap']:.2g} / {r['dphist_noisy_gap']:.2g} / {r['opendp_gap']:.2g} "
                     f"({r['opendp_full_gap']:.2g}) |")
    lines += ["", "Notes:", "",
              "* Uncertainty: dphist publishes a per-cell interval (`ci_lower`, `ci_upper`) with every count; "
              "OpenDP's `ContingencyTable.std(attrs)` gives one standard deviation per marginal (the same for all "
              "its cells, from the identity measurements covering it: "
              + "; ".join(f"{r['workload'][:3]} ρ {r['rho']}: {r['opendp_std']}" for r in rows)
              + "), from which `opendp.accuracy.gaussian_scale_to_accuracy` makes an interval; its table carries "
              "no per-cell interval.",
              "* Shared margins: the gap is the largest difference between two released marginals summed onto an "
              "attribute they share, over all releases.  dphist's noisy_count tables agree exactly (one consistent "
              "estimate, up to floating point); its published non-negative integers agree exactly where every "
              "table shares at most two largest sub-tables (a), and otherwise (b: each 3-way table shares three) "
              "each marginal is rounded on its own with the one grand total, and each release's report states the "
              "largest difference that left (`marginals.rounded_agreement.max_difference`, largest over the "
              "releases: " + "; ".join(f"{r['workload'][:3]} {r['dphist_stated_gap']}" for r in rows) + ").  OpenDP's are projections of one fitted model, so "
              "they agree up to floating point with their null cells (the figure in brackets), but not once the "
              "null cells are dropped: each marginal loses a different part of the null mass.",
              "* OpenDP measures every marginal with the same noise scale (σ = "
              + "; ".join(f"{r['workload'][:3]} ρ {r['rho']}: {', '.join(f'{s:.2f}' for s in r['opendp_scales'])}"
                          for r in rows)
              + ") over its keys plus a null category per column; the fitted model puts on average "
              + "; ".join(f"{r['workload'][:3]} ρ {r['rho']}: {r['opendp_null']:.1f}" for r in rows)
              + " records per marginal in null cells (values that do not exist in the data), dropped here.",
              "* Same neighbour relation and ρ: OpenDP `unit_of(contributions=1)` (symmetric distance 1) is "
              "dphist's add/remove-one-record unit; every column keyed, so OpenDP needs no δ and no row count, "
              "and dphist measures its grand total within ρ."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        from sections import replace_section  # noqa: PLC0415

        replace_section("marginals-opendp", text)
    return lines


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
