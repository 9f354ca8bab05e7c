"""The expected error of a released table on single cells and on ranges, for the report: public facts only.

A steward publishes a table for some questions (its workload: ranges, single cells or one-way marginals) and
its readers deserve to know how far off an answer may be, whichever algorithm ran.  Two kinds of figure, both
computed without reading the data again (so they cost nothing):

* **Identity**: exact, in closed form (:func:`identity_errors`): every cell's noise is independent with the
  stated distribution, a range's error the sum over its cells.
* **Other data-independent algorithms** (H, Hb, the quadtree, Privelet): their unbiased estimate is the true
  table plus noise that does not depend on the data, so its error is the error of a release of the all-zero
  table.  :func:`noise_errors` runs the algorithm on zeros ``repeats`` times, at the same budget, and measures
  the root mean squared and mean absolute error of every cell and of ``RANGE_QUERIES`` random ranges (random
  boxes along ordered columns, one category along categorical ones; none for a table of categorical columns
  only, where a range is one cell), in records.  This is the error before
  non-negativity and rounding (which usually lower it on sparse tables); it is exact up to the simulation's
  sampling error, stated with it (``rms_relative_se``, from the spread between runs).  The simulation's noise is
  seeded: it is a computation about the mechanism, not a release of data.
* **Data-adaptive algorithms** (DAWA, DPCube, PrivTree, MWEM, ...): the error depends on the data through the
  structure they choose and the bias of spreading a count evenly over a bucket, so no data-free figure exists.
  :func:`typical_errors` gives the algorithm's median error on the DPBench data sets at the table's dimension,
  nearest domain size and signal decade (``auto_rules.TYPICAL``, measured by bench/auto_rules.py), as a fraction
  of the records, times the released total (a DP output, so free).  It is typical, not a bound.

Beside the cells' mean absolute error, ``mean_abs_relative`` gives it as a share of the mean released cell count
(the released total over the cells), so that a reader sees 10 records of error against cells of 4,000 or of 20.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import workloads
from ..inference.measurements import total_measurement
from ..privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_pmf, discrete_gaussian_variance,
                       discrete_laplace_variance, per_row_epsilon_like)

__all__ = ["noise_errors", "identity_errors", "typical_errors", "expected_errors", "range_workload", "ordered_axes",
           "MAX_SIMULATED_CELLS"]

RANGE_QUERIES = 2000
#: Tables above this many cells get no simulated figure (the simulation runs the algorithm ``repeats`` times).
MAX_SIMULATED_CELLS = 1 << 16
_SEED = 20261124  # any fixed seed: the figure is about the mechanism, not the data


def range_workload(shape: tuple[int, ...], ordered: list[bool], count: int = RANGE_QUERIES) -> workloads.Workload:
    """``count`` random boxes over ``shape`` (seeded, public): along an ordered axis a uniformly random interval,
    as the DPBench protocol draws them; along a categorical axis (``ordered[k]`` False) a single category."""
    rng = np.random.default_rng(_SEED)
    lo = np.empty((count, len(shape)), dtype=np.int64)
    hi = np.empty_like(lo)
    for k, n in enumerate(shape):
        side = rng.integers(1, n, size=count, endpoint=True) if ordered[k] else np.ones(count, dtype=np.int64)
        lo[:, k] = rng.integers(0, n - side, endpoint=True)
        hi[:, k] = lo[:, k] + side
    return workloads.from_boxes(shape, lo, hi, name=f"{count} random ranges")


def _summary(errors: list[np.ndarray]) -> dict:
    """RMS and mean absolute error over all runs' errors, and the RMS's relative standard error from the spread
    of the runs' mean squared errors (the queries of one run share noise, so the runs are the independent
    samples): se(RMS)/RMS ≈ ½·sd(run MSE)/(mean MSE·√runs)."""
    mse = np.array([np.mean(np.square(e)) for e in errors])
    se = 0.5 * float(mse.std(ddof=1)) / (float(mse.mean()) * len(mse) ** 0.5) if len(mse) > 1 and mse.mean() else 0.0
    return {"rms": round(float(np.sqrt(mse.mean())), 4),
            "mean_abs": round(float(np.mean([np.mean(np.abs(e)) for e in errors])), 4),
            "rms_relative_se": round(se, 4)}


def noise_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int = 1,
                 repeats: int | None = None, total_amount: Fraction | None = None) -> dict:
    """The error of ``algorithm``'s unbiased estimate on single cells and on :func:`range_workload`'s ranges,
    from ``repeats`` runs on the all-zero table at ``amount`` (ε under "pure", ρ otherwise) for a protected group
    of ``factor`` rows: ``{"cells": {"rms", "mean_abs"}, "ranges": {...}, "basis": ...}``, in records.  Only for
    data-independent algorithms (their error is the same on every table).  ``total_amount`` (pure ε): each run
    also measures the total at that ε and refits the estimate with it (``Algorithm.refit``), as auto does
    with its N̂.  Reads no data."""
    cells = math.prod(shape)
    if repeats is None:  # about 2^16 simulated cells in all, 8 to 64 runs (well under a second)
        repeats = int(min(64, max(8, (1 << 16) // max(cells, 1))))
    ordered = ordered_axes(columns, len(shape))
    ranges = range_workload(tuple(shape), ordered) if any(ordered) else None
    zeros = np.zeros(shape, dtype=np.int64)
    budget_type = PrivacyBudget if definition == "pure" else ZCDPBudget
    if total_amount is not None and definition != "pure":
        raise ValueError("a noisy total is refitted only under pure ε (auto measures none under zCDP)")
    cell_errors, range_errors = [], []
    for r in range(repeats):
        if total_amount is None:
            estimate = algorithm.run(zeros, budget_type(amount, bits=SeededBits(_SEED + r), factor=factor), columns)
        else:
            whole = PrivacyBudget(total_amount + amount, bits=SeededBits(_SEED + r), factor=factor)
            for_total, rest = whole.split([total_amount, amount])
            total, record = for_total.laplace(np.asarray(0), 1, for_total.amount, "the total", composition="one query")
            estimate = algorithm.run(zeros, rest, columns)
            refitted = algorithm.refit(estimate, total_measurement(float(total), record.noise_variance))
            estimate = estimate if refitted is None else refitted
        values = np.asarray(estimate.values, dtype=np.float64)
        cell_errors.append(values.ravel())
        if ranges is not None:
            range_errors.append(ranges.answer(values))
    refit = ", each refitted with a noisy total as auto does" if total_amount is not None else ""
    where = (f"ranges: {ranges.size} random boxes along ordered columns, one category along categorical ones"
             if ranges is not None else "no ranges: every column is categorical, so a range is a single cell")
    return {"cells": _summary(cell_errors), **({"ranges": _summary(range_errors)} if ranges is not None else {}),
            "basis": f"exact noise of the unbiased estimate (before non-negativity and rounding), simulated: "
                     f"{repeats} runs of the algorithm on an all-zero table at the same budget{refit}; {where}"}


def ordered_axes(columns, dimensions: int) -> list[bool]:
    """Per axis, whether a range along it means an interval (an ordered column, or a categorical one with a
    hierarchy) rather than a single category."""
    return [not (getattr(c, "kind", None) == "categorical" and not getattr(c, "hierarchy", None))
            for c in (columns or [None] * dimensions)]


def identity_errors(record, shape: tuple[int, ...], columns) -> dict:
    """Identity's error in closed form, from its measurement ``record`` (discrete Laplace of scale b, or discrete
    Gaussian of parameter σ², on every cell alike): a cell's error is one noise Z, so its RMS is √Var Z and its mean
    absolute error E|Z|; a range of k cells errs by the sum S of k independent noises, RMS √(k·Var Z) exactly and

        E|S| = (1/π) ∫₀^π (1 − φ(t)^k) / (1 − cos t) dt,

    an identity for integer-valued S (|s| = (1/2π)∫ (1 − cos st)/(1 − cos t) dt over a period) with φ the noise's
    characteristic function: (1 − a)²/(1 − 2a·cos t + a²), a = e^(−1/b), for the discrete Laplace; the θ-function
    ratio Σ_m exp(−σ²(t + 2πm)²/2) / Σ_m exp(−σ²(2πm)²/2) for the discrete Gaussian.  The integral is taken by
    Gauss–Legendre to far below the printed digits (checked against the Laplace's E|Z| = 2a/(1 − a²)), so every
    printed digit is exact.  Same keys as :func:`noise_errors`."""
    ordered = ordered_axes(columns, len(shape))
    log_phi, variance = _noise_law(record)
    cells = {"rms": round(math.sqrt(variance), 4), "mean_abs": round(float(_mean_abs([1], log_phi, variance)[0]), 4)}
    out = {"cells": cells}
    where = "no ranges: every column is categorical, so a range is a single cell"
    if any(ordered):
        ranges = range_workload(tuple(shape), ordered)
        lo, hi = (np.asarray(a) for a in ranges.boxes())
        sizes = np.prod(hi - lo, axis=1)
        distinct, counts = np.unique(sizes, return_counts=True)
        mean_abs = _mean_abs(distinct, log_phi, variance)
        out["ranges"] = {"rms": round(math.sqrt(float(np.mean(sizes)) * variance), 4),
                         "mean_abs": round(float(np.dot(mean_abs, counts) / counts.sum()), 4)}
        where = f"ranges: {ranges.size} random boxes along ordered columns, one category along categorical ones"
    return {**out, "basis": "exact, in closed form: the noise of every cell is independent with the stated "
                            f"distribution, a range's error the sum over its cells; {where}"}


def _noise_law(record) -> tuple:
    """log φ(t) on [0, π] (vectorised, stable for scales far from 1) and Var Z for ``record``'s noise."""
    if record.sigma2 is None:  # discrete Laplace of scale b
        a = math.exp(-1 / float(record.scale))
        return (lambda t: -np.log1p(4 * a * np.sin(t / 2) ** 2 / (1 - a) ** 2)), discrete_laplace_variance(record.scale)
    s2 = float(record.sigma2)
    if s2 >= 1:  # Poisson summation: the images at t ± 2π are all that count on [0, π] (the rest < e^(-8π²))
        def log_phi(t):
            images = np.exp(-s2 * ((2 * math.pi - t) ** 2 - t * t) / 2) + np.exp(-s2 * ((2 * math.pi + t) ** 2 - t * t) / 2)
            return -s2 * t * t / 2 + np.log1p(images) - math.log1p(2 * math.exp(-2 * math.pi ** 2 * s2))
    else:  # φ(t) = 1 − 4 Σ_k p(k) sin²(kt/2) over k ≥ 1, summed without cancelling near t = 0
        k = np.arange(1, int(12 * math.sqrt(s2)) + 3)
        pk = discrete_gaussian_pmf(k, s2)

        def log_phi(t):
            return np.log1p(-4 * (np.sin(np.multiply.outer(t, k) / 2) ** 2 @ pk))
    return log_phi, discrete_gaussian_variance(record.sigma2)


def _mean_abs(sizes, log_phi, variance: float) -> np.ndarray:
    """E|S_k| for each k in ``sizes`` (the formula of :func:`identity_errors`), with 1 − cos t = 2 sin²(t/2) and
    1 − φ^k = −expm1(k log φ) so that no digit is lost near t = 0.  Composite 12-point Gauss–Legendre over
    intervals growing geometrically (ratio 1.17) from t₀ = 10⁻³/(sd·√k_max), where the integrand's features sit,
    to π; below t₀ the integrand is k·Var Z to a relative 10⁻⁶, integrated as such."""
    k = np.asarray(sizes, dtype=np.float64)
    start = 1e-3 / (math.sqrt(variance) * math.sqrt(float(k.max())) + 1e-300)
    start = min(start, 1e-3)
    edges = np.geomspace(start, math.pi, max(int(math.log(math.pi / start) / math.log(1.17)), 8) + 1)
    nodes, weights = np.polynomial.legendre.leggauss(12)
    half = (edges[1:] - edges[:-1]) / 2
    t = ((edges[1:] + edges[:-1]) / 2)[:, None] + half[:, None] * nodes  # (intervals, 12)
    w = (half[:, None] * weights).ravel()
    t = t.ravel()
    integrand = -np.expm1(np.multiply.outer(k, log_phi(t))) / (2 * np.sin(t / 2) ** 2)
    return (integrand @ w + k * variance * start) / math.pi


def typical_errors(name: str, shape: tuple[int, ...], released_total: float, epsilon_like: float) -> dict | None:
    """``name``'s median error on the DPBench data sets at the nearest learned setting (dimension, domain size,
    signal decade of released_total × epsilon_like), scaled to ``released_total`` records: ``{"cells":
    {"mean_abs"}, "ranges": {"mean_abs"}, "basis"}``, or None where the grid has no figure for it."""
    from ..algorithms.auto.rules import TYPICAL  # noqa: PLC0415  (a large generated table: loaded when needed)
    from ..algorithms.auto.choice import nearest_rule  # noqa: PLC0415
    total = max(float(released_total), 1.0)
    signal = total * float(epsilon_like)
    try:
        _, _, _, key, dec = nearest_rule({k: {d: ("", 0, 0) for d in v} for k, v in TYPICAL.items()},
                                         len(shape), math.prod(shape), signal)
    except (ValueError, KeyError):
        return None
    figures = TYPICAL[key][dec].get(name)
    if figures is None:
        return None
    cells, ranges = figures
    return {"cells": {"mean_abs": round(cells * total, 4)}, "ranges": {"mean_abs": round(ranges * total, 4)},
            "basis": f"typical, not a bound: the algorithm's median error on the DPBench data sets ({key[0]}-D, "
                     f"{key[1]} cells, records x epsilon ~ 1e{dec}) times the released total; its error depends on "
                     "the data (the structure it chooses and the bias of spreading counts evenly)"}


def expected_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int,
                    released_total: float, total_amount: Fraction | None = None) -> dict:
    """The report's ``expected_error`` block for a table released by ``algorithm`` (the one that ran; auto's
    choice is looked through by the caller) at ``amount``: :func:`noise_errors` for a data-independent algorithm
    of at most MAX_SIMULATED_CELLS cells (refitted with a total measured at ``total_amount`` where auto did so),
    else :func:`typical_errors`, else a line saying why there is none."""
    cells = math.prod(shape)
    if algorithm.name == "identity" and total_amount is None:
        # the closed form needs only identity's noise law: one measurement of one zero cell at the same budget
        probe = (PrivacyBudget if definition == "pure" else ZCDPBudget)(amount, bits=SeededBits(_SEED), factor=factor)
        algorithm.run(np.zeros(1, dtype=np.int64), probe)
        return _relative(identity_errors(probe.measurements[0], tuple(shape), columns), released_total, cells)
    if not getattr(algorithm, "data_adaptive", True):
        if cells <= MAX_SIMULATED_CELLS:
            figures = noise_errors(algorithm, shape, columns, amount, definition, factor, total_amount=total_amount)
            return _relative(figures, released_total, cells)
        return {"not_computed": f"the simulation runs for tables of at most {MAX_SIMULATED_CELLS:,} cells "
                                f"(here {cells:,})"}
    # An ε-like number for the signal decade: ε per row, or √(2ρ) per row under zCDP (the ε at which a Laplace
    # count's noise has the Gaussian's scale, up to a constant).
    per_row = per_row_epsilon_like(definition, amount, factor)
    typical = typical_errors(algorithm.name, tuple(shape), released_total, per_row)
    if typical is None:
        return {"not_computed": f"no DPBench figure for {algorithm.name} at this shape"}
    if not any(ordered_axes(columns, len(shape))):
        typical = {k: v for k, v in typical.items() if k != "ranges"}
    return _relative(typical, released_total, cells)


def _relative(figures: dict, released_total: float, cells: int) -> dict:
    """``figures`` with the cells' mean absolute error also as a share of the mean released cell count (the
    released total over the cells: a DP output, so free), where that count is positive."""
    mean_cell = float(released_total) / max(cells, 1)
    if mean_cell <= 0 or "mean_abs" not in figures.get("cells", {}):
        return figures
    return {**figures, "cells": {**figures["cells"],
                                 "mean_abs_relative": float(f"{figures['cells']['mean_abs'] / mean_cell:.4g}")}}
