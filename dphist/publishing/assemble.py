"""Assembling a release from its measurements: post-processing into tidy tables, the report, and the operator's summary.

Everything here reads only noisy values, public facts (the plan, the tables' shapes) and the privacy budget's
record, so it costs nothing (docs/algorithms.md §6).  :mod:`dphist.publishing.execution` hands over each table as a
:class:`MeasuredTable`; :func:`released_tables` post-processes them, :func:`release_report` writes the report,
and :class:`Release` holds the result (``write``, ``stage`` and ``summary``).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Context, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation import expected_error
from ..algorithms import Algorithm, Estimate, get_algorithm
from ..algorithms.auto.choice import default_workload
from ..read.counting import TableShape
from ..inference.nonnegative import nonnegative_integer_table
from ..errors import UsageError
from ..read.sources import is_path
from .writers import stage_release, write_release
from ..declare.job import TableRequest, table_name_for
from ..inference.marginals import (check_separable, consistent_marginals, expected_errors,
                                   nonnegative_integer_marginals)
from ..algorithms.marginal_sets import SEPARATE_MAX_CELLS, derive_marginal, labelled_frame
from ..algorithms.residual_planner import ResidualMeasurement, exact_variances, reconstruct
from .planning import ReleasePlan
from ..privacy import Measurement, PrivacyBudget, format_fraction, per_row_amount
from ..privacy.conversions import epsilon_for
from . import intervals
from .intervals import Z_95
from .tidy import CHUNK_ROWS, Tables, TidyTable
from .unit_cap import dropped_note, dropped_notice
from ..version import __version__
from ..text import quoted

__all__ = ["Release", "MeasuredTable", "ResidualSet", "table_report", "released_tables", "discovery_report", "release_report",
           "budget_report", "tidy_table", "NOT_PRIVATE", "DELTA_REFERENCE"]

POST_PROCESSING = ("top-down over a public tree of blocks (the algorithm's tree, or 4 splits per column): the "
                   "estimated total clamped at 0 and rounded; each block's parts projected onto the non-negative "
                   "values with the block's fixed sum (Euclidean) and rounded to it by largest remainders")
SEPARATE_CI = ("normal approximation: noisy_count ± 1.96 × expected_cell_sd, the exact sd of the least-squares "
               "consistent estimate")
#: Derived marginals of a full table whose cells carry independent noise (identity): a marginal cell sums k cells.
DERIVED_CI = ("normal approximation: noisy_count ± 1.96 × √(k × the full table's cell variance), k the full "
              "table's cells summed into the marginal's cell (identity: independent noise)")
SEPARATE_POST = ("exact least-squares consistency with the other marginals (shared sub-tables and grand total "
                 "agree), then non-negative integers with the shared sub-tables held fixed (L1-closest)")
RESIDUAL_CI = ("normal approximation: noisy_count ± 1.96 × expected_cell_sd, the exact sd of the marginal "
               "rebuilt from its residual bases (each basis's discrete Gaussian variance, as recorded)")
#: The same under pure ε, where the bases are estimated from Laplace measurements (docs/algorithms.md §11.1).
RESIDUAL_LAPLACE_CI = ("normal approximation: noisy_count ± 1.96 × expected_cell_sd, the exact sd of the marginal "
                       "rebuilt from its residual bases (each basis's least-squares variance from the recorded "
                       "discrete Laplace scales of the tables it is estimated from)")
RESIDUAL_POST = ("rebuilt from the set's residual bases (shared sub-tables and grand total agree exactly), then "
                 "non-negative integers: {how}")
#: A residual marginal set lists one step per basis up to this many; beyond it, one summary step.
RESIDUAL_STEPS_LISTED = 64
PRIVACY_UNIT = "one record (row)"
NEIGHBOURING = "add/remove one record"
SAMPLER = "exact discrete Laplace (binary-expansion sampler) on OS CSPRNG bits (os.urandom)"
TEST_SAMPLER = "exact discrete Laplace on a SEEDED PCG64 stream (test mode: NOT private)"
GAUSSIAN_SAMPLER = ("exact discrete Gaussian (Canonne, Kamath and Steinke 2020) for linear queries, exact discrete "
                    "Laplace and permute-and-flip for any data-adaptive step, on OS CSPRNG bits (os.urandom)")
GAUSSIAN_TEST_SAMPLER = ("exact discrete Gaussian (and discrete Laplace for data-adaptive steps) on a SEEDED PCG64 "
                         "stream (test mode: NOT private)")
#: The δ at which a ρ-zCDP release's report states the ε it implies (``epsilon_implied``; the ledger shows a
#: ρ spend at the same reference δ).  zCDP itself has no δ: this is a reading aid, not part of the guarantee.
DELTA_REFERENCE = Fraction(1, 10**6)
#: How ρ becomes (ε, δ) in the report.
#: Why a pure release charged none of the δ it was given.
DELTA_UNUSED = ("no step of this release can use delta (only finding the categories of an undeclared text "
                "column can), so none was charged")
CONVERSION = ("tight conversion of Canonne, Kamath and Steinke 2020 (Prop. 12): rho-zCDP implies (epsilon, delta)-DP "
              "for the smallest epsilon with inf over alpha > 1 of exp((alpha-1)(alpha*rho-epsilon))/(alpha-1) * "
              "(1-1/alpha)^alpha <= delta; epsilon rounded up to 6 significant digits")
GUARANTEES = {
    "pure": "pure epsilon-differential privacy",
    "pure_delta": "(epsilon, delta)-differential privacy (delta only in discovering categories)",
    "zcdp": "rho-zero-concentrated differential privacy (rho-zCDP, Bun and Steinke 2016)",
    "approximate": "(epsilon, delta)-differential privacy, measured as rho-zCDP with the largest rho whose "
                   "(epsilon, delta) guarantee holds by the tight conversion (CKS20)",
}
SHORT_NAMES = {"pure": "pure epsilon-DP", "zcdp": "rho-zCDP", "approximate": "(epsilon, delta)-DP via rho-zCDP"}
NOT_PRIVATE = "TEST MODE: noise was drawn from a seeded generator; this release is NOT differentially private"


@dataclass
class Release:
    """A finished release: ``tables`` maps table name to a tidy DataFrame (built on first access: the release's
    own writers stream big tables in chunks instead); ``report`` is the accountant report."""

    tables: Tables
    report: dict
    #: Facts for the operator only (input file size): kept out of the published report, since they depend on
    #: the data without noise.
    operator: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tables, Tables):
            self.tables = Tables(self.tables)

    @property
    def test_mode(self) -> bool:
        return bool(self.report.get("test_mode"))

    def write(self, out: str | os.PathLike = "release", format: str = "csv", overwrite: bool = False,
              protect=(), extra=None) -> list[Path]:
        """Write ``<table>.<format>`` files and ``report.json`` into ``out`` atomically; returns the paths.
        ``overwrite`` replaces only an earlier dphist release, never a folder holding any of ``protect``.
        ``extra(staging)``: files made from the staged release, written with it (:func:`stage_release`).
        UsageError for an ``out`` that is not a path or an ``overwrite`` that is not True or False."""
        if not is_path(out):
            raise UsageError(f"out must be a path (str or os.PathLike), not {quoted(type(out).__name__, '')}")
        if not isinstance(overwrite, (bool, np.bool_)):
            raise UsageError(f"overwrite must be True or False, not {quoted(type(overwrite).__name__, '')}")
        return write_release(out, self.tables, self.report, format, overwrite, self._notices(), protect, extra)

    def stage(self, staging: Path, format: str = "csv", extra=None) -> list[str]:
        """Write the release's files into the folder ``staging`` (see :mod:`dphist.publishing.transaction`); returns their names."""
        return stage_release(staging, self.tables, self.report, format, self._notices(), extra)

    def _notices(self) -> dict[str, str] | None:
        return {"NOT_PRIVATE.txt": NOT_PRIVATE + "\n"} if self.test_mode else None

    def summary(self, banner: bool = True) -> str:
        """A short human-readable account of what was released and spent (for the operator, not publication)."""
        r = self.report
        lines = []
        if banner and r.get("test_mode"):
            lines.append(f"*** {NOT_PRIVATE} ***")
        inp = r["input"]
        size = self.operator.get("size_bytes")
        where = f"{inp['name']}" + (f" ({_human_bytes(size)}, {inp['format']})" if size is not None else "")
        lines.append(f"dphist {r['dphist_version']}: released {len(r['tables'])} table(s) from {where}")
        definition = r.get("definition", "pure")
        if definition == "pure":
            spent = (f"epsilon {r['epsilon_spent']} spent of {r['epsilon_requested']} requested, "
                     f"delta {r['delta_spent']}")
            if "delta_note" in r:
                spent += f" ({r['delta_requested']} requested: {r['delta_note']})"
        elif definition == "zcdp":
            spent = (f"rho {r['rho_spent']} spent of {r['rho_requested']} requested (implies epsilon "
                     f"{r['epsilon_implied']} at the reference delta {r['delta_reference']})")
        else:
            spent = (f"epsilon {r['epsilon_requested']}, delta {r['delta_requested']} requested, run as rho "
                     f"{r['rho_requested']}; rho {r['rho_spent']} spent (implies epsilon {r['epsilon_implied']} at "
                     f"delta {r['delta_requested']})")
        lines.append(f"privacy ({SHORT_NAMES.get(definition, definition)}): {spent}; unit {r['privacy_unit']}, "
                     f"neighbours differ by {r['neighbouring']}")
        if r.get("discovery"):
            d = r["discovery"]
            names = ", ".join(c["column"] for c in d["columns"])
            lines.append(f"discovery: epsilon {d['epsilon']}, delta {d['delta']} to find the domains of the "
                         f"undeclared columns {names}")
            keeps = {}
            for c in d["columns"]:
                if "keeps" in c:
                    keeps.setdefault((c["keeps"]["threshold_rows"], c["keeps"]["kept_from_rows"]), []).append(c["column"])
            for (threshold, sure), text in keeps.items():
                lines.append(f"  categories kept above a noisy {threshold:,} rows (every one of {sure:,} rows or more): "
                             f"{', '.join(text)}")
            for skipped in d.get("skipped_tables", []):
                lines.append(f"  skipped table {skipped['name']}: {skipped['reason']}")
        notice = dropped_notice(r["unit_cap"]) if r.get("unit_cap") else None
        if notice is not None:
            lines.append(notice)
        if r.get("marginals"):
            m = r["marginals"]
            agreement = m.get("rounded_agreement", {"exact": True})
            agree = ("every shared margin and the grand total agree across the tables" if agreement["exact"] else
                     "every shared margin and the grand total agree before rounding; after it, sums onto a shared "
                     f"margin differ by at most {agreement['max_difference']}")
            lines.append(f"marginals: strategy {m['strategy']} ({m['chosen_by']}); {agree}")
        width = max(len(t["name"]) for t in r["tables"])
        for t in r["tables"]:
            sd = f", sd per cell {t['expected_cell_sd']:.3g}" if t.get("expected_cell_sd") is not None else ""
            sd += _error_text(t.get("expected_error") or {}, t["workload"])
            shared = f" (a sum of the one {t['derived_from']} table)" if t.get("derived_from") else ""
            if t.get("measured_in"):
                shared = f" (the {unit_name(t)} of the whole set, measured jointly)"
            algorithm = t["algorithm"] + (" (auto)" if t.get("algorithm_choice") else "")
            unit = unit_name(t)
            lines.append(f"  {t['name']:<{width}}  {algorithm:<15} {unit} {t[unit]:<8} "
                         f"{t['cells']} cells{sd}{shared}")
            note = _interval_note(t.get("interval"))
            if note:
                lines.append(f"  {'':<{width}}  {note}")
        return "\n".join(lines)


