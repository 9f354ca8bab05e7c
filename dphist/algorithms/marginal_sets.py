"""Sets of marginal tables from the same records that agree exactly with each other (docs/algorithms.md §6.4).

Two strategies, chosen before any data is read:

* **full**: measure the contingency table over the union of the marginals' columns once with all of ε,
  post-process it to non-negative integers, and sum it down to each marginal.  Every marginal is a
  post-processing of one ε-DP release, and any two share the same sub-marginals and grand total because they are
  sums of one integer table.  Its error grows with the full table's size.
* **separate**: measure each of the k marginals with the identity mechanism at ε/k (sequential composition:
  one record is in every marginal), then make them mutually consistent by exact least squares and non-negative
  integers that keep the shared sub-tables (:mod:`dphist.inference.marginals`).  Its error grows with k.

``auto`` picks the one with the lower expected squared error, computed from public facts alone (the marginals'
shapes, ε and the noise distribution).

Under zCDP a third strategy applies, and ``auto`` takes it:

* **residual**: measure the marginals' residual bases (every subset of a marginal, docs/algorithms.md §11) once,
  jointly, with the whole amount split by the residual planner's closed form, and rebuild every marginal from
  them.  For the sum of all cells' variances this is the optimal Gaussian linear measurement of the workload
  (Xiao et al. 2023), so its expected error is never above full's or separate's.  The marginals share their
  residual pieces, so every shared sub-table agrees exactly before rounding, for any set (no refusal).

Under pure ε "residual" is the best of the Laplace plans of :mod:`.residual_laplace` (docs/algorithms.md §11.1):
tables of L1 sensitivity 1 (workload marginals, and residual bases with binary attributes differenced) at
optimised shares of ε, every residual basis estimated from them by least squares, every marginal rebuilt as
under zCDP.  Its plan "marginals" at equal shares is strategy separate with its least squares, so its expected
error is never above separate's; ``auto`` takes it when it is below both full's and separate's.

Under zCDP (``noise="gaussian"``, amounts ρ) the same two strategies apply with discrete Gaussian noise: "full"
measures the table over the union with Δ₂² = 1 at ρ (σ² = 1/(2ρ) per cell); "separate" measures each marginal with
identity on its part ρ/k (σ² = k/(2ρ): the k marginals of one record have Δ₂² = k together, so this is the same
noise as one joint measurement at ρ), and the least squares weights use those variances.  The variance of
"separate" grows as k under L2 against k² under Laplace, which is why marginal sets favour Gaussian noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ..inference.marginals import check_separable, expected_errors, full_table_errors, shared_subsets
from .residual_laplace import LaplacePlan, best_plan
from .residual_planner import ResidualPlan, check_sampler, discrete_variance_per_cell, plan_residuals
from ..errors import UsageError
from ..privacy import discrete_laplace_variance
from ..privacy.samplers import discrete_gaussian_variance
from ..text import quoted

__all__ = ["parse_marginals", "union_of", "derive_marginal", "labelled_frame", "STRATEGIES", "MarginalPlan",
           "plan_marginals", "cell_variance", "SEPARATE_MAX_CELLS"]

STRATEGIES = ("auto", "full", "separate", "residual")
#: Strategy "separate" solves a transportation problem per table; beyond this many cells it is too slow.
SEPARATE_MAX_CELLS = 1_000_000
ERROR_MEASURE = ("expected squared error of the unbiased estimates (before non-negativity and rounding), summed "
                 "over all cells of all marginals; per table, the root-mean-square error per cell")


def parse_marginals(value: Any) -> list[tuple[str, ...]]:
    """``"age,sex;sex,income"`` or ``[["age", "sex"], ["sex", "income"]]`` into tuples of column names."""
    if isinstance(value, str):
        groups = [[c.strip() for c in part.split(",")] for part in value.split(";") if part.strip()]
    else:
        try:
            groups = [[str(c).strip() for c in ([g] if isinstance(g, str) else g)] for g in value]
        except TypeError:
            raise UsageError("marginals must be like 'age,sex;sex,income' or a list of column lists") from None
    if not groups:
        raise UsageError("marginals: give at least one table, like 'age,sex;sex,income'")
    out = []
    for group in groups:
        if not group or not all(group):
            raise UsageError("marginals: every table needs column names, like 'age,sex;sex,income'")
        if len(set(group)) != len(group):
            raise UsageError(f"marginals: a column is listed twice in {quoted(','.join(group))}")
        if tuple(group) in out:
            raise UsageError(f"marginals: {quoted(','.join(group))} is listed twice")
        out.append(tuple(group))
    return out


def union_of(marginals: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The columns of all marginals, in order of first appearance (the full table's axes)."""
    return tuple(dict.fromkeys(c for m in marginals for c in m))


