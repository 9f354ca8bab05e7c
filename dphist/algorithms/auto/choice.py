"""Auto: choose the algorithm for a table from public facts and a noisy total, then run it.

    measure:  N̂ = Σx + DLap(1/ε₀), ε₀ = share·ε                    (Δ = 1: one record changes the total by 1)
    choose:   from the workload (the questions the table will answer: ranges, single cells or one-way
              marginals), the table's dimensions, its number of cells, the column kinds and the signal
              s = max(N̂, 1)·ε₁, ε₁ = ε − ε₀, look up the workload's rule table learned on the DPBench grid and
              the real-table corpus (``auto_rules.RULES[workload]``, written by bench/auto_rules.py): at that
              dimension, the nearest learned domain size and the signal decade round(log₁₀ s), the algorithm
              with the lowest mean regret among identity, hb and those that were never worse than the better of
              the two on any training table there; for single cells and one-way marginals, identity or hb by
              the signal per cell s / cells against a learned threshold (:func:`signal_baseline`); where the
              rule differs between the decades within two standard deviations of N̂, the baseline instead
    run:      the chosen algorithm at ε₁ (DPCube and the k-d tree take their block size from N̂ instead of
              measuring a total of their own)
    infer:    where the chosen algorithm fits its measurements by least squares, N̂ joins the fit
              (:meth:`Algorithm.refit`): as one more measurement of the root of a tree (h, hb, quadtree) or of
              DAWA's bucket tree, and of the sum of DPCube's (and the k-d tree's) partition totals.  N̂ is
              independent of the algorithm's own measurements, so the fit is the least-squares estimate from
              every measurement made.  On the DPBench data (bench/low_signal.py's fresh samples, ε = 0.1, the
              same noise with and without it) auto's error where it runs hb fell by 6.5 % on average in 1-D
              (4096 cells, 1e7 records; a prefix's error is much of it its total's), 3.9 % in 2-D at 1e5
              records and 0.6 % at 1e7 (256 × 256); where it runs DPCube (2-D, 1e3) by 2.0 %.  Where it runs
              DAWA (1-D, 1e3 and 1e5) it moved by +0.1 % and −0.7 %, within noise: at ε/20, N̂ weighs little
              against DAWA's few bucket counts.

The promise (docs/algorithms.md §10): auto does no harm, its error at most about the better of identity and hb
(the data-independent choices a careful steward makes by hand) on every table.  A data-adaptive algorithm wins by
a structure that fits the data and can lose twice over where it does not, and N̂ cannot tell those tables apart;
so it is chosen only in settings where it lost to neither baseline on any training table.

The choice (and the refit) reads the data only through N̂, so it is post-processing of an ε₀-DP measurement, and
the whole is ε-DP by sequential composition (ε₀ + ε₁ = ε).  The report names the workload, the choice, the rule
entry and N̂.

The workload is the steward's (``--workload``); by default it follows the columns (:func:`default_workload`):
ranges when a column is ordered (numbers, dates, or categories with a declared hierarchy), single cells when
every column is a plain category.

Outside the grid: range queries run along ordered columns only, so a categorical column (without a hierarchy)
splits the table into slices and the rule is looked up for one slice (the ordered columns, N̂/slices records);
a table of categorical columns only gets identity, the unbiased estimate of each cell, on all of ε (no total
is measured: the choice would not read it).  Tables of three or more
ordered columns use the two-column rules.  A choice that cannot take the table's shape (a one-column algorithm
such as DAWA or MWEM for a table with categorical slices) gives way to the rule's best algorithm for tables of
several columns, and to hb if there is none.

Under zCDP (``budget.noise == "gaussian"``) auto chooses within the definition, among the data-independent L2
strategies, from the public shape and column kinds alone (:func:`choose_gaussian`), and measures no total (the
choice reads no data, so there is nothing to pay for): the whole ρ goes to the chosen algorithm.  The candidates
are identity, Privelet with its L2 level weights, (1-D, at most ``EXACT_L2_CELLS`` cells) Hb with its L2
branching, and hdmm where its strategy is at hand (:func:`_hdmm_error`); each one's exact average variance per unit σ² on the table's workload (all ranges along ordered
columns, single categories along categorical ones, whose axes factorise) is computed and the least wins.  Above
``EXACT_L2_CELLS`` cells the tree is not compared: docs/algorithms.md §8 has Privelet below every tree under L2
(n = 1024 / 4096: 18.7 / 26.4 uniform, 18.0 / 25.6 with L2 weights, against H₂ 20.5 / 28.6 and H₄ 21.0 / 29.7).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ...declare.choices import RELEASE_WORKLOADS as WORKLOADS
from ...inference.measurements import total_measurement
from ...errors import UsageError
from ...privacy import PrivacyBudget, format_fraction
from .. import options as option
from .rules import BASELINE_SIGNAL, RULES
from ..base import Algorithm, Estimate, Step
from ..catalog import REGISTRY, get_algorithm
from ..partitioning import DPCube

__all__ = ["Auto", "nearest_rule", "choose_gaussian", "WORKLOADS", "default_workload", "as_learned"]

FALLBACK = "hb"
#: The data-independent choices a careful steward makes by hand, which auto's promise is measured against.
BASELINES = ("identity", "hb")
#: Algorithms that read a table of two columns as one sequence of cells (DAWA, along the Hilbert curve): with
#: categorical slices the curve would interleave the categories, so there they give way as a one-column
#: algorithm does.
SEQUENCE_ONLY = ("dawa",)


def as_learned(name: str) -> dict:
    """The options auto runs ``name`` with: those its rule table measured it with (bench/auto_rules.py --grid).

    DPCube and the k-d tree: the block from the rule without the stand-alone 9-cell cap, the fixed split
    penalty (``DPCube.REFINE_PENALTY``) and no significance cut.  That configuration has the lowest mean error over the data sets; the
    stand-alone DPCube's defaults give up some of the mean at low signal to stay at or below the reference's
    DPCube on every data set (2-D DPBench, 1,000 records, ε = 0.1, fresh samples, bench/low_signal.py: mean
    0.73 → 0.76 of the reference's expected error, worst 1.48 → 0.88; against the best reference algorithm of
    each data set, mean 1.19 → 1.45, BEIJING-CABS-E, spread over many cells, 1.20 → 2.27)."""
    if issubclass(REGISTRY[name], DPCube):
        return {"penalty": DPCube.REFINE_PENALTY, "max_side": 1 << 30, "significance": "off"}
    return {}


#: How many standard deviations of the noisy total's noise the signal decade must be sure over (two: the total is
#: that far off with probability exp(−2√2) ≈ 6 %).
DOUBT = 2

#: Below this signal (N̂·ε, the rule table's decades 1e2 and lower) and LOW_SIGNAL_PER_CELL per cell, auto runs a
#: 1-D DAWA with the options of LOW_SIGNAL_OPTIONS (measured in :func:`low_signal_options`).
LOW_SIGNAL = 10 ** 2.5
LOW_SIGNAL_PER_CELL = 0.2
LOW_SIGNAL_OPTIONS = {"dawa": {"prefix_threshold": Fraction(1), "fit": "nnls"}}


def low_signal_options(name: str, shape: tuple[int, ...], signal: float) -> dict:
    """The options auto adds to ``name`` for a table of ``shape`` at ``signal`` = max(N̂, 1)·ε:
    LOW_SIGNAL_OPTIONS[name] for a 1-D DAWA below LOW_SIGNAL and below LOW_SIGNAL_PER_CELL per cell, else none.
    Public: the shape, ε and N̂, which is paid for.

    A 1-D DAWA at low signal: a higher bar for splitting the top intervals (prefix_threshold 1 for 3/10), as a
    split that noise alone caused costs a near-uniform table a whole extra bucket count's noise; and bucket
    counts fitted with non-negativity (fit=nnls), as at this signal many buckets hold next to nothing and the
    noise of a negative one would otherwise be paid by the released total.  Measured (DPBench 1-D, 1,000 records,
    ε = 0.1, 4096 cells, 8 samples × 8 runs per data set, the same noise for each setting; auto ÷ the
    re-measured bar, mean / worst): seed 7 0.99 / 1.98 (BIDS-ALL) → 0.96 / 1.62, seed 11 1.06 / 2.04 →
    1.03 / 1.75, seed 2026 1.02 / 1.99 → 0.98 / 1.63.  The price: HEPTH and PATENT, whose records leave the
    domain's ends empty, 1.0–1.2 → 1.3.  On the rule table's grid (1,000 records, ε = 0.1, the same data summed
    into fewer cells) DAWA's mean regret went 1.90 → 1.85 at 4096 cells and 1.45 → 1.27 at 1024 (0.024 and 0.1
    records × ε per cell), but 1.56 → 1.60 at 256 and 1.20 → 1.28 at 64 (0.4 and 1.6): hence the per-cell
    bound.  Not at 100,000 records: nnls there moved the mean from 0.78 to 0.80 (ADULT 0.62 → 0.72)."""
    cells = math.prod(shape)
    if len(shape) == 1 and signal < LOW_SIGNAL and signal < LOW_SIGNAL_PER_CELL * cells:
        return dict(LOW_SIGNAL_OPTIONS.get(name, {}))
    return {}


def default_workload(columns) -> str:
    """The workload a table is released for when the steward names none: single cells when every column is a
    plain category (its cells have no order, so a range is no question), else ranges."""
    if columns and all(_unordered(c) for c in columns):
        return "cells"
    return "ranges"


def nearest_rule(rules: dict, dims: int, cells: int, signal: float) -> tuple[str, float, int, tuple, int]:
    """The rule table's entry for a table: ``(algorithm, mean regret, data sets, (dims, cells) key, decade)``.

    ``dims`` above the largest learned dimension use the largest; ``cells`` picks the learned domain size
    nearest on a log scale (ties to the larger); the decade round(log₁₀ signal) is clipped to the learned ones.
    """
    learned = sorted({d for d, _ in rules})
    d = min(max(dims, learned[0]), learned[-1])
    sizes = sorted(c for dd, c in rules if dd == d)
    size = min(sizes, key=lambda c: (abs(math.log(c) - math.log(max(cells, 1))), -c))
    decades = rules[(d, size)]
    dec = min(max(int(round(math.log10(max(signal, 1.0)))), min(decades)), max(decades))
    algorithm, regret, datasets = decades[dec][:3]
    return algorithm, regret, datasets, (d, size), dec


def signal_baseline(workload: str, dims: int, per_cell: float) -> str | None:
    """The baseline for ``workload`` on a table of ``dims`` ordered columns at ``per_cell`` = N̂·ε / cells
    (records times ε per cell): hb below the learned threshold ``10 ** BASELINE_SIGNAL[workload][dims]``,
    identity at or above it; None where no threshold was learned (ranges: the rule table's baseline).

    On single cells and one-way marginals which of the two wins turns on the signal per cell: where most cells
    hold less than the noise, hb's top-down rounding zeroes whole empty subtrees and identity leaves noise on
    every empty cell; where cells hold more, identity's one measurement per cell at the whole budget beats hb's
    cells, measured at a share of it.  The signal decade of the whole table (the rule table's key) mixes tables
    whose cells hold ten times more or less; the ratio is what the error follows."""
    threshold = signal_threshold(workload, dims)
    if threshold is None:
        return None
    return "hb" if per_cell < 10.0 ** threshold else "identity"


def signal_threshold(workload: str, dims: int) -> float | None:
    """log₁₀ of the learned signal per cell below which ``workload``'s baseline is hb (tables of more ordered
    columns than learned take the largest learned); None where none was learned."""
    thresholds = BASELINE_SIGNAL.get(workload, {})
    if not thresholds:
        return None
    return thresholds[min(max(dims, min(thresholds)), max(thresholds))]


def candidates(workload: str, shape: tuple[int, ...]) -> list[str]:
    """Every algorithm the rule table of ``workload`` (or its fallbacks, hb and identity) may run on a table of
    ``shape``: those named anywhere in it that can take the shape."""
    names = {FALLBACK, "identity"}
    for decades in RULES[workload].values():
        for entry in decades.values():
            names.update(n for i, n in enumerate(entry) if i in (0, 3, 4))
    return sorted(n for n in names if _takes(n, shape))


def _takes(name: str, shape: tuple[int, ...]) -> bool:
    """Whether ``name`` with its default options can release a table of ``shape``: its shape checks and its
    work ceilings (a choice that would pass a ceiling gives way as one that cannot take the shape)."""
    try:
        get_algorithm(name).check(tuple(shape))
    except UsageError:
        return False
    return True


def _unordered(column) -> bool:
    """A categorical column without a declared hierarchy: its cells have no order."""
    return getattr(column, "kind", None) == "categorical" and not getattr(column, "hierarchy", None)


def _unordered_axes(columns) -> list[int]:
    return [k for k, c in enumerate(columns or ()) if _unordered(c)]


def _axis_error_factors(axis, ordered: bool) -> tuple[float, float]:
    """(Δ₂² factor, workload variance factor) of one Privelet axis: the average over all ranges (ordered) or over
    single cells (categorical) of the variance per unit noise variance on every coefficient."""
    from ..privelet import HaarAxis  # noqa: PLC0415  (privelet imports nothing from here)
    scales, factors = axis.variance_factors_by_class()
    if isinstance(axis, HaarAxis) and ordered:
        per_level = axis.level_costs()
        return float(axis.l2_squared), float(np.dot(per_level, axis.level_scales**2))
    n = factors.shape[0]
    if ordered and scales.size == 1 and np.all(factors == 1):  # an untransformed ordered axis: |R| per range
        return 1.0, (n + 2) / 3
    return float(axis.l2_squared), float((factors * scales**2).sum(axis=1).mean())


def choose_gaussian(shape: tuple[int, ...], columns=None, workload: str = "ranges") -> dict:
    """The zCDP choice for a table of ``shape``: ``chosen``, ``reason`` and ``expected`` (each candidate's exact
    average variance per query of the table's workload, per unit σ² = 1/(2ρ)).  Reads only public facts.  For
    the cells workload the choice is identity, whose every cell has the least variance any of these strategies
    gives a cell (each spends the whole budget on one measurement of every cell or on several coarser ones); the
    marginals workload is served as ranges (a marginal's cell is a range along its axis)."""
    from ..hierarchical import EXACT_L2_CELLS, best_branching, l2_range_error  # noqa: PLC0415
    from ..privelet import HaarAxis, Privelet  # noqa: PLC0415
    unordered = set(_unordered_axes(columns))
    if workload == "cells":
        return {"chosen": "identity", "reason": "zCDP, workload cells: identity is the unbiased estimate of each "
                "cell with the least variance", "expected": {}}
    if len(unordered) == len(shape):
        return {"chosen": "identity", "reason": "zCDP: every column is categorical: cells have no order, so range "
                "queries do not apply and identity is the unbiased estimate of each cell", "expected": {}}
    ordered = [k not in unordered and not getattr((columns or [None] * len(shape))[k], "hierarchy", None)
               for k in range(len(shape))]
    expected = {"identity": float(np.prod([(n + 2) / 3 if o else 1.0 for n, o in zip(shape, ordered)]))}
    privelet = Privelet()
    axes = privelet.axes_for(tuple(shape), columns)
    for axis in axes:
        if isinstance(axis, HaarAxis):
            axis.use_weights(axis.l2_weights())
    if any(isinstance(a, HaarAxis) for a in axes):
        l2, err = 1.0, 1.0
        for axis, o in zip(axes, ordered):
            a_l2, a_err = _axis_error_factors(axis, o)
            l2, err = l2 * a_l2, err * a_err
        expected["privelet"] = l2 * err
    if len(shape) == 1 and ordered[0] and 2 <= shape[0] <= EXACT_L2_CELLS:
        expected["hb"] = l2_range_error(int(shape[0]), best_branching(tuple(shape), "gaussian"))
    optimised = _hdmm_error(tuple(shape), columns, ordered)
    if optimised is not None:
        expected["hdmm"] = optimised
    chosen = min(expected, key=lambda k: (expected[k], k))
    figures = ", ".join(f"{k} {v:.4g}" for k, v in sorted(expected.items(), key=lambda kv: kv[1]))
    reason = (f"zCDP: the least exact average variance per query (ranges along ordered columns, single categories "
              f"along categorical ones) per unit sigma^2 among the data-independent L2 strategies: {figures}")
    return {"chosen": chosen, "reason": reason, "expected": {k: round(v, 4) for k, v in expected.items()}}


#: Under zCDP auto weighs hdmm (a strategy optimised for the table's ranges) where every ordered column has at
#: most this many cells or a cached strategy: optimising one of 256 cells takes a few seconds once (then it is
#: cached), one of 1,024 about 90 s.
HDMM_AUTO_CELLS = 256


def _hdmm_error(shape: tuple[int, ...], columns, ordered: list[bool], noise: str = "gaussian") -> float | None:
    """hdmm's exact average variance per query on the table's workload (all ranges along the ``ordered`` axes,
    single categories along the others), per unit σ² = 1/(2ρ) under ``noise="gaussian"`` and per unit 1/ε² under
    "laplace", or None where auto does not weigh it: no ordered axis, more than hdmm takes, or an ordered column
    past HDMM_AUTO_CELLS without a cached strategy.  Public facts only (the strategy depends on the shape, the
    column kinds and the noise).

    The estimate is x̂ = (AᵀA)⁻¹Aᵀy for the integer strategy A = A₁ ⊗ … with noise of variance v per answer
    (Δ₂²σ² for the Gaussian, 2Δ₁²/ε² for the Laplace), so a box query w = ⊗w_k has variance
    v·Π_k w_kᵀ(A_kᵀA_k)⁻¹w_k, and the average over the product workload is the product of the per-axis averages:
    tr(G_k(A_kᵀA_k)⁻¹)/m_k with G_k the all-ranges Gram on an ordered axis and the identity on a categorical
    one."""
    from ..hdmm import HDMM, MAX_ORDERED_AXES, optimised_axes  # noqa: PLC0415  (loads scipy.linalg)
    from ..strategies.integer_strategy import inverse_grams  # noqa: PLC0415
    from ..strategies.range_grams import RangeGram  # noqa: PLC0415
    from ..strategies.optimized import noise_kind  # noqa: PLC0415
    from ..strategies.strategy_cache import default_cache_dir, is_cached  # noqa: PLC0415

    axes = optimised_axes(shape, columns)
    if not any(axes) or sum(axes) > MAX_ORDERED_AXES or axes != list(ordered):
        return None  # (a categorical column with a hierarchy is ordered for hdmm, a category for the workload)
    directory = default_cache_dir()
    if any(o and n > HDMM_AUTO_CELLS and not is_cached("all_ranges", n, noise_kind(noise), directory)
           for n, o in zip(shape, axes)):
        return None
    try:
        strategy = HDMM().plan(shape, columns, noise).strategy
    except (UsageError, ValueError):
        return None
    error = float(strategy.l2_squared) if noise == "gaussian" else 2.0 * float(strategy.l1) ** 2
    for n, o, inverse in zip(shape, axes, inverse_grams(strategy)):
        if o:
            gram = RangeGram("all_ranges", int(n))
            error *= float(np.sum(gram.dense() * inverse)) / gram.queries
        else:
            error *= float(np.trace(inverse)) / int(n)
    return error


_EXACT_ERRORS: dict = {}
#: hdmm replaces a baseline only where its exact variance is lower by more than rounding: on a few cells its
#: optimised strategy is the identity itself.
OPTIMISED_MARGIN = 1e-6


def _baseline_error(name: str, shape: tuple[int, ...], ordered: list[bool]) -> float | None:
    """The exact average variance per query over the table's workload (all ranges along ``ordered`` axes, single
    categories along the others) of baseline ``name`` under pure ε, per unit 1/ε², where it has a closed form:
    identity (2 times the mean number of cells a query sums, (n + 2)/3 per ordered axis) and Hb on one ordered
    column (its tree's exact error, :func:`~dphist.algorithms.hierarchical.l2_range_error`, at a node variance of
    2h² for h measured levels sharing ε evenly); None otherwise."""
    from ..hierarchical import Hb, l2_range_error  # noqa: PLC0415

    if name == "identity":
        return 2.0 * float(np.prod([(n + 2) / 3 if o else 1.0 for n, o in zip(shape, ordered)]))
    if name == "hb" and len(shape) == 1 and ordered[0] and shape[0] >= 2:
        tree, b = Hb().tree_for(shape, "laplace")
        if tree.levels < 2:
            return None
        h = tree.levels - 1  # the root is not measured
        return 2.0 * h * l2_range_error(int(shape[0]), int(b))
    return None


def _optimised_instead(name: str, shape: tuple[int, ...], columns) -> tuple[str | None, str]:
    """Under pure ε, for the ranges workload: ("hdmm", why) instead of the baseline ``name`` where hdmm's exact
    average variance per range (:func:`_hdmm_error`) is below the baseline's (:func:`_baseline_error`).  Both are
    data-independent linear estimates, so the comparison reads public facts only.  Where the rule named a
    baseline, no data-adaptive algorithm was safe there, and the strategy optimised for exactly these queries is
    the better data-independent choice; on real columns it kept its lead after non-negativity and rounding (a
    sparse one included: docs/algorithms.md §12).  (None, "") where it is not."""
    from ..hdmm import optimised_axes  # noqa: PLC0415
    from ..strategies.strategy_cache import default_cache_dir  # noqa: PLC0415

    unordered = set(_unordered_axes(columns))
    ordered = [k not in unordered and not getattr((columns or [None] * len(shape))[k], "hierarchy", None)
               for k in range(len(shape))]
    # Both figures depend on the shape and the axes' kinds only (and on what the cache holds): kept per process,
    # as a data-adaptive release may choose many times (the audit, the error simulation).
    key = (name, shape, tuple(ordered), tuple(optimised_axes(shape, columns)), str(default_cache_dir()))
    if key not in _EXACT_ERRORS:
        base = _baseline_error(name, shape, ordered)
        _EXACT_ERRORS[key] = (base, _hdmm_error(shape, columns, ordered, "laplace") if base is not None else None)
    base, optimised = _EXACT_ERRORS[key]
    if optimised is None or optimised >= base * (1 - OPTIMISED_MARGIN):
        return None, ""
    return "hdmm", (f"then hdmm instead, whose strategy optimised for these ranges has the lower exact average "
                    f"variance per range ({optimised:.4g} against {name}'s {base:.4g}, per unit 1/epsilon^2)")


class Auto(Algorithm):
    name = "auto"
    summary = ("chooses an algorithm per table from its shape, ε, workload and a noisy total (rules learned on DPBench "
               "and real tables; never a data-adaptive one where it was worse than identity or hb)")
    options = {"total_share": (Fraction(1, 20), option.fraction_between_0_and_1)}
    option_help = {"total_share": "share of the table's ε spent on the noisy total that the choice reads"}
    data_adaptive = True

    def __init__(self, workload: str | None = None, **options):
        """``workload``: the questions the table will answer (:data:`WORKLOADS`), the one the choice serves; None:
        :func:`default_workload` of the table's columns.  Not an option of the user's: a release passes its
        table's workload (--workload, or the table's), which is also the one its report states."""
        super().__init__(**options)
        try:
            self.served = None if workload is None else option.choice(*WORKLOADS)(workload)
        except ValueError as exc:
            raise UsageError(f"algorithm 'auto': workload: {exc}") from None

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """Under zCDP the chosen algorithm's steps (a choice from public facts); with every column categorical,
        identity's; otherwise the noisy total, then the steps of every algorithm the rules may choose for this
        shape (with its default options), on the rest.  (hdmm, which may stand in for a baseline, is not among
        them: its quantum follows the budget, so :meth:`run` checks its step and keeps the baseline where it does
        not fit.)"""
        shape = tuple(shape)
        if noise == "gaussian":
            chosen = choose_gaussian(shape, columns, self.workload(columns))["chosen"]
            return get_algorithm(chosen).steps(shape, columns, noise)
        if len(_unordered_axes(columns)) == len(shape):
            return get_algorithm("identity").steps(shape, columns, noise)
        share = self.params["total_share"]
        steps = [Step("the table's total", "laplace", share)]
        for name in candidates(self.workload(columns), shape):
            steps += [dataclasses.replace(s, what=f"{name}: {s.what}", share=s.share * (1 - share))
                      for s in get_algorithm(name).steps(shape, columns, noise)]
        return steps

    def budget_steps(self, shape: tuple[int, ...], budget: PrivacyBudget, columns=None) -> list[Step]:
        """Under zCDP the chosen algorithm's steps on ``budget`` (its plan may depend on the amount); otherwise
        :meth:`steps`."""
        if budget.noise == "gaussian":
            chosen = choose_gaussian(tuple(shape), columns, self.workload(columns))["chosen"]
            return get_algorithm(chosen).budget_steps(tuple(shape), budget, columns)
        return self.steps(shape, columns, budget.noise)

    def workload(self, columns=None) -> str:
        """The workload the choice serves: the one it was made for, else :func:`default_workload` of ``columns``."""
        return self.served or default_workload(columns)

    def choose(self, shape: tuple[int, ...], epsilon: Fraction, noisy_total: float, columns=None,
               total_sd: float = 0.0) -> dict:
        """The choice for a table of ``shape`` to be released at ``epsilon`` per record (after the total's share),
        as a report entry: ``workload``, ``chosen`` and ``reason``.  Reads only public facts and the noisy
        total, whose noise has standard deviation ``total_sd`` (public: from its scale).

        Where the rule's algorithm is not the same at every signal decade within DOUBT standard deviations of
        N̂ (at a small ε and few records N̂ cannot tell 1,000 records from 5,000), the choice is the rule's
        baseline, identity or hb: the data-adaptive algorithms are safe only in the settings they were learned
        in, and the baselines' errors do not depend on the data through a structure."""
        workload = self.workload(columns)
        # Locality (what every algorithm but identity exploits) runs along ordered columns only: a categorical
        # column splits the table into slices, each an ordered table with its share of the records, so the rule
        # is looked up for one slice.
        unordered = _unordered_axes(columns)
        ordered = [n for k, n in enumerate(shape) if k not in unordered]
        if not ordered:
            return {"workload": workload, "chosen": "identity",
                    "reason": "every column is categorical: cells have no order, so no algorithm gains from "
                    "neighbouring cells and identity is the unbiased estimate of each cell"}
        slices = int(np.prod([shape[k] for k in unordered], dtype=np.int64))
        signal = max(float(noisy_total), 1.0) * float(epsilon) / slices
        rules = RULES[workload]
        name, regret, datasets, (d, size), dec = nearest_rule(rules, len(ordered), int(np.prod(ordered)), signal)
        per_slice = f" per slice of the {slices} categories" if slices > 1 else ""
        reason = (f"{workload} rule for {d}-D tables of {size} cells at noisy total x epsilon ~ 1e{dec} (here "
                  f"{signal:.3g}{per_slice}): lowest mean regret ({regret} over {datasets} data sets of DPBench and "
                  "the real-table corpus) among identity, hb and the algorithms never worse than both there")
        entry = rules[(d, size)][dec]
        baseline = entry[4] if len(entry) > 4 else None
        per_cell = signal / int(np.prod(ordered))
        by_signal = signal_baseline(workload, d, per_cell)
        if by_signal is not None:
            baseline = by_signal
            if name in BASELINES:
                reason += (f"; of identity and hb, {baseline}, as the signal per cell (noisy total x epsilon / cells) "
                           f"is {per_cell:.3g}, {'below' if baseline == 'hb' else 'at or above'} the learned "
                           f"{10.0 ** signal_threshold(workload, d):.3g}")
                name = baseline
        spread = [nearest_rule(rules, len(ordered), int(np.prod(ordered)),
                               max(float(noisy_total) + k * DOUBT * total_sd, 1.0) * float(epsilon) / slices)[4]
                  for k in (-1, 1)]
        # where the signal per cell picks the baseline, two decades whose rules are both baselines agree
        kind = (lambda a: "baseline" if a in BASELINES else a) if by_signal is not None else (lambda a: a)
        doubtful = [e for e in range(min(spread), max(spread) + 1)
                    if kind(rules[(d, size)].get(e, entry)[0]) != kind(name)]
        if doubtful and baseline is not None and baseline != name:
            reason += (f"; but within {DOUBT} standard deviations of the noisy total the signal may be "
                       f"~1e{min(spread)} to ~1e{max(spread)}, where the rule differs, so its baseline {baseline}")
            name = baseline
        if not _takes(name, shape) or (slices > 1 and name in SEQUENCE_ONLY):
            # The rule's best algorithm for tables of several columns, else the fixed fallback.
            usable = len(entry) > 3 and _takes(entry[3], shape) and not (slices > 1 and entry[3] in SEQUENCE_ONLY)
            other = entry[3] if usable else FALLBACK
            why = " (the rule's best for several columns)" if other != FALLBACK else ""
            reason += f"; {name} cannot take a table of shape {tuple(shape)}, so {other}{why}"
            name = other
        if workload == "ranges" and name in BASELINES:
            better, why = _optimised_instead(name, tuple(shape), columns)
            if better is not None:
                return {"workload": workload, "chosen": better, "reason": f"{reason}; {why}", "instead_of": name}
        return {"workload": workload, "chosen": name, "reason": reason}

    @staticmethod
    def low_signal(name: str, shape: tuple[int, ...], epsilon: Fraction, noisy_total: float) -> dict:
        """:func:`low_signal_options` at the signal max(N̂, 1)·ε (ε per record, after the total's share)."""
        return low_signal_options(name, tuple(shape), max(float(noisy_total), 1.0) * float(epsilon))

    def instance(self, name: str, shape: tuple[int, ...], epsilon: Fraction, noisy_total: float) -> Algorithm:
        """The chosen algorithm, set up to reuse N̂ where it would otherwise measure a total of its own, with the
        low-signal options of :func:`low_signal_options` (a 1-D table has no categorical slices)."""
        extra = self.low_signal(name, shape, epsilon, noisy_total)
        if issubclass(REGISTRY[name], DPCube):
            # The block DPCube would choose itself from this total, as the rule table measured it (the longest
            # axis's block: shorter axes are cut to their length in either mode).
            learned = {**as_learned(name), **extra}
            block = max(REGISTRY[name](**learned).auto_block(noisy_total, tuple(shape), epsilon))
            return get_algorithm(name, block=block, **learned)
        return get_algorithm(name, **extra)

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        if budget.noise == "gaussian":
            # zCDP: a data-independent choice from public facts only, so no total is measured.
            workload = self.workload(columns)
            choice = choose_gaussian(counts.shape, columns, workload)
            estimate = get_algorithm(choice["chosen"]).run(counts, budget, columns)
            return with_choice(estimate, choice["chosen"], {"workload": workload, "chosen": choice["chosen"],
                                                            "reason": choice["reason"]})
        if len(_unordered_axes(columns)) == counts.ndim:
            # Every column categorical: the choice is identity whatever the total, so no total is measured.
            choice = self.choose(counts.shape, budget.amount, 0.0, columns)
            return with_choice(get_algorithm(choice["chosen"]).run(counts, budget, columns), choice["chosen"], choice)
        # measure: the table's total, with a share of ε
        share = self.params["total_share"]
        for_total, rest = budget.split([share, 1 - share])
        noisy_total, total_record = for_total.laplace(np.asarray(counts.sum()), 1, for_total.amount,
                                                      "the table's total (read by the choice of algorithm)",
                                                      composition="one query")
        # select: the algorithm, from public facts and the noisy total (post-processing)
        per_record = rest.epsilon_per_record(rest.amount)
        choice = self.choose(counts.shape, per_record, float(noisy_total), columns,
                             math.sqrt(float(total_record.noise_variance)))
        name = choice["chosen"]
        if name == "hdmm":
            # its quantum follows the budget, so its step is checked here rather than among auto's steps
            try:
                get_algorithm(name).check_budget(counts.shape, rest, columns)
            except UsageError:
                name = choice["instead_of"]
                choice = {**choice, "chosen": name,
                          "reason": f"{choice['reason']}; but its measurement does not fit this budget, so {name}"}
        # run it on the rest of the budget
        chosen = self.instance(name, counts.shape, per_record, float(noisy_total))
        estimate = chosen.run(counts, rest, columns)
        # infer: N̂ is released already, and it measures the table's total independently of the chosen
        # algorithm's own measurements: one more measurement in its least squares (post-processing, no new noise)
        refitted = chosen.refit(estimate, total_measurement(float(noisy_total), total_record.noise_variance))
        reused = {}
        if refitted is not None:
            estimate = refitted
            reused = {"noisy_total_reused": f"as {chosen.total_refit}"}
        extra = self.low_signal(name, counts.shape, per_record, float(noisy_total))
        if extra:
            reused["low_signal_options"] = {k: str(v) for k, v in extra.items()}
        return with_choice(estimate, name, {**choice, "noisy_total": int(noisy_total),
                                            "epsilon_for_total": format_fraction(for_total.amount), **reused})


def with_choice(estimate: Estimate, name: str, choice: dict) -> Estimate:
    """``estimate`` of the chosen algorithm ``name`` as auto's: its report entries led by the choice (what was
    chosen, and why) and the algorithm's name."""
    return dataclasses.replace(estimate, choices={"algorithm_choice": choice, **estimate.choices},
                               structure={"algorithm": name, **estimate.structure})