def unit_name(table: dict) -> str:
    """The budget unit a table's report entry states its amount in."""
    return "epsilon" if "epsilon" in table else "rho"


def _error_text(errors: dict, workload: str) -> str:
    """The summary's words for a table's ``expected_error``: only digits that are exact or stable (a simulated
    figure to the digits its standard error supports, the standard error said), and which of the three it is."""
    cells = errors.get("cells") or {}
    if "mean_abs" not in cells:
        return ""
    figure = expected_error.figure_text
    se = cells.get("mean_abs_se")
    relative = cells.get("mean_abs_relative")
    share = ""
    if relative is not None:
        percent = (figure(100 * relative, 100 * se * relative / cells["mean_abs"]) + "%"
                   if se and cells["mean_abs"] > 0 else f"{relative:.2%}")
        share = f"{'se ' + figure(se, None) + '; ' if se else ''}{percent} of the mean cell"
    elif se:
        share = f"se {figure(se, None)}"
    text = f"mean error per cell {figure(cells['mean_abs'], se)}{f' ({share})' if share else ''}"
    ranges = errors.get("ranges") or {}
    if "mean_abs" in ranges:
        range_se = ranges.get("mean_abs_se")
        stated = f" (se {figure(range_se, None)})" if range_se else ""
        text += f", per range {figure(ranges['mean_abs'], range_se)}{stated}"
    if "rms" not in cells:
        return f"; for {workload}: typical {text}"
    return f"; for {workload}, {'simulated' if se else 'exact'}: {text}"


