"""A 10M-row 1-D release with dphist beside the same release written with OpenDP.

    .venv/bin/python bench/opendp_release.py               # 10M rows, best of 5; about a minute
    .venv/bin/python bench/opendp_release.py --rows 1000000 --repeat 3
    .venv/bin/python bench/opendp_release.py --with-list     # also OpenDP fed a Python list (its slow path)

The table: ``income`` of the generated census-like Parquet (bench/run.py's ``make_big_parquet`` and
``BIG_SCHEMA``), 50 bins over [0, 250000], values outside clamped into the end bins, pure epsilon = 1 under
add/remove-one-record neighbours, written as a CSV of 50 noisy counts.

* dphist: the command a data steward runs, ``python -m dphist release ... --columns income --epsilon 1 --format
  csv --ledger <temporary ledger>`` (reading, counting, choice of algorithm, noise, post-processing, report.json,
  ledger entry and atomic write).
* OpenDP (its Python package, the library being Rust behind a ctypes FFI), as its users write it: pyarrow reads
  the column into a numpy float64 array (the fastest input OpenDP takes: a contiguous array is handed to Rust by
  pointer, where a list would be converted element by element), then one Measurement built with ``>>``:
  ``find_bin`` (49 inner edges; values below the first edge fall in bin 0 and values at or above the last one in
  bin 49, so it clamps by itself) -> ``count_by_categories`` (bins 0..49, no null category) -> ``laplace`` at
  scale 1/epsilon, which on integer counts is OpenDP's exact discrete Laplace.  Its privacy map is checked to give
  at most epsilon for d_in = 1 before the data is touched.  Two more OpenDP variants are timed beside it: the
  chain with an explicit ``clamp`` first (as the textbook pipeline reads), and the bins computed by numpy with
  only counting and noise in OpenDP (not an all-OpenDP release; the fastest OpenDP can be part of here).

Each run is a fresh process started by a runner process of its own, so that the runner's
``getrusage(RUSAGE_CHILDREN).ru_maxrss`` is that run's peak resident memory (as bench/run.py's ``timed_release``
does).  The runs alternate (dphist, then each OpenDP variant, the order rotated every round) so that all see the
same load, and each figure is the best wall time of ``--repeat``.  Both outputs are checked: 50 counts, each
within noise of the true count and their total within noise of the row count.  Prints a markdown table;
``main()`` also returns its lines.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import BIG_SCHEMA, OUT, ROOT, make_big_parquet  # noqa: E402

COLUMN, LOWER, UPPER, BINS = "income", 0.0, 250000.0, 50  # as BIG_SCHEMA declares the column
EPSILON = 1

# The OpenDP release, run as `python -c OPENDP_CHILD MODE PARQUET OUT.csv EPSILON`.  MODE "chain" is the
# measured OpenDP pipeline; "clamp" puts make_clamp first; "numpy-bins" bins in numpy and hands OpenDP bin indices;
# "list" is "chain" fed a Python list (OpenDP's slow path: every element converted on its own).
OPENDP_CHILD = r"""
import sys
import numpy as np
import pyarrow.parquet as pq
import opendp.prelude as dp

dp.enable_features("contrib")
mode, path, out, epsilon = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lower, upper, bins = 0.0, 250000.0, 50
width = (upper - lower) / bins
edges = [lower + width * i for i in range(1, bins)]

# Build (and check) the measurement before reading any row.
space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()
if mode == "numpy-bins":
    space = dp.vector_domain(dp.atom_domain(T="i32")), dp.symmetric_distance()
elif mode == "clamp":
    space = space >> dp.t.then_clamp((lower, upper))
if mode != "numpy-bins":
    space = space >> dp.t.then_find_bin(edges)
release = (space >> dp.t.then_count_by_categories(list(range(bins)), null_category=False)
           >> dp.m.then_laplace(1.0 / epsilon))
assert release.map(1) <= epsilon, release.map(1)

