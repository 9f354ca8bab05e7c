"""Counting at scale: dphist's counting pass beside a bare Arrow scan of the same columns.

    .venv/bin/python bench/scale.py            # about 10 minutes; part of `make bench`
    .venv/bin/python bench/scale.py --quick    # 10M rows only

For 10M and 50M generated rows of Parquet and 10M rows of CSV, and 1-D, 2-D and 3-D tables, each measurement
runs in a fresh process (so its peak RSS is its own), baseline and dphist alternately, best of three:

* baseline, Parquet: ``pyarrow.dataset`` scanning the table's columns (Arrow's threads, nothing else done);
* baseline, CSV: pyarrow's streaming CSV reader (``open_csv``) reading the table's columns;
* dphist: the counting pass of a release (``Source.batches`` + ``count_tables``), which also reads;
* counting alone: ``count_tables`` over batches read beforehand, for its CPU seconds (with the scan's CPU
  seconds they bound what any overlap of reading and counting could reach on this machine's cores);
* progress: the 3-D pass drawing its progress bar (to a terminal stand-in) against the pass without it,
  alternately in one process, fastest of seven each (process start-up noise would hide a 2 % difference);
  and, since even that difference swings by several per cent on a shared machine, the time spent inside
  the bar's own calls as a share of the passes that drew it.

Peak memory is also measured at 200M rows (four copies of the 50M-row file in one directory).  (Releases of
2^24- and 2^26-cell tables are in bench/large_tables.py, beside their floor.)  Writes the `scale` section of
bench/RESULTS.md and the raw records to bench/results/scale.json (regenerated, not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import BIG_SCHEMA, OUT, make_big_parquet  # noqa: E402
from records import RESULTS, write_json  # noqa: E402
from sections import replace_section  # noqa: E402

CORES = os.cpu_count() or 1
TABLES = {"1-D": ["income"], "2-D": ["age", "income"], "3-D": ["age", "state", "income"]}

CHILD = r"""
import json, os, resource, sys, time
mode, path, cols = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
import pyarrow.csv as pacsv, pyarrow.dataset as ds
t, cpu = time.perf_counter(), time.process_time()
if mode == "scan-parquet":
    rows = sum(b.num_rows for b in ds.dataset(path, format="parquet").to_batches(columns=cols))
elif mode == "scan-csv":
    reader = pacsv.open_csv(path, convert_options=pacsv.ConvertOptions(include_columns=cols))
    rows = sum(b.num_rows for b in reader)