def _interval_note(interval: dict | None) -> str | None:
    """The summary's line on a table's intervals where they are not for each cell's count (None where they are)."""
    if not interval or interval["covers"] == intervals.COUNT:
        return None
    if interval["covers"] == intervals.SHARE:
        return ("intervals cover bucket shares (a bucket's true total ÷ its cells: see the ci_covers and bucket "
                "columns), not each cell's count")
    return f"no intervals: {interval['reason']}"


@dataclass
class MeasuredTable:
    """One table after its measurement: what was asked, its final shape, the algorithm, the part of the
    release's budget it ran on (whose record lists its steps) and the noisy estimate."""

    request: TableRequest
    shape: TableShape
    algorithm: Algorithm
    budget: PrivacyBudget
    estimate: Estimate


# --------------------------------------------------------------------------------------------------------------
# Post-processing into tidy tables


@dataclass
class ResidualSet:
    """A marginal set of strategy residual after its one joint measurement: the tables asked for and their
    shapes (in the plan's order), the set's part of the release's budget (whose record lists one step per basis)
    and the measured bases."""

    requests: list[TableRequest]
    shapes: list[TableShape]
    budget: PrivacyBudget
    measurements: list[ResidualMeasurement]


def released_tables(plan: ReleasePlan, tables: list[MeasuredTable],
                    residual: ResidualSet | None = None) -> tuple[dict, list[dict], dict | None]:
    """The released tables (name -> tidy DataFrame), their report entries and the report's ``marginals`` block
    (None without marginals).  A marginal set under "separate" is made consistent across its tables; under
    "full" its one table is summed down to each marginal; under "residual" (``residual`` given, ``tables``
    empty) every marginal is rebuilt from the measured bases."""
    if residual is not None:
        return _residual_marginals(plan, residual)
    reports = [table_report(t, plan.rows_per_protected_group, plan.raw) for t in tables]
    if plan.marginal_plan is not None and plan.marginal_plan.strategy == "separate":
        frames, marginal_report = _consistent_marginals(plan, tables, reports)
        return frames, reports, marginal_report
    frames = {t.request.name: tidy_table(t.shape, t.estimate, plan.raw) for t in tables}
    if plan.marginal_plan is not None:
        return _derived_marginals(plan, tables[0], frames, reports)
    return frames, reports, None


