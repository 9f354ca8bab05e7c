"""dphist speed benchmarks: sampler throughput, algorithm run times, end-to-end release time and peak memory,
each beside a baseline measured in the same run.

    .venv/bin/python bench/run.py            # the speed section of bench/RESULTS.md (10M-row release included)
    .venv/bin/python bench/run.py --quick    # 1M rows, 1M samples

Speed and memory are measured here, never in tests.  Ratios compare runs made side by side in this one process
on this machine; absolute figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sections import replace_section  # noqa: E402

ROOT = HERE.parent
OUT = HERE / "out"
SHARED_REAL = ROOT.parent / "shared" / "data" / "real"


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def sampler_benchmark(n: int) -> list[dict]:
    from dphist.privacy import SeededBits, SystemBits
    from dphist.privacy.samplers import discrete_laplace

    rows = []
    for label, make in (("exact, OS CSPRNG", SystemBits), ("exact, seeded PCG64 (tests)", lambda: SeededBits(1))):
        for scale in ("10", "1", "100"):
            secs = best_of(lambda: discrete_laplace(Fraction(scale), n, make()))
            rows.append({"sampler": label, "scale": scale, "n": n, "seconds": secs, "per_second": n / secs})
    rng = np.random.default_rng(0)
    a = np.exp(-1 / 10)
    secs = best_of(lambda: rng.geometric(1 - a, n) - rng.geometric(1 - a, n))
    rows.append({"sampler": "numpy geometric difference (float inversion, NOT exact, NOT CSPRNG)", "scale": "10",
                 "n": n, "seconds": secs, "per_second": n / secs})
    return rows


def make_big_parquet(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """A census-like Parquet table of ``rows`` rows, written in chunks so the generator's memory is bounded."""
    if path.exists() and pq.read_metadata(path).num_rows == rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2026)
    states = np.array(["CA", "TX", "FL", "NY", "PA", "IL", "OH", "GA", "NC", "MI", "WY", "VT"])
    schema = pa.schema([("age", pa.int64()), ("sex", pa.string()), ("state", pa.string()),
                        ("income", pa.float64()), ("interview_date", pa.date32())])
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            days = rng.integers(0, 3 * 365, n) + (dt.date(2023, 1, 1) - dt.date(1970, 1, 1)).days
            writer.write_table(pa.table({
                "age": rng.integers(17, 91, n),
                "sex": rng.choice(["F", "M"], n),
                "state": rng.choice(states, n),
                "income": np.round(rng.lognormal(10.5, 1.0, n), 2),
                "interview_date": pa.array(days.astype(np.int32), type=pa.int32()).cast(pa.date32()),
            }, schema=schema), row_group_size=256_000)
            done += n


BIG_SCHEMA = """columns:
  age:    {type: numeric, lower: 15, upper: 95, width: 5}
  sex:    {type: categorical, values: [F, M]}
  state:  {type: categorical, values: [CA, TX, FL, NY, PA, IL, OH, GA, NC, MI, WY, VT]}
  income: {type: numeric, lower: 0, upper: 250000, bins: 50}
  interview_date: {type: date, lower: 2023-01-01, upper: 2026-01-01, unit: month}
"""


def timed_release(args: list[str]) -> dict:
    """Run ``dphist release`` in a fresh process; wall time and the child's peak resident memory."""
    out = OUT / "release"
    cmd = [sys.executable, "-m", "dphist", "release", *args, "--out", str(out), "--overwrite", "--quiet"]
    # A fresh process per run, so ru_maxrss of RUSAGE_CHILDREN is that run's peak (one child at a time).
    code = ("import resource, subprocess, sys, time, json; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:]); w = time.perf_counter() - t; "
            "print(json.dumps({'rc': r.returncode, 'wall': w, "
            "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))")
    res = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, cwd=ROOT)
    data = json.loads(res.stdout.strip().splitlines()[-1])
    if data["rc"] != 0:
        raise SystemExit(f"release failed: {' '.join(cmd)}\n{res.stderr}")
    return data


