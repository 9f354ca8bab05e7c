"""The reference bar re-measured: the expected error of the reference algorithms that set the low-signal bar.

    .venv/bin/python bench/reference_bar.py             # 1-D and 2-D, scales 1e3 and 1e5 (about 5 minutes)
    .venv/bin/python bench/reference_bar.py --dims 2    # 2-D only (under a minute)
    .venv/bin/python bench/reference_bar.py --seeds 5   # fewer noise seeds (a quick look)

Why.  ../shared/data/dpbench/reference holds the reference implementation's (dpcomp_core) errors for its noise
seeds 0 and 1 only, the same two seeds for every data set and scale (the Identity rows show it: their error, which
depends on the noise alone, is the same on every data set).  A data set's bar, the least of eleven algorithms'
means, is then a least of samples of two draws each.  For an algorithm whose error is heavy-tailed that is no
estimate of its error at all: MWEM's seeds 0 and 1 both draw a positive noise (+113 and +116 records at 1e3) for
the first measured range, which on a table whose records sit in a few cells pushes mass the right way (seed 2
draws −592), and MWEM's published error there is a quarter to a half of its expected error.  DPCube, AGrid and
UGrid in 2-D ran with seed 0 alone.

How.  The reference algorithms that set the bar at low signal are written here again from their published
description (our code; the facts read from dpcomp_core), each drawing its randomness from
``numpy.random.RandomState(seed)`` in the reference's order: 1-D MWEM (``mwemND_engine``: T = 10 rounds, half of
ε for the selections, 100 replays of the multiplicative-weights update, the true N as its starting scale), EFPA
and Uniform (``uniform_noisy_engine``: the total plus Laplace noise of scale 1/ε, spread evenly); 2-D DPCube
(UGrid phase 1 on 11-cell blocks, then its k-d splits), AGrid and UGrid.  With the reference's own seeds they
reproduce the published numbers (the check column, *reference seeds ÷ published*: the samples are ours, not the
reference's, so only the noise is the same; EFPA's choice of coefficients is unseeded in the reference).  Run with
``--seeds`` noise seeds on the 4 fresh samples per data set that bench/low_signal.py runs auto on, their mean is
the algorithm's expected error: the bar as it should have been measured.  MWEM, AGrid and UGrid read the true N,
as the reference does: these are not private and exist only to measure the bar.

The records (``bench/results/reference-bar.jsonl``) feed bench/low_signal.py's second bar: the least, per data
set, of the reference algorithms' published means with the re-measured ones replaced by their expected errors.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dpbench import DATA, manifest  # noqa: E402
from records import read_records, write_records  # noqa: E402
from sections import replace_section  # noqa: E402

from dphist.evaluation import workloads  # noqa: E402
from dphist.evaluation.benchmark import benchmark_sample, load_histogram, workload_for  # noqa: E402

RECORDS = HERE / "results" / "reference-bar.jsonl"
SAMPLE_SEED = 2026  # bench/low_signal.py's fresh samples
SAMPLES = 4  # data samples per data set, the ones bench/low_signal.py runs auto on (each gets every noise seed)
EPSILON = 0.1
SCALES = [1_000, 100_000]  # where the targets are


def mwem(x: np.ndarray, epsilon: float, seed: int, rounds: int = 10, ratio: float = 0.5,
         replay: int = 100) -> np.ndarray:
    """The reference's MWEM on the prefix workload of a 1-D table ``x`` (float estimate of x's shape).

    Starts from the uniform table with the true total N (not private), then for each of ``rounds`` rounds: picks a
    prefix [0, h) not picked before by the exponential mechanism on |prefix(x − x̂)| at ε·ratio/rounds (weights
    exp(ε'·(score − max)/2), one uniform from ``RandomState(seed)`` inverted over the candidates in order), measures
    it with Laplace noise of scale rounds/(ε(1 − ratio)), and replays the multiplicative-weights update over every
    measurement so far ``replay`` times."""
    prng = np.random.RandomState(seed)
    n = x.size
    estimate = np.full(n, x.sum() / float(n))
    true_prefix = np.cumsum(x, dtype=np.float64)
    candidates = list(range(1, n + 1))  # prefix [0, h) for h = 1 … n, the workload's order
    measured: list[tuple[int, float]] = []
    select_eps, measure_eps = epsilon * ratio / rounds, epsilon * (1 - ratio)
    for _ in range(rounds):
        ends = np.asarray(candidates)
        scores = np.abs(true_prefix[ends - 1] - np.cumsum(estimate)[ends - 1])
        weights = np.exp(select_eps * (scores - scores.max()) / 2.0)
        u = prng.random_sample() * weights.sum()
        pick = min(int(np.searchsorted(np.cumsum(weights), u)), len(candidates) - 1)
        h = candidates.pop(pick)
        measured.append((h, true_prefix[h - 1] + prng.laplace(0.0, rounds / measure_eps, 1)[0]))
        for _ in range(replay):
            for end, answer in measured:
                total = estimate.sum()
                estimate[:end] *= np.exp((answer - estimate[:end].sum()) / (2.0 * total))
                estimate *= total / estimate.sum()
    return estimate


def _blocks(length: int, side: int) -> np.ndarray:
    """Edges of the reference's grid along one axis: runs of ``side`` cells from 0, the last one cut at the end."""
    return np.append(np.arange(0, length, side), length)


def _block_sums(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return np.add.reduceat(np.add.reduceat(x, rows[:-1], axis=0), cols[:-1], axis=1)


def _spread(values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Each block's value divided evenly over its cells."""
    area = np.outer(np.diff(rows), np.diff(cols))
    return np.repeat(np.repeat(values / area, np.diff(rows), axis=0), np.diff(cols), axis=1)


def ugrid(x: np.ndarray, epsilon: float, seed: int, side: int) -> np.ndarray:
    """The reference's UGrid with a given block side: every side × side block's count + Laplace(1/ε) (draws from
    ``RandomState(seed)`` block by block, row-major), spread evenly (float32 as the reference)."""
    prng = np.random.RandomState(seed)
    rows, cols = _blocks(x.shape[0], side), _blocks(x.shape[1], side)
    counts = _block_sums(x, rows, cols)
    noisy = counts + prng.laplace(0.0, 1.0 / epsilon, counts.size).reshape(counts.shape)
    return _spread(noisy, rows, cols).astype(np.float32)


def ugrid_reference(x: np.ndarray, epsilon: float, seed: int, c: float = 10.0) -> np.ndarray:
    """The reference's UGrid as it runs on its own: blocks of side ⌈√(r·c_cells/M)⌉ with M = Nε/c, from the TRUE N
    (not private)."""
    n, m = x.shape
    cells = x.sum() * epsilon / c
    return ugrid(x, epsilon, seed, max(int(np.sqrt(n * m / cells) - 1) + 1, 1))


def agrid(x: np.ndarray, epsilon: float, seed: int, c: float = 10.0, c2: float = 5.0,
          alpha: float = 0.5) -> np.ndarray:
    """The reference's AGrid: a first grid of m1 × m1 blocks, m1 = max(10, ⌈√(Nε/c)/4⌉) from the TRUE N (not
    private), measured at αε; inside each block a second grid of m2 × m2, m2 = ⌈√(noisy·(1 − α)ε/c2)⌉ (1 when the
    noisy count is not positive), measured at (1 − α)ε; the two levels combined by the reference's weights, spread
    evenly.  Draws from ``RandomState(seed)``: the first level's noise in one call, then per block in row-major
    order its second level's."""
    prng = np.random.RandomState(seed)
    n, m = x.shape
    m1 = max(int(np.sqrt(x.sum() * epsilon / c) / 4 - 1) + 1, 10)
    side = int(np.sqrt(n * m / m1 ** 2) - 1) + 1
    rows, cols = _blocks(n, side), _blocks(m, side)
    counts = _block_sums(x, rows, cols).ravel()
    noisy = counts + prng.laplace(0.0, 1.0 / (alpha * epsilon), counts.size)
    out = np.zeros(x.shape, dtype=np.float32)
    k = 0
    for i in range(rows.size - 1):
        for j in range(cols.size - 1):
            r0, r1, c0, c1 = rows[i], rows[i + 1], cols[j], cols[j + 1]
            m2 = 1 if noisy[k] <= 0 else int(np.sqrt(noisy[k] * (1 - alpha) * epsilon / c2) - 1) + 1
            side2 = max(int(np.sqrt((r1 - r0) * (c1 - c0) / m2 ** 2) - 1) + 1, 1)
            sub_rows, sub_cols = _blocks(r1 - r0, side2), _blocks(c1 - c0, side2)
            sub = _block_sums(x[r0:r1, c0:c1], sub_rows, sub_cols)
            sub_noisy = sub + prng.laplace(0.0, 1.0 / ((1 - alpha) * epsilon), sub.size).reshape(sub.shape)
            a, b = (alpha * m2) ** 2, (1 - alpha) ** 2
            combined = a / (b + a) * noisy[k] + b / (b + a) * sub_noisy.sum()
            adjusted = sub_noisy + (combined - sub_noisy.sum()) / sub.size
            out[r0:r1, c0:c1] = _spread(adjusted, sub_rows, sub_cols)
            k += 1
    return out


def dpcube(x: np.ndarray, epsilon: float, seed: int, side: int = 11, alpha: float = 0.5) -> np.ndarray:
    """The reference's DPCube in 2-D: UGrid with blocks of ``side`` cells at αε (its own ``RandomState(seed)``),
    then from the whole table down: a box is cut in two along its longer axis (the second on ties) at the first
    position of least SSE₁ + SSE₂ of the UGrid cells while that beats SSE + 1/ε₂ by more than 1/ε₂ (the cost
    SSE + 1/ε₂ per box, ε₂ = (1 − α)ε); a box that is not cut gets its true count + Laplace(1/ε₂), spread evenly,
    boxes in depth-first order (first half first), the draws from a second ``RandomState(seed)`` (as the
    reference: the two streams start alike)."""
    prng = np.random.RandomState(seed)
    first = ugrid(x, epsilon * alpha, seed, side).astype(np.float64)
    eps2 = (1 - alpha) * epsilon
    s1 = np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    s1[1:, 1:] = first.cumsum(0).cumsum(1)
    s2 = np.zeros_like(s1)
    s2[1:, 1:] = np.square(first).cumsum(0).cumsum(1)
    st = np.zeros_like(s1)
    st[1:, 1:] = x.astype(np.float64).cumsum(0).cumsum(1)

    def box(table, r0, r1, c0, c1):  # sums over rows r0..r1 − 1, columns c0..c1 − 1 (vectorised over arrays)
        return table[r1, c1] - table[r0, c1] - table[r1, c0] + table[r0, c0]

    def sse(r0, r1, c0, c1):
        return box(s2, r0, r1, c0, c1) - box(s1, r0, r1, c0, c1) ** 2 / ((r1 - r0) * (c1 - c0))

    out = np.zeros(x.shape, dtype=np.float32)
    stack = [(0, x.shape[0], 0, x.shape[1])]
    while stack:
        r0, r1, c0, c1 = stack.pop()
        whole = sse(r0, r1, c0, c1) + 1.0 / eps2
        if r1 - r0 > c1 - c0:
            k = np.arange(r0 + 1, r1)
            cost = sse(r0, k, c0, c1) + sse(k, r1, c0, c1) + 2.0 / eps2
            halves = lambda cut: [(cut, r1, c0, c1), (r0, cut, c0, c1)]  # noqa: E731
        else:
            k = np.arange(c0 + 1, c1)
            cost = sse(r0, r1, c0, k) + sse(r0, r1, k, c1) + 2.0 / eps2
            halves = lambda cut: [(r0, r1, cut, c1), (r0, r1, c0, cut)]  # noqa: E731
        if k.size and cost.min() < whole:
            stack += halves(int(k[int(np.argmin(cost))]))  # the second half pushed first: the first half runs first
            continue
        count = box(st, r0, r1, c0, c1) + prng.laplace(0.0, 1.0 / eps2)
        out[r0:r1, c0:c1] = count / ((r1 - r0) * (c1 - c0))
    return out


def efpa(x: np.ndarray, epsilon: float, seed: int) -> np.ndarray:
    """The reference's EFPA (its ``EFPA(x, 1, ε, prng)``): the unnormalised real DFT of x; with ε₁ = ε₂ = ε/2, the
    number of kept coefficients (k complex, K real numbers) chosen by the exponential mechanism at ε₁ with score
    −(√(energy dropped) + √2·K/ε₂) and score sensitivity 1; the kept magnitudes + Laplace(√K/ε₂) from
    ``RandomState(seed)``, phases kept, the rest zero; the inverse DFT.  The reference draws the choice from Python's
    unseeded ``random`` module, so here it comes from a second stream (``RandomState(seed + 10**6)``): only the
    Laplace draws are the reference's.  (As published it is not ε-DP: see dphist/algorithms/efpa.py.)"""
    prng, chooser = np.random.RandomState(seed), np.random.RandomState(seed + 10 ** 6)
    coeffs = np.fft.rfft(x)
    n, even = coeffs.size, x.size % 2 == 0
    power = np.abs(coeffs) ** 2
    weight = np.full(n, 2.0)
    weight[0] = 1.0
    if even:
        weight[-1] = 1.0
    kept_reals = np.cumsum(weight).astype(int)  # real numbers kept when the first j + 1 coefficients are kept
    dropped = np.maximum(np.sum(weight * power) - np.cumsum(weight * power), 0.0)
    score = -(np.sqrt(dropped) + np.sqrt(2) * kept_reals / (epsilon / 2))
    probability = np.exp(epsilon / 2 / 2.0 * (score - score.max()))
    u = chooser.random_sample() * probability.sum()
    j = min(int(np.searchsorted(np.cumsum(probability), u)), n - 1)
    scale = np.sqrt(kept_reals[j]) / (epsilon / 2)
    noisy = np.zeros_like(coeffs)
    noisy[:j + 1] = (np.abs(coeffs[:j + 1]) + prng.laplace(0.0, scale, j + 1)) * np.exp(1j * np.angle(coeffs[:j + 1]))
    return np.fft.irfft(noisy, x.size)


def uniform(x: np.ndarray, epsilon: float, seed: int) -> np.ndarray:
    """The reference's Uniform (``uniform_noisy_engine``, DPBench's "Uniform"): the total with Laplace noise of scale
    1/ε, one draw from ``RandomState(seed)``, spread evenly.  This is private (all of ε on the total); the
    reference's other, noiseless ``uniform_engine`` reads the true N and is not the one DPBench reports (its
    published errors differ between noise seeds on the same sample)."""
    total = x.sum() + np.random.RandomState(seed).laplace(0.0, 1.0 / epsilon, 1)[0]
    return np.full(x.shape, total / x.size)


def prefix_error(x: np.ndarray, estimate: np.ndarray) -> float:
    """DPBench's scaled prefix error: mean over the n prefixes of |true − estimate|, divided by the scale N."""
    return float(np.abs(np.cumsum(x, dtype=np.float64) - np.cumsum(estimate)).mean() / x.sum())


def published(dims: int) -> pd.DataFrame:
    """The reference's records at ε = 0.1 (status ok), with an ``error`` column."""
    column = "err_prefix" if dims == 1 else "err_dpbench2000"
    ref = pd.read_json(DATA / "reference" / f"full_{dims}d.jsonl", lines=True)
    ref = ref[(ref.status == "ok") & np.isclose(ref.eps, EPSILON)].copy()
    ref["error"] = ref[column]
    ref["scale"] = ref["scale"].astype(int)
    return ref


# What is re-measured: per dimension, the reference algorithms that set the bar at scales 1e3 and 1e5, and the noise
# seeds the reference ran them with (the check column).
ALGORITHMS = {1: {"MWEM": mwem, "EFPA": efpa, "Uniform": uniform},
              2: {"DPCube": dpcube, "AGrid": agrid, "UGrid": ugrid_reference}}
REFERENCE_SEEDS = {1: (0, 1), 2: (0,)}


def run(dims: int, seeds: int, progress=print, sample_seed: int = SAMPLE_SEED) -> list[dict]:
    """One record per (data set, scale, algorithm): its mean error over ``SAMPLES`` samples (drawn with
    ``sample_seed``) × ``seeds`` noise seeds, with the standard error, median and 90th percentile, and its mean
    with the reference's own seeds beside the published mean."""
    sets = {name: load_histogram(path) for name, (d, path) in manifest(quick=False).items() if d == dims}
    pub = published(dims).groupby(["dataset", "scale", "alg"])["error"].mean()
    check = list(REFERENCE_SEEDS[dims])
    records = []
    for index, (name, x) in enumerate(sets.items()):
        for scale in SCALES:
            samples = [benchmark_sample(x, scale, sample_seed, index, s).astype(np.float64) for s in range(SAMPLES)]
            for algorithm, release in ALGORITHMS[dims].items():
                errors = np.empty((SAMPLES, seeds))
                for s, sample in enumerate(samples):
                    for seed in range(seeds):
                        errors[s, seed] = error(sample, release(sample, EPSILON, seed))
                runs = errors.ravel()
                records.append({"dims": dims, "dataset": name, "scale": scale, "algorithm": algorithm,
                                "runs": int(runs.size), "mean": float(runs.mean()),
                                "se": float(runs.std(ddof=1) / np.sqrt(runs.size)), "median": float(np.median(runs)),
                                "p90": float(np.percentile(runs, 90)), "reference_seeds": check,
                                "with_reference_seeds": float(errors[:, check].mean()),
                                "published": float(pub.get((name, scale, algorithm), np.nan))})
        progress(f"{name}: done", flush=True)
    return records


def error(x: np.ndarray, estimate: np.ndarray) -> float:
    """DPBench's scaled error of an estimate: the prefixes in 1-D, the 2000 random rectangles in 2-D."""
    if x.ndim == 1:
        return prefix_error(x, estimate)
    return workloads.scaled_average_l1(workload_for(x.shape), x, estimate.astype(np.float64))


def remeasured(reference_means: pd.DataFrame, records: list[dict]) -> pd.DataFrame:
    """The bar with every re-measured algorithm's published mean replaced by its expected error.

    ``reference_means``: the published means, indexed by (scale, dataset), one column per reference algorithm.
    Returns (scale, dataset) → ``reference`` (the best algorithm) and ``reference_error`` (its error)."""
    means = reference_means.copy()
    for r in records:
        key = (int(r["scale"]), r["dataset"])
        if key in means.index and r["algorithm"] in means.columns:
            means.loc[key, r["algorithm"]] = r["mean"]
    return pd.DataFrame({"reference": means.idxmin(axis=1), "reference_error": means.min(axis=1)})


def table(records: list[dict], minutes: float | None) -> str:
    frame = pd.DataFrame(records)
    took = f" Last run took {minutes:.1f} min." if minutes is not None else ""
    lines = ["## The reference bar re-measured", "",
             "The reference implementation's published errors (../shared/data/dpbench/reference) come from its noise "
             "seeds 0 and 1 in 1-D and seed 0 alone in 2-D, the same for every data set and scale. The reference "
             "algorithms that set the low-signal bar, re-implemented from their published description and seeded as "
             "the reference (`bench/reference_bar.py`), are run with those seeds (the check: *reference seeds ÷ "
             "published* near 1; the samples are ours, only the noise is the reference's) and with many seeds: the "
             f"mean is the algorithm's expected error. {SAMPLES} fresh samples per data set (seed {SAMPLE_SEED}, as "
             "bench/low_signal.py) × the noise seeds. *expected ÷ published* above 1: the published mean is "
             "optimistic. MWEM, AGrid and UGrid read the true N, as in the reference (not private); Uniform "
             "spends all of ε on a noisy total, as the reference's (the check differs most where the error is the "
             "sample's: the samples are ours); EFPA's "
             "choice of coefficients comes from an unseeded generator in the reference, so its check cannot match "
             "exactly. ε = 0.1; 1-D: 4096 cells, prefix workload; 2-D: 256 × 256, 2000 random rectangles."
             f"{took}", ""]
    for (dims, scale, algorithm), group in frame.groupby(["dims", "scale", "algorithm"]):
        ratio = group["mean"] / group["published"]
        check = group["with_reference_seeds"] / group["published"]
        seeds = " and ".join(map(str, group["reference_seeds"].iloc[0]))
        lines += [f"### {dims}-D {algorithm}, scale {scale:,} ({int(group.runs.median())} runs per data set)", "",
                  f"Expected ÷ published: median {ratio.median():.2f}, range {ratio.min():.2f}–{ratio.max():.2f}. "
                  f"Check, reference seeds ÷ published: median {check.median():.2f}, range {check.min():.2f}–"
                  f"{check.max():.2f}.", "",
                  f"| data set | published (seed {seeds}) | ours, seed {seeds} | ÷ published | expected (mean ± se) | "
                  "÷ published | median | 90th percentile |", "|---|---|---|---|---|---|---|---|"]
        for _, r in group.iterrows():
            lines.append(f"| {r.dataset} | {r.published:.2e} | {r.with_reference_seeds:.2e} | "
                         f"{r.with_reference_seeds / r.published:.2f} | {r['mean']:.2e} ± {r.se:.1e} | "
                         f"{r['mean'] / r.published:.2f} | {r['median']:.2e} | {r.p90:.2e} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, choices=(1, 2), nargs="*", default=[1, 2])
    parser.add_argument("--seeds", type=int, default=20, help="noise seeds per sample (default 20)")
    parser.add_argument("--from-records", action="store_true", help="rewrite the section only")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"DPBench data not found at {DATA}")
    records = read_records(RECORDS, missing_ok=True)
    minutes = None
    if not args.from_records:
        if args.seeds < 2:
            raise SystemExit("--seeds must be at least 2 (the reference's own seeds are 0 and 1)")
        started = time.perf_counter()
        new = [r for dims in args.dims for r in run(dims, args.seeds)]
        minutes = (time.perf_counter() - started) / 60
        records = [r for r in records if r["dims"] not in args.dims] + new
        write_records(RECORDS, records)
    text = table(records, minutes)
    replace_section("reference-bar", text)
    print(text)


if __name__ == "__main__":
    main()