def tidy_table(shape: TableShape, estimate: Estimate, raw: bool) -> TidyTable:
    """One row per cell in C order: dimension labels, count (non-negative integers that keep the noisy total,
    or the noisy values with ``raw``), noisy_count, and the interval columns of
    :mod:`dphist.publishing.intervals` (ci_lower, ci_upper, ci_covers, bucket: empty where the algorithm gives no
    interval)."""
    data: dict[str, Any] = {}
    noisy = estimate.values.ravel()
    if raw:
        count = _integral_or_float(noisy)
    elif estimate.integers is not None:
        count = estimate.integers().ravel()
    else:
        count = nonnegative_integer_table(estimate.values, estimate.total).ravel()
    data["count"] = count
    # The other columns are computed chunk by chunk as the table is written (no full-size temporaries).
    data["noisy_count"] = _chunked(lambda a, b: np.round(noisy[a:b], 6), noisy.size)
    half = intervals.halfwidth(estimate)
    if half is None:
        # The same columns whatever the algorithm (auto's choice may change from run to run): empty, not absent.
        data.update(intervals.empty_columns(noisy.size))
        return TidyTable(list(shape.columns), data)
    part = (lambda a, b: half) if np.ndim(half) == 0 else (lambda a, b: half[a:b])
    data["ci_lower"] = _chunked(lambda a, b: intervals.bounds(noisy[a:b], part(a, b))[0], noisy.size)
    data["ci_upper"] = _chunked(lambda a, b: intervals.bounds(noisy[a:b], part(a, b))[1], noisy.size)
    numbers = intervals.buckets(estimate.groups)
    data["ci_covers"] = intervals.covers_column(noisy.size, numbers, True)
    data["bucket"] = intervals.bucket_column(noisy.size, numbers)
    return TidyTable(list(shape.columns), data)


def _consistent_marginals(plan: ReleasePlan, tables: list[MeasuredTable], reports: list[dict]) -> tuple[dict, dict]:
    """Strategy separate: least-squares consistent marginals, then non-negative integers that keep agreeing; each
    table's expected error is the consistent estimate's (:func:`expected_error.consistent_marginal_errors`)."""
    marginals = plan.marginals
    estimates = [t.estimate for t in tables]
    variances = [float(e.variance.flat[0]) for e in estimates]  # identity: the same variance on every cell
    consistent = consistent_marginals([e.values for e in estimates], marginals, variances)
    counts = nonnegative_integer_marginals(consistent, marginals)
    sizes = {c.name: c.n_cells for shape in plan.shapes for c in shape.columns}
    errors = expected_errors(marginals, sizes, variances)
    figures = expected_error.consistent_marginal_errors(
        marginals, [list(shape.columns) for shape in plan.shapes], [t.budget.amount for t in tables],
        tables[0].budget.definition, plan.rows_per_protected_group, [float(np.sum(v)) for v in consistent])
    frames = {}
    for shape, report, value, count, error, figure in zip(plan.shapes, reports, consistent, counts, errors, figures):
        sd = (error / shape.n_cells) ** 0.5  # every cell of a marginal has the same variance after consistency
        frames[shape.name] = _marginal_frame(shape, count, value, sd)
        report["expected_cell_sd"] = round(sd, 4)
        report["expected_error"] = {"unit": "records", **figure}
        report["interval"] = {"covers": intervals.COUNT, "method": SEPARATE_CI}
        report["post_processing"] = SEPARATE_POST
    k = len(marginals)
    return frames, {**plan.marginal_plan.report(),
                    "composition": f"sequential: the {k} marginals are of the same records, each measured with "
                                   f"{plan.amount_name} {format_fraction(plan.budgets[0])}",
                    "ci": f"ci_lower/ci_upper: {SEPARATE_CI}"}


