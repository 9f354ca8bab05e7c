"""Releases of large tables (2^24 and 2^26 cells) beside their floor: the same work without privacy machinery.

    .venv/bin/python bench/large_tables.py            # about 6 minutes; part of `make bench`
    .venv/bin/python bench/large_tables.py --quick    # 2^24 cells only, identity only

The data: 5,000,000 rows of two numbers in [0, 1] (Parquet).  The table: x × y in 4096 × 4096 bins (2^24 cells)
and 8192 × 8192 (2^26).  Each command runs in a fresh process, the floor and dphist alternately, fastest of
``--repeat``; peak RSS is the process's own.

The floor (``FLOOR`` below) does what a release must do, plainly: read both columns with pyarrow, bin them with
numpy, bincount, add numpy's (inexact, seeded) Laplace noise rounded to integers, clamp at zero, and write the
same eight columns (bin bounds of x and y, count, noisy count, interval ends) as one Parquet file.  dphist adds
exact noise from the OS CSPRNG, the post-processing that keeps the total and the local sums (integers), the
ledger and the atomic release.  The full run adds bench/opendp_release.py (a 10M-row release beside OpenDP's).
Writes the `large-tables` section of bench/RESULTS.md and the raw records to bench/results/large-tables.json
(regenerated, not committed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from records import RESULTS, write_json  # noqa: E402
from sections import replace_section  # noqa: E402

OUT = HERE / "out" / "large"
ROWS = 5_000_000

FLOOR = r"""
import sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
data, bins, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
table = pq.read_table(data, columns=["x", "y"])
ix = np.clip((table["x"].to_numpy() * bins).astype(np.int64), 0, bins - 1)
iy = np.clip((table["y"].to_numpy() * bins).astype(np.int64), 0, bins - 1)
counts = np.bincount(ix * bins + iy, minlength=bins * bins)
noisy = counts + np.rint(np.random.default_rng(0).laplace(0, 1.0, counts.size)).astype(np.int64)
edges = np.linspace(0, 1, bins + 1)
cell = np.arange(bins * bins)
pq.write_table(pa.table({
    "x_lower": edges[cell // bins], "x_upper": edges[cell // bins + 1],
    "y_lower": edges[cell % bins], "y_upper": edges[cell % bins + 1],
    "count": np.maximum(noisy, 0), "noisy_count": noisy,
    "ci_lower": np.maximum(noisy - 3.0, 0.0), "ci_upper": noisy + 3.0}), out)
"""

# Runs a command and prints its wall time and peak RSS (of the child: one child per runner process).
RUNNER = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
          "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); w = time.perf_counter() - t; "
          "print(json.dumps({'rc': r.returncode, 'wall': w, "
          "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))")


def make_data(path: Path) -> None:
    if path.exists():
        return
    rng = np.random.default_rng(24)
    pq.write_table(pa.table({"x": rng.normal(0.5, 0.15, ROWS), "y": rng.beta(2, 5, ROWS)}), path,
                   row_group_size=1 << 20)


def measure(cmd: list[str]) -> dict:
    res = subprocess.run([sys.executable, "-c", RUNNER, *cmd], capture_output=True, text=True, cwd=HERE.parent)
    result = json.loads(res.stdout.strip().splitlines()[-1])
    if result["rc"] != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{res.stderr}")
    return result


def commands(data: Path, bins: int, algorithm: str) -> tuple[list[str], list[str]]:
    folder = OUT / f"bins{bins}"
    folder.mkdir(parents=True, exist_ok=True)
    schema = folder / "xy.schema.yaml"
    schema.write_text(f"columns:\n  x: {{type: numeric, lower: 0, upper: 1, bins: {bins}}}\n"
                      f"  y: {{type: numeric, lower: 0, upper: 1, bins: {bins}}}\n")
    floor = [sys.executable, "-c", FLOOR, str(data), str(bins), str(folder / "floor.parquet")]
    release = [sys.executable, "-m", "dphist", "release", str(data), "--schema", str(schema), "--columns", "x,y",
               "--epsilon", "1", "--algorithm", algorithm, "--format", "parquet", "--out", str(folder / "out"),
               "--overwrite", "--quiet", "--max-cells", str(bins * bins), "--ledger", str(folder / "ledger.sqlite")]
    return floor, release


def side_by_side(data: Path, bins: int, algorithm: str, repeat: int) -> dict:
    """The fastest of ``repeat`` alternating runs of the floor and the release (and each one's peak RSS)."""
    floor_cmd, release_cmd = commands(data, bins, algorithm)
    floor, release = [], []
    for _ in range(repeat):
        floor.append(measure(floor_cmd))
        release.append(measure(release_cmd))
    f, r = min(floor, key=lambda x: x["wall"]), min(release, key=lambda x: x["wall"])
    rec = {"cells": bins * bins, "algorithm": algorithm, "floor_s": f["wall"], "release_s": r["wall"],
           "ratio": r["wall"] / f["wall"], "floor_rss_mb": max(x["rss_mb"] for x in floor),
           "release_rss_mb": max(x["rss_mb"] for x in release)}
    print(json.dumps(rec), flush=True)
    return rec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2^24 cells, identity only")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    data = OUT / "xy.parquet"
    make_data(data)
    plan = [(4096, "identity")] if args.quick else [(4096, "identity"), (4096, "hb"), (4096, "privelet"),
                                                     (8192, "identity"), (8192, "hb")]
    records = [side_by_side(data, bins, algorithm, args.repeat if bins == 4096 else 1) for bins, algorithm in plan]
    lines = ["## Large tables beside their floor", "",
             f"{ROWS:,} rows of two numbers, released as an x × y table at ε = 1 into Parquet. The floor does the "
             "same work plainly (pyarrow read, numpy bins, bincount, numpy Laplace noise rounded, clamp, the same "
             "eight columns written as Parquet); dphist adds exact noise from the OS CSPRNG, the local "
             "post-processing into non-negative integers that keep the total, the ledger and the atomic "
             f"release. Fastest of {args.repeat} alternating fresh processes on this 2-core machine (2^26: one "
             "each); peak RSS is the largest of each command's runs.", "",
             "| cells | algorithm | floor s | dphist s | ratio | floor peak MB | dphist peak MB |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| 2^{int(np.log2(r['cells']))} | {r['algorithm']} | {r['floor_s']:.2f} | {r['release_s']:.2f}"
                     f" | {r['ratio']:.2f} | {r['floor_rss_mb']:.0f} | {r['release_rss_mb']:.0f} |")
    if not args.quick:
        import opendp_release  # the 10M-row release beside OpenDP's, in this section too

        lines += ["", "### A 10M-row release beside OpenDP", "", *opendp_release.main(["--with-list"])]
    lines += ["", f"Run took {(time.perf_counter() - started) / 60:.1f} min."]
    if not args.quick:
        replace_section("large-tables", "\n".join(lines))
        write_json(RESULTS / "large-tables.json", records)
        print("wrote bench/RESULTS.md (large-tables) and bench/results/large-tables.json")
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
