"""Low signal, 1-D, on more fresh samples: bench/low_signal.py's comparison repeated with other sample seeds.

    .venv/bin/python bench/low_signal_seeds.py                  # seeds 7, 11 and 2027 (about 4 minutes each)
    .venv/bin/python bench/low_signal_seeds.py --seeds 5 6      # other seeds
    .venv/bin/python bench/low_signal_seeds.py --from-records   # rewrite the section only

Why.  bench/low_signal.py scores the default release on one set of fresh samples (seed 2026).  A target met there
by a small margin could be that seed's luck, so the same comparison is repeated here on samples drawn with other
seeds, none of which the rule table was fitted on (it uses seed 0).

How.  Per seed, at scales 1e3 and 1e5: auto on 4 samples × 8 runs per data set (as bench/low_signal.py), and the
re-measured bar on the same 4 samples (bench/reference_bar.py: MWEM, EFPA and Uniform at their mean error over 20
noise seeds, the other reference algorithms at their published means).  The published bar does not depend on
our samples.  The ratio is auto's mean error ÷ the bar, per data set; the table lists their mean and worst.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import low_signal  # noqa: E402
import reference_bar  # noqa: E402
from dpbench import DATA  # noqa: E402
from records import RESULTS, read_records, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

RECORDS = RESULTS / "low-signal-seeds.jsonl"
COMMAND = ".venv/bin/python bench/low_signal_seeds.py"  # writes RECORDS
SEEDS = (7, 11, 2027)
SCALES = [1_000, 100_000]
NOISE_SEEDS = 20  # per sample, for the re-measured bar (as bench/reference_bar.py)


def run(seed: int) -> list[dict]:
    """One record per (scale, data set): auto's mean error on the samples of ``seed``, the published bar and the
    bar re-measured on those samples."""
    bar_records = reference_bar.run(1, NOISE_SEEDS, progress=lambda *a, **k: None, sample_seed=seed)
    remeasured = reference_bar.remeasured(low_signal.reference_means(), bar_records)
    published = low_signal.reference_best()
    auto = pd.DataFrame(low_signal.run(["auto"], 4, 8, seed=seed, scales=SCALES, progress=lambda *a, **k: None))
    auto = auto.groupby(["scale", "dataset"])["error"].mean()
    return [{"seed": seed, "scale": int(scale), "dataset": name, "auto": float(error),
             "published": float(published.loc[(scale, name), "reference_error"]),
             "published_algorithm": published.loc[(scale, name), "reference"],
             "remeasured": float(remeasured.loc[(scale, name), "reference_error"]),
             "remeasured_algorithm": remeasured.loc[(scale, name), "reference"]}
            for (scale, name), error in auto.items()]


def table(records: list[dict], minutes: float | None) -> str:
    frame = pd.DataFrame(records)
    took = f" Run took {minutes:.1f} min." if minutes is not None else ""
    lines = ["## Low signal, 1-D, on more fresh samples", "",
             "Issue 22's must-show (section *Low signal, 1-D*, seed 2026) repeated on samples drawn with other seeds "
             "(`bench/low_signal_seeds.py`): auto on 4 samples × 8 runs per data set; the re-measured bar on the "
             f"same samples ({NOISE_SEEDS} noise seeds per sample for MWEM, EFPA and Uniform). ε = 0.1, 4096 cells, "
             f"prefix workload. Ratio: auto ÷ the bar, per data set; below 1 is better. "
             f"{records_note(RECORDS, COMMAND)}{took}", "",
             "| sample seed | scale | ÷ re-measured bar: mean | worst (data set) | ÷ published bar: mean | "
             "worst (data set) | target mean / worst |", "|---|---|---|---|---|---|---|"]
    for (seed, scale), group in frame.groupby(["seed", "scale"]):
        fair = (group["auto"] / group["remeasured"]).set_axis(group["dataset"])
        pub = (group["auto"] / group["published"]).set_axis(group["dataset"])
        mean, worst = low_signal.TARGETS[scale]
        lines.append(f"| {seed} | {scale:,} | {fair.mean():.2f} | {fair.max():.2f} ({fair.idxmax()}) | "
                     f"{pub.mean():.2f} | {pub.max():.2f} ({pub.idxmax()}) | ≤ {mean} / ≤ {worst} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="sample seeds (default 7 11 2027)")
    parser.add_argument("--from-records", action="store_true", help="rewrite the section only")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"DPBench data not found at {DATA}")
    if low_signal.SEED in args.seeds:
        raise SystemExit(f"seed {low_signal.SEED} is bench/low_signal.py's own; choose others")
    records = read_records(RECORDS, COMMAND, missing_ok=not args.from_records)
    minutes = None
    if not args.from_records:
        started = time.perf_counter()
        new = []
        for seed in args.seeds:
            new += run(seed)
            print(f"seed {seed}: done", flush=True)
        minutes = (time.perf_counter() - started) / 60
        records = [r for r in records if r["seed"] not in args.seeds] + new
        write_records(RECORDS, records)
    text = table(records, minutes)
    replace_section("low-signal-seeds", text)
    print(text)


if __name__ == "__main__":
    main()