def _residual_marginals(plan: ReleasePlan, measured: ResidualSet) -> tuple[dict, list[dict], dict]:
    """Strategy residual: each marginal rebuilt from the residual bases (docs/algorithms.md §11), its exact per-cell
    variance from the bases' records, then non-negative integers.  A set that :func:`check_separable` accepts keeps
    every shared sub-table exactly (:func:`nonnegative_integer_marginals`); any other set rounds each marginal on
    its own to the one shared rounded grand total, and the report states the largest difference left between two
    marginals' sums onto a sub-table they share (computed from the released integers: post-processing)."""
    marginal_plan, marginals = plan.marginal_plan, plan.marginals
    residual = marginal_plan.residual
    laplace = marginal_plan.laplace is not None  # pure ε: bases estimated from Laplace tables (§11.1)
    ci = RESIDUAL_LAPLACE_CI if laplace else RESIDUAL_CI
    rebuilt = reconstruct(residual, measured.measurements)
    variances = exact_variances(residual, measured.measurements)
    values = []
    for m in marginals:
        key = marginal_plan.indices(m)
        ordered = sorted(m, key=marginal_plan.attributes.index)
        values.append(np.transpose(rebuilt[key], [ordered.index(c) for c in m]))
    sizes = {c.name: c.n_cells for shape in measured.shapes for c in shape.columns}
    separable = (check_separable(marginals) is None
                 and max(math.prod(sizes[c] for c in m) for m in marginals) <= SEPARATE_MAX_CELLS)
    if separable:
        counts = nonnegative_integer_marginals(values, marginals)
        how = "the shared sub-tables held fixed (L1-closest), so they agree exactly after rounding too"
    else:
        # The grand total is the empty basis's alone, the same in every marginal: one rounded total for all.
        total = float(np.sum(values[0]))
        counts = [nonnegative_integer_table(v, total) for v in values]
        how = ("each marginal on its own, keeping the one rounded grand total (integer tables with three or more "
               "fixed margins may not exist)")
    difference = largest_shared_difference(counts, marginals)
    factor = plan.rows_per_protected_group
    amount = _table_amount(measured.budget, factor)
    frames, reports = {}, []
    for m, request, shape, value, count in zip(marginals, measured.requests, measured.shapes, values, counts):
        sd = math.sqrt(variances[marginal_plan.indices(m)])
        frames[shape.name] = _marginal_frame(shape, count, value, sd)
        reports.append({
            "name": request.name, "columns": list(request.columns), "algorithm": "residual", **amount,
            "measured_in": "the marginal set's one joint measurement of residual bases (marginals.steps); the "
                           f"{plan.amount_name} shown is the whole set's",
            "cells": shape.n_cells, "shape": list(shape.shape),
            "domain": {c.name: c.describe() for c in shape.columns},
            "expected_cell_sd": round(sd, 4),
            "interval": {"covers": intervals.COUNT, "method": ci},
            "workload": request.workload,
            "expected_error": {"unit": "records", "cells": {"rms": round(sd, 4)},
                               "basis": "exact: the rebuilt marginal's noise (before non-negativity and rounding) "
                                        "has the same variance in every cell, the sum over its bases of each "
                                        + ("basis's least-squares variance (from the recorded discrete Laplace "
                                           "scales) times p_A/∏ n_i² (docs/algorithms.md §11.1)" if laplace else
                                           "basis's recorded discrete Gaussian variance times p_A/∏ n_i² "
                                           "(docs/algorithms.md §11)")},
            "post_processing": RESIDUAL_POST.format(how=how)})
    steps = [m.report() for m in measured.budget.measurements]
    if len(steps) > RESIDUAL_STEPS_LISTED:
        records = measured.budget.measurements
        what = ("marginal tables, one discrete Laplace measurement each" if laplace else
                "residual bases, one discrete Gaussian measurement each")
        steps = [{"what": f"{len(records)} {what} (listed one by one only up to {RESIDUAL_STEPS_LISTED})",
                  "mechanism": records[0].mechanism, "bases": len(records),
                  plan.amount_name: format_fraction(measured.budget.spent),
                  "noisy_values": sum(r.queries for r in records)}]
    if laplace:
        composition = (f"one joint measurement: {len(marginal_plan.laplace.tables)} tables of L1 sensitivity 1, each "
                       f"with its share of the set's {plan.amount_name} {format_fraction(measured.budget.amount)} "
                       f"(sequential: the {plan.amount_name}s of the tables add up to it); the "
                       f"{len(measured.measurements)} residual bases are estimated from them by least squares and "
                       "every marginal is rebuilt from the bases it contains")
    else:
        composition = (f"one joint measurement: {len(measured.measurements)} residual bases, each with its share of "
                       f"the set's {plan.amount_name} {format_fraction(measured.budget.amount)} (sequential: the "
                       f"{plan.amount_name}s of the bases add up to it); every marginal is rebuilt from the bases it "
                       "contains")
    block = {**marginal_plan.report(),
             "composition": composition,
             "steps": steps,
             "rounded_agreement": {
                 "exact": bool(separable), "max_difference": difference,
                 "why": ("the shared sub-tables are fixed first and every marginal rounded around them"
                         if separable else
                         "before rounding every shared sub-table agrees exactly; this set has a table with three or "
                         "more largest shared sub-tables, so each marginal is rounded on its own (same grand total) "
                         "and sums onto a shared sub-table may differ by up to max_difference")},
             "ci": f"ci_lower/ci_upper: {ci}"}
    return frames, reports, block


def largest_shared_difference(tables: list[np.ndarray], marginals: list[tuple[str, ...]]) -> int:
    """The largest absolute difference between two of ``tables`` (axes ``marginals[i]``) summed onto a column set
    both contain (the grand total included); 0 when every shared sub-table agrees."""
    low: dict[frozenset, np.ndarray] = {}
    high: dict[frozenset, np.ndarray] = {}
    worst = 0
    for table, m in zip(tables, marginals):
        for r in range(len(m) + 1):
            for keep in itertools.combinations(range(len(m)), r):
                key = frozenset(m[k] for k in keep)
                # the sub-table with its axes in one canonical order (sorted column names), whatever m's order
                order = sorted(keep, key=lambda k: m[k])
                dropped = tuple(k for k in range(len(m)) if k not in keep)
                summed = np.asarray(table, dtype=np.int64).sum(axis=dropped) if dropped else np.asarray(table)
                summed = np.transpose(summed, [sorted(keep).index(k) for k in order]) if r else summed
                if key in low:
                    low[key] = np.minimum(low[key], summed)
                    high[key] = np.maximum(high[key], summed)
                    worst = max(worst, int(np.max(high[key] - low[key])))
                else:
                    low[key], high[key] = summed, summed
    return worst


def _marginal_frame(shape: TableShape, count: np.ndarray, value: np.ndarray, sd: float):
    """A consistent marginal's tidy table: its integer counts, the consistent noisy values and their 95 % count
    intervals from the one standard deviation every cell shares."""
    lower, upper = intervals.bounds(value, Z_95 * sd)
    return labelled_frame(list(shape.columns), {
        "count": count,
        "noisy_count": _integral_or_float(np.round(value, 6)),
        "ci_lower": lower, "ci_upper": upper,
        "ci_covers": intervals.covers_column(value.size, None, True),
        "bucket": intervals.bucket_column(value.size, None)})


