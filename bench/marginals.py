"""Marginal sets: the strategies' expected errors against measured ones on Adult, and residual bases at the optimum.

    .venv/bin/python bench/marginals.py [--runs 20]     # about a minute; part of `make bench`
    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python bench/marginals.py --optimum    # residual vs separate, ~5 min
    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python bench/marginals.py --scale      # time and memory, ~2 min
    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python bench/marginals.py --coverage   # 95 % intervals, ~3 min
    OMP_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python bench/marginals.py --pure       # pure ε plans, ~5 min

The last four write the sections `marginals-optimum`, `marginals-scale`, `marginals-coverage` and `marginals-pure`
(see :func:`optimum`, :func:`scale`, :func:`coverage`, :func:`pure`); their records go to bench/results/.

For each marginal set and ε, both strategies are released RUNS times (test-mode seeds) and compared with the
true marginals: the root-mean-square error per cell of the unbiased estimates (`noisy_count`), which the report's
expected error predicts, and of the released non-negative integers (`count`).  Writes the `marginals` section of
bench/RESULTS.md.  Needs ../shared/data/real/adult.csv.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import RESULTS, records_note, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

import dphist  # noqa: E402
from dphist.api import plan_release  # noqa: E402
from dphist.algorithms.residual_laplace import METHODS, best_plan, measure_laplace  # noqa: E402
from dphist.algorithms.residual_planner import (exact_variances, measure_residuals, plan_residuals,  # noqa: E402
                                                reconstruct)
from dphist.inference.marginals import consistent_marginals, expected_errors  # noqa: E402
from dphist.privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_variance,  # noqa: E402
                            discrete_laplace_variance)
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


def all_k_way(attributes: int, k: int) -> list[tuple[int, ...]]:
    """Every k-way marginal of ``attributes`` attributes, as sorted index tuples."""
    return list(itertools.combinations(range(attributes), k))


def random_codes(rows: int, sizes: list[int], seed: int) -> np.ndarray:
    """``rows`` uniformly random records (int64 codes, one column per attribute)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, n, rows) for n in sizes], axis=1)


def true_marginal(codes: np.ndarray, marginal: tuple[int, ...], sizes: list[int]) -> np.ndarray:
    """The exact counts of ``marginal`` (axes in its order) over ``codes``."""
    dims = tuple(sizes[i] for i in marginal)
    flat = np.ravel_multi_index([codes[:, i] for i in marginal], dims)
    return np.bincount(flat, minlength=math.prod(dims)).reshape(dims)


def separate_variance(marginals: int, rho) -> float:
    """The per-cell variance of strategy "separate" without reconciliation: each of ``marginals`` marginals (one
    record moves one cell of each by 1, Δ₂² = 1) gets ρ/k, so discrete Gaussian noise of σ² = k/(2ρ)."""
    return discrete_gaussian_variance(Fraction(marginals) / (2 * Fraction(rho)))


def separate_ls_rmse(marginals: list[tuple[int, ...]], sizes: list[int], rho) -> float:
    """The RMSE per cell of strategy "separate" (each marginal at ρ/k, then exact least squares,
    :func:`~dphist.inference.marginals.expected_errors`), over all the workload's cells."""
    variance = separate_variance(len(marginals), rho)
    errors = expected_errors(marginals, {i: n for i, n in enumerate(sizes)}, [variance] * len(marginals))
    cells = sum(math.prod(sizes[i] for i in m) for m in marginals)
    return math.sqrt(sum(errors) / cells)


def residual_errors(plan, codes: np.ndarray, truth: dict, rho, seed: int) -> float:
    """The mean squared error per cell, over all the plan's workload cells, of one residual release at ``rho``."""
    budget = ZCDPBudget(Fraction(rho), bits=SeededBits(seed))
    estimates = reconstruct(plan, measure_residuals(plan, codes, budget))
    total = sum(float(((estimates[m] - truth[m]) ** 2).sum()) for m in plan.marginals)
    return total / sum(t.size for t in truth.values())


