"""Discovery on the real-table corpus: what a release with no schema finds for every column, and what it loses.

    .venv/bin/python bench/corpus/fetch.py            # first: the corpus
    .venv/bin/python bench/corpus/discovery.py [--epsilons 1,0.1] [--seeds 3] [--rows N ...]

For every corpus table, every ε and seed: ``dphist release TABLE --epsilon E --delta 1e-6 --seed S`` (no schema:
one histogram per column, the default discovery share), then, per column, from the report and the true values:

* numeric, date, code and flag columns: whether the column was released, its bounds and bins, the share of rows
  outside ``[lower, upper)`` (counted in an end bin by design, but placed wrongly), whether whole-valued columns
  got fractional bins;
* text columns: the share of rows whose category was kept (the category recall by rows), and the categories kept;
* a column skipped, or a release refused as a whole, with the reason the tool gave.

``--rows N`` also runs each table cut to its first N rows (the small-table figures).  Records go to
bench/results/corpus-discovery.jsonl (regenerated, not committed); the summary to stdout and, for a run over
the whole corpus, to the ``corpus-discovery`` section of bench/RESULTS.md.  Test mode (seeded
noise) is used so runs are repeatable: the figures are what a real release would see with that noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from records import RESULTS, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "data" / "MANIFEST.json"
DPHIST = Path(sys.executable).parent / "dphist"
RECORDS = RESULTS / "corpus-discovery.jsonl"


def _release(path: Path, epsilon: str, seed: int, out: Path) -> tuple[dict | None, str]:
    proc = subprocess.run([str(DPHIST), "release", str(path), "-e", epsilon, "--delta", "1e-6", "--seed", str(seed),
                           "-o", str(out), "-q", "--overwrite", "-f", "parquet"], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads((out / "report.json").read_text()), ""


def _outside(values: pd.Series, domain: dict) -> float:
    present = values.dropna()
    if present.empty:
        return 0.0
    lower, upper = domain["lower"], domain["upper"]
    if domain["type"] == "date":
        present = pd.to_datetime(present, utc=True).dt.tz_localize(None)  # compared as UTC wall times
        lower, upper = pd.Timestamp(lower), pd.Timestamp(upper)
    return float(((present < lower) | (present >= upper)).mean())


def _fractional(values: pd.Series, domain: dict) -> bool:
    """Whether a whole-valued column got bins whose edges are not whole numbers."""
    present = values.dropna()
    if domain["type"] != "numeric" or present.empty or not pd.api.types.is_numeric_dtype(present):
        return False
    if not np.all(present.to_numpy(dtype=float) == np.round(present.to_numpy(dtype=float))):
        return False
    width = (float(domain["upper"]) - float(domain["lower"])) / int(domain["bins"])
    return width != round(width) or float(domain["lower"]) != round(float(domain["lower"]))


def measure(name: str, entry: dict, frame: pd.DataFrame, epsilon: str, seed: int, rows: int | None,
            work: Path) -> list[dict]:
    """One record per column of one release of ``frame`` (written to Parquet in ``work``)."""
    path = work / f"{name}.parquet"
    frame.to_parquet(path, index=False)
    report, error = _release(path, epsilon, seed, work / "out")
    found = {c["column"]: c for c in (report or {}).get("discovery", {}).get("columns", [])}
    skipped = {}
    for t in (report or {}).get("discovery", {}).get("skipped_tables", []):
        skipped[t["name"]] = t["reason"]
    out = []
    for column, info in entry["columns"].items():
        record = {"table": name, "column": column, "kind": info["kind"], "epsilon": epsilon, "seed": seed,
                  "rows": len(frame), "cut": rows}
        column_found = found.get(column)
        domain = (column_found or {}).get("domain")
        if report is None:
            record.update(released=False, reason=error)
        elif domain is None or column in skipped:
            record.update(released=False, reason=skipped.get(column) or (column_found or {}).get("reason", "skipped"))
        elif domain["type"] == "categorical":
            values = frame[column].dropna().astype(str)
            kept = set(map(str, domain["values"]))
            record.update(released=True, categories=len(kept), distinct=int(values.nunique()),
                          kept_rows=float(values.isin(kept).mean()) if len(values) else 1.0)
        else:
            record.update(released=True, lower=domain["lower"], upper=domain["upper"], bins=domain.get("bins"),
                          outside=_outside(frame[column], domain), fractional=_fractional(frame[column], domain))
        out.append(record)
    return out


def summary(records: list[dict]) -> str:
    """Per kind and ε (and cut): columns released, mean and worst share outside, fractional bins, recall."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["cut"] or 0, r["epsilon"], r["kind"])].append(r)
    lines = ["| rows | ε | kind | columns | released | outside: mean | outside: worst | fractional bins | "
             "kept rows (text): mean | worst |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (cut, epsilon, kind), group in sorted(groups.items(), key=lambda x: (x[0][0], -float(x[0][1]), x[0][2])):
        released = [r for r in group if r["released"]]
        outside = [r["outside"] for r in released if "outside" in r]
        kept = [r["kept_rows"] for r in released if "kept_rows" in r]
        lines.append(
            f"| {'all' if not cut else cut} | {epsilon} | {kind} | {len(group)} | {len(released)} | "
            + (f"{statistics.mean(outside):.1%} | {max(outside):.1%} | " if outside else "– | – | ")
            + f"{sum(r.get('fractional', False) for r in released)} | "
            + (f"{statistics.mean(kept):.1%} | {min(kept):.1%} |" if kept else "– | – |"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", default="1,0.1")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rows", type=int, action="append", default=[],
                        help="also run every table cut to its first N rows (repeatable)")
    parser.add_argument("--only", default=None, help="only tables whose name contains this")
    args = parser.parse_args()
    if not MANIFEST.exists():
        sys.exit(f"{MANIFEST} not found: run .venv/bin/python bench/corpus/fetch.py first")
    manifest = json.loads(MANIFEST.read_text())
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, entry in manifest.items():
            if args.only and args.only not in name:
                continue
            path = Path(entry["path"])
            frame = pd.read_parquet(path if path.is_absolute() else HERE / path)
            for cut in [None, *args.rows]:
                if cut is not None and cut >= len(frame):
                    continue
                part = frame if cut is None else frame.iloc[:cut]
                for epsilon in args.epsilons.split(","):
                    for seed in range(args.seeds):
                        records += measure(name, entry, part, epsilon, seed, cut, work)
                print(f"{name:28s} {len(part):8,d} rows done", file=sys.stderr, flush=True)
    write_records(RECORDS, records)
    table = summary(records)
    print(table)
    if args.only is None:
        replace_section("corpus-discovery", "\n".join([
            "## Discovery on the real-table corpus",
            "",
            f"{len(manifest)} public tables (`bench/corpus/fetch.py`), each released with no schema as the README's "
            f"recipe does (`dphist release TABLE --epsilon E --delta 1e-6`, the default discovery share, "
            f"{args.seeds} seed(s)); whole tables and their first {', '.join(map(str, args.rows)) or '–'} rows. "
            "*released*: columns discovery found a domain for; *outside*: share of a released column's rows outside "
            "its bounds (placed in an end bin); *fractional bins*: whole-valued columns given bins of fractional "
            "width; *kept rows*: share of a text column's rows whose category was kept. "
            + records_note(RECORDS, ".venv/bin/python bench/corpus/discovery.py --rows 500 --rows 1000 --rows 2000"),
            "", table]))


if __name__ == "__main__":
    main()