def derive_marginal(full: np.ndarray, axes: tuple[str, ...], columns: tuple[str, ...]) -> np.ndarray:
    """``full`` (one axis per name in ``axes``) summed over the axes not in ``columns``, with its axes in the
    order of ``columns``."""
    keep = [axes.index(c) for c in columns]
    drop = tuple(i for i in range(len(axes)) if i not in keep)
    summed = full.sum(axis=drop) if drop else full
    remaining = [i for i in range(len(axes)) if i in keep]  # axes left after the sum, in their old order
    return np.transpose(summed, [remaining.index(i) for i in keep])


def labelled_frame(columns: list, values: dict[str, np.ndarray]) -> pd.DataFrame:
    """A tidy table in C order over ``columns`` (schema column objects): their labels, then ``values`` (each
    an array of the table's shape)."""
    from ..publishing.tidy import TidyTable

    return TidyTable(columns, values).frame()


@dataclass
class MarginalPlan:
    """How a marginal set will be released: the strategy, why, and the strategies' expected errors.  Under
    strategy residual, ``residual`` is the residual plan whose bases rebuild the marginals (attribute i is
    ``attributes[i]``, the marginals' columns in order of first appearance), and under pure ε ``laplace`` is the
    Laplace plan that measures them; else both are None."""

    marginals: list[tuple[str, ...]]
    strategy: str
    chosen_by: str
    expected: dict
    shared: list[tuple[str, ...]]
    residual: ResidualPlan | None = field(default=None, repr=False)
    attributes: tuple[str, ...] = ()
    laplace: LaplacePlan | None = field(default=None, repr=False)

    def indices(self, marginal: tuple[str, ...]) -> tuple[int, ...]:
        """The residual plan's key of ``marginal``: its columns' attribute indices, sorted."""
        return tuple(sorted(self.attributes.index(c) for c in marginal))

    def report(self) -> dict:
        return {"strategy": self.strategy, "chosen_by": self.chosen_by,
                "shared_sub_tables": [list(s) for s in self.shared],
                "expected_error": self.expected}