def _derived_marginals(plan: ReleasePlan, table: MeasuredTable, frames: dict,
                       reports: list[dict]) -> tuple[dict, list[dict], dict]:
    """Replace the full table by its marginals: sums of its released integer counts (and of its noisy values),
    each with the expected error of such a sum (:func:`expected_error.derived_marginal_errors`).

    Intervals for the marginals' counts where the full table's cells carry independent noise of a stated variance
    (identity's: a sum of k cells has k times a cell's variance); any other algorithm's cells are correlated (a
    tree, wavelets, buckets), and a sum's variance differs from cell to cell: no interval, with that reason."""
    estimate = table.estimate
    (shape,), (full_report,) = plan.shapes, reports
    algorithm, amount, total_amount = _released_by(table, full_report.get("algorithm_choice"))
    released_total = float(np.sum(table.estimate.values))
    full = frames[plan.requests[0].name]
    axes = tuple(c.name for c in shape.columns)
    counts = full.column("count").reshape(shape.shape)
    noisy = full.column("noisy_count").astype(np.float64).reshape(shape.shape)
    by_name = {c.name: c for c in shape.columns}
    # the marginals answer the full table's workload, or, where it was the default one, their own default
    inherited = full_report["workload"] != default_workload(list(shape.columns))
    independent = full_report["algorithm"] == "identity" and estimate.variance is not None
    variance = float(np.asarray(estimate.variance).flat[0]) if independent else None
    out_frames, out_reports = {}, []
    for m in plan.marginals:
        name = table_name_for(m)
        cols = [by_name[c] for c in m]
        figures = expected_error.derived_marginal_errors(
            algorithm, shape.shape, shape.columns, amount, table.budget.definition, plan.rows_per_protected_group,
            released_total, [axes.index(c) for c in m], total_amount=total_amount)
        exact_sd = "rms" in figures.get("cells", {}) and "rms_relative_se" not in figures["cells"]
        value = derive_marginal(noisy, axes, m)
        columns = intervals.empty_columns(value.size)
        interval = {"covers": intervals.NONE, "method": "none",
                    "reason": f"each cell is a sum of the full table's cells, whose noise under "
                              f"{full_report['algorithm']} is correlated between cells, so each sum has its own "
                              "variance (expected_error gives their root mean square, not one per cell)"}
        if variance is not None:
            summed = math.prod(shape.shape) // value.size
            lower, upper = intervals.bounds(value, Z_95 * math.sqrt(summed * variance))
            columns = {"ci_lower": _integral_or_float(lower), "ci_upper": _integral_or_float(upper),
                       "ci_covers": intervals.covers_column(value.size, None, True),
                       "bucket": intervals.bucket_column(value.size, None)}
            interval = {"covers": intervals.COUNT, "method": DERIVED_CI}
        out_frames[name] = labelled_frame(cols, {
            "count": derive_marginal(counts, axes, m),
            "noisy_count": _integral_or_float(np.round(value, 6)), **columns})
        out_reports.append({
            "name": name, "columns": list(m), "algorithm": full_report["algorithm"],
            **{key: full_report[key] for key in ("epsilon", "rho", "delta") if key in full_report},
            "cells": math.prod(c.n_cells for c in cols),
            "shape": [c.n_cells for c in cols], "domain": {c.name: c.describe() for c in cols},
            "derived_from": full_report["name"], "interval": interval,
            "post_processing": "sum of the full table's released counts",
            "expected_cell_sd": figures["cells"]["rms"] if exact_sd else None,
            "workload": full_report["workload"] if inherited else default_workload(cols),
            "expected_error": {"unit": "records", **figures},
        })
    full_table = {**plan.marginal_plan.report(),
                  "composition": "one measurement of the table over all the marginals' columns; each marginal is "
                                 "a sum of its non-negative integer counts, so all of them agree exactly (shared "
                                 f"sub-marginals and grand total) and together cost the run's {plan.amount_name} "
                                 + ("once" if plan.unit_cap is None else "once, less the unit cap's part"),
                  "full_table": full_report}
    return out_frames, out_reports, full_table


# --------------------------------------------------------------------------------------------------------------
# The report


def table_report(table: MeasuredTable, factor: int, raw: bool) -> dict:
    """A table's entry in the report: its public shape and domain, the algorithm (and what auto chose), its part
    of the budget (``epsilon`` and ``delta`` of a pure budget, ``rho`` of a zCDP one, with the part per row of the
    protected group where a group has several: ε/K, ρ/K²), every step its budget recorded, and the expected
    noise."""
    request, shape, algo, budget, estimate = (table.request, table.shape, table.algorithm, table.budget,
                                              table.estimate)
    choices = dict(estimate.choices)
    choice = choices.pop("algorithm_choice", None)
    return {
        "name": request.name,
        "columns": list(request.columns),
        "algorithm": choice["chosen"] if choice else algo.name,
        **({"algorithm_choice": {"by": algo.name, **choice}} if choice else {}),
        **_table_amount(budget, factor),
        "cells": shape.n_cells,
        "shape": list(shape.shape),
        "domain": {c.name: c.describe() for c in shape.columns},
        "structure": estimate.structure,
        **({"chosen_from_noisy_values": choices} if choices else {}),
        "steps": [m.report() for m in budget.measurements],
        # The sd of a cell's error only where its interval covers its count (a bucket share's sd is not that).
        "expected_cell_sd": _rms_sd(estimate.variance) if intervals.covers(estimate) == intervals.COUNT else None,
        "interval": intervals.describe(estimate),
        "workload": request.workload,
        "expected_error": _expected_error(table, factor, choice),
        "post_processing": "none (--raw)" if raw else POST_PROCESSING,
    }