# Nulls dropped, as dphist drops them; the column's chunks become one contiguous float64 array.
x = pq.read_table(path, columns=["income"]).column(0).drop_null().to_numpy()
if mode == "numpy-bins":
    x = np.minimum((np.maximum(x, lower) - lower) // width, bins - 1).astype(np.int32)
elif mode == "list":
    x = x.tolist()
noisy = release(x)

with open(out, "w") as f:
    f.write("income_lower,income_upper,noisy_count\n")
    for i, n in enumerate(noisy):
        f.write(f"{lower + width * i:g},{lower + width * (i + 1):g},{n}\n")
print(f"map(1)={release.map(1)}")
"""

# One runner process per run, so ru_maxrss of RUSAGE_CHILDREN is that one child's peak.
RUNNER = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
          "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); w = time.perf_counter() - t; "
          "print(json.dumps({'rc': r.returncode, 'wall': w, 'out': r.stdout[-500:], 'err': r.stderr[-2000:], "
          "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))")

OPENDP_VARIANTS = {
    "chain": "find_bin -> count_by_categories -> laplace",
    "clamp": "clamp -> find_bin -> count_by_categories -> laplace",
    "numpy-bins": "numpy bins; count_by_categories -> laplace",
}
LIST_VARIANT = {"list": "find_bin -> count_by_categories -> laplace, fed a Python list (slow path, not the fair one)"}


def timed(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` in a fresh process: wall seconds (start-up included) and its peak RSS in MB; exits if it fails."""
    res = subprocess.run([sys.executable, "-c", RUNNER, *cmd], capture_output=True, text=True, cwd=ROOT, env=env)
    data = json.loads(res.stdout.strip().splitlines()[-1])
    if data["rc"] != 0:
        raise SystemExit(f"failed: {' '.join(cmd[:4])} ...\n{data['err']}")
    return data


def true_counts(path: Path) -> np.ndarray:
    """The exact per-bin counts (50,) with out-of-range values clamped into the end bins, nulls dropped."""
    x = pq.read_table(path, columns=[COLUMN]).column(0).drop_null().to_numpy()
    width = (UPPER - LOWER) / BINS
    return np.bincount(np.minimum((np.clip(x, LOWER, UPPER) - LOWER) // width, BINS - 1).astype(np.int64),
                       minlength=BINS)


def read_counts(path: Path, column: str) -> np.ndarray:
    with open(path, newline="") as f:
        return np.array([float(row[column]) for row in csv.DictReader(f)])


def check(name: str, released: np.ndarray, truth: np.ndarray) -> None:
    """Exit unless ``released`` has 50 counts, each within noise of the truth and their total too.

    The noise is discrete Laplace of scale about 1 per cell (dphist: 1/0.95 on cells, 20 on its total), so a
    cell off by more than 40 or a total off by more than 400 has a chance below 1e-15: a bug, not noise."""
    if released.shape != truth.shape:
        raise SystemExit(f"{name}: {released.size} counts, expected {truth.size}")
    worst = float(np.abs(released - truth).max())
    off = float(released.sum() - truth.sum())
    if worst > 40 or abs(off) > 400:
        raise SystemExit(f"{name}: counts not within noise (worst cell off by {worst:g}, total by {off:g})")


def measure(parquet: Path, schema: Path, work: Path, repeat: int, variants: dict) -> dict[str, list[dict]]:
    """Every run of dphist and of each OpenDP variant, alternating, ``repeat`` rounds; the outputs checked."""
    env = dict(os.environ)
    # Both sides load bytecode as an installed package would (PYTHONDONTWRITEBYTECODE would recompile every run).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    truth = true_counts(parquet)
    ledger, dphist_out = work / "ledger.sqlite", work / "dphist"
    commands = {"dphist": [sys.executable, "-m", "dphist", "release", str(parquet), "--schema", str(schema),
                           "--columns", COLUMN, "--epsilon", str(EPSILON), "--format", "csv",
                           "--out", str(dphist_out), "--overwrite", "--quiet", "--ledger", str(ledger)]}
    for mode in variants:
        commands[mode] = [sys.executable, "-c", OPENDP_CHILD, mode, str(parquet), str(work / f"{mode}.csv"),
                          str(EPSILON)]
    names = list(commands)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(repeat + 1):  # round 0 warms the page cache and bytecode and is not counted
        for name in names[r % len(names):] + names[:r % len(names)]:
            data = timed(commands[name], env)
            if r:
                runs[name].append(data)
            out = dphist_out / f"{COLUMN}.csv" if name == "dphist" else work / f"{name}.csv"
            check(name, read_counts(out, "count" if name == "dphist" else "noisy_count"), truth)
    return runs


def table(rows: int, runs: dict[str, list[dict]], variants: dict) -> list[str]:
    """The markdown lines: one row per OpenDP variant beside the same dphist figures."""
    best = {name: min(r["wall"] for r in rs) for name, rs in runs.items()}
    peak = {name: max(r["rss_mb"] for r in rs) for name, rs in runs.items()}
    version = importlib.metadata.version("opendp")
    lines = [f"| rows | OpenDP pipeline (OpenDP {version}) | dphist s | OpenDP s | ratio (OpenDP / dphist) "
             "| dphist peak MB | OpenDP peak MB |", "|---:|---|---:|---:|---:|---:|---:|"]
    for mode, label in variants.items():
        lines.append(f"| {rows:,} | {label} | {best['dphist']:.2f} | {best[mode]:.2f} | "
                     f"{best[mode] / best['dphist']:.2f}x | {peak['dphist']:.0f} | {peak[mode]:.0f} |")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    """Measure, print the markdown table and return its lines (with a one-line note of how it was measured)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (best of)")
    parser.add_argument("--with-list", action="store_true",
                        help="also time OpenDP fed a Python list instead of a numpy array (about 6 s a run)")
    args = parser.parse_args(argv)
    variants = {**OPENDP_VARIANTS, **(LIST_VARIANT if args.with_list else {})}
    OUT.mkdir(parents=True, exist_ok=True)
    parquet = OUT / f"big_{args.rows}.parquet"
    make_big_parquet(parquet, args.rows)
    with tempfile.TemporaryDirectory(prefix="dphist-opendp-") as tmp:
        schema = Path(tmp) / "big.schema.yaml"
        schema.write_text(BIG_SCHEMA)
        runs = measure(parquet, schema, Path(tmp), args.repeat, variants)
    lines = table(args.rows, runs, variants) + [
        "", f"Wall time of a fresh process (start-up included), best of {args.repeat}, dphist and OpenDP alternating; "
        f"peak RSS the largest of those runs; 1-D `{COLUMN}`, {BINS} bins, epsilon {EPSILON}, both outputs checked "
        f"within noise of the true counts; {os.cpu_count()} cores."]
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
