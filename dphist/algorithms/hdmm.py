"""HDMM: a measurement strategy optimised for the table's range workload (McKenna et al., PVLDB 2018;
docs/algorithms.md §12).

    select:   the p-Identity strategy A = [I; Θ]D⁻¹ optimised for the workload (all ranges, or prefixes) of each
              ordered column, for the budget's noise (L2 under zCDP, L1 under pure ε); on two ordered columns
              their Kronecker product (OPT_⊗); on a categorical column the identity.  Public: it depends on the
              shape, the column kinds, the workload and the noise only, and is read from the on-disk cache
              (:mod:`.strategies.strategy_cache`) where it was optimised before.  It is then rounded to
              integers, A_int = round(q·A), whose exact largest column norms are its sensitivities Δ₁ and Δ₂²
              (a record moves one cell, so the answers move by one column of A_int).
    measure:  y = A_int·x + noise in one kernel call (``budget.measure``) at Δ₁ (discrete Laplace, pure ε) or
              Δ₂² (discrete Gaussian, zCDP), with the whole budget
    infer:    least squares, x̂ = (A_intᵀA_int)⁻¹A_intᵀy, one solve per axis; every answer has the same noise,
              so this is the GLS estimate, unbiased, with the exact covariance v·(A_intᵀA_int)⁻¹ (v the kernel's
              noise variance per answer).  A total measured elsewhere is one more measurement in the same least
              squares (a rank-one update).

Ceiling: an ordered column of more than :data:`MAX_UNCACHED_CELLS` cells whose strategy is not in the cache is
refused before any row is read (optimising takes about 90 s of CPU at 1,024 cells under zCDP and grows about as
n³); a strategy put in the cache beforehand (by a run at that size with a raised ceiling, or a nightly job) is
used at any size.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..errors import UsageError
from ..inference.measurements import Measurement, by_query, pooled_total
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Ceiling, Estimate, Step
from .strategies.integer_strategy import (IntegerStrategy, default_quantum, inverse_grams, measure_strategy, quantise,
                                          reconstruct)
from .strategies.optimized import noise_kind
from .strategies.strategy_cache import cached_strategy, default_cache_dir, is_cached

__all__ = ["HDMM", "StrategyPlan", "STRATEGY_QUERY", "WORKLOADS", "MAX_UNCACHED_CELLS", "MAX_ORDERED_AXES",
           "optimised_axes", "forget_strategies"]

#: The option's values and the range workloads they name (:data:`.strategies.range_grams.KINDS`).
WORKLOADS = {"all_ranges": "all_ranges", "prefixes": "prefix"}
#: An ordered column of more cells than this is refused unless its strategy is cached (optimisation time).
MAX_UNCACHED_CELLS = 1024
#: OPT_⊗'s sensitivity is the product of its axes' (about q per axis): two ordered columns at most, so that it
#: stays within the samplers' ranges (docs/algorithms.md §12).
MAX_ORDERED_AXES = 2
#: The query of the one measurement: every row of the strategy.
STRATEGY_QUERY = ("optimised strategy",)
WHAT = "optimised range strategy"
CEILING = Ceiling(
    options=(), unit="cells", formula="the cells of an ordered column whose strategy is not cached",
    limit=MAX_UNCACHED_CELLS,
    why="optimising takes about 90 s of CPU at 1,024 cells under zCDP, growing about as the cube; a cached "
        "strategy is used at any size")


@dataclass(frozen=True, eq=False)
class StrategyPlan:
    """What a run selected, all public: the integer strategy (one factor per axis, the identity on a categorical
    one), the table's shape and the report's entries."""

    strategy: IntegerStrategy
    shape: tuple[int, ...]
    structure: dict


def optimised_axes(shape: tuple[int, ...], columns=None) -> list[bool]:
    """Per axis, whether it gets an optimised strategy: an ordered column (numeric, date, or undeclared) of at
    least 2 cells.  A categorical column, with or without a hierarchy, gets the identity (its ranges are single
    categories), as does a column of one cell (nothing to optimise)."""
    columns = list(columns) if columns is not None else [None] * len(shape)
    return [int(n) >= 2 and getattr(c, "kind", None) != "categorical" for n, c in zip(shape, columns)]


@lru_cache(maxsize=32)
def _strategy(kind: str, shape: tuple[int, ...], ordered: tuple[bool, ...], noise: str,
              cache_dir: str, q: int) -> tuple[IntegerStrategy, tuple[int, ...]]:
    """The integer strategy for a table of ``shape`` (the optimised one on the ``ordered`` axes rounded at the
    quantum ``q``, the identity on the others) and the p of each optimised axis.  Memoised in the process:
    planning's budget check, the run and the report's error figures all ask for it, and rounding costs a pass
    over every entry.  ValueError where rounding at ``q`` loses a cell."""
    dims = tuple(n for n, o in zip(shape, ordered) if o)
    if not dims:
        factors = tuple(_identity(n) for n in shape)
        return IntegerStrategy(factors, 1, 1, 1), ()
    optimised = cached_strategy(kind, dims, noise, cache_dir)
    rounded = quantise(optimised, q)
    parts = iter(rounded.factors)
    factors = tuple(next(parts) if o else _identity(n) for n, o in zip(shape, ordered))
    return (IntegerStrategy(factors, rounded.q, rounded.l1, rounded.l2_squared),
            tuple(int(f.p) for f in optimised.factors))


def _step(strategy: IntegerStrategy) -> Step:
    """The one measurement: every row of ``strategy`` at its exact sensitivities, with the whole budget."""
    return Step(WHAT, "measure", Fraction(1), Fraction(strategy.l1), Fraction(strategy.l2_squared))


def _identity(n: int) -> np.ndarray:
    eye = np.eye(int(n), dtype=np.int64)
    eye.setflags(write=False)
    return eye


class HDMM(Algorithm):
    name = "hdmm"
    summary = ("a measurement strategy optimised for the table's range workload (HDMM's p-Identity; one or two "
               "ordered columns)")
    options = {"workload": ("all_ranges", option.choice(*WORKLOADS))}
    option_help = {"workload": "the range queries the strategy is optimised for: all_ranges (every interval "
                               "[i, j) of each ordered column; boxes on two) or prefixes ([0, i])"}
    total_refit = "one more measurement of the table's total (least squares)"
    ceilings = (CEILING,)

    def plan(self, shape: tuple[int, ...], columns=None, noise: str = "laplace",
             budget: PrivacyBudget | None = None) -> StrategyPlan:
        """The public plan for a table of ``shape`` under the budget's ``noise`` ("laplace" or "gaussian"), read
        from the cache or optimised (and cached).  UsageError, before any data, for more than two ordered
        columns or an uncached ordered column past the ceiling.

        The quantum: :func:`default_quantum`, or with ``budget`` (public: its amount and unit) the largest of
        it, q/16, q/256, … whose measurement the samplers can take on that budget.  The sensitivity grows about
        as q per ordered axis, so at the smallest budgets a table may get (ε 10⁻⁶, ρ 5·10⁻¹³) the default's
        noise would be past the samplers' range; a coarser rounding is a slightly less optimal strategy, still
        measured at its exact sensitivity."""
        shape = tuple(int(n) for n in shape)
        ordered = tuple(optimised_axes(shape, columns))
        if sum(ordered) > MAX_ORDERED_AXES:
            raise UsageError(f"algorithm 'hdmm' optimises one or two ordered columns; this table has {sum(ordered)} "
                             "(declare the others categorical, or release fewer columns together)")
        kind, norm, directory = WORKLOADS[self.params["workload"]], noise_kind(noise), default_cache_dir()
        for n, o in zip(shape, ordered):
            if o and n > MAX_UNCACHED_CELLS and not is_cached(kind, n, norm, directory):
                raise UsageError(f"algorithm 'hdmm': an ordered column of {n:,} cells has no cached strategy, and "
                                 f"the ceiling is {MAX_UNCACHED_CELLS:,} cells per column without one (optimising "
                                 f"takes about 90 s of CPU at 1,024 cells, growing about as the cube); declare "
                                 f"fewer bins, or cache the strategy first (in {directory})")
        strategy, ps = self._quantised(kind, shape, ordered, norm, str(directory), budget)
        structure = {"workload": self.params["workload"], "noise": norm,
                     "strategy": "p-Identity per ordered column (Kronecker product on two), identity on categorical "
                                 "ones",
                     "optimised_axes": [i for i, o in enumerate(ordered) if o], "p": list(ps), "quantum": strategy.q,
                     "rows": strategy.rows, "l1": strategy.l1, "l2_squared": strategy.l2_squared}
        return StrategyPlan(strategy, shape, structure)

    @staticmethod
    def _quantised(kind: str, shape: tuple[int, ...], ordered: tuple[bool, ...], norm: str, directory: str,
                   budget: PrivacyBudget | None) -> tuple[IntegerStrategy, tuple[int, ...]]:
        """:func:`_strategy` at the largest quantum (default, /16, /256, …) whose step ``budget`` can take; the
        default without a budget, the coarsest that keeps every cell where none fits (the budget check then
        refuses it in one line)."""
        from ..privacy import BudgetExceeded  # noqa: PLC0415

        q = default_quantum(max(1, sum(ordered)))
        fitting = None
        while q >= 1:
            try:
                candidate = _strategy(kind, shape, ordered, norm, directory, q)
            except ValueError:  # rounding this coarse loses a cell
                break
            fitting = candidate
            if budget is None:
                return candidate
            try:
                _step(candidate[0]).tried(budget)
                return candidate
            except (ValueError, BudgetExceeded):
                q //= 16
        if fitting is None:
            raise UsageError("algorithm 'hdmm': its strategy cannot be rounded to integers for this table")
        return fitting

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """One measurement of every row of the integer strategy at its exact sensitivities, with the whole
        budget (at the default quantum: :meth:`budget_steps` for a given budget)."""
        return [_step(self.plan(shape, columns, noise).strategy)]

    def budget_steps(self, shape: tuple[int, ...], budget: PrivacyBudget, columns=None) -> list[Step]:
        return [_step(self.plan(shape, columns, budget.noise, budget).strategy)]

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # select: the strategy optimised for the workload and the budget's noise, rounded at the quantum the
        # budget can take (public: shape, columns and the amount only)
        plan = self.plan(counts.shape, columns, budget.noise, budget)
        # measure: every row of A_int, once, at its exact column norms (one kernel call)
        noisy, record = measure_strategy(plan.strategy, counts, budget, budget.amount, WHAT)
        # infer: least squares, per axis
        return self.infer(plan, (Measurement(STRATEGY_QUERY, noisy, record.noise_variance),))

    def infer(self, plan: StrategyPlan, measurements: tuple[Measurement, ...]) -> Estimate:
        """x̂ = (A_intᵀA_int)⁻¹A_intᵀy with the exact per-cell variance v·diag((A_intᵀA_int)⁻¹); a total measured
        elsewhere (t, of variance v_t) is one more least-squares measurement: with Σ = v·(A_intᵀA_int)⁻¹ and
        u = Σ1, x̂ + u·(t − 1ᵀx̂)/(1ᵀu + v_t), of variance diag Σ − u²/(1ᵀu + v_t) (Sherman–Morrison).
        Post-processing."""
        own = by_query(measurements)[STRATEGY_QUERY]
        v = float(own.variance)
        values = reconstruct(plan.strategy, own.values)
        diagonal, row_sums = np.ones(()), np.ones(())
        for inverse in inverse_grams(plan.strategy):
            diagonal = np.multiply.outer(diagonal, np.diag(inverse))
            row_sums = np.multiply.outer(row_sums, inverse.sum(axis=1))
        variance = v * diagonal
        structure = plan.structure
        total = pooled_total(measurements)
        if total is not None:
            u = v * row_sums
            denominator = float(u.sum()) + float(total.variance)
            d = len(plan.shape)
            gap = np.asarray(total.values, dtype=np.float64) - values.sum(axis=tuple(range(-d, 0)))
            values = values + np.reshape(gap, np.shape(gap) + (1,) * d) * u / denominator
            variance = variance - u * u / denominator
            structure = {**structure, "total_also_from": "an earlier noisy total (least squares)"}
        return Estimate(values=values, variance=variance, structure=structure, plan=plan,
                        measurements=tuple(measurements))


def forget_strategies() -> None:
    """Empty the in-process memo of strategies (the on-disk cache stays): the next run reads the cache again."""
    _strategy.cache_clear()