def _released_by(table: MeasuredTable, choice: dict | None) -> tuple:
    """``(algorithm, amount, total_amount)``: the algorithm that produced the table (auto's choice), the amount it
    ran on (after auto's noisy total) and the amount of the total it was refitted with, if any."""
    algorithm, amount, total_amount = table.algorithm, table.budget.amount, None
    if choice is not None:
        algorithm = get_algorithm(choice["chosen"])
        amount -= Fraction(choice.get("epsilon_for_total", 0))
        if "noisy_total_reused" in choice:  # auto refitted the tree with its N̂: so does the simulation
            total_amount = Fraction(choice["epsilon_for_total"])
    return algorithm, amount, total_amount


def _expected_error(table: MeasuredTable, factor: int, choice: dict | None) -> dict:
    """The expected error of single cells and of ranges (:mod:`dphist.evaluation.expected_error`) of the algorithm that
    produced the table (auto's choice, at the budget left after auto's noisy total).  Public facts only."""
    algorithm, amount, total_amount = _released_by(table, choice)
    figures = expected_error.expected_errors(algorithm, table.shape.shape, table.shape.columns, amount,
                                             table.budget.definition, factor, float(np.sum(table.estimate.values)),
                                             total_amount=total_amount)
    return {"unit": "records", **figures}


def _table_amount(budget: PrivacyBudget, factor: int) -> dict:
    if budget.definition == "pure":
        return {"epsilon": format_fraction(budget.amount),
                **({"epsilon_per_row": format_fraction(per_row_amount("pure", budget.amount, factor))}
                   if factor > 1 else {}),
                "delta": "0"}
    # A unit of K rows moves the answers K times as far in L2, so one row alone is protected at ρ/K².
    return {"rho": format_fraction(budget.amount),
            **({"rho_per_row": format_fraction(per_row_amount("zcdp", budget.amount, factor))} if factor > 1 else {})}


def discovery_report(plan: ReleasePlan, columns: list[dict], steps: list[Measurement],
                     skipped: list[int]) -> dict:
    """The report's ``discovery`` block: each discovered column, every step paid for, and the tables skipped
    (by index into the plan) because a column of theirs was not found."""
    failed = {c["column"]: c["failed"] for c in columns if "failed" in c}
    skipped_tables = [{"name": plan.requests[i].name, "epsilon": format_fraction(plan.budgets[i]),
                       "reason": "; ".join(f"column {quoted(c.name)}: {failed[c.name]}" for c in plan.shapes[i].columns
                                           if c.name in failed)
                       + "; its epsilon was charged before discovery and is counted in epsilon_spent"}
                      for i in skipped]
    return {
        "epsilon": format_fraction(plan.discovery.epsilon), "delta": format_fraction(plan.delta),
        "columns": columns, "steps": [m.report() for m in steps],
        **({"skipped_tables": skipped_tables} if skipped_tables else {}),
        "note": "domains of undeclared columns were chosen from noisy counts (docs/algorithms.md §9); values "
                "outside a discovered range are counted in its first or last bin, and categories held by few "
                "records are left out by design (not published as 'other')"}


def release_report(plan: ReleasePlan, budget: PrivacyBudget, skipped: Fraction, tables: list[dict],
                   discovery: dict | None, marginals: dict | None, unit_cap: dict | None = None) -> dict:
    """The published report: the privacy unit, what was requested and spent (read from the release's budget,
    plus ``skipped``: the parts of tables skipped after the ledger charged them), every table's steps, how the
    noise was drawn, and under a unit cap the ``unit_cap`` entry (what the cap dropped,
    :mod:`dphist.publishing.unit_cap`), which the note on intervals cites."""
    test_mode = plan.seed is not None
    report = {
        "dphist_version": __version__,
        "input": {"name": plan.source.public_name, "format": plan.source.format},
        **unit_report(plan),
        **budget_report(plan, budget, skipped),
        **({"discovery": discovery} if discovery is not None else {}),
        **({"unit_cap": unit_cap} if unit_cap is not None else {}),
        "composition": f"sequential over tables{' and the unit cap measurement' if unit_cap is not None else ''} "
                       f"({'epsilons' if plan.definition == 'pure' else 'rhos'} add); parallel over the disjoint "
                       "cells of a table",
        "noise": (TEST_SAMPLER if test_mode else SAMPLER) if plan.definition == "pure" else
                 (GAUSSIAN_TEST_SAMPLER if test_mode else GAUSSIAN_SAMPLER),
        "test_mode": test_mode,
        "tables": tables,
        **({"marginals": marginals} if marginals is not None else {}),
        "notes": [
            "Bin edges, categories and table shapes come from the declared schema, which is public"
            + (", and for undeclared columns from the discovery steps." if discovery else "."),
            "Values outside a column's domain were clamped or dropped as the schema says; how many is not published.",
            "ci_lower/ci_upper: a 95% interval from noisy_count and the noise distribution alone (cut at 0, "
            "rounded outward to 2 decimals). ci_covers says what it covers: 'count', the cell's true count; "
            "'bucket share', where the algorithm spreads one estimated total evenly over a bucket of cells (the "
            "bucket column numbers it), the bucket's true total divided by its cells. All three are empty where "
            "the algorithm gives no interval; tables[].interval says what each table's intervals cover, by which "
            "method, or why there are none."
            + (dropped_note(unit_cap) if unit_cap is not None else ""),
        ],
    }
    if test_mode:
        report["warning"] = NOT_PRIVATE
    return report


