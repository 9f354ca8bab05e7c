"""The accuracy benchmark (DPBench protocol, Hay et al. SIGMOD 2016), for our data sets or a steward's own.

For every data set, scale, ε and algorithm: normalise the histogram to a distribution, draw ``scale`` records
from it (``samples`` data seeds; :func:`sample_from_shape`), run the algorithm (``runs`` noise seeds per sample) and score the released
table by the scaled average per-query L1 error ‖Wx − Wx̂‖₁ / (|W| · scale) on the prefix workload (1-D) or 2000
random boxes (2-D, seed 0; identity queries beyond 2-D).  Noise is seeded: benchmark outputs are not private.

Summaries per setting (dimensions, scale, ε): each algorithm's median error, its regret (error ÷ the best
algorithm's error on the same data set, averaged over data sets) and its median run time.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from . import workloads
from ..algorithms import get_algorithm
from ..errors import DataError
from ..inference.nonnegative import nonnegative_integer_table
from ..privacy import PrivacyBudget, SeededBits
from ..text import quoted

__all__ = ["load_histogram", "workload_for", "cell_error", "marginal_error", "sample_from_shape", "benchmark_sample",
           "run_benchmark", "summarize", "derived_seed"]


def load_histogram(path: str | Path) -> np.ndarray:
    """A count histogram from ``.npy`` (any dimension) or CSV (numbers only: one column = 1-D, a grid = 2-D)."""
    path = Path(path)
    try:
        if path.suffix.lower() == ".npy":
            x = np.load(path, allow_pickle=False)
        else:
            x = pd.read_csv(path, header=None).to_numpy(dtype=np.float64)
            x = x.ravel() if x.shape[1] == 1 else x
    except (OSError, ValueError) as exc:
        raise DataError(f"{quoted(path, '')}: not a histogram of counts ({type(exc).__name__})") from None
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0) or x.sum() <= 0:
        raise DataError(f"{quoted(path, '')}: a histogram needs finite, non-negative counts with a positive total")
    return np.rint(x).astype(np.int64)


def workload_for(shape: tuple[int, ...]) -> workloads.Workload:
    """The DPBench range workload of a table of ``shape``: the prefixes (1-D), 2000 random boxes (2-D), else the
    cells."""
    if len(shape) == 1:
        return workloads.prefix(shape[0])
    if len(shape) == 2:
        return workloads.random_boxes(shape, 2000, seed=0)
    return workloads.identity(shape)


def cell_error(x: np.ndarray, x_hat: np.ndarray) -> float:
    """The scaled average L1 error of the single cells: Σ|x − x̂| / (cells · N), N = x.sum() (1 if 0)."""
    records = float(x.sum()) or 1.0
    return float(np.abs(np.asarray(x, dtype=np.float64) - x_hat).mean() / records)


def marginal_error(x: np.ndarray, x_hat: np.ndarray) -> float:
    """The scaled average L1 error of the one-way marginals (each axis's cells summed over the other axes; the
    cells themselves for one axis): Σ over the marginals' cells of |error| / (their number · N)."""
    if x.ndim == 1:
        return cell_error(x, x_hat)
    diff = np.asarray(x, dtype=np.float64) - x_hat
    parts = [np.abs(diff.sum(axis=tuple(a for a in range(x.ndim) if a != k))) for k in range(x.ndim)]
    records = float(x.sum()) or 1.0
    return float(sum(p.sum() for p in parts) / (sum(p.size for p in parts) * records))


def sample_from_shape(x, scale: int, seed) -> np.ndarray:
    """DPBench's data protocol: a table of ``scale`` records drawn as Multinomial(scale, x / x.sum()).

    ``x`` is a non-negative array with a positive sum (a shape, not necessarily counts); the result is an int64
    array of the same shape summing to ``scale``, drawn with ``np.random.default_rng(seed)``.  Cells where x is
    zero stay exactly zero.
    """
    x = np.asarray(x, dtype=np.float64)
    if int(scale) != scale or scale < 0:
        raise ValueError(f"scale must be a non-negative integer, got {scale}")
    if not np.all(np.isfinite(x)) or np.any(x < 0) or not x.sum() > 0:
        raise ValueError("x must be finite and non-negative with a positive sum")
    flat = x.ravel()
    support = np.flatnonzero(flat)
    # Drawing over the support only: numpy hands the last category whatever rounding leaves over, which could
    # otherwise put a record in a zero cell.  numpy draws nothing for a zero-probability category, so apart from
    # that rounding case this is the same draw as over the full table.
    counts = np.random.default_rng(seed).multinomial(int(scale), flat[support] / flat[support].sum())
    out = np.zeros(flat.size, dtype=np.int64)
    out[support] = counts
    return out.reshape(x.shape)