def release_benchmarks(rows_list: list[int], with_csv: bool) -> list[dict]:
    results = []
    base = ["--epsilon", "1"]  # production path: OS CSPRNG noise
    if SHARED_REAL.is_dir():
        for name in ("adult.csv", "adult.parquet"):
            r = timed_release([str(SHARED_REAL / name), "--schema", str(HERE / "adult.schema.yaml"), *base,
                               "--spec", str(write_spec("adult", [["age", "sex"], ["education_num"],
                                                                  ["race", "sex", "income"], ["hours_per_week"]]))])
            results.append({"input": f"shared/real/{name}", "rows": 48842, "tables": 4, **r})
    schema_path = OUT / "big.schema.yaml"
    OUT.mkdir(exist_ok=True)
    schema_path.write_text(BIG_SCHEMA)
    spec = write_spec("big", [["age", "sex"], ["state", "income"], ["interview_date"]])
    for rows in rows_list:
        path = OUT / f"big_{rows}.parquet"
        make_big_parquet(path, rows)
        r = timed_release([str(path), "--schema", str(schema_path), *base, "--spec", str(spec)])
        results.append({"input": f"generated Parquet ({path.stat().st_size / 2**20:.0f} MB)", "rows": rows,
                        "tables": 3, **r})
        if with_csv:
            csv_path = path.with_suffix(".csv")
            if not csv_path.exists():
                import pyarrow.csv as pacsv
                pacsv.write_csv(pq.read_table(path), csv_path)
            r = timed_release([str(csv_path), "--schema", str(schema_path), *base, "--spec", str(spec)])
            results.append({"input": f"generated CSV ({csv_path.stat().st_size / 2**20:.0f} MB)", "rows": rows,
                            "tables": 3, **r})
    return results