def budget_report(plan: ReleasePlan, budget: PrivacyBudget, skipped: Fraction = Fraction(0)) -> dict:
    """The report's budget fields, read from the release's root ``budget`` (``skipped``: parts of tables skipped
    after the ledger charged them, counted as spent).  Amounts are exact strings; ``epsilon_implied`` a decimal
    rounded up.

    * "pure":  definition, guarantee, epsilon_requested, epsilon_spent, delta_requested, delta_spent (δ as
      charged), and delta_used where partition selection used less.
    * "zcdp":  definition, guarantee, rho_requested, rho_spent, delta_reference (:data:`DELTA_REFERENCE`) and
      epsilon_implied (the ε that ρ-zCDP of the requested ρ gives at that δ), conversion.
    * "approximate":  definition, guarantee, epsilon_requested, delta_requested, epsilon_spent and delta_spent
      (the (ε, δ) charged), rho_requested (= rho_for(ε, δ)), rho_spent, epsilon_implied (at delta_requested,
      never above epsilon_requested), conversion."""
    definition = plan.definition
    spent = budget.spent_counting(skipped)
    if definition == "pure":
        requested = plan.delta if plan.delta_requested is None else plan.delta_requested
        return {
            "definition": "pure",
            "guarantee": GUARANTEES["pure" if plan.delta == 0 else "pure_delta"],
            "epsilon_requested": format_fraction(plan.epsilon),
            "epsilon_spent": format_fraction(spent),
            "delta_requested": format_fraction(requested),
            # All of δ is reserved for discovery and charged in the ledger before any row is read; a CSV column
            # whose type turns out to be a number leaves its share of δ unused, which only makes the guarantee
            # stronger.  The report states what was charged, as the ledger does, and what partition selection used.
            # A δ that no step could use (no undeclared column may be text) is not charged at all.
            "delta_spent": format_fraction(plan.delta),
            **({"delta_used": format_fraction(budget.spent_delta)} if budget.spent_delta != plan.delta else {}),
            **({"delta_note": DELTA_UNUSED} if requested != plan.delta else {}),
        }
    # The implied ε is of the ρ charged (the requested one): what the ledger holds the data set to.
    reference = plan.delta if definition == "approximate" else DELTA_REFERENCE
    implied = _round_up(epsilon_for(plan.rho, reference))
    out = {"definition": definition, "guarantee": GUARANTEES[definition]}
    if definition == "approximate":
        out.update({"epsilon_requested": format_fraction(plan.epsilon),
                    "delta_requested": format_fraction(plan.delta),
                    "epsilon_spent": format_fraction(plan.epsilon), "delta_spent": format_fraction(plan.delta)})
    out.update({"rho_requested": format_fraction(plan.rho), "rho_spent": format_fraction(spent)})
    if definition == "zcdp":
        out["delta_reference"] = format_fraction(DELTA_REFERENCE)
    out.update({"epsilon_implied": implied, "conversion": CONVERSION})
    return out


def _round_up(value: float, digits: int = 6) -> str:
    """``value`` rounded up to ``digits`` significant digits, as a plain decimal string (an ε that may only
    grow when printed)."""
    if value == 0:
        return "0"
    return format(Context(prec=digits, rounding=ROUND_CEILING).plus(Decimal(value)).normalize(), "f")


def unit_report(plan: ReleasePlan) -> dict:
    """What one "neighbouring" data set differs by, and how contributions were bounded (public parameters)."""
    unit, c, factor = plan.unit, plan.group_size, plan.rows_per_protected_group
    out: dict[str, Any] = {
        "privacy_unit": PRIVACY_UNIT if unit is None else f"one {unit.column} (all its rows)",
        "neighbouring": NEIGHBOURING if unit is None else f"add/remove all rows of one {unit.column}"}
    if unit is not None:
        out["contribution_bounding"] = {
            "unit_column": unit.column, "max_rows_per_unit": unit.max_rows,
            "rule": f"at most {unit.max_rows} rows per {unit.column}, chosen uniformly at random among its rows "
                    "(independent of their values); rows with no unit are left out"}
    if c > 1:
        out["group_privacy"] = {"group_size": c, "rule": f"the guarantee holds for any group of {c} "
                                f"{'units' if unit else 'records'} together"}
    if factor > 1:
        out["group_privacy_scaling"] = (f"the protected group adds or removes at most {factor} rows, so every "
                                        f"step's sensitivity counts {factor} rows per record it would count "
                                        "(group privacy); each step's epsilon (or rho) is its cost for the group")
    return out


# --------------------------------------------------------------------------------------------------------------


def _rms_sd(variance: np.ndarray | None) -> float | None:
    """The root-mean-square standard deviation of the released cells before post-processing (public)."""
    if variance is None or variance.size == 0 or not np.all(np.isfinite(variance)):
        return None
    return round(float(np.sqrt(np.mean(variance))), 4)


def _chunked(column, n: int, chunk: int = CHUNK_ROWS):
    """The column ``column(start, stop)`` (floats) as whole numbers (int64) if every value is a finite whole
    number, else as floats, decided over the whole column but computed a chunk at a time (twice, rather than held
    whole)."""
    integral = all(_is_integral(column(a, a + chunk)) for a in range(0, n, chunk))
    return (lambda a, b: column(a, b).astype(np.int64)) if integral else column


def _is_integral(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def _integral_or_float(values: np.ndarray) -> np.ndarray:
    return values.astype(np.int64) if _is_integral(values) else values


def _human_bytes(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"  # pragma: no cover