def benchmark_sample(x: np.ndarray, scale: int, seed: int, dataset_index: int, sample: int) -> np.ndarray:
    """The ``sample``-th table of ``scale`` records that :func:`run_benchmark` draws from data set number
    ``dataset_index`` (its position among the data sets passed) with ``seed``: the same records for every caller."""
    return sample_from_shape(x, scale, seed=derived_seed(seed, dataset_index, scale, sample))


def run_benchmark(datasets: dict[str, np.ndarray], algorithms: list[str], scales: list[int],
                  epsilons: list[str], samples: int = 5, runs: int = 2, seed: int = 0, progress=None,
                  options=None, first_index: int = 0) -> list[dict]:
    """One record per (data set, scale, ε, algorithm, sample, run): the released table's errors on the ranges of
    :func:`workload_for` (``error``; ``error_gls`` for the least-squares estimate), on the single cells
    (``error_cells``) and on the one-way marginals (``error_marginals``), and the seconds the algorithm took
    (noise, inference and post-processing).  ``options(name, scale, ε)``, if given, returns an algorithm's options
    for a scale and ε (public policy numbers such as a cap, auto's workload, or the options auto runs it with).
    ``first_index``: the number of the first data set (they are numbered in order from it; the number seeds their
    samples and noise), so a data set run alone draws what it drew among others."""
    records = []
    for d_index, (name, x) in enumerate(datasets.items(), start=first_index):
        W = workload_for(x.shape)
        for scale in scales:
            for s in range(samples):
                sample = benchmark_sample(x, scale, seed, d_index, s)
                for e_index, eps_text in enumerate(epsilons):
                    eps = Fraction(eps_text)
                    for algo_name in algorithms:
                        algo = get_algorithm(algo_name, **(options(algo_name, scale, eps) if options else {}))
                        for r in range(runs):
                            # The same noise stream for every algorithm in a cell (common random numbers).
                            bits = SeededBits(derived_seed(seed, d_index, scale, s, e_index, r))
                            start = time.perf_counter()
                            est = algo.run(sample, PrivacyBudget(eps, bits=bits))
                            released = est.integers() if est.integers else nonnegative_integer_table(est.values,
                                                                                                     est.total)
                            seconds = time.perf_counter() - start
                            records.append({
                                "dataset": name, "dims": x.ndim, "cells": int(x.size), "scale": scale,
                                "epsilon": eps_text, "algorithm": algo_name, "sample": s, "run": r,
                                "error": workloads.scaled_average_l1(W, sample, released),
                                "error_cells": cell_error(sample, released),
                                "error_marginals": marginal_error(sample, released),
                                "error_gls": workloads.scaled_average_l1(W, sample, est.values),
                                "seconds": seconds,
                                "chosen": est.choices.get("algorithm_choice", {}).get("chosen", algo_name),
                            })
                if progress:
                    progress(name, scale, s)
    return records


def summarize(records: list[dict]) -> str:
    """Markdown tables, one per (dimensions, scale, ε): median error, mean regret, median seconds."""
    frame = pd.DataFrame(records)
    lines = []
    for (dims, scale, eps), group in frame.groupby(["dims", "scale", "epsilon"], sort=True):
        per_data = group.groupby(["dataset", "algorithm"])["error"].mean().unstack()
        regret = per_data.div(per_data.min(axis=1), axis=0).mean()
        median = group.groupby("algorithm")["error"].median()
        median_gls = group.groupby("algorithm")["error_gls"].median()
        seconds = group.groupby("algorithm")["seconds"].median()
        lines += [f"#### {dims}-D, scale {scale:,}, ε = {eps} ({per_data.shape[0]} data sets)", "",
                  "| algorithm | median error | median error, least squares only | regret | ms per run |",
                  "|---|---|---|---|---|"]
        for algo in regret.sort_values().index:
            lines.append(f"| {algo} | {median[algo]:.3e} | {median_gls[algo]:.3e} | {regret[algo]:.2f} | "
                         f"{1000 * seconds[algo]:.1f} |")
        lines.append("")
    return "\n".join(lines)


def derived_seed(*parts: int) -> int:
    """A reproducible seed from integers (Python's hash() of strings changes between processes)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])