def plan_marginals(marginals: list[tuple[str, ...]], sizes: dict[str, int], epsilon: Fraction,
                   algorithm: str, strategy: str = "auto", full_limit: str | None = None, *,
                   noise: str = "laplace") -> MarginalPlan:
    """Choose the strategy for ``marginals`` from public facts: the columns' sizes, the amount and the algorithm.

    ``epsilon`` is the amount per row of the protected unit: ε/factor for pure ε (``noise="laplace"``), or
    ρ/factor² for zCDP (``noise="gaussian"``: a unit of K rows multiplies Δ₂² by K²).
    Expected errors are exact for the identity mechanism (Δ₁ = Δ₂ = 1 per measured table): "full" measures the
    table over all the columns with all of the amount; "separate" measures each marginal with a k-th of it and
    combines them by least squares; the per-cell variances are the exact ones of discrete Laplace noise of scale
    1/ε (k/ε) or of discrete Gaussian noise of σ² = 1/(2ρ) (k/(2ρ)).  With another algorithm only "full"
    applies (its error is not computed here).  ``full_limit`` says why the full table cannot be released (too
    many columns or cells), if so.

    With identity, "residual" also applies.  Under zCDP: the residual plan's exact per-cell variances with the
    discrete Gaussian's variance per basis (:func:`~dphist.algorithms.residual_planner.discrete_variance_per_cell`),
    and "auto" chooses it (the other two are still reported).  Under pure ε: the best Laplace plan of
    :func:`~dphist.algorithms.residual_laplace.best_plan`, its exact per-cell variances (discrete Laplace of the
    exact shares), and "auto" chooses it when its expected error is below full's and separate's (those that
    apply).  UsageError (one line, nothing read) for residual requested with another algorithm, or at an amount
    whose noise is beyond the sampler's limit (auto then falls back to full or separate).
    """
    if noise not in ("laplace", "gaussian"):
        raise UsageError(f"unknown noise {quoted(noise)} for a marginal set (laplace or gaussian)")
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown marginal strategy {quoted(strategy)} (choose one of {', '.join(STRATEGIES)})")
    k = len(marginals)
    names = ["_".join(m) for m in marginals]
    separable = check_separable(marginals)
    biggest = max(math.prod(sizes[c] for c in m) for m in marginals)  # exact Python ints
    if separable is None and biggest > SEPARATE_MAX_CELLS:
        separable = f"a marginal has {biggest} cells, more than the {SEPARATE_MAX_CELLS} strategy separate handles"
    if separable is None and algorithm != "identity":
        separable = (f"strategy separate measures each marginal with identity, and algorithm {quoted(algorithm)} "
                     "was chosen")
    if separable is None:
        try:
            cell_variance(noise, epsilon, k)
        except ValueError:
            separable = f"each of the {k} marginals would get noise past the samplers' range"

    try:  # the largest share any strategy's measurement gets: one table at the whole amount (full's)
        cell_variance(noise, epsilon, 1)
    except ValueError:
        unit = "rho" if noise == "gaussian" else "epsilon"
        raise UsageError(f"a marginal set of {k} tables at {unit} {_sig(float(epsilon))} per record is too small "
                         "for exact noise (its scale would be past the samplers' range); raise the budget") from None

    def summary(errors: list[float]) -> dict:
        cells = [float(np.prod([sizes[c] for c in m], dtype=np.float64)) for m in marginals]
        return {"total": _sig(sum(errors)),
                "rmse_per_cell": {n: _sig((e / c) ** 0.5) for n, e, c in zip(names, errors, cells)}}
    expected: dict[str, Any] = {"measure": ERROR_MEASURE}
    full_errors = None
    if algorithm == "identity":
        full_errors = full_table_errors(marginals, sizes, cell_variance(noise, epsilon, 1))
        expected["full"] = summary(full_errors)
    else:
        expected["full"] = {"not_computed": f"exact for identity only; algorithm {quoted(algorithm)} was chosen"}
    separate_errors = None
    try:
        variance = cell_variance(noise, epsilon, k)
    except ValueError:
        variance = None
    if variance is not None and (separable is None or algorithm != "identity"):
        separate_errors = expected_errors(marginals, sizes, [variance] * k)
        expected["separate"] = summary(separate_errors)
        if separable is not None:
            expected["separate"]["not_available"] = separable
    else:
        expected["separate"] = {"not_available": separable}

    residual, residual_errors, residual_limit, laplace = None, None, None, None

    def not_available(plan, exc: ValueError, unit: str) -> str:
        """Note why the residual plan does not apply at this budget; refuse if it was asked for by name."""
        expected["residual"] = {"bases": len(plan.bases), "not_available": str(exc)}
        if strategy == "residual":
            raise UsageError(f"marginal strategy residual does not apply at this budget: {exc}; raise {unit}") from None
        return str(exc)

    def per_marginal(variances: dict, attributes: list) -> list[float]:
        """Each marginal's summed variance, from the per-cell variance of each (sorted attribute tuple)."""
        return [variances[tuple(sorted(attributes.index(c) for c in m))] * math.prod(sizes[c] for c in m)
                for m in marginals]
    if algorithm != "identity":
        if strategy == "residual":
            how = "discrete Gaussian" if noise == "gaussian" else "discrete Laplace"
            raise UsageError(f"marginal strategy residual measures residual bases with {how} noise itself, not "
                             f"with algorithm {quoted(algorithm)}; drop the algorithm or choose another marginal "
                             "strategy")
    elif noise != "gaussian":
        attributes = union_of(marginals)
        indices = [[attributes.index(c) for c in m] for m in marginals]
        try:
            laplace, totals = best_plan(indices, [sizes[c] for c in attributes], epsilon)
        except ValueError as exc:
            residual = plan_residuals(indices, [sizes[c] for c in attributes])
            residual_limit = not_available(residual, exc, "epsilon")
        else:
            residual = laplace.structure
            residual_errors = per_marginal(laplace.variance_per_cell(epsilon), attributes)
            expected["residual"] = {**summary(residual_errors), "bases": len(residual.bases),
                                    "plan": laplace.method, "measures": laplace.describe(),
                                    "plans": {m: _sig(t) for m, t in totals.items()}}
    else:
        attributes = union_of(marginals)
        residual = plan_residuals([[attributes.index(c) for c in m] for m in marginals],
                                  [sizes[c] for c in attributes])
        try:
            check_sampler(residual, epsilon)
        except ValueError as exc:
            residual_limit = not_available(residual, exc, "rho")
        else:
            residual_errors = per_marginal(discrete_variance_per_cell(residual, epsilon), attributes)
            expected["residual"] = {**summary(residual_errors), "bases": len(residual.bases)}
    if full_limit is not None:
        expected["full"]["not_available"] = full_limit
    if separable is not None and full_limit is not None and (residual is None or residual_limit is not None):
        raise UsageError(f"these marginals cannot be released together: the full table {full_limit}, and strategy "
                         f"separate does not apply ({separable})")
    if strategy == "separate" and separable is not None:
        raise UsageError(f"marginal strategy separate does not apply: {separable}; use --marginal-strategy full")
    if strategy == "full" and full_limit is not None:
        raise UsageError(f"marginal strategy full does not apply: the full table {full_limit}; use "
                         "--marginal-strategy separate")
    available = [sum(e) for e, limit in ((full_errors, full_limit), (separate_errors, separable))
                 if e is not None and limit is None]
    if strategy != "auto":
        chosen, why = strategy, "requested"
    elif residual_errors is not None and noise == "gaussian":
        chosen, why = "residual", ("auto: residual bases measured jointly are the optimal Gaussian linear measurement "
                                   "of these marginals for the sum of their cells' variances (never worse than full "
                                   "or separate; their figures are given for comparison)")
    elif residual_errors is not None and (not available or sum(residual_errors) < min(available)):
        chosen, why = "residual", (f"auto: the lowest expected error (residual bases, Laplace plan "
                                   f"{quoted(laplace.method)}; full's and separate's are given for comparison)")
    elif full_limit is not None:
        chosen, why = "separate", f"auto: full does not apply (the full table {full_limit})"
    elif separable is not None:
        chosen, why = "full", f"auto: separate does not apply ({separable})"
    else:
        chosen = "separate" if sum(separate_errors) < sum(full_errors) else "full"
        why = "auto: the lower expected error"
    if noise == "gaussian":  # (a pure-ε report names no noise: Laplace is the default there)
        expected["noise"] = "discrete Gaussian, amounts are rho"
    return MarginalPlan(marginals, chosen, why, expected, shared_subsets(marginals)[1:],
                        residual if chosen == "residual" else None, union_of(marginals),
                        laplace if chosen == "residual" else None)


def cell_variance(noise: str, amount, parts: int) -> float:
    """The exact noise variance of one identity cell (Δ₁ = Δ₂ = 1) measured with ``amount``/``parts``: discrete
    Laplace of scale parts/ε, or discrete Gaussian of σ² = parts/(2ρ)."""
    amount = Fraction(amount)
    if noise == "gaussian":
        return discrete_gaussian_variance(Fraction(parts) / (2 * amount))
    return discrete_laplace_variance(Fraction(parts) / amount)


def _sig(value: float) -> float:
    return float(f"{value:.4g}")