BASELINE = r"""
import sys, time, resource
import numpy as np, pyarrow.parquet as pq, pyarrow.compute as pc
t = time.perf_counter()
f = pq.ParquetFile(sys.argv[1], pre_buffer=False)
counts = np.zeros(16 * 2, dtype=np.int64)
for b in f.iter_batches(batch_size=1 << 17, columns=["age", "sex"]):
    age = np.clip((b.column(0).to_numpy() - 15) // 5, 0, 15)
    sex = (pc.equal(b.column(1), "M").to_numpy(zero_copy_only=False)).astype(np.int64)
    counts += np.bincount(age * 2 + sex, minlength=32)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def baseline_versus_release(path: Path, schema: Path) -> dict:
    """A bare pyarrow scan + bincount of one 2-way table, against `dphist release` of the same table."""
    res = subprocess.run([sys.executable, "-c", BASELINE, str(path)], capture_output=True, text=True, check=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, pyarrow.parquet, pyarrow.compute"], check=True)
    startup = time.perf_counter() - t0
    scan, rss = (float(v) for v in res.stdout.split())
    release = timed_release([str(path), "--schema", str(schema), "--epsilon", "1", "--columns", "age,sex"])
    return {"baseline_scan_s": scan, "baseline_with_startup_s": scan + startup, "baseline_rss_mb": rss,
            "release_s": release["wall"], "release_rss_mb": release["rss_mb"]}


def algorithm_timings(repeat: int = 5) -> list[dict]:
    from dphist.algorithms import REGISTRY, get_algorithm
    from dphist.errors import UsageError
    from dphist.privacy import PrivacyBudget, SystemBits
    rows = []
    rng = np.random.default_rng(0)
    # StructureFirst once more at full resolution: every one of the 4096 cells a candidate boundary (the
    # O(k n²) dynamic program at n = 4096, k = 32).
    variants = [(name, name, REGISTRY[name].example_options) for name in sorted(REGISTRY)]
    variants.append(("structurefirst grid=4096", "structurefirst", {**REGISTRY["structurefirst"].example_options,
                                                                     "grid": 4096}))
    for shape in ((4096,), (256, 256), (1024, 1024)):
        x = rng.poisson(20, shape)
        for label, name, options in variants:
            algo = get_algorithm(name, **options)
            try:
                algo.check_shape(shape)
            except UsageError:
                continue  # e.g. a one-column algorithm on a two-way table

            def once():
                est = algo.run(x, PrivacyBudget(Fraction(1, 10), bits=SystemBits()))
                est.integers() if est.integers else None
            once()
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                once()
                times.append(time.perf_counter() - t)
            rows.append({"shape": "x".join(map(str, shape)), "algorithm": label, "ms": 1000 * float(np.median(times))})
    return rows


def write_spec(name: str, tables: list[list[str]]) -> Path:
    import yaml
    OUT.mkdir(exist_ok=True)
    path = OUT / f"{name}.job.yaml"
    path.write_text(yaml.safe_dump({"tables": [{"columns": t} for t in tables]}))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M rows and 1M samples only")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--rows", type=int, nargs="*", default=None)
    parser.add_argument("--csv", action="store_true", help="also time the generated tables as CSV")
    args = parser.parse_args()
    samples = args.samples or (1_000_000 if args.quick else 10_000_000)
    rows = args.rows or ([1_000_000] if args.quick else [1_000_000, 10_000_000])

    lines = ["## Speed" + (" (quick mode)" if args.quick else ""), "",
             f"{dt.datetime.now():%Y-%m-%d %H:%M}, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}, "
             f"pyarrow {pa.__version__}. Reproduce: `.venv/bin/python bench/run.py{' --quick' if args.quick else ''}`.",
             "", "### Discrete Laplace sampler (best of 3)", "",
             "| sampler | scale | samples | seconds | samples/s |", "|---|---|---|---|---|"]
    for r in sampler_benchmark(samples):
        lines.append(f"| {r['sampler']} | {r['scale']} | {r['n']:,} | {r['seconds']:.3f} | {r['per_second']:,.0f} |")
        print(lines[-1], flush=True)
    lines += ["", "### Algorithms (ε = 0.1, OS CSPRNG noise, inference and post-processing included; median of 5;"
              " 1024x1024 is a table of 2^20 cells)",
              "", "| table | algorithm | ms per run |", "|---|---|---|"]
    for r in algorithm_timings():
        lines.append(f"| {r['shape']} | {r['algorithm']} | {r['ms']:.1f} |")
        print(lines[-1], flush=True)
    lines += ["", "### End-to-end release (fresh process; wall time and peak RSS)", "",
              "| input | rows | tables | wall s | peak RSS MB |", "|---|---|---|---|---|"]
    for r in release_benchmarks(rows, args.csv):
        lines.append(f"| {r['input']} | {r['rows']:,} | {r['tables']} | {r['wall']:.2f} | {r['rss_mb']:.0f} |")
        print(lines[-1], flush=True)
    biggest = OUT / f"big_{max(rows)}.parquet"
    b = baseline_versus_release(biggest, OUT / "big.schema.yaml")
    lines += ["", f"### Against a bare scan ({max(rows):,}-row Parquet, one age x sex table)", "",
              "| | wall s | peak RSS MB |", "|---|---|---|",
              f"| pyarrow scan + numpy bincount, no privacy (in-process time) | {b['baseline_scan_s']:.2f} | "
              f"{b['baseline_rss_mb']:.0f} |",
              f"| the same plus interpreter start and imports | {b['baseline_with_startup_s']:.2f} | |",
              f"| `dphist release --columns age,sex` (whole command) | {b['release_s']:.2f} | {b['release_rss_mb']:.0f} |",
              "", f"Release ÷ baseline with start-up: {b['release_s'] / b['baseline_with_startup_s']:.2f}.", ""]
    print("\n".join(lines[-8:]))
    replace_section("speed", "\n".join(lines))
    print("wrote bench/RESULTS.md (speed)")


if __name__ == "__main__":
    main()