def separate_errors(marginals: list[tuple[int, ...]], truth: dict, rho, seed: int) -> tuple[float, float]:
    """(without, with least squares): the mean squared error per cell of one release that measures each marginal
    at ρ/k through the kernel, as measured and after :func:`~dphist.inference.marginals.consistent_marginals`
    (the same draws)."""
    budget = ZCDPBudget(Fraction(rho), bits=SeededBits(seed))
    parts = budget.split([Fraction(1)] * len(marginals))
    noisy = [part.gaussian(truth[m], 1, part.amount, f"marginal {m}")[0].astype(np.float64)
             for m, part in zip(marginals, parts)]
    cells = sum(truth[m].size for m in marginals)
    raw = sum(float(((y - truth[m]) ** 2).sum()) for y, m in zip(noisy, marginals)) / cells
    variance = float(separate_variance(len(marginals), rho))
    fitted = consistent_marginals(noisy, marginals, [variance] * len(marginals))
    least = sum(float(((y - truth[m]) ** 2).sum()) for y, m in zip(fitted, marginals)) / cells
    return raw, least


def monte_carlo(mse: list[float]) -> tuple[float, float]:
    """(RMSE, its standard error) from per-release mean squared errors (delta method: se(MSE)/(2·RMSE))."""
    mse = np.asarray(mse, dtype=np.float64)
    root = math.sqrt(float(mse.mean()))
    se = float(mse.std(ddof=1) / math.sqrt(mse.size)) / (2 * root) if mse.size > 1 else float("nan")
    return root, se


#: (label, attributes, values each, k, closed form at ρ = 1 from the brief, releases; 0: closed form only).
OPTIMUM_CASES = (("all 3-way, 20 binary", 20, 2, 3, 5.8676, 40),
                 ("all 3-way, 20 × 10 values", 20, 10, 3, 18.822, 4),
                 ("all 3-way, 100 × 10 values", 100, 10, 3, 214.375, 0))


