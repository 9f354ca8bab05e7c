"""zCDP and the discrete Gaussian: what they cost and what they buy, measured side by side in one run.

    .venv/bin/python bench/zcdp.py            # a few minutes; part of `make bench`
    .venv/bin/python bench/zcdp.py --quick    # fewer runs

1. the exact discrete Gaussian sampler's speed (10^7 draws at σ = 10) beside our discrete Laplace in the same run;
2. Monte-Carlo average variance over all ranges of a 1-D domain, per unit σ² (σ² = Δ₂²/(2ρ), Δ₂ the strategy's L2
   sensitivity), against docs/algorithms.md §8's L2 columns;
3. identity's released noise variance against 1/(2ρ); the report's rho_spent; the (ε = 1, δ = 1e-6) conversion;
4. prefix-query error of hb and privelet against identity at ρ = 0.01 on a 4096-bin table;
5. OpenDP's Gaussian measurement on the same 4096-bin histogram at the same ρ: error and wall time;
6. the Adult marginal set {age×sex, sex×income, age×income, education_num×income} at (ε = 1, δ = 1e-6) with
   Gaussian noise against pure ε = 1 Laplace (needs ../shared/data/real/adult.csv).

Writes the `zcdp` section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sections import replace_section  # noqa: E402

import dphist  # noqa: E402
from dphist.algorithms import get_algorithm  # noqa: E402
from dphist.privacy import SeededBits, SystemBits, ZCDPBudget  # noqa: E402
from dphist.privacy.conversions import epsilon_for, rho_for  # noqa: E402
from dphist.privacy.samplers import discrete_gaussian, discrete_laplace  # noqa: E402

ADULT = HERE.parent.parent / "shared" / "data" / "real" / "adult.csv"
SCHEMA = HERE / "adult.schema.yaml"
ADULT_SET = "age,sex;sex,income;age,income;education_num,income"
#: docs/algorithms.md §8, L2 columns: average range variance per unit σ² (n = 1024, 4096)
TABLE_L2 = {"identity": (342, 1366), "h": (20.5, 28.6), "privelet": (18.7, 26.4)}


def sampler_speed(n: int) -> list[str]:
    bits = SystemBits()
    rows = []
    for name, draw in (("discrete Gaussian σ = 10 (σ² = 100)", lambda: discrete_gaussian(100, n, bits)),
                       ("discrete Gaussian σ = 1000", lambda: discrete_gaussian(10**6, n, bits)),
                       ("discrete Laplace scale 10", lambda: discrete_laplace(10, n, bits))):
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            draw()
            best = min(best, time.perf_counter() - t)
        rows.append(f"| {name} | {n:,} | {best:.2f} s | {n / best / 1e6:.2f} M/s |")
    return ["| sampler (OS CSPRNG) | draws | best of 3 | rate |", "|---|---|---|---|", *rows]


def mean_range_sq(errors: np.ndarray) -> np.ndarray:
    """Per run (rows), the mean squared error over all n(n+1)/2 ranges [i, j) of a 1-D error vector."""
    prefix = np.concatenate([np.zeros((errors.shape[0], 1)), np.cumsum(errors, axis=1)], axis=1)
    m = prefix.shape[1]
    total = m * np.sum(prefix**2, axis=1) - np.sum(prefix, axis=1) ** 2  # Σ_{i<j} (P_j − P_i)²
    return total / (m * (m - 1) / 2)


def per_unit_sigma2(name: str, n: int, runs: int, options: dict | None = None) -> tuple[float, float, dict]:
    """Average range variance per unit σ², i.e. times 2ρ: §8's L2 figures are Δ₂²·tr(W(AᵀA)⁻¹Wᵀ)/|W| with σ = Δ₂,
    and a strategy of L2 sensitivity Δ₂ run at ρ has σ² = Δ₂²/(2ρ).  Returns (mean, standard error, structure)."""
    rho = Fraction(1, 2)
    counts = np.zeros(n, dtype=np.int64)
    per_run, structure = np.empty(runs), {}
    for r in range(runs):
        estimate = get_algorithm(name, **(options or {})).run(counts, ZCDPBudget(rho, bits=SeededBits(1000 + r)))
        per_run[r] = mean_range_sq(np.asarray(estimate.values, dtype=np.float64).reshape(1, n))[0] * 2 * float(rho)
        structure = estimate.structure
    return float(per_run.mean()), float(per_run.std(ddof=1) / math.sqrt(runs)), structure


def range_table(runs: int) -> list[str]:
    lines = ["| strategy | n | ours per unit σ² (± s.e.) | docs/algorithms.md §8 | ratio |", "|---|---|---|---|---|"]
    for name, options in (("identity", None), ("h", None), ("privelet", {"small_axis": 0, "weights": "uniform"}),
                          ("hb", None), ("privelet", {"small_axis": 0})):
        for k, n in enumerate((1024, 4096)):
            try:  # identity's average is dominated by a few long ranges: it needs many more runs (cheap ones)
                value, se, structure = per_unit_sigma2(name, n, runs * (10 if name == "identity" else 1), options)
            except Exception as exc:  # an option another version lacks: say so in the table
                lines.append(f"| {name} {options or ''} | {n} | not run: {exc} | | |")
                continue
            ref = TABLE_L2.get(name) if not options or options.get("weights") == "uniform" else None
            label = name + (f" (b = {structure.get('branching')})" if "branching" in structure else "") + \
                (f" weights {structure.get('weights')}" if "weights" in structure else "")
            lines.append(f"| {label} | {n} | {value:.2f} ± {se:.2f} | {ref[k] if ref else '–'} | "
                         f"{value / ref[k]:.3f} |" if ref else f"| {label} | {n} | {value:.2f} ± {se:.2f} | – | – |")
    return lines


def identity_noise(cells: int) -> list[str]:
    rho = Fraction(1, 100)
    budget = ZCDPBudget(rho, bits=SeededBits(7))
    counts = np.full(cells, 50, dtype=np.int64)
    estimate = get_algorithm("identity").run(counts, budget)
    noise = np.asarray(estimate.values) - counts
    target = 1 / (2 * float(rho))
    var = float(noise.var())
    conv = rho_for(1, Fraction(1, 10**6))
    loose = (math.sqrt(math.log(1e6) + 1) - math.sqrt(math.log(1e6))) ** 2
    return [f"- identity at ρ = 0.01 on {cells:,} cells: released noise variance {var:.3f} against 1/(2ρ) = "
            f"{target:.0f} (ratio {var / target:.4f}); spent ρ = {budget.spent} exactly.",
            f"- (ε = 1, δ = 1e-6) → ρ = {conv} ({float(conv):.6f}) by the tight conversion; the loose one "
            f"(ε = ρ + 2√(ρ ln 1/δ)) gives {loose:.6f} ({float(conv) / loose:.3f}×); that ρ implies ε = "
            f"{epsilon_for(conv, 1e-6):.6f} at δ = 1e-6."]


def prefix_errors(runs: int) -> list[str]:
    rng = np.random.default_rng(3)
    counts = rng.poisson(rng.gamma(0.5, 40, size=4096)).astype(np.int64)
    truth = np.cumsum(counts)
    rho = Fraction(1, 100)
    lines = ["| algorithm | RMS prefix error at ρ = 0.01, n = 4096 | against identity |", "|---|---|---|"]
    base = None
    for name in ("identity", "hb", "privelet", "h"):
        errors = []
        for r in range(runs):
            estimate = get_algorithm(name).run(counts, ZCDPBudget(rho, bits=SeededBits(50 + r)))
            errors.append(np.mean((np.cumsum(estimate.values) - truth) ** 2))
        rms = math.sqrt(float(np.mean(errors)))
        base = base or rms
        lines.append(f"| {name} | {rms:.1f} | {rms / base:.3f} |")
    return lines


def opendp_side_by_side(repeat: int) -> list[str]:
    try:
        import opendp.prelude as dp
    except ImportError:
        return ["- OpenDP is not installed: side-by-side skipped."]
    dp.enable_features("contrib")
    rng = np.random.default_rng(5)
    counts = rng.poisson(30, size=4096).astype(np.int64)
    rho = Fraction(1, 200)  # σ = 10 for Δ₂ = 1
    space = (dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l2_distance(T=dp.i64))
    meas = space >> dp.m.then_gaussian(scale=10.0)
    assert abs(meas.map(1) - float(rho)) < 1e-12
    as_list = counts.tolist()
    ours_t, theirs_t, ours_e, theirs_e = [], [], [], []
    for r in range(repeat):
        t = time.perf_counter()
        ours = get_algorithm("identity").run(counts, ZCDPBudget(rho, bits=SystemBits())).values
        ours_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs = np.asarray(meas(as_list))
        theirs_t.append(time.perf_counter() - t)
        ours_e.append(np.sqrt(np.mean((ours - counts) ** 2)))
        theirs_e.append(np.sqrt(np.mean((theirs - counts) ** 2)))
    return ["| 4096-bin histogram, ρ = 0.005 (σ = 10) | RMS error per cell | wall time (median) |", "|---|---|---|",
            f"| dphist identity (exact discrete Gaussian, OS CSPRNG) | {np.mean(ours_e):.3f} | "
            f"{np.median(ours_t) * 1e3:.1f} ms |",
            f"| OpenDP `then_gaussian` (i64 vector, discrete Gaussian) | {np.mean(theirs_e):.3f} | "
            f"{np.median(theirs_t) * 1e3:.1f} ms |",
            f"| ratio (OpenDP / dphist) | {np.mean(theirs_e) / np.mean(ours_e):.3f} | "
            f"{np.median(theirs_t) / np.median(ours_t):.1f}× |"]


def adult_marginals(runs: int) -> list[str]:
    if not ADULT.is_file():
        return ["- Adult table not found: the marginal-set comparison is skipped."]
    from dphist.api import plan_release
    from dphist.read.counting import count_tables
    plan = plan_release(ADULT, "1", SCHEMA, marginals=ADULT_SET, marginal_strategy="separate", seed=0)
    needed = {c.name: c for shape in plan.shapes for c in shape.columns}
    truth = {s.name: c.ravel() for s, c in zip(plan.shapes, count_tables(plan.source.batches(needed), plan.shapes,
                                                                         plan.source.name))}
    lines = ["| budget | strategy | RMS error per cell (unbiased) | RMS error (released integers) |",
             "|---|---|---|---|"]
    for label, kwargs in (("pure ε = 1, Laplace", {"epsilon": "1"}),
                          ("(ε = 1, δ = 1e-6), Gaussian", {"epsilon": "1", "delta": "1e-6", "noise": "gaussian"})):
        for strategy in ("separate", "full", "auto"):
            noisy_err, count_err, chosen = [], [], None
            for r in range(runs):
                release = dphist.release(ADULT, schema=SCHEMA, marginals=ADULT_SET, marginal_strategy=strategy,
                                         seed=100 + r, **kwargs)
                chosen = release.report.get("marginals", {}).get("strategy", strategy)
                for name, frame in release.tables.items():
                    noisy_err.append(np.mean((frame["noisy_count"].to_numpy() - truth[name]) ** 2))
                    count_err.append(np.mean((frame["count"].to_numpy() - truth[name]) ** 2))
            lines.append(f"| {label} | {strategy if strategy != 'auto' else f'auto → {chosen}'} | "
                         f"{math.sqrt(np.mean(noisy_err)):.2f} | {math.sqrt(np.mean(count_err)):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 400 if args.quick else 2000
    started = time.perf_counter()
    parts = {
        "Sampler speed": sampler_speed(10**6 if args.quick else 10**7),
        "Average range variance per unit σ² (all ranges, 1-D)": range_table(runs // 2 if args.quick else runs),
        "Identity noise and the conversion": identity_noise(200_000),
        "Prefix error at ρ = 0.01": prefix_errors(20 if args.quick else 50),
        "Beside OpenDP": opendp_side_by_side(5 if args.quick else 20),
        "Adult marginal set": adult_marginals(5 if args.quick else 20),
    }
    lines = ["## zCDP and the discrete Gaussian", "",
             f"Measured by `bench/zcdp.py{' --quick' if args.quick else ''}` in {time.perf_counter() - started:.0f} s "
             "(test-mode seeds for accuracy; the OS CSPRNG for speed).", ""]
    for title, body in parts.items():
        lines += [f"### {title}", "", *body, ""]
    text = "\n".join(lines)
    print(text)
    replace_section("zcdp", text)


if __name__ == "__main__":
    main()