else:
    import io
    from dphist.read.counting import TableShape, count_tables
    from dphist.read.sources import open_source
    from dphist.read.progress import Progress
    from dphist.declare.schema import load_schema
    schema = load_schema(sys.argv[4])
    src = open_source(path)
    class Terminal(io.TextIOBase):
        def isatty(self): return True
        def write(self, s): return len(s)
    class Timed(Progress):
        # The bar, timing its own calls (the A/B difference of whole passes is lost in a shared machine's noise).
        spent = 0.0
        def add(self, n):
            t = time.perf_counter(); super().add(n); Timed.spent += time.perf_counter() - t
        def show(self, force=False):
            t = time.perf_counter(); super().show(force); Timed.spent += time.perf_counter() - t
    def once(progress, batches=None):
        bar = Timed(*src.progress_total(), stream=Terminal()) if progress else None
        t = time.perf_counter()
        (counts,) = count_tables(batches or src.batches({c: schema[c] for c in cols}, bar),
                                 [TableShape("t", tuple(schema[c] for c in cols))], src.name)
        if bar is not None:
            bar.close()
        return time.perf_counter() - t, int(counts.sum())
    if mode == "progress-pairs":
        # Without and with the bar, alternately in one process, 7 times each: the fastest of each.
        pairs = [(once(False)[0], once(True)[0]) for _ in range(7)]
        print(json.dumps({"seconds": min(a for a, _ in pairs), "progress_seconds": min(b for _, b in pairs),
                          "in_bar_share": Timed.spent / sum(b for _, b in pairs),
                          "rows": 0, "rss_mb": 0}))
        sys.exit(0)
    if mode == "count-only":
        # The counting alone, over batches already read: its CPU is what counting adds to reading's.
        batches = list(src.batches({c: schema[c] for c in cols}))
        t, cpu = time.perf_counter(), time.process_time()
        rows = once(False, iter(batches))[1]
    else:
        t, cpu = time.perf_counter(), time.process_time()
        rows = once(False)[1]
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu, "rows": rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode: str, path: Path, cols: list[str], schema: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), ",".join(cols), str(schema)],
                         capture_output=True, text=True, cwd=HERE.parent)
    if res.returncode != 0:
        raise SystemExit(f"{mode} {path} failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def best(modes: list[str], path: Path, cols: list[str], schema: Path, repeat: int) -> dict[str, dict]:
    """Each mode ``repeat`` times, interleaved; the fastest run of each, with the largest peak RSS seen."""
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(repeat):
        for m in modes:
            runs[m].append(child(m, path, cols, schema))
    return {m: {"seconds": min(r["seconds"] for r in rs), "cpu_s": min(r["cpu_s"] for r in rs),
                "rss_mb": max(r["rss_mb"] for r in rs), "rows": rs[0]["rows"]} for m, rs in runs.items()}


def make_csv(parquet: Path) -> Path:
    path = parquet.with_suffix(".csv")
    if not path.exists():
        with pacsv.CSVWriter(path, pq.read_schema(parquet)) as writer:
            for batch in pq.ParquetFile(parquet).iter_batches(batch_size=1 << 20):
                writer.write_batch(batch)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10M rows only")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    OUT.mkdir(exist_ok=True)
    schema = OUT / "big.schema.yaml"
    schema.write_text(BIG_SCHEMA)
    inputs = [("Parquet", 10_000_000)] + ([] if args.quick else [("Parquet", 50_000_000)]) + [("CSV", 10_000_000)]
    records = []
    for kind, rows in inputs:
        parquet = OUT / f"big_{rows}.parquet"
        make_big_parquet(parquet, rows)
        path = parquet if kind == "Parquet" else make_csv(parquet)
        base = "scan-parquet" if kind == "Parquet" else "scan-csv"
        for dims, cols in TABLES.items():
            r = best([base, "count", "count-only"], path, cols, schema, args.repeat)
            assert r["count"]["rows"] == r["count-only"]["rows"] <= rows and r[base]["rows"] == rows
            # If reading and counting overlapped perfectly on all cores, the pass would take the longer of the
            # scan and (reading's CPU + counting's CPU) / cores.
            overlapped = max(r[base]["seconds"], (r[base]["cpu_s"] + r["count-only"]["cpu_s"]) / CORES)
            rec = {"input": kind, "rows": rows, "dims": dims, "columns": cols,
                   "baseline_s": r[base]["seconds"], "dphist_s": r["count"]["seconds"],
                   "ratio": r["count"]["seconds"] / r[base]["seconds"], "baseline_rss_mb": r[base]["rss_mb"],
                   "dphist_rss_mb": r["count"]["rss_mb"], "baseline_cpu_s": r[base]["cpu_s"],
                   "dphist_cpu_s": r["count"]["cpu_s"], "counting_cpu_s": r["count-only"]["cpu_s"],
                   "overlap_ratio": overlapped / r[base]["seconds"]}
            if dims == "3-D":
                pairs = child("progress-pairs", path, cols, schema)
                rec["progress_s"], rec["no_progress_s"] = pairs["progress_seconds"], pairs["seconds"]
                rec["progress_overhead"] = pairs["progress_seconds"] / pairs["seconds"] - 1
                rec["progress_in_bar_share"] = pairs["in_bar_share"]
            records.append(rec)
            print(json.dumps(rec), flush=True)
    memory = []
    if not args.quick:
        folder = OUT / "rows200m"
        folder.mkdir(exist_ok=True)
        for i in range(4):
            link = folder / f"part{i}.parquet"
            if not link.exists():
                os.symlink(OUT / "big_50000000.parquet", link)
        r = child("count", folder, TABLES["3-D"], schema)
        memory.append({"rows": r["rows"], "seconds": r["seconds"], "rss_mb": r["rss_mb"]})
        print(memory[-1], flush=True)

    lines = ["## Counting at scale", "",
             f"Generated census-like rows (bench/run.py's generator: zstd Parquet, row groups of 256,000 rows; the "
             f"CSV is the same rows). Tables: 1-D income (50 bins), 2-D age × income, 3-D age × state × income "
             f"(state is text, read dictionary-encoded). Each figure is the fastest of {args.repeat} fresh "
             "processes, baseline and dphist interleaved, on this 2-core machine. Baseline: a bare pyarrow "
             "dataset scan of the same columns (Parquet), pyarrow's streaming CSV reader (CSV). dphist: the whole "
             "counting pass, reading included.", "",
             "CPU columns: the CPU seconds of the scan, of the dphist pass, and of the counting alone over "
             "batches already read. *Overlap bound*: the ratio if reading and counting overlapped perfectly on "
             f"all {CORES} cores, max(scan, (scan CPU + counting CPU) / {CORES}) / scan -- where reading keeps "
             "every core busy, counting's CPU adds to the wall time and no threading can hide it.", "",
             "| input | rows | table | baseline s | dphist s | ratio | overlap bound | baseline CPU s "
             "| dphist CPU s | counting alone CPU s | dphist peak RSS MB | progress overhead (A/B; time in the bar) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        overhead = (f"{100 * r['progress_overhead']:+.1f} % (in the bar: {100 * r['progress_in_bar_share']:.2f} %)"
                    if "progress_overhead" in r else "")
        lines.append(f"| {r['input']} | {r['rows']:,} | {r['dims']} | {r['baseline_s']:.2f} | {r['dphist_s']:.2f} "
                     f"| {r['ratio']:.2f} | {r['overlap_ratio']:.2f} | {r['baseline_cpu_s']:.2f} "
                     f"| {r['dphist_cpu_s']:.2f} | {r['counting_cpu_s']:.2f} | {r['dphist_rss_mb']:.0f} | {overhead} |")
    if memory:
        m = memory[0]
        lines += ["", f"Peak memory does not grow with rows: the 3-D count over {m['rows']:,} counted rows of "
                  f"200,000,000 (four copies of the 50M file) took {m['seconds']:.1f} s with a peak RSS of "
                  f"{m['rss_mb']:.0f} MB."]
    lines += ["", f"Run took {(time.perf_counter() - started) / 60:.1f} min."]
    replace_section("scale", "\n".join(lines))
    write_json(RESULTS / "scale.json", {"counting": records, "memory_200m": memory})
    print("wrote bench/RESULTS.md (scale) and bench/results/scale.json")


if __name__ == "__main__":
    main()