def optimum(rows: int = 200_000, rho: int = 1) -> None:
    """Section marginals-optimum: residual bases against the closed form and against separate with and without
    least squares, Monte Carlo on the same random records at the same ρ."""
    started = time.perf_counter()
    path = RESULTS / "marginals_optimum.jsonl"
    made_by = "python bench/marginals.py --optimum"
    records, lines = [], [
        "## Marginal sets at the optimum: residual bases against separate", "",
        f"All k-way marginals of random records ({rows:,} rows, uniform codes), ρ = {rho}, RMSE per cell over all "
        "the workload's cells.  *closed form*: ResidualPlanner's optimum (`plan_residuals(...).rmse(ρ)`, continuous "
        "Gaussian).  *residual*: Monte Carlo of `measure_residuals` + `reconstruct` (exact discrete Gaussians, "
        "`ZCDPBudget(ρ, bits=SeededBits(seed))`).  *separate*: each marginal measured at ρ/k through the kernel, no "
        "reconciliation; *separate + LS*: the same draws after the exact least squares of strategy separate "
        "(`consistent_marginals`); *exact* columns are their formulas (σ² = k/(2ρ), and `expected_errors`).  "
        "± is one standard error of the Monte Carlo RMSE (across releases).", "",
        f"Regenerate: `OMP_NUM_THREADS=1 PYTHONPATH=. python bench/marginals.py --optimum`.", "",
        "| workload | cells | bases | plan s | closed form | residual (MC) | vs closed form | separate exact | "
        "separate (MC) | separate + LS exact | separate + LS (MC) | releases | s per residual release |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, attributes, values, k, published, releases in OPTIMUM_CASES:
        sizes = [values] * attributes
        marginals = all_k_way(attributes, k)
        t0 = time.perf_counter()
        plan = plan_residuals(marginals, sizes)
        plan_seconds = time.perf_counter() - t0
        closed = plan.rmse(rho)
        cells = int(plan.marginal_cells().sum())
        record = {"workload": label, "cells": cells, "bases": len(plan.bases), "plan_seconds": plan_seconds,
                  "closed_form": closed, "brief_closed_form": published, "releases": releases,
                  "separate_exact": math.sqrt(separate_variance(len(marginals), rho))}
        if releases:
            codes = random_codes(rows, sizes, seed=attributes * 100 + values)
            truth = {m: true_marginal(codes, m, sizes) for m in plan.marginals}
            res, seconds = [], []
            for r in range(releases):
                t0 = time.perf_counter()
                res.append(residual_errors(plan, codes, truth, rho, seed=1000 + r))
                seconds.append(time.perf_counter() - t0)
            sep = [separate_errors(marginals, truth, rho, seed=2000 + r) for r in range(releases)]
            record.update(residual_mse=res, residual_seconds=seconds, separate_mse=[a for a, _ in sep],
                          separate_ls_mse=[b for _, b in sep], separate_ls_exact=separate_ls_rmse(marginals, sizes, rho))
            (rr, rse), (sr, sse), (lr, lse) = monte_carlo(res), monte_carlo(record["separate_mse"]), monte_carlo(
                record["separate_ls_mse"])
            lines.append(f"| {label} | {cells:,} | {len(plan.bases):,} | {plan_seconds:.2f} | {closed:.4f} | "
                         f"{rr:.4f} ± {rse:.4f} | {100 * (rr / closed - 1):+.2f} % | {record['separate_exact']:.4f} | "
                         f"{sr:.4f} ± {sse:.4f} | {record['separate_ls_exact']:.4f} | {lr:.4f} ± {lse:.4f} | "
                         f"{releases} | {np.median(seconds):.1f} |")
        else:
            lines.append(f"| {label} | {cells:,} | {len(plan.bases):,} | {plan_seconds:.2f} | {closed:.4f} | "
                         f"closed form only | | {record['separate_exact']:.4f} | | | | 0 | |")
        records.append(record)
        print(lines[-1], flush=True)
    lines += ["", "The 100 × 10 workload has 161,700 marginals and 161.7 million cells: one float64 copy of its "
              "reconstruction is 1.3 GB and a release draws 162 million discrete Gaussians (about 13 µs each "
              "here, so over half an hour), so it is planned but not released.",
              "Strategy separate as a release strategy refuses all these sets (every 3-way table shares three "
              "2-way sub-tables, so its non-negative integer step cannot keep them; `check_separable`); its "
              "least-squares estimate is measured here at library level all the same.", "",
              f"Run took {(time.perf_counter() - started) / 60:.1f} min.  " + records_note(path, made_by)]
    write_records(path, records)
    replace_section("marginals-optimum", "\n".join(lines))
    print("wrote bench/RESULTS.md (marginals-optimum)")


#: (label, attributes, values each, largest k: all marginals of 1..k attributes, rows).
SCALE_CASES = {"3way-20x10": ("all 3-way of 20 × 10 values", 20, 10, (3,), 200_000),
               "le2way-100x10": ("all ≤ 2-way of 100 × 10 values", 100, 10, (1, 2), 200_000)}


def scale_case(name: str, rho: int = 1) -> dict:
    """Plan, measure and reconstruct one SCALE_CASES workload in this process: the seconds of each step and this
    process's peak resident memory (ru_maxrss, which includes the random records and their true counts)."""
    label, attributes, values, lengths, rows = SCALE_CASES[name]
    sizes = [values] * attributes
    marginals = [m for k in lengths for m in all_k_way(attributes, k)]
    codes = random_codes(rows, sizes, seed=7)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    plan = plan_residuals(marginals, sizes)
    t1 = time.perf_counter()
    measured = measure_residuals(plan, codes, ZCDPBudget(Fraction(rho), bits=SeededBits(1)))
    t2 = time.perf_counter()
    estimates = reconstruct(plan, measured)
    t3 = time.perf_counter()
    return {"case": name, "workload": label, "rows": rows, "marginals": len(plan.marginals),
            "cells": int(plan.marginal_cells().sum()), "bases": len(plan.bases), "plan_s": t1 - t0,
            "measure_s": t2 - t1, "reconstruct_s": t3 - t2, "total_s": t3 - t0,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "maxrss_before_mb": before / 1024, "estimated": len(estimates)}


def scale() -> None:
    """Section marginals-scale: each SCALE_CASES workload in a fresh subprocess (so its peak memory is its own)."""
    path = RESULTS / "marginals_scale.jsonl"
    made_by = "python bench/marginals.py --scale"
    records = []
    for name in SCALE_CASES:
        done = subprocess.run([sys.executable, __file__, "--scale-case", name], capture_output=True, text=True,
                              check=True)
        records.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(records[-1], flush=True)
    lines = ["## Marginal sets at scale: residual plan, measure and reconstruct", "",
             "One release at ρ = 1 of each workload on random records, each in a fresh process: wall seconds of "
             "`plan_residuals`, `measure_residuals` (counting every basis from the records and drawing its exact "
             "discrete Gaussians) and `reconstruct`, and the process's peak resident memory (`ru_maxrss`, "
             "including Python, numpy and the records; *before* is the peak once the records were made).  "
             "Aim: under 60 s and 2 GB.  Wall times depend on the machine's load (this run: 2 cores shared with "
             "other jobs; measure alone took 15 s for the first workload on a quieter moment).", "",
             "Regenerate: `OMP_NUM_THREADS=1 PYTHONPATH=. python bench/marginals.py --scale`.", "",
             "| workload | rows | marginals | cells | bases | plan s | measure s | reconstruct s | total s | "
             "peak MB | before MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['workload']} | {r['rows']:,} | {r['marginals']:,} | {r['cells']:,} | {r['bases']:,} | "
                     f"{r['plan_s']:.2f} | {r['measure_s']:.1f} | {r['reconstruct_s']:.2f} | {r['total_s']:.1f} | "
                     f"{r['maxrss_mb']:.0f} | {r['maxrss_before_mb']:.0f} |")
    lines += ["", records_note(path, made_by)]
    write_records(path, records)
    replace_section("marginals-scale", "\n".join(lines))
    print("wrote bench/RESULTS.md (marginals-scale)")


#: (label, attributes, values each, k, rows): a small and a medium workload for interval coverage.
COVERAGE_CASES = (("all 3-way of 8 binary", 8, 2, 3, 2_000), ("all 2-way of 10 × 5 values", 10, 5, 2, 20_000))


def coverage_runs(attributes: int, values: int, k: int, rows: int, releases: int, rho=1) -> list[float]:
    """The fraction of cells whose 95 % normal interval (reconstructed value ± 1.96 standard deviations from
    :func:`~dphist.algorithms.residual_planner.exact_variances`) covers the true count, one per release."""
    sizes = [values] * attributes
    plan = plan_residuals(all_k_way(attributes, k), sizes)
    codes = random_codes(rows, sizes, seed=attributes * 10 + values)
    truth = {m: true_marginal(codes, m, sizes) for m in plan.marginals}
    out = []
    for r in range(releases):
        measured = measure_residuals(plan, codes, ZCDPBudget(Fraction(rho), bits=SeededBits(5000 + r)))
        estimates, variances = reconstruct(plan, measured), exact_variances(plan, measured)
        covered = sum(int((np.abs(estimates[m] - truth[m]) <= 1.959964 * math.sqrt(variances[m])).sum())
                      for m in plan.marginals)
        out.append(covered / sum(t.size for t in truth.values()))
    return out


def pure_coverage_runs(attributes: int, values: int, k: int, rows: int, releases: int, epsilon=1) -> list[float]:
    """:func:`coverage_runs` under pure ε: the best Laplace plan (:func:`best_plan`), each release through
    `measure_laplace` on a plain seeded budget, the interval from `exact_variances` of its measurements."""
    sizes = [values] * attributes
    plan, _ = best_plan(all_k_way(attributes, k), sizes, epsilon)
    codes = random_codes(rows, sizes, seed=attributes * 10 + values)
    truth = {m: true_marginal(codes, m, sizes) for m in plan.structure.marginals}
    out = []
    for r in range(releases):
        measured = measure_laplace(plan, truth, PrivacyBudget(Fraction(epsilon), bits=SeededBits(7000 + r)))
        estimates, variances = reconstruct(plan.structure, measured), exact_variances(plan.structure, measured)
        covered = sum(int((np.abs(estimates[m] - truth[m]) <= 1.959964 * math.sqrt(variances[m])).sum())
                      for m in plan.structure.marginals)
        out.append(covered / sum(t.size for t in truth.values()))
    return out


def coverage(releases: int = 200) -> None:
    """Section marginals-coverage: COVERAGE_CASES' 95 % intervals over ``releases`` releases each."""
    path = RESULTS / "marginals_coverage.jsonl"
    made_by = "python bench/marginals.py --coverage"
    records = []
    lines = ["## Residual marginals: 95 % interval coverage", "",
             f"{releases} releases at ρ = 1, and at ε = 1 with the best Laplace plan (docs/algorithms.md §11.1), per "
             "workload (random records, `SeededBits` seeds): each cell's interval is the reconstructed value ± 1.96 "
             "× the standard deviation `exact_variances` gives (from the exact discrete Gaussian variance of every "
             "basis, or the least-squares variance of every basis from the exact discrete Laplace variances of "
             "its tables); coverage is the fraction of all cells of all releases that it covers the true count.  "
             "± is one standard error across releases (cells of one release are correlated through shared "
             "bases).  Band: 94–96 %.", "",
             "Regenerate: `OMP_NUM_THREADS=1 PYTHONPATH=. python bench/marginals.py --coverage`.", "",
             "| workload | budget | rows | cells | releases | coverage | ± | in band |",
             "|---|---|---|---|---|---|---|---|"]
    for label, attributes, values, k, rows in COVERAGE_CASES:
        for budget, runner in (("ρ = 1", coverage_runs), ("ε = 1 (Laplace plan)", pure_coverage_runs)):
            runs = runner(attributes, values, k, rows, releases)
            mean, se = float(np.mean(runs)), float(np.std(runs, ddof=1) / math.sqrt(len(runs)))
            cells = len(all_k_way(attributes, k)) * values ** k
            records.append({"workload": label, "budget": budget, "rows": rows, "cells": cells, "coverage": runs})
            lines.append(f"| {label} | {budget} | {rows:,} | {cells:,} | {releases} | {100 * mean:.2f} % | "
                         f"{100 * se:.2f} % | {'yes' if 0.94 <= mean <= 0.96 else 'no'} |")
            print(lines[-1], flush=True)
    lines += ["", records_note(path, made_by)]
    write_records(path, records)
    replace_section("marginals-coverage", "\n".join(lines))
    print("wrote bench/RESULTS.md (marginals-coverage)")


# -- pure ε: the Laplace residual plans (docs/algorithms.md §11.1) ----------------------------------------------

ADULT_PARQUET = HERE.parent.parent / "shared" / "data" / "real" / "adult.parquet"
ISSUE_SET = SETS["issue set"]
#: (label, attributes' sizes, marginals as index tuples) at ε = 1; the Adult rows are added from the schemas.
PURE_CASES = (("all 3-way, 20 binary", [2] * 20, all_k_way(20, 3)),
              ("all 3-way, 20 × 10 values", [10] * 20, all_k_way(20, 3)),
              ("all 2-way, 10 × 10 values", [10] * 10, all_k_way(10, 2)))


def draft_schema() -> Path:
    """The draft schema `dphist schema` writes for Adult (bounds and categories from the data: a benchmark
    input, not a private choice), written to bench/results/."""
    path = RESULTS / "adult.draft.schema.yaml"
    done = subprocess.run([sys.executable, "-m", "dphist", "schema", str(ADULT_PARQUET)], capture_output=True,
                          text=True, check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(done.stdout)
    return path


def adult_case(source: Path, schema: Path, marginals: str) -> tuple[list[int], list[tuple[int, ...]], dict]:
    """The attributes' sizes and the marginals (index tuples) of ``marginals`` under ``schema``, and their true
    counts (by the release's own counting pass), keyed by the marginal's column names joined by '_'."""
    plan = plan_release(source, "1", schema, marginals=marginals, marginal_strategy="separate", seed=0)
    names = list(dict.fromkeys(c.name for shape in plan.shapes for c in shape.columns))
    sizes = {c.name: c.n_cells for shape in plan.shapes for c in shape.columns}
    needed = {c.name: c for shape in plan.shapes for c in shape.columns}
    counts = count_tables(plan.source.batches(needed), plan.shapes, plan.source.name)
    truth = {shape.name: c for shape, c in zip(plan.shapes, counts)}
    return ([sizes[n] for n in names], [tuple(names.index(c.name) for c in shape.columns) for shape in plan.shapes],
            truth)


def separate_figures(marginals: list[tuple[int, ...]], sizes: list[int], epsilon) -> tuple[float, float]:
    """(separate, separate + least squares): RMSE per cell over all the workload's cells of each marginal measured
    with discrete Laplace at ε/k, without and with the exact least squares of strategy separate."""
    k = len(marginals)
    variance = discrete_laplace_variance(Fraction(k) / Fraction(epsilon))
    errors = expected_errors(marginals, dict(enumerate(sizes)), [variance] * k)
    cells = sum(math.prod(sizes[i] for i in m) for m in marginals)
    return math.sqrt(variance), math.sqrt(sum(errors) / cells)


def pure_monte_carlo(sizes: list[int], marginals: list[tuple[int, ...]], rows: int, reps: int, epsilon=1,
                     seed: int = 11) -> dict:
    """``reps`` releases of the best Laplace plan at once (every table's exact discrete Laplace noise drawn
    ``reps`` times: dphist_audit's replicated budget) on random records: the RMSE per cell against the plan's
    closed form."""
    from dphist_audit.replication import ReplicatedBudget  # noqa: PLC0415

    plan, _ = best_plan(marginals, sizes, epsilon)
    codes = random_codes(rows, sizes, seed)
    truth = {m: true_marginal(codes, m, sizes) for m in plan.structure.marginals}
    t0 = time.perf_counter()
    measured = measure_laplace(plan, truth, ReplicatedBudget(Fraction(epsilon), SeededBits(seed), reps, []))
    rebuilt = reconstruct(plan.structure, measured)  # every release at once, on the leading axis
    seconds = time.perf_counter() - t0
    cells = sum(t.size for t in truth.values())
    mse = sum(((rebuilt[m] - truth[m]) ** 2).reshape(reps, -1).sum(axis=1) for m in truth) / cells
    rmse, se = monte_carlo(mse)
    return {"plan": plan.method, "closed_form": plan.rmse(epsilon), "monte_carlo": rmse, "se": se, "reps": reps,
            "cells": cells, "seconds": seconds}


def cli_release(schema: Path, marginals: str, strategy: str, seed: int, out: Path) -> tuple[float, dict]:
    """One `dphist release` process on Adult at ε = 1 (test mode): its wall seconds and the report."""
    args = [sys.executable, "-m", "dphist", "release", str(ADULT_PARQUET), "--epsilon", "1", "--schema", str(schema),
            "--marginals", marginals, "--seed", str(seed), "-o", str(out), "-q", "--overwrite"]
    if strategy != "auto":
        args += ["--marginal-strategy", strategy]
    t0 = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, json.loads((out / "report.json").read_text())


def pure(seeds: int = 10, reps: int = 20_000, api_seeds: int = 60) -> None:
    """Section marginals-pure: the Laplace plans' closed forms against separate with and without least squares at
    ε = 1, Monte Carlo against the closed form, and the CLI on Adult (auto against separate)."""
    import pandas as pd  # noqa: PLC0415

    started = time.perf_counter()
    path = RESULTS / "marginals_pure.jsonl"
    made_by = "python bench/marginals.py --pure"
    schema = draft_schema()
    records, lines = [], [
        "## Marginal sets under pure ε: the Laplace residual plans against separate", "",
        "ε = 1, RMSE per cell over all the workload's cells, exact (discrete Laplace variances of the exact "
        "shares; docs/algorithms.md §11.1).  *marginals*, *bases*, *combined*: the three plans "
        "(`plan_laplace`); *chosen*: `best_plan`, what `--marginal-strategy residual` (and auto, when lowest) "
        "runs; *separate*: each marginal at ε/k, no reconciliation; *separate + LS*: strategy separate's exact "
        "least squares (`expected_errors`); *zCDP at ρ = ½*: ResidualPlanner's closed form at the ρ an ε = 1 "
        "release also satisfies, for reference.  Adult: the issue's set with the sizes of the draft schema "
        "`dphist schema adult.parquet` writes, and with bench/adult.schema.yaml's.", "",
        "Regenerate: `OMP_NUM_THREADS=1 PYTHONPATH=. python bench/marginals.py --pure`.", "",
        "| workload | cells | marginals | bases | plan s | marginals | bases | combined | chosen | separate | "
        "separate + LS | chosen / sep. + LS | zCDP at ρ = ½ |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = list(PURE_CASES)
    for label, source, schema_path in (("Adult issue set (draft schema)", ADULT_PARQUET, schema),
                                       ("Adult issue set (bench schema)", ADULT_PARQUET, SCHEMA)):
        sizes, marginals, _ = adult_case(source, schema_path, ISSUE_SET)
        cases.append((f"{label}: sizes {sizes}", sizes, marginals))
    for label, sizes, marginals in cases:
        t0 = time.perf_counter()
        plan, totals = best_plan(marginals, sizes, 1)
        seconds = time.perf_counter() - t0
        cells = int(plan.structure.marginal_cells().sum())
        rmse = {m: math.sqrt(t / cells) for m, t in totals.items()}
        sep, sep_ls = separate_figures(marginals, sizes, 1)
        zcdp = plan_residuals(marginals, sizes).rmse(0.5)
        records.append({"workload": label, "cells": cells, "plan_seconds": seconds, "plans": rmse,
                        "chosen": plan.method, "separate": sep, "separate_ls": sep_ls, "zcdp_rho_half": zcdp,
                        "measured_tables": len(plan.tables)})
        shown = [f"{rmse[m]:.4f}" if m in rmse else "not built" for m in METHODS]
        lines.append(f"| {label} | {cells:,} | {len(marginals):,} | {len(plan.structure.bases):,} | {seconds:.2f} | "
                     f"{' | '.join(shown)} | {rmse[plan.method]:.4f} ({plan.method}, {len(plan.tables)} tables) | "
                     f"{sep:.4f} | {sep_ls:.4f} | {rmse[plan.method] / sep_ls:.3f} | {zcdp:.4f} |")
        print(lines[-1], flush=True)

    lines += ["", f"Monte Carlo: {reps:,} releases at once of the chosen plan on random records (every table's exact "
              "discrete Laplace noise drawn that many times, `dphist_audit`'s replicated budget, through "
              "`measure_laplace`), RMSE per cell of the rebuilt marginals (before rounding) against the closed "
              "form; ± one standard error.", "",
              "| workload | plan | cells | releases | closed form | Monte Carlo | difference | s |",
              "|---|---|---|---|---|---|---|---|"]
    for label, sizes, marginals, rows in (("all 3-way, 8 binary", [2] * 8, all_k_way(8, 3), 2_000),
                                          ("all 2-way, 6 × 4 values", [4] * 6, all_k_way(6, 2), 5_000)):
        mc = pure_monte_carlo(sizes, marginals, rows, reps)
        records.append({"monte_carlo": label, **mc})
        lines.append(f"| {label} | {mc['plan']} | {mc['cells']:,} | {reps:,} | {mc['closed_form']:.4f} | "
                     f"{mc['monte_carlo']:.4f} ± {mc['se']:.4f} | "
                     f"{100 * (mc['monte_carlo'] / mc['closed_form'] - 1):+.2f} % | {mc['seconds']:.1f} |")
        print(lines[-1], flush=True)

    sizes, marginals, truth = adult_case(ADULT_PARQUET, schema, ISSUE_SET)
    lines += ["", f"Through the CLI on Adult (adult.parquet, draft schema, `--epsilon 1 --marginals "
              f"\"{ISSUE_SET}\" --seed N`, seeds 1–{seeds}): RMSE per cell over all the set's cells against the "
              "true marginals, of the unbiased estimates (`noisy_count`) and of the released non-negative "
              "integers (`count`), and the wall seconds of each `dphist release` process (Python start-up "
              "included).  *expected*: the report's expected RMSE (a few seeds of 72 correlated cells: the "
              "in-process run below has the statistics).", "",
              "| strategy | plan | expected | noisy_count (√ mean over seeds) | count (√ mean over seeds) | "
              "s per release (median) |", "|---|---|---|---|---|---|"]
    cells = sum(t.size for t in truth.values())
    scratch = RESULTS / "pure_cli"
    for strategy in ("auto", "separate"):
        unbiased, released, seconds, expected, chosen = [], [], [], None, None
        for seed in range(1, seeds + 1):
            wall, report = cli_release(schema, ISSUE_SET, strategy, seed, scratch)
            seconds.append(wall)
            block = report["marginals"]
            chosen = block["strategy"] + (f" ({block['expected_error']['residual']['plan']})"
                                          if block["strategy"] == "residual" else "")
            expected = math.sqrt(block["expected_error"][block["strategy"]]["total"] / cells)
            noisy = count = 0.0
            for name, t in truth.items():
                frame = pd.read_csv(scratch / f"{name}.csv")
                noisy += float(((frame["noisy_count"].to_numpy(float) - t.ravel()) ** 2).sum())
                count += float(((frame["count"].to_numpy(float) - t.ravel()) ** 2).sum())
            unbiased.append(noisy / cells)
            released.append(count / cells)
        records.append({"cli": strategy, "chosen": chosen, "expected": expected, "noisy_mse": unbiased,
                        "count_mse": released, "seconds": seconds})
        lines.append(f"| {strategy} | {chosen} | {expected:.3f} | {math.sqrt(np.mean(unbiased)):.3f} | "
                     f"{math.sqrt(np.mean(released)):.3f} | {np.median(seconds):.2f} |")
        print(lines[-1], flush=True)
    lines += ["", f"The same in-process (`dphist.release`, seeds 1–{api_seeds}): the mean squared error per cell of "
              "`noisy_count` over the seeds, as an RMSE ± one standard error, against the report's expected RMSE.", "",
              "| strategy | expected | noisy_count | difference in standard errors | s per release (median) |",
              "|---|---|---|---|---|"]
    for strategy in ("residual", "separate"):
        mse, seconds = [], []
        for seed in range(1, api_seeds + 1):
            t0 = time.perf_counter()
            result = dphist.release(ADULT_PARQUET, "1", schema, marginals=ISSUE_SET, marginal_strategy=strategy,
                                    seed=seed)
            seconds.append(time.perf_counter() - t0)
            mse.append(sum(float(((t["noisy_count"].to_numpy(float) - truth[n].ravel()) ** 2).sum())
                           for n, t in result.tables.items()) / cells)
        expected = math.sqrt(result.report["marginals"]["expected_error"][strategy]["total"] / cells)
        rmse, se = monte_carlo(mse)
        records.append({"api": strategy, "expected": expected, "mse": mse, "seconds": seconds})
        lines.append(f"| {strategy} | {expected:.3f} | {rmse:.3f} ± {se:.3f} | {(rmse - expected) / se:+.1f} | "
                     f"{np.median(seconds):.2f} |")
        print(lines[-1], flush=True)
    lines += ["", f"Run took {(time.perf_counter() - started) / 60:.1f} min on a shared machine.  "
              + records_note(path, made_by)]
    write_records(path, records)
    replace_section("marginals-pure", "\n".join(lines))
    print("wrote bench/RESULTS.md (marginals-pure)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--optimum", action="store_true", help="write the marginals-optimum section")
    parser.add_argument("--scale", action="store_true", help="write the marginals-scale section")
    parser.add_argument("--scale-case", choices=sorted(SCALE_CASES), help=argparse.SUPPRESS)
    parser.add_argument("--coverage", action="store_true", help="write the marginals-coverage section")
    parser.add_argument("--pure", action="store_true", help="write the marginals-pure section")
    options = parser.parse_args()
    if options.scale_case:
        print(json.dumps(scale_case(options.scale_case)))
        return
    if options.optimum or options.scale or options.coverage or options.pure:
        for wanted, run in ((options.optimum, optimum), (options.scale, scale), (options.coverage, coverage),
                            (options.pure, pure)):
            if wanted:
                run()
        return
    runs = options.runs
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
