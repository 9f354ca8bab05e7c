"""The expected error of a released table on single cells and on ranges, for the report: public facts only.

A steward publishes a table for some questions (its workload: ranges, single cells or one-way marginals) and
its readers deserve to know how far off an answer may be, whichever algorithm ran.  Two kinds of figure, both
computed without reading the data again (so they cost nothing):

* **Identity**: exact, in closed form (:func:`identity_errors`): every cell's noise is independent with the
  stated distribution, a range's error the sum over its cells.
* **Other data-independent algorithms** (H, Hb, the quadtree, Privelet): their unbiased estimate is the true
  table plus noise that does not depend on the data, linear in the noisy measurements given the public plan
  (x̂ = x + L z), so a query q errs by qᵀL z.  Its RMS is exact (:func:`linear_errors`, from
  :mod:`~dphist.evaluation.linear_error`): Var(qᵀx̂) = Σ_j (Lᵀq)_j² Var z_j for every cell and, where that takes
  at most ``EXACT_WORK`` (trees up to 4,096 cells, Privelet axes up to 4,096), for every one of
  ``RANGE_QUERIES`` random ranges (random boxes along ordered columns, one category along categorical ones; none
  for a table of categorical columns only, where a range is one cell); beyond that the ranges' RMS is simulated.
  The mean absolute error of a sum of discrete noises of different scales has no closed form, so it is
  simulated: runs of the algorithm on the all-zero table at the same budget (refitted with a noisy total where
  auto did so), all drawn at once along a leading axis, with each query's exact second and fourth moments as
  control variates (E e² = κ₂, E e⁴ = κ₄ + 3κ₂², where their computation is within ``EXACT_WORK``): a
  regression estimator whose spread is what e² and e⁴ do not explain of |e|: on ranges, whose errors in one run
  share much of their noise, 5 to 30 times smaller than the plain mean's at the same runs, on cells 2 to 3 times
  (h, Hb and Privelet on 256 to 4,096 cells).  A simulated figure states its standard error (from the spread between runs: the
  queries of one run share noise, so the runs are the independent samples) and is rounded to the digits it
  supports (:func:`stable_round`: the last digit kept is worth at least ``STABLE_UNITS`` standard errors, so
  that another simulation rarely prints another figure).  All of it is the error before non-negativity and
  rounding (which usually lower it on sparse tables).  The simulation's noise is seeded: it is a computation
  about the mechanism, not a release of data.
* **Marginal sets**: each released marginal states its own error: under strategy "full" that of a sum of the
  measured table's cells (:func:`derived_marginal_errors`: boxes of that table, so the above applies, identity's
  in closed form), under "separate" that of the least-squares reconciled marginals
  (:func:`consistent_marginal_errors`: exact variances by ANOVA component, simulated mean absolute error).
* **Data-adaptive algorithms** (DAWA, DPCube, PrivTree, MWEM, ...): the error depends on the data through the
  structure they choose and the bias of spreading a count evenly over a bucket, so no data-free figure exists.
  :func:`typical_errors` gives the algorithm's median error on the DPBench data sets at the table's dimension,
  nearest domain size and signal decade (``auto_rules.TYPICAL``, measured by bench/auto_rules.py), as a fraction
  of the records, times the released total (a DP output, so free).  It is typical, not a bound.

Beside the cells' mean absolute error, ``mean_abs_relative`` gives it as a share of the mean released cell count
(the released total over the cells), so that a reader sees 10 records of error against cells of 4,000 or of 20.
:func:`figure_text` prints a figure with only its exact or stable digits.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from . import workloads
from .linear_error import box_sums, fourth_cumulant, privelet_noise, strategy_noise, tree_noise
from ..algorithms.hdmm import StrategyPlan
from ..algorithms.hierarchical import TreePlan
from ..algorithms.identity import Identity
from ..algorithms.privelet import Privelet
from ..inference.marginals import consistent_marginals, expected_errors as consistent_squared_errors
from ..inference.measurements import TOTAL, total_measurement
from ..privacy import (PrivacyBudget, SeededBits, SimulationBits, ZCDPBudget, discrete_gaussian_pmf, discrete_gaussian_variance,
                       discrete_laplace_variance, per_row_epsilon_like)

__all__ = ["noise_errors", "linear_errors", "box_errors", "identity_errors", "derived_marginal_errors",
           "consistent_marginal_errors", "typical_errors", "expected_errors", "range_workload",
           "ordered_axes", "stable_round", "stable_decimals", "figure_text", "MAX_SIMULATED_CELLS",
           "EXACT_WORK", "STABLE_UNITS"]

RANGE_QUERIES = 2000
#: Tables above this many cells get no simulated figure (the simulation runs the algorithm many times).
MAX_SIMULATED_CELLS = 1 << 16
#: The ranges' RMS is exact where its computation takes at most this much work (``LinearNoise.box_work``: one
#: inference per range for a tree, O(n_k²) per axis for Privelet; about half a second at the limit, which takes in
#: 1-D trees of 4,096 cells, 2-D ones of 64 × 64 and Privelet axes of 4,096), else simulated.
EXACT_WORK = 1 << 25
#: The simulation's size: runs × (noisy values + cells + box corners per run) about this (about a second),
#: between MIN_RUNS and MAX_RUNS runs.
SIMULATION_WORK = 1 << 23
MIN_RUNS, MAX_RUNS = 64, 1 << 15
#: A marginal set's runs reconcile every marginal at once: fewer of them (each is several passes over the cells).
MAX_MARGINAL_RUNS = 1 << 12
#: A simulated figure keeps the decimal digits whose unit u is at least this many of its standard errors (se).
#: Two independent simulations then print the same figure unless the true value lies near the boundary between
#: two printed ones: with probability E|X₁ − X₂|/u = (2/√π)·se/u ≤ 1.13/STABLE_UNITS ≈ 6 % (for a true value
#: anywhere between two printed ones), about 2 % on average over se/u in (1/200, 1/20]; and then by one unit in
#: the last digit (by two units with probability below 1e-6).
STABLE_UNITS = 20
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


def stable_decimals(value: float, se: float) -> int:
    """The decimals a figure ``value`` of standard error ``se`` > 0 keeps: its last digit is worth at least
    ``STABLE_UNITS`` standard errors (negative: rounded to tens, hundreds, ...), but at least its leading digit
    is kept (a figure rounded to nothing would say less than its standard error does)."""
    decimals = -math.ceil(math.log10(STABLE_UNITS * se))
    if value:
        decimals = max(decimals, -math.floor(math.log10(abs(float(value)))))
    return decimals


def stable_round(value: float, se: float | None) -> float:
    """``value`` rounded to the decimals of :func:`stable_decimals` (an exact value, ``se`` None or 0, to 4)."""
    if not se:
        return round(float(value), 4)
    return float(round(float(value), stable_decimals(value, se)))


def figure_text(value: float, se: float | None = None) -> str:
    """A figure of the report as the summary prints it: an exact one (``se`` None or 0) to 3 significant digits,
    a simulated one (as :func:`stable_round` gives it) to the decimals its standard error supports."""
    if not se:
        return f"{value:.3g}"
    decimals = stable_decimals(value, se)
    return f"{round(float(value), decimals):.{max(decimals, 0)}f}"


def _repeated(budget: PrivacyBudget, runs: int) -> PrivacyBudget:
    """``budget`` drawing every measurement ``runs`` times at once, along a leading axis (the kernel's hook for
    many runs, as the audit's replicated budgets use it): a data-independent algorithm carries the axis through."""
    budget.repetitions = (int(runs),)
    return budget


def _simulate(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int,
              total_amount: Fraction | None, runs: int, seed: int, per_run: int, queries: dict) -> dict:
    """``runs`` runs of ``algorithm`` on the all-zero table (as :func:`noise_errors` describes), drawn in batches
    along a leading axis, and per run and query set of ``queries`` (name -> (lo, hi, weights, sd, m4): distinct
    boxes and how many queries each stands for, or None, None, None for every cell in C order; each query's exact
    sd and fourth moment E e⁴, or None) the weighted means of e², of |e| and of the control variates, zero-mean
    terms of the errors where sd (and m4) is given: (e² − sd²)/sd and (e⁴ − m4)/sd³.  ``{name: {"mse", "abs",
    "controls"}}``, arrays over runs (controls: runs × variates).  ``per_run``: the noisy values of one run (sizes
    the batches)."""
    zeros = np.zeros(shape, dtype=np.int64)
    cells = math.prod(shape)
    budget_type = PrivacyBudget if definition == "pure" else ZCDPBudget
    boxes = sum(q[0].shape[0] << len(shape) for q in queries.values() if q[0] is not None)
    batch = max(1, min(runs, (1 << 22) // (8 * (per_run + cells) + boxes)))
    out = {name: {"mse": [], "abs": [], "controls": []} for name in queries}
    unit = None  # the estimate's response to a total of 1 (the refit is linear in the total)
    for index, start in enumerate(range(0, runs, batch)):
        reps = min(batch, runs - start)
        bits = SimulationBits(seed + index)  # (very large Gaussian noise as rounded normals: see its docstring)
        if total_amount is None:
            estimate = algorithm.run(zeros, _repeated(budget_type(amount, bits=bits, factor=factor), reps), columns)
            values = np.asarray(estimate.values, dtype=np.float64)
        else:
            whole = _repeated(PrivacyBudget(total_amount + amount, bits=bits, factor=factor), reps)
            for_total, rest = whole.split([total_amount, amount])
            totals, record = for_total.laplace(np.asarray(0), 1, for_total.amount, "the total", composition="one query")
            estimate = algorithm.run(zeros, rest, columns)
            at_zero = algorithm.refit(estimate, total_measurement(0.0, record.noise_variance))
            if at_zero is None:
                values = np.asarray(estimate.values, dtype=np.float64)
            else:
                values = np.asarray(at_zero.values, dtype=np.float64)
                if unit is None:
                    at_one = algorithm.refit(estimate, total_measurement(1.0, record.noise_variance))
                    unit = (np.asarray(at_one.values, dtype=np.float64) - values)[0]
                values = values + np.asarray(totals, dtype=np.float64).reshape((reps,) + (1,) * len(shape)) * unit
        values = values.reshape((reps,) + tuple(shape))
        for name, (lo, hi, weights, sd, m4) in queries.items():
            _add_runs(out[name], values.reshape(reps, cells) if lo is None else box_sums(values, lo, hi), weights,
                      sd, m4)
    return _collected(out)


def _add_runs(out: dict, errors: np.ndarray, weights: np.ndarray | None, sd: np.ndarray | None,
              m4: np.ndarray | None) -> None:
    """Append to ``out`` ("mse", "abs", "controls" lists) the per-run statistics of ``errors`` (runs × queries) of
    :func:`_simulate`."""
    w = np.full(errors.shape[1], 1 / errors.shape[1]) if weights is None else weights / weights.sum()
    squares = np.square(errors)
    out["mse"].append(squares @ w)
    out["abs"].append(np.abs(errors) @ w)
    if sd is not None:
        scale = np.where(sd > 0, sd, 1.0)  # a query without noise errs by 0: its terms are 0
        with np.errstate(all="ignore"):  # (noise so small that powers of its sd underflow: see _mean_and_se)
            controls = [(squares - sd**2) / scale @ w]
            if m4 is not None:
                controls.append((squares**2 - m4) / scale**3 @ w)
        out["controls"].append(np.stack(controls, axis=1))


def _collected(out: dict) -> dict:
    return {name: {k: np.concatenate(v) if v else None for k, v in parts.items()} for name, parts in out.items()}


def _mean_and_se(samples: np.ndarray, controls: np.ndarray | None = None) -> tuple[float, float]:
    """The mean of ``samples`` (one per run) and its standard error; with ``controls`` (runs × variates of known
    mean 0), the regression estimator mean(samples − controls·β), β fitted by least squares over the runs: its
    spread is what the controls do not explain, its bias of order 1/runs (far below the standard error)."""
    if controls is not None:  # a control that under- or overflowed (noise of a vanishing scale) is left out
        controls = controls[:, np.all(np.isfinite(controls), axis=0)]
        controls = controls[:, np.ptp(controls, axis=0) > 0]
        controls = controls if controls.shape[1] else None
    if controls is not None and samples.size > controls.shape[1] + 2:
        centred = controls - controls.mean(axis=0)
        beta = np.linalg.lstsq(centred, samples - samples.mean(), rcond=None)[0]
        adjusted = samples - controls @ beta
        dof = 1 + controls.shape[1]
    else:
        adjusted, dof = samples, 1
    if adjusted.size <= dof:
        return float(adjusted.mean()), 0.0
    return float(adjusted.mean()), float(adjusted.std(ddof=dof) / math.sqrt(adjusted.size))


def _rms_and_se(mse: np.ndarray) -> tuple[float, float]:
    """The RMS over runs and its relative standard error from the spread of the runs' mean squared errors:
    se(RMS)/RMS ≈ ½·sd(run MSE)/(mean MSE·√runs)."""
    mean = float(mse.mean())
    se = 0.5 * float(mse.std(ddof=1)) / (mean * math.sqrt(mse.size)) if mse.size > 1 and mean else 0.0
    return math.sqrt(mean), se


def _simulated_rms(mse: np.ndarray, rounded: bool = True) -> dict:
    rms, relative_se = _rms_and_se(mse)
    if not rounded:
        return {"rms": rms, "rms_relative_se": relative_se}
    return {"rms": stable_round(rms, rms * relative_se), "rms_relative_se": float(f"{relative_se:.2g}")}


def _simulated_mean_abs(samples: np.ndarray, rounded: bool = True, controls: np.ndarray | None = None) -> dict:
    mean, se = _mean_and_se(samples, controls)
    if not rounded:
        return {"mean_abs": mean, "mean_abs_se": se}
    return {"mean_abs": stable_round(mean, se), "mean_abs_se": float(f"{se:.2g}")}


def _runs(per_run: int, cells: int, boxes: int) -> int:
    """Runs for a simulation whose run draws ``per_run`` noisy values over ``cells`` cells and sums ``boxes``
    box corners: about SIMULATION_WORK in all, between MIN_RUNS and MAX_RUNS."""
    return int(min(MAX_RUNS, max(MIN_RUNS, SIMULATION_WORK // max(per_run + cells + boxes, 1))))


def _distinct_boxes(ranges) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct boxes of ``ranges`` (lo, hi) and how many of its queries each one is (a small table's
    random ranges repeat)."""
    lo, hi = (np.asarray(a, dtype=np.int64) for a in ranges.boxes())
    d = lo.shape[1]
    distinct, counts = np.unique(np.concatenate([lo, hi], axis=1), axis=0, return_counts=True)
    return distinct[:, :d], distinct[:, d:], counts.astype(np.float64)


def _where(ranges) -> str:
    return (f"ranges: {ranges.size} random boxes along ordered columns, one category along categorical ones"
            if ranges is not None else "no ranges: every column is categorical, so a range is a single cell")


def noise_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int = 1,
                 repeats: int | None = None, total_amount: Fraction | None = None, seed: int = _SEED,
                 rounded: bool = True) -> dict:
    """The error of ``algorithm``'s unbiased estimate on single cells and on :func:`range_workload`'s ranges,
    simulated only, from ``repeats`` runs on the all-zero table at ``amount`` (ε under "pure", ρ otherwise) for a
    protected group of ``factor`` rows: ``{"cells": {"rms", "mean_abs", "rms_relative_se", "mean_abs_se"},
    "ranges": {...}, "basis": ...}``, in records, each figure rounded to the digits its standard error supports
    (``rounded`` False: as estimated, with unrounded standard errors).
    Only for data-independent algorithms (their error is the same on every table).  ``total_amount`` (pure ε):
    each run also measures the total at that ε and refits the estimate with it (``Algorithm.refit``), as auto
    does with its N̂.  Reads no data.  :func:`linear_errors` gives the exact RMS where the algorithm is known to
    be linear."""
    if total_amount is not None and definition != "pure":
        raise ValueError("a noisy total is refitted only under pure ε (auto measures none under zCDP)")
    shape = tuple(int(n) for n in shape)
    cells = math.prod(shape)
    ordered = ordered_axes(columns, len(shape))
    ranges = range_workload(shape, ordered) if any(ordered) else None
    queries = {"cells": (None, None, None, None, None)}
    if ranges is not None:
        queries["ranges"] = (*_distinct_boxes(ranges), None, None)
    per_run = _probe(algorithm, shape, columns, amount, definition, factor, total_amount)[2]
    if repeats is None:
        repeats = _runs(per_run, cells, 0 if ranges is None else queries["ranges"][0].shape[0] << len(shape))
    simulated = _simulate(algorithm, shape, columns, amount, definition, factor, total_amount, repeats, seed,
                          per_run, queries)
    out = {name: {**_simulated_rms(parts["mse"], rounded), **_simulated_mean_abs(parts["abs"], rounded)}
           for name, parts in simulated.items()}
    refit = ", each refitted with a noisy total as auto does" if total_amount is not None else ""
    return {**out, "basis": f"simulated: the noise of the unbiased estimate (before non-negativity and rounding), "
                            f"from {repeats} runs of the algorithm on an all-zero table at the same budget{refit}, "
                            f"each figure rounded to the digits its standard error supports; {_where(ranges)}"}


def _probe(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int,
           total_amount: Fraction | None):
    """One run of ``algorithm`` on the all-zero table at ``amount`` (refitted with a total of 0 measured at
    ``total_amount``, where given and where the algorithm refits): ``(estimate, its budget, noisy values per
    run)``.  Only the public plan and the noise variances of the result matter."""
    budget_type = PrivacyBudget if definition == "pure" else ZCDPBudget
    budget = budget_type(amount, bits=SeededBits(_SEED), factor=factor)
    estimate = algorithm.run(np.zeros(shape, dtype=np.int64), budget, columns)
    per_run = sum(int(m.queries or 0) for m in budget.measurements)
    if total_amount is not None:
        probe = PrivacyBudget(total_amount, bits=SeededBits(_SEED), factor=factor)
        _, record = probe.laplace(np.asarray(0), 1, probe.amount, "the total", composition="one query")
        refitted = algorithm.refit(estimate, total_measurement(0.0, record.noise_variance))
        estimate = estimate if refitted is None else refitted
        per_run += 1
    return estimate, budget, per_run


def _linear_noise(algorithm, estimate, budget, shape: tuple[int, ...], columns):
    """The exact noise model of ``estimate`` (:mod:`~dphist.evaluation.linear_error`) where ``algorithm`` is one
    whose estimate is known to be linear in its measurements (a tree, Privelet); else None."""
    if isinstance(estimate.plan, TreePlan):
        return tree_noise(algorithm, estimate, "laplace" if budget.definition == "pure" else "gaussian")
    if isinstance(algorithm, Privelet):
        return privelet_noise(algorithm, shape, columns, budget.measurements[0])
    if isinstance(estimate.plan, StrategyPlan):
        own = [m for m in estimate.measurements if m.query != TOTAL]
        totals = [m for m in estimate.measurements if m.query == TOTAL]
        if len(own) == 1 and len(totals) <= 1:  # (a refitted total is auto's N̂, always Laplace)
            return strategy_noise(estimate.plan, float(own[0].variance),
                                  "laplace" if budget.definition == "pure" else "gaussian",
                                  float(totals[0].variance) if totals else None)
    return None


def linear_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int = 1,
                  total_amount: Fraction | None = None, repeats: int | None = None, seed: int = _SEED,
                  rounded: bool = True) -> dict:
    """The error of a data-independent ``algorithm``'s unbiased estimate, as :func:`noise_errors` (same
    arguments and keys), with the RMS exact where the estimate is known to be linear (trees, Privelet: every
    cell, and the ranges where that takes at most ``EXACT_WORK``) and the mean absolute error simulated with the
    exact second and fourth moments as control variates; without an exact model, :func:`noise_errors`.  A figure
    with a standard error (``mean_abs_se``, ``rms_relative_se``) is simulated, one without it exact."""
    shape = tuple(int(n) for n in shape)
    ordered = ordered_axes(columns, len(shape))
    ranges = range_workload(shape, ordered) if any(ordered) else None
    figures = box_errors(algorithm, shape, columns, amount, definition, factor, total_amount, None,
                         None if ranges is None else _distinct_boxes(ranges), repeats, seed, rounded)
    if figures is None:
        return noise_errors(algorithm, shape, columns, amount, definition, factor, repeats, total_amount, seed,
                            rounded)
    return {**figures, "basis": f"{figures['basis']}; {_where(ranges)}"}


def box_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str, factor: int,
               total_amount: Fraction | None, cells: tuple | None, ranges: tuple | None, repeats: int | None = None,
               seed: int = _SEED, rounded: bool = True) -> dict | None:
    """:func:`linear_errors` for queries given as boxes of the table of ``shape`` that ``algorithm`` releases:
    ``cells`` (lo, hi) the boxes standing for single cells (None: the table's own cells) and ``ranges`` (lo, hi,
    weights: how many queries each box stands for) the ranges, or None.  (A marginal summed from the table has
    its cells and ranges as such boxes.)  ``{"cells": {...}, "ranges": {...}, "basis"}``, or None where the
    algorithm has no exact model."""
    if total_amount is not None and definition != "pure":
        raise ValueError("a noisy total is refitted only under pure ε (auto measures none under zCDP)")
    shape = tuple(int(n) for n in shape)
    estimate, budget, per_run = _probe(algorithm, shape, columns, amount, definition, factor, total_amount)
    noise = _linear_noise(algorithm, estimate, budget, shape, columns)
    if noise is None:
        return None
    queries = {}
    if cells is None:  # the variances are the algorithm's own; the fourth cumulants where they take little work
        lo = np.indices(shape).reshape(len(shape), -1).T
        queries["cells"] = (None, None, None, noise.cell_variances, None)
        if noise.box_work(lo, lo + 1) <= EXACT_WORK:
            queries["cells"] = (None, None, None, *noise.box_cumulants(lo, lo + 1))
    else:
        queries["cells"] = (*cells, None, *_cumulants(noise, *cells))
    if ranges is not None:
        queries["ranges"] = (*ranges, *_cumulants(noise, ranges[0], ranges[1]))
    exact = {name: q[3] is not None for name, q in queries.items()}
    boxes = sum(q[0].shape[0] << len(shape) for q in queries.values() if q[0] is not None)
    if repeats is None:
        repeats = _runs(per_run, math.prod(shape), boxes)
    simulated = _simulate(algorithm, shape, columns, amount, definition, factor, total_amount, repeats, seed,
                          per_run, {name: (lo, hi, weights, None if v is None else np.sqrt(v),
                                           None if v is None or k4 is None else k4 + 3 * v**2)
                                    for name, (lo, hi, weights, v, k4) in queries.items()})
    out = {}
    for name, (_, _, weights, variances, _) in queries.items():
        parts = simulated[name]
        if variances is None:
            out[name] = {**_simulated_rms(parts["mse"], rounded), **_simulated_mean_abs(parts["abs"], rounded)}
            continue
        w = np.full(variances.size, 1.0) if weights is None else weights
        out[name] = {"rms": round(math.sqrt(float(np.dot(variances, w) / w.sum())), 4),
                     **_simulated_mean_abs(parts["abs"], rounded, parts["controls"])}
    refit = ", each refitted with a noisy total as auto does" if total_amount is not None else ""
    which = " and ".join(name for name, e in exact.items() if e) or "no query"
    simulated_rms = [name for name, e in exact.items() if not e]
    also = (f"; the RMS of the {' and '.join(simulated_rms)} is simulated too (its exact computation would take "
            "too long at this size)" if simulated_rms else "")
    return {**out, "basis": f"the noise of the unbiased estimate (before non-negativity and rounding): RMS exact "
                            f"for the {which} (the estimate is linear in the noisy measurements given the public "
                            f"plan, so a query's variance is a sum over the measurements); mean absolute error "
                            f"simulated, {repeats} runs of the algorithm on an all-zero table at the same "
                            f"budget{refit}, with the exact second and fourth moments as control variates where "
                            f"known{also}; a simulated figure states its standard error and keeps the digits it "
                            "supports"}


def _cumulants(noise, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """The boxes' exact variances and fourth cumulants, or (None, None) where they would take more than
    ``EXACT_WORK``."""
    if noise.box_work(lo, hi) > EXACT_WORK:
        return None, None
    return noise.box_cumulants(lo, hi)


def derived_marginal_errors(algorithm, shape: tuple[int, ...], columns, amount: Fraction, definition: str,
                            factor: int, released_total: float, kept: list[int],
                            total_amount: Fraction | None = None) -> dict:
    """The expected error of a marginal summed from a table of ``shape`` released by ``algorithm`` (strategy
    "full"): the marginal keeps the axes ``kept`` (in its order), so each of its cells and ranges is a box of the
    table, full along the summed axes.  Identity: in closed form (:func:`identity_errors`, each cell a sum of as
    many noises as it sums cells); another data-independent algorithm: :func:`box_errors` on those boxes; a
    data-adaptive one: a line saying why there is none (its typical figures are for tables, not for sums of
    them).  Public facts only, as :func:`expected_errors`."""
    shape = tuple(int(n) for n in shape)
    part = tuple(shape[k] for k in kept)
    part_columns = [columns[k] for k in kept] if columns is not None else None
    cells, part_cells = math.prod(shape), math.prod(part)
    if algorithm.name == "identity" and total_amount is None:
        probe = (PrivacyBudget if definition == "pure" else ZCDPBudget)(amount, bits=SeededBits(_SEED), factor=factor)
        algorithm.run(np.zeros(1, dtype=np.int64), probe)
        figures = identity_errors(probe.measurements[0], part, part_columns, cells // part_cells)
        return _relative(figures, released_total, part_cells)
    if getattr(algorithm, "data_adaptive", True):
        return {"not_computed": f"{algorithm.name} adapts to the data; its typical error is known for whole tables, "
                                "not for the marginals summed from them"}
    if cells > MAX_SIMULATED_CELLS:
        return {"not_computed": f"the simulation runs for tables of at most {MAX_SIMULATED_CELLS:,} cells "
                                f"(here {cells:,})"}

    def boxes(lo, hi):  # boxes of the marginal as boxes of the table
        full_lo = np.zeros((lo.shape[0], len(shape)), dtype=np.int64)
        full_hi = np.tile(np.asarray(shape, dtype=np.int64), (lo.shape[0], 1))
        full_lo[:, kept], full_hi[:, kept] = lo, hi
        return full_lo, full_hi

    unit = np.indices(part).reshape(len(part), -1).T
    ordered = ordered_axes(part_columns, len(part))
    ranges = range_workload(part, ordered) if any(ordered) else None
    range_boxes = None
    if ranges is not None:
        lo, hi, weights = _distinct_boxes(ranges)
        range_boxes = (*boxes(lo, hi), weights)
    figures = box_errors(algorithm, shape, columns, amount, definition, factor, total_amount, boxes(unit, unit + 1),
                         range_boxes)
    if figures is None:
        return {"not_computed": f"no exact model of {algorithm.name}'s noise for sums of its cells"}
    summed = f"each cell the sum of {cells // part_cells:,} cells of the measured table"
    return _relative({**figures, "basis": f"{figures['basis']}; {summed}; {_where(ranges)}"}, released_total,
                     part_cells)


def consistent_marginal_errors(marginals: list[tuple[str, ...]], columns: list, amounts: list[Fraction],
                               definition: str, factor: int, released_totals: list[float],
                               repeats: int | None = None, seed: int = _SEED, rounded: bool = True) -> list[dict]:
    """The expected error of each marginal of strategy "separate": marginal i (``columns[i]``, the column
    declarations of ``marginals[i]``) measured by identity at ``amounts[i]``, then all of them made consistent
    by least squares (:func:`~dphist.inference.marginals.consistent_marginals`).  The estimate is linear, and its
    error splits into independent ANOVA components (docs/algorithms.md §6.4): the α-component of marginal i
    (α ⊆ S_i) errs by c_i times the weighted mean of the marginals' own, whose covariance over α's cells is
    C_α/(N_α Λ_α), C_α the product of the centring matrices I − J/n_a along α, N_α = Π_{a ∉ α} n_a over the union
    of the columns and Λ_α = Σ_{j: α ⊆ S_j} c_j/v_j.  So a box of marginal i with sides ℓ_a has the exact variance

        Σ_{α ⊆ S_i} c_i / (m_{i,α} Λ_α) · Π_{a ∈ α} (ℓ_a − ℓ_a²/n_a) · Π_{a ∈ S_i ∖ α} ℓ_a²,

    m_{i,α} = Π_{a ∈ S_i ∖ α} n_a (so that c_i/m_{i,α} = c_i²/N_α),

    whose single cells add up to :func:`~dphist.inference.marginals.expected_errors`.  The mean absolute error is
    simulated (all runs in one reconciliation, with the runs as one more column that every marginal has: the
    least squares of independent stacked problems is theirs, one by one), with the exact variances as a control
    variate, and the exact fourth moments too where the whole linear map is small enough to build (the same
    stacking, each measured cell's unit noise one run).  One figure dict per marginal, as :func:`expected_errors`
    gives them."""
    sizes = {c.name: int(c.n_cells) for cols in columns for c in cols}
    union = tuple(dict.fromkeys(c for m in marginals for c in m))
    budget_type = PrivacyBudget if definition == "pure" else ZCDPBudget
    identity = Identity()
    variances = []
    for amount in amounts:  # identity's exact noise variance at each marginal's amount
        probe = budget_type(amount, bits=SeededBits(_SEED), factor=factor)
        identity.run(np.zeros(1, dtype=np.int64), probe)
        variances.append(float(probe.measurements[0].noise_variance))
    outside = [math.prod(sizes[a] for a in union if a not in m) for m in marginals]  # c_i, exact integers

    def coefficient(i: int, alpha: tuple) -> float:  # c_i / (m_{i,α} Λ_α)
        precision = sum(float(Fraction(outside[j], outside[i])) / variances[j]
                        for j, other in enumerate(marginals) if set(alpha) <= set(other))
        return 1.0 / (math.prod(sizes[a] for a in marginals[i] if a not in alpha) * precision)

    def box_variances(i: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        side = (hi - lo).astype(np.float64)
        n = np.array([sizes[a] for a in marginals[i]], dtype=np.float64)
        out = np.zeros(lo.shape[0])
        for r in range(len(marginals[i]) + 1):
            for inside in itertools.combinations(range(len(marginals[i])), r):
                alpha = tuple(marginals[i][k] for k in inside)
                term = np.full(lo.shape[0], coefficient(i, alpha))
                for k in range(len(marginals[i])):
                    term *= side[:, k] - side[:, k] ** 2 / n[k] if k in inside else side[:, k] ** 2
                out += term
        return out

    cell_sd = [math.sqrt(e / math.prod(sizes[a] for a in m))
               for e, m in zip(consistent_squared_errors(marginals, sizes, variances), marginals)]
    shapes = [tuple(sizes[a] for a in m) for m in marginals]
    cells = sum(math.prod(s) for s in shapes)
    run = "\0runs"  # a column name no schema has: the runs, as one more column of every marginal
    rows = None
    if cells * cells <= EXACT_WORK // 8:  # the whole linear map: each measured cell's unit noise as one "run"
        basis = np.eye(cells)
        starts = np.cumsum([0] + [math.prod(shape) for shape in shapes])
        rows = consistent_marginals([basis[:, a:b].reshape((cells,) + shape)
                                     for a, b, shape in zip(starts, starts[1:], shapes)],
                                    [(run,) + tuple(m) for m in marginals], variances)
        kappa = np.repeat([fourth_cumulant(budget_type.noise, v) for v in variances], np.diff(starts))

    def moments(i: int, lo, hi, variance: np.ndarray):  # (sd, E e⁴) of marginal i's boxes (E e⁴ from the map)
        if rows is None:
            return np.sqrt(variance), None
        weights = rows[i].reshape(cells, -1) if lo is None else box_sums(rows[i], lo, hi)
        return np.sqrt(variance), (weights**4).T @ kappa + 3 * variance**2

    queries = []
    for i, m in enumerate(marginals):
        part = {"cells": (None, None, None, *moments(i, None, None, np.full(math.prod(shapes[i]), cell_sd[i] ** 2)))}
        ordered = ordered_axes(columns[i], len(m))
        if any(ordered):
            lo, hi, weights = _distinct_boxes(range_workload(shapes[i], ordered))
            part["ranges"] = (lo, hi, weights, *moments(i, lo, hi, box_variances(i, lo, hi)))
        queries.append(part)
    boxes = sum(q["ranges"][0].shape[0] << len(s) for q, s in zip(queries, shapes) if "ranges" in q)
    if repeats is None:  # a reconciliation costs a pass per ANOVA component: about 2^|S_i| passes per cell
        repeats = min(_runs(4 * cells * 2 ** max(len(m) for m in marginals), cells, boxes), MAX_MARGINAL_RUNS)
    stats = [{name: {"mse": [], "abs": [], "controls": []} for name in q} for q in queries]
    batch = max(1, min(repeats, (1 << 20) // max(cells, 1)))
    for index, start in enumerate(range(0, repeats, batch)):
        reps = min(batch, repeats - start)
        noisy = []
        for k, (amount, shape) in enumerate(zip(amounts, shapes)):
            budget = _repeated(budget_type(amount, bits=SeededBits(seed + 7919 * index + k), factor=factor), reps)
            noisy.append(np.asarray(identity.run(np.zeros(shape, dtype=np.int64), budget).values, dtype=np.float64))
        consistent = consistent_marginals(noisy, [(run,) + tuple(m) for m in marginals], variances)
        for errors, part, shape, out in zip(consistent, queries, shapes, stats):
            for name, (lo, hi, weights, sd, m4) in part.items():
                _add_runs(out[name], errors.reshape(reps, -1) if lo is None else box_sums(errors, lo, hi), weights,
                          sd, m4)
    results = []
    for i, (part, out) in enumerate(zip(queries, map(_collected, stats))):
        figures = {}
        for name, (_, _, weights, sd, _) in part.items():
            w = np.full(sd.size, 1.0) if weights is None else weights
            figures[name] = {"rms": round(math.sqrt(float(np.dot(sd**2, w) / w.sum())), 4),
                             **_simulated_mean_abs(out[name]["abs"], rounded, out[name]["controls"])}
        where = _where(range_workload(shapes[i], ordered_axes(columns[i], len(shapes[i])))
                       if "ranges" in part else None)
        figures["basis"] = ("the least-squares consistent estimate's noise (before non-negativity and rounding): "
                            "RMS exact (the estimate is linear, its error a sum of independent ANOVA components); "
                            f"mean absolute error simulated, {repeats} runs of the {len(marginals)} identity "
                            "measurements and their reconciliation, with the exact second (and, for small sets, "
                            "fourth) moments as control variates; "
                            f"a simulated figure states its standard error and keeps the digits it supports; {where}")
        results.append(_relative(figures, released_totals[i], math.prod(shapes[i])))
    return results


def ordered_axes(columns, dimensions: int) -> list[bool]:
    """Per axis, whether a range along it means an interval (an ordered column, or a categorical one with a
    hierarchy) rather than a single category."""
    return [not (getattr(c, "kind", None) == "categorical" and not getattr(c, "hierarchy", None))
            for c in (columns or [None] * dimensions)]


def identity_errors(record, shape: tuple[int, ...], columns, cells_per_cell: int = 1) -> dict:
    """Identity's error in closed form, from its measurement ``record`` (discrete Laplace of scale b, or discrete
    Gaussian of parameter σ², on every cell alike): a cell's error is one noise Z, so its RMS is √Var Z and its mean
    absolute error E|Z|; a range of k cells errs by the sum S of k independent noises, RMS √(k·Var Z) exactly and

        E|S| = (1/π) ∫₀^π (1 − φ(t)^k) / (1 − cos t) dt,

    an identity for integer-valued S (|s| = (1/2π)∫ (1 − cos st)/(1 − cos t) dt over a period) with φ the noise's
    characteristic function: (1 − a)²/(1 − 2a·cos t + a²), a = e^(−1/b), for the discrete Laplace; the θ-function
    ratio Σ_m exp(−σ²(t + 2πm)²/2) / Σ_m exp(−σ²(2πm)²/2) for the discrete Gaussian.  The integral is taken by
    Gauss–Legendre to far below the printed digits (checked against the Laplace's E|Z| = 2a/(1 − a²)), so every
    printed digit is exact.  ``cells_per_cell``: each cell of the table of ``shape`` is a sum of that many
    measured cells (a marginal summed from a table measured by identity), so a range of k of its cells sums k
    times as many noises.  Same keys as :func:`noise_errors`."""
    ordered = ordered_axes(columns, len(shape))
    log_phi, variance = _noise_law(record)
    c = int(cells_per_cell)
    cells = {"rms": round(math.sqrt(c * variance), 4),
             "mean_abs": round(float(_mean_abs([c], log_phi, variance)[0]), 4)}
    out = {"cells": cells}
    where = "no ranges: every column is categorical, so a range is a single cell"
    if any(ordered):
        ranges = range_workload(tuple(shape), ordered)
        lo, hi = (np.asarray(a) for a in ranges.boxes())
        sizes = np.prod(hi - lo, axis=1) * c
        distinct, counts = np.unique(sizes, return_counts=True)
        mean_abs = _mean_abs(distinct, log_phi, variance)
        out["ranges"] = {"rms": round(math.sqrt(float(np.mean(sizes)) * variance), 4),
                         "mean_abs": round(float(np.dot(mean_abs, counts) / counts.sum()), 4)}
        where = f"ranges: {ranges.size} random boxes along ordered columns, one category along categorical ones"
    summed = f"each cell the sum of {c:,} measured cells, " if c > 1 else ""
    return {**out, "basis": "exact, in closed form: the noise of every cell is independent with the stated "
                            f"distribution, {summed}a range's error the sum over its cells; {where}"}


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
    choice is looked through by the caller) at ``amount``: :func:`identity_errors` for identity,
    :func:`linear_errors` for another data-independent algorithm of at most MAX_SIMULATED_CELLS cells (refitted
    with a total measured at ``total_amount`` where auto did so),
    else :func:`typical_errors`, else a line saying why there is none."""
    cells = math.prod(shape)
    if algorithm.name == "identity" and total_amount is None:
        # the closed form needs only identity's noise law: one measurement of one zero cell at the same budget
        probe = (PrivacyBudget if definition == "pure" else ZCDPBudget)(amount, bits=SeededBits(_SEED), factor=factor)
        algorithm.run(np.zeros(1, dtype=np.int64), probe)
        return _relative(identity_errors(probe.measurements[0], tuple(shape), columns), released_total, cells)
    if not getattr(algorithm, "data_adaptive", True):
        if cells <= MAX_SIMULATED_CELLS:
            figures = linear_errors(algorithm, shape, columns, amount, definition, factor, total_amount=total_amount)
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
    se = figures["cells"].get("mean_abs_se")
    share = figures["cells"]["mean_abs"] / mean_cell
    relative = stable_round(share, se / mean_cell) if se else float(f"{share:.4g}")
    return {**figures, "cells": {**figures["cells"], "mean_abs_relative": relative}}
