"""Marginal sets on the Adult table: the two strategies' expected errors against measured ones, and auto's choice.

    .venv/bin/python bench/marginals.py [--runs 20]     # about a minute; part of `make bench`

For each marginal set and ε, both strategies are released RUNS times (test-mode seeds) and compared with the
true marginals: the root-mean-square error per cell of the unbiased estimates (`noisy_count`), which the report's
expected error predicts, and of the released non-negative integers (`count`).  Writes the `marginals` section of
bench/RESULTS.md.  Needs ../shared/data/real/adult.csv.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sections import replace_section  # noqa: E402

import dphist  # noqa: E402
from dphist.api import plan_release  # noqa: E402
from dphist.read.counting import count_tables  # noqa: E402

ADULT = HERE.parent.parent / "shared" / "data" / "real" / "adult.csv"
SCHEMA = HERE / "adult.schema.yaml"
SETS = {
    "issue set": "age,sex;sex,income;age,income;education_num,income",
    "all pairs of 4": "age,sex;age,race;age,income;sex,race;sex,income;race,income",
    "three 3-way": "age,sex,income;race,sex,income;education_num,income",
    "two small": "sex,income;race,sex",
}
EPSILONS = ("0.1", "1")


def truth(marginals: str) -> dict[str, np.ndarray]:
    """The true counts of each marginal, counted by the release's own counting pass."""
    plan = plan_release(ADULT, "1", SCHEMA, marginals=marginals, marginal_strategy="separate", seed=0)
    needed = {c.name: c for shape in plan.shapes for c in shape.columns}
    counts = count_tables(plan.source.batches(needed), plan.shapes, plan.source.name)
    return {shape.name: c.ravel() for shape, c in zip(plan.shapes, counts)}


def rms(errors: list[float], cells: int) -> float:
    return float(np.sqrt(np.mean(errors) / cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    if not ADULT.is_file():
        raise SystemExit(f"Adult table not found at {ADULT}")
    started = time.perf_counter()
    lines = ["## Marginal sets on the Adult table", "",
             f"Root-mean-square error per cell over all marginals of a set, {runs} releases per row (test-mode "
             "seeds). *expected*: from the report, before post-processing; *unbiased*: measured on `noisy_count`; "
             "*released*: measured on the non-negative integer `count`. *auto* is the strategy `auto` picks.", "",
             "| set | cells | ε | strategy | expected | unbiased | released | s per release | auto |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, marginals in SETS.items():
        true = truth(marginals)
        cells = sum(t.size for t in true.values())
        for epsilon in EPSILONS:
            auto = dphist.release(ADULT, epsilon, SCHEMA, marginals=marginals, seed=0).report["marginals"]
            for strategy in ("full", "separate"):
                if "not_available" in auto["expected_error"][strategy]:
                    lines.append(f"| {label} | {cells} | {epsilon} | {strategy} | not available: "
                                 f"{auto['expected_error'][strategy]['not_available']} | | | | |")
                    continue
                unbiased, released, seconds = [], [], []
                expected = auto["expected_error"][strategy]["total"]
                for r in range(runs):
                    t0 = time.perf_counter()
                    result = dphist.release(ADULT, epsilon, SCHEMA, marginals=marginals, marginal_strategy=strategy,
                                            seed=1000 + r)
                    seconds.append(time.perf_counter() - t0)
                    unbiased.append(sum(float(((t["noisy_count"].to_numpy(float) - true[n]) ** 2).sum())
                                        for n, t in result.tables.items()))
                    released.append(sum(float(((t["count"].to_numpy(float) - true[n]) ** 2).sum())
                                        for n, t in result.tables.items()))
                lines.append(f"| {label} | {cells} | {epsilon} | {strategy} | {np.sqrt(expected / cells):.3g} | "
                             f"{rms(unbiased, cells):.3g} | {rms(released, cells):.3g} | {np.median(seconds):.2f} | "
                             f"{'←' if auto['strategy'] == strategy else ''} |")
                print(lines[-1], flush=True)
    lines += ["", f"Run took {(time.perf_counter() - started) / 60:.1f} min."]
    replace_section("marginals", "\n".join(lines))
    print("wrote bench/RESULTS.md (marginals)")


if __name__ == "__main__":
    main()
