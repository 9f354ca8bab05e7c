"""The Python API: ``dphist.release(...)`` runs the whole pipeline and returns the tables and the report.

    source ─► schema ─► count ─► algorithm ─► post-process ─► tables + report

The CLI is a thin layer over this module.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .version import __version__
from .algorithms import Algorithm, Estimate, applicable_options, get_algorithm
from .contribution import UnitBound, UnitColumn
from .discovery import (AUTO, DEFAULT_BINS, DEFAULT_MAX_CATEGORIES, DEFAULT_SHARE, DiscoveryPlan, TextAs, discover,
                        kind_of)
from .counting import TableShape
from .engines import check_engine
from .engines import count as count_with
from .errors import DataError, UsageError
from .ledger import ROW_UNIT
from .inference import nonnegative_integer_table
from .io.sources import Source, open_source, remote_source
from .io.writers import stage_release, write_release
from .job import TableRequest, check_table_names, parse_tables, table_name_for
from .consistency import consistent_marginals, expected_errors, nonnegative_integer_marginals
from .marginals import MarginalPlan, derive_marginal, labelled_frame, parse_marginals, plan_marginals, union_of
from .privacy import (MIN_EPSILON, BitSource, PrivacyBudget, SeededBits, SystemBits, exact_fraction, format_fraction,
                      parse_delta, parse_epsilon, split_shares)
from .progress import Progress
from .schema import MAX_CELLS, MAX_DIMENSIONS, Schema, load_schema, parse_schema

__all__ = ["Release", "ReleasePlan", "release", "plan_release", "run_plan", "DEFAULT_ALGORITHM"]

DEFAULT_ALGORITHM = "auto"
#: Tables of more cells than this are refused before any row is read, unless a larger limit is given.
DEFAULT_MAX_CELLS = 2**24
# Marginal sets default to identity: the strategies' expected errors and the exact least-squares combination
# of "separate" are worked out for it (marginals.py).
MARGINALS_ALGORITHM = "identity"
POST_PROCESSING = ("top-down over a public tree of blocks (the algorithm's tree, or 4 splits per column): the "
                   "estimated total clamped at 0 and rounded; each block's parts projected onto the non-negative "
                   "values with the block's fixed sum (Euclidean) and rounded to it by largest remainders")
PRIVACY_UNIT = "one record (row)"
NEIGHBOURING = "add/remove one record"
SAMPLER = "exact discrete Laplace (binary-expansion sampler) on OS CSPRNG bits (os.urandom)"
TEST_SAMPLER = "exact discrete Laplace on a SEEDED PCG64 stream (test mode: NOT private)"
NOT_PRIVATE = "TEST MODE: noise was drawn from a seeded generator; this release is NOT differentially private"


@dataclass
class Release:
    """A finished release: ``tables`` maps table name to a tidy DataFrame; ``report`` is the accountant report."""

    tables: dict[str, pd.DataFrame]
    report: dict
    #: Facts for the operator only (input file size): kept out of the published report, since they depend on
    #: the data without noise.
    operator: dict = field(default_factory=dict)

    @property
    def test_mode(self) -> bool:
        return bool(self.report.get("test_mode"))

    def write(self, out: str | os.PathLike = "release", format: str = "csv", overwrite: bool = False,
              protect=()) -> list[Path]:
        """Write ``<table>.<format>`` files and ``report.json`` into ``out`` atomically; returns the paths.
        ``overwrite`` replaces only an earlier dphist release, never a folder holding any of ``protect``."""
        return write_release(out, self.tables, self.report, format, overwrite, self._notices(), protect)

    def stage(self, staging: Path, format: str = "csv") -> list[str]:
        """Write the release's files into the folder ``staging`` (see :mod:`dphist.publish`); returns their names."""
        return stage_release(staging, self.tables, self.report, format, self._notices())

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
        lines.append(f"privacy: epsilon {r['epsilon_spent']} spent of {r['epsilon_requested']} requested, "
                     f"delta {r['delta_spent']}; unit {r['privacy_unit']}, neighbours differ by {r['neighbouring']}")
        if r.get("discovery"):
            d = r["discovery"]
            names = ", ".join(c["column"] for c in d["columns"])
            lines.append(f"discovery: epsilon {d['epsilon']}, delta {d['delta']} to find the domains of the "
                         f"undeclared columns {names}")
            for skipped in d.get("skipped_tables", []):
                lines.append(f"  skipped table {skipped['name']}: {skipped['reason']}")
        if r.get("marginals"):
            m = r["marginals"]
            lines.append(f"marginals: strategy {m['strategy']} ({m['chosen_by']}); every shared margin and the "
                         "grand total agree across the tables")
        width = max(len(t["name"]) for t in r["tables"])
        for t in r["tables"]:
            sd = f", sd per cell {t['expected_cell_sd']:.3g}" if t.get("expected_cell_sd") is not None else ""
            shared = f" (a sum of the one {t['derived_from']} table)" if t.get("derived_from") else ""
            algorithm = t["algorithm"] + (" (auto)" if t.get("algorithm_choice") else "")
            lines.append(f"  {t['name']:<{width}}  {algorithm:<15} epsilon {t['epsilon']:<8} "
                         f"{t['cells']} cells{sd}{shared}")
        return "\n".join(lines)


@dataclass
class ReleasePlan:
    """Everything a release will do, validated before any row is read: the budget split, the tables' public
    shapes, their algorithms and the noise source."""

    source: Source
    epsilon: Fraction
    requests: list[TableRequest]
    shapes: list[TableShape]
    algorithms: list[Algorithm]
    budgets: list[Fraction]
    seed: int | None
    raw: bool
    #: Columns without a declared domain, found privately before counting (their shapes in ``shapes`` are
    #: placeholders of the largest size until then); and the run's δ.
    discovery: DiscoveryPlan | None = None
    delta: Fraction = Fraction(0)
    #: Contribution bounding: at most ``unit.max_rows`` rows per privacy unit; groups of ``group_size`` units.
    unit: UnitBound | None = None
    group_size: int = 1
    #: With marginals: the strategy; under "full" the one table is the full table over their columns, released
    #: as sums of it; under "separate" the tables are the marginals, made consistent after measurement.
    marginal_plan: MarginalPlan | None = None
    #: Where the counting pass runs (:mod:`dphist.engines`) and the cell limit tables were checked against.
    engine: str = "local"
    master: str | None = None
    max_cells: int = DEFAULT_MAX_CELLS

    @property
    def rows_per_protected_group(self) -> int:
        """How many rows the protected group (one unit, or group_size units) can change: algorithms run at
        ε divided by this (group privacy)."""
        return (self.unit.max_rows if self.unit else 1) * self.group_size

    @property
    def ledger_unit(self) -> str:
        return ROW_UNIT if self.unit is None else f"unit:{self.unit.column}"

    @property
    def marginals(self) -> list[tuple[str, ...]] | None:
        return None if self.marginal_plan is None else self.marginal_plan.marginals


def plan_release(
    source: Any,
    epsilon: Any,
    schema: Any = None,
    columns: list[str] | str | None = None,
    tables: list[dict] | list[TableRequest] | None = None,
    algorithm: str | None = None,
    seed: int | None = None,
    raw: bool = False,
    algorithm_options: dict | None = None,
    marginals: Any = None,
    marginal_strategy: str = "auto",
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    group_size: int = 1,
    delta: Any = 0,
    discovery_share: Any = None,
    discovery_bins: int | None = None,
    max_categories: int | None = None,
    discovery_binning: str = "equal-width",
    engine: str = "local",
    master: str | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> ReleasePlan:
    """Validate the arguments of :func:`release` and the input's header; reads no rows, spends nothing."""
    total_epsilon = parse_epsilon(epsilon)
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or not 1 <= max_cells <= MAX_CELLS:
        raise UsageError(f"the cell limit must be a whole number from 1 to {MAX_CELLS:,}")
    unit = _unit_bound(privacy_unit, max_rows_per_unit)
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise UsageError("group size must be a whole number of units, at least 1")
    if marginals is not None:
        if columns is not None or tables is not None:
            raise UsageError("give marginals, columns or tables, not more than one")
        marginals = parse_marginals(marginals)
        if raw:
            raise UsageError("marginals are post-processed to agree with each other: --raw does not apply")
    total_delta = _parse_delta(delta)
    if schema is not None:
        schema = schema if isinstance(schema, Schema) else (
            parse_schema(schema) if isinstance(schema, dict) else load_schema(schema))
    remote = engine == "spark" and isinstance(source, (str, os.PathLike)) and "://" in os.fspath(source)
    src = remote_source(os.fspath(source)) if remote else open_source(source)
    wanted = ([c for m in marginals for c in m] if marginals is not None else
              _requested_columns(columns, tables, schema, src, unit))
    discovery = None
    undeclared = list(dict.fromkeys(c for c in wanted if schema is None or c not in schema.columns))
    if undeclared:
        if marginals is not None:
            raise UsageError(f"column '{undeclared[0]}' has no declared domain: marginal sets need a schema")
        share = DEFAULT_SHARE if discovery_share is None else exact_fraction(discovery_share, "the discovery share")
        if not 0 < share < 1:
            raise UsageError("the discovery share must be between 0 and 1, e.g. 0.1")
        discovery = DiscoveryPlan(_kinds(src, undeclared), total_epsilon * share, total_delta,
                                  discovery_bins or DEFAULT_BINS, max_categories or DEFAULT_MAX_CATEGORIES,
                                  discovery_binning)
        schema = Schema({**(schema.columns if schema else {}), **discovery.placeholders()})
    elif total_delta > 0:
        raise UsageError("delta is only used to discover categories of undeclared columns; every column is declared, "
                         "so leave --delta out")
    table_epsilon = total_epsilon - (discovery.epsilon if discovery else 0)
    marginal_plan = None
    if marginals is not None:
        for m in marginals:
            for c in m:
                schema[c]  # unknown columns fail here, before any choice is made
            check_table_names([TableRequest(table_name_for(m), m)])
        sizes = {c: schema[c].n_cells for m in marginals for c in m}
        union = union_of(marginals)
        full_cells = math.prod(sizes[c] for c in union)  # a Python int: exact, never wraps
        full_limit = (f"would have {len(union)} columns, more than {MAX_DIMENSIONS}" if len(union) > MAX_DIMENSIONS
                      else f"would have {full_cells:,} cells, more than {max_cells:,}" if full_cells > max_cells else None)
        per_row = table_epsilon / ((unit.max_rows if unit else 1) * int(group_size))  # what the noise is set by
        algorithm = algorithm or MARGINALS_ALGORITHM
        marginal_plan = plan_marginals(marginals, sizes, per_row, algorithm, marginal_strategy, full_limit)
        if marginal_plan.strategy == "full":
            columns = list(union_of(marginals))
        else:
            tables = [TableRequest(table_name_for(m), m, "identity") for m in marginals]
    requests = _table_requests(wanted, columns, tables)
    names = [t.algorithm or algorithm or DEFAULT_ALGORITHM for t in requests]
    # Options given for the whole run apply to the tables whose algorithm has them; a table's own win.
    algorithms = [get_algorithm(n, **{**applicable_options(n, algorithm_options), **t.options})
                  for n, t in zip(names, requests)]
    for key in algorithm_options or {}:
        if not any(key in applicable_options(n, {key: None}) for n in names):
            raise UsageError(f"option '{key}' does not apply to {', '.join(sorted(set(names)))}")
    shapes = [_table_shape(schema, t, int(max_cells)) for t in requests]
    for algo, shape in zip(algorithms, shapes):
        algo.check_shape(shape.shape)
    budgets = split_shares(table_epsilon, [Fraction(t.share) for t in requests])
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise UsageError("seed must be a non-negative integer")
    check_engine(engine, master, src, unit, discovery is not None)
    if not remote:  # a URL's header is checked by Spark when it reads it
        src.check_columns({c.name: c for shape in shapes for c in shape.columns
                           if discovery is None or c.name not in discovery.kinds})
    if unit is not None and unit.column not in src.column_names():
        raise DataError(f"{src.name}: privacy-unit column '{unit.column}' not found in the input")
    plan = ReleasePlan(src, total_epsilon, requests, shapes, algorithms, budgets, seed, raw, discovery, total_delta,
                       unit, int(group_size), marginal_plan, engine, master, int(max_cells))
    factor = plan.rows_per_protected_group
    for request, budget in zip(requests, budgets):
        if budget < MIN_EPSILON:
            raise UsageError(f"table '{request.name}' would get epsilon {format_fraction(budget)}, below the minimum "
                             f"{format_fraction(MIN_EPSILON)}: raise epsilon or its share, or release fewer tables")
        if budget / factor < MIN_EPSILON:
            raise UsageError(f"table '{request.name}': epsilon {format_fraction(budget)} spread over {factor} rows "
                             f"per protected group is below the minimum {format_fraction(MIN_EPSILON)} per row")
    if discovery is not None and discovery.column_epsilon / factor < MIN_EPSILON:
        raise UsageError(f"discovering {len(discovery.kinds)} columns would leave each epsilon "
                         f"{format_fraction(discovery.column_epsilon / factor)} per row, below the minimum "
                         f"{format_fraction(MIN_EPSILON)}: raise epsilon or the discovery share, or declare columns")
    return plan


def _unit_report(plan: ReleasePlan) -> dict:
    """What one "neighbouring" data set differs by, and how contributions were bounded (public parameters)."""
    unit, c, factor = plan.unit, plan.group_size, plan.rows_per_protected_group
    out: dict[str, Any] = {"privacy_unit": PRIVACY_UNIT if unit is None else f"one {unit.column} (all its rows)",
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
                                        "(group privacy); each step's epsilon is its cost for the group")
    return out


def _unit_bound(column: str | None, max_rows: Any) -> UnitBound | None:
    if column is None:
        if max_rows is not None:
            raise UsageError("--max-rows-per-unit needs --privacy-unit COLUMN")
        return None
    if not isinstance(column, str) or not column.strip():
        raise UsageError("the privacy unit must be a column name")
    if max_rows is None:
        raise UsageError(f"--privacy-unit {column} needs --max-rows-per-unit K: the most rows one unit may add "
                         "to the counts (its other rows are left out at random)")
    if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1:
        raise UsageError("--max-rows-per-unit must be a whole number, at least 1")
    return UnitBound(column.strip(), int(max_rows))


def release(
    source: Any,
    epsilon: Any,
    schema: Any = None,
    columns: list[str] | str | None = None,
    tables: list[dict] | list[TableRequest] | None = None,
    algorithm: str | None = None,
    seed: int | None = None,
    raw: bool = False,
    algorithm_options: dict | None = None,
    ledger: Any = None,
    dataset_id: str | None = None,
    marginals: Any = None,
    marginal_strategy: str = "auto",
    privacy_unit: str | None = None,
    max_rows_per_unit: int | None = None,
    group_size: int = 1,
    delta: Any = 0,
    discovery_share: Any = None,
    discovery_bins: int | None = None,
    max_categories: int | None = None,
    discovery_binning: str = "equal-width",
    engine: str = "local",
    master: str | None = None,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> Release:
    """Release differentially private tables of ``source``, charged to the budget ledger.

    Parameters
    ----------
    source : path (CSV/Parquet file, directory or glob) or pandas DataFrame.
    epsilon : total privacy budget, a positive number; a decimal string keeps it exact (``"0.5"``).
    schema : path to a YAML/JSON schema, a parsed schema mapping, or a ``Schema``.  Columns it does not declare
        (all of them without a schema) get their domain privately from the data, with ``discovery_share`` of
        epsilon (default 1/10): DP bounds and ``discovery_bins`` bins (default 16) for numbers and dates, of
        equal width or, with ``discovery_binning="quantiles"``, cut at DP quantiles (numbers); for text, the
        categories held by enough records (at most ``max_categories``, default 100), which needs ``delta`` > 0.
    delta : the δ of (ε, δ)-DP, used only to discover categories (e.g. ``"1e-6"``); 0 otherwise.
    columns : one table over these columns (``["age", "sex"]`` or ``"age,sex"``).
    tables : several tables, each ``{"name", "columns", "algorithm", "share"}``; epsilon is split by share.
        With neither ``columns`` nor ``tables``, one 1-D table per schema column, epsilon split equally.
    algorithm : default algorithm for tables that do not name one (``auto``: chosen per table from a noisy
        total; ``identity`` for marginal sets).
    algorithm_options : options for the algorithms (e.g. ``{"branching": 16}``); a table's own ``options``
        take precedence.
    seed : test mode.  Deterministic noise; the release is marked NOT differentially private, and the ledger is
        not touched.
    raw : skip post-processing; ``count`` is then the unbiased noisy estimate.
    marginals : a set of tables that agree exactly with each other (shared sub-tables and grand total),
        ``"age,sex;sex,income"`` or a list of column lists.
    marginal_strategy : ``"full"``: the table over all the marginals' columns is measured once with all of
        epsilon and each marginal is a sum of its released counts; ``"separate"``: each marginal is measured
        with epsilon/k, then they are made consistent by least squares and rounded keeping the agreement;
        ``"auto"`` (default): the one with the lower expected error (``report["marginals"]`` gives both).
    privacy_unit, max_rows_per_unit : protect every value of this column (a person, a household) rather than
        one row: at most ``max_rows_per_unit`` rows per unit are counted (chosen at random), and the algorithms
        run at epsilon / max_rows_per_unit, so the whole unit is protected at epsilon (group privacy).  The
        ledger keeps this budget apart from per-row budgets.
    group_size : protect any group of this many units (or records) together at epsilon.
    ledger : a :class:`~dphist.ledger.Ledger` or a path to one (default: ``$DPHIST_LEDGER``, else
        ``~/.local/share/dphist/ledger.sqlite``).  The release is recorded there against ``dataset_id`` (default:
        the input's absolute path; every DataFrame shares one id), and refused (BudgetExhausted) past its cap.
    engine, master : where the counting pass runs: ``"local"`` (default; this process, all cores), ``"dask"``
        (``master``: "threads", "processes", "local-cluster" or a scheduler address) or ``"spark"`` (``master``:
        any Spark master, default ``local[*]``; ``source`` may then be a URL Spark reads, such as s3a:// or
        hdfs://).  Counts are the same on every engine; noise and output stay in this process.
    max_cells : refuse (UsageError, before reading) any table of more cells than this (default 2**24).

    The total epsilon spent is exactly ``epsilon`` (sequential composition over tables), under add/remove of
    one record.  Raises UsageError for bad arguments (before reading data) and DataError for unreadable data.
    """
    from .ledger import Ledger
    from .publish import charged_run

    plan = plan_release(source, epsilon, schema, columns=columns, tables=tables, algorithm=algorithm, seed=seed,
                        raw=raw, algorithm_options=algorithm_options, marginals=marginals,
                        marginal_strategy=marginal_strategy, privacy_unit=privacy_unit,
                        max_rows_per_unit=max_rows_per_unit, group_size=group_size, delta=delta,
                        discovery_share=discovery_share, discovery_bins=discovery_bins,
                        max_categories=max_categories, discovery_binning=discovery_binning,
                        engine=engine, master=master, max_cells=max_cells)
    if seed is not None:
        return run_plan(plan)

    def work(info):
        result = run_plan(plan)
        result.report["ledger"] = info
        return result
    book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    return charged_run(plan, work, book, dataset_id, detail={"command": "Python API"}).value


def run_plan(plan: ReleasePlan, progress: bool = False) -> Release:
    """Read the data once, measure every table with noise, post-process, and build the report.

    ``progress``: draw a progress bar of the counting pass on stderr (for a terminal; see :mod:`dphist.progress`).
    """
    src, seed, raw, total_epsilon = plan.source, plan.seed, plan.raw, plan.epsilon
    bits: BitSource = SystemBits() if seed is None else SeededBits(int(seed))
    factor = plan.rows_per_protected_group
    # The release's one budget: every noisy step below draws from it (or from a part of it).
    root = PrivacyBudget(total_epsilon, plan.delta, bits=bits, factor=factor)
    discovery_part = [plan.discovery.epsilon] if plan.discovery is not None else []
    parts = root.split(discovery_part + list(plan.budgets), delta_shares=[1] * len(discovery_part) + [0] * len(
        plan.budgets))
    shapes, discovery_report, skipped = plan.shapes, None, Fraction(0)
    tables = list(zip(plan.requests, plan.algorithms, parts[len(discovery_part):]))
    unit_reader = {} if plan.unit is None else {plan.unit.column: UnitColumn(plan.unit.column)}
    if plan.discovery is not None:
        usable, shapes, discovery_report = _discover_domains(plan, parts[0], unit_reader)
        # A skipped table's budget was charged in the ledger before discovery ran: it is counted as spent.
        skipped = sum((part.epsilon for i, (_, _, part) in enumerate(tables) if i not in usable), Fraction(0))
        tables = [tables[i] for i in usable]
    needed = {c.name: c for shape in shapes for c in shape.columns}
    needed.update(_chosen_readers(discovery_report, needed))
    needed.update({k: v for k, v in unit_reader.items() if k not in needed})
    # The only step that reads rows (apart from discovery).  Contribution bounding's row choice is randomness,
    # not noise: it reads the release's bit source.
    bar = Progress(*src.progress_total()) if progress and src.files else None
    try:
        counts = count_with(plan.engine, plan.master, src, needed, shapes, plan.unit, root.bits, bar)
    finally:
        if bar is not None:
            bar.close()

    table_reports, estimates = [], []
    for (request, algo, budget), shape, table_counts in zip(tables, shapes, counts):
        estimate = algo.run(table_counts, budget, columns=shape.columns)
        estimates.append(estimate)
        choice = estimate.choices.pop("algorithm_choice", None)
        table_reports.append({
            "name": request.name,
            "columns": list(request.columns),
            "algorithm": choice["chosen"] if choice else algo.name,
            **({"algorithm_choice": {"by": algo.name, **choice}} if choice else {}),
            "epsilon": format_fraction(budget.epsilon),
            **({"epsilon_per_row": format_fraction(budget.epsilon / factor)} if factor > 1 else {}),
            "delta": "0",
            "cells": shape.n_cells,
            "shape": list(shape.shape),
            "domain": {c.name: c.describe() for c in shape.columns},
            "structure": estimate.structure,
            **({"chosen_from_noisy_values": estimate.choices} if estimate.choices else {}),
            "steps": [m.report() for m in budget.measurements],
            "expected_cell_sd": _rms_sd(estimate.variance),
            "post_processing": "none (--raw)" if raw else POST_PROCESSING,
        })
    marginal_report = None
    if plan.marginal_plan is not None and plan.marginal_plan.strategy == "separate":
        frames, marginal_report = _consistent_marginals(plan, estimates, table_reports)
    else:
        frames = {request.name: _tidy_table(shape, estimate, raw)
                  for (request, _, _), shape, estimate in zip(tables, shapes, estimates)}
        if plan.marginal_plan is not None:
            frames, table_reports, marginal_report = _derive_marginals(plan, frames, table_reports)
    report = {
        "dphist_version": __version__,
        "input": {"name": src.public_name, "format": src.format},
        **_unit_report(plan),
        "definition": "pure epsilon-differential privacy" if plan.delta == 0 else "(epsilon, delta)-differential "
                      "privacy (delta only in discovering categories)",
        "epsilon_requested": format_fraction(total_epsilon),
        "epsilon_spent": format_fraction(root.spent + skipped),
        "delta_requested": format_fraction(plan.delta),
        "delta_spent": format_fraction(root.spent_delta),
        **({"discovery": discovery_report} if discovery_report is not None else {}),
        "composition": "sequential over tables (epsilons add); parallel over the disjoint cells of a table",
        "noise": TEST_SAMPLER if seed is not None else SAMPLER,
        "test_mode": seed is not None,
        "tables": table_reports,
        **({"marginals": marginal_report} if marginal_report is not None else {}),
        "notes": [
            "Bin edges, categories and table shapes come from the declared schema, which is public"
            + (", and for undeclared columns from the discovery steps." if discovery_report else "."),
            "Values outside a column's domain were clamped or dropped as the schema says; how many is not published.",
            "ci_lower/ci_upper: 95% interval for the true count of each cell, from noisy_count and the noise "
            "distribution alone (cut at 0); empty where the algorithm states no per-cell noise distribution (the "
            "data-adaptive partitions of dpcube, kdtree, noisefirst and structurefirst).",
        ],
    }
    if seed is not None:
        report["warning"] = NOT_PRIVATE
    return Release(frames, report, operator=src.describe())


# --------------------------------------------------------------------------------------------------------------


def _discover_domains(plan: ReleasePlan, budget: PrivacyBudget, unit_reader: dict):
    """Read the undeclared columns once and fix their domains from noisy counts, paid from ``budget``.  Returns
    the indices of the tables that can be released, their final shapes and the report's ``discovery`` block."""
    src, shapes = plan.source, plan.shapes
    found, columns = discover(plan.discovery, src.batches({**plan.discovery.readers(), **unit_reader}), budget,
                              plan.unit)
    failed = {c["column"]: c["failed"] for c in columns if "failed" in c}
    usable = [i for i, shape in enumerate(shapes) if not any(c.name in failed for c in shape.columns)]
    if not usable:
        raise DataError(f"{src.name}: no table can be released: "
                        + "; ".join(f"column '{k}': {v}" for k, v in failed.items()))
    skipped = [{"name": plan.requests[i].name, "epsilon": format_fraction(plan.budgets[i]),
                "reason": "; ".join(f"column '{c.name}': {failed[c.name]}" for c in shapes[i].columns
                                    if c.name in failed)
                + "; its epsilon was charged before discovery and is counted in epsilon_spent"}
               for i in range(len(shapes)) if i not in usable]
    shapes = [TableShape(shapes[i].name, tuple(found.get(c.name, c) for c in shapes[i].columns)) for i in usable]
    for i, shape in zip(usable, shapes):
        plan.algorithms[i].check_shape(shape.shape)
        if shape.n_cells > plan.max_cells:
            raise DataError(f"table '{shape.name}': its discovered domain has {shape.n_cells:,} cells, more than "
                            f"the limit of {plan.max_cells:,} (--max-cells); declare coarser bins in a schema")
    report = {
        "epsilon": format_fraction(plan.discovery.epsilon), "delta": format_fraction(plan.delta),
        "columns": columns, "steps": [m.report() for m in budget.measurements],
        **({"skipped_tables": skipped} if skipped else {}),
        "note": "domains of undeclared columns were chosen from noisy counts (algorithms.md §9); values "
                "outside a discovered range are counted in its first or last bin, and categories held by few "
                "records are left out by design (not published as 'other')"}
    return usable, shapes, report


def _chosen_readers(discovery_report: dict | None, needed: dict) -> dict[str, TextAs]:
    """How to read the CSV columns whose type discovery chose as a number or a date: as text converted the
    way discovery read it, so a value that does not look like that type is missing (its null cell), as it
    was to discovery, rather than an error after the budget is spent."""
    if discovery_report is None:
        return {}
    chosen = {c["column"]: c["type"]["chosen"] for c in discovery_report["columns"] if isinstance(c.get("type"), dict)}
    return {name: TextAs(name, kind) for name, kind in chosen.items() if name in needed and kind != "categorical"}


SEPARATE_POST = ("exact least-squares consistency with the other marginals (shared sub-tables and grand total "
                 "agree), then non-negative integers with the shared sub-tables held fixed (L1-closest)")


def _consistent_marginals(plan: ReleasePlan, estimates: list[Estimate], table_reports: list) -> tuple[dict, dict]:
    """Strategy separate: least-squares consistent marginals, then non-negative integers that keep agreeing."""
    marginals = plan.marginals
    variances = [float(e.variance.flat[0]) for e in estimates]  # identity: the same variance on every cell
    consistent = consistent_marginals([e.values for e in estimates], marginals, variances)
    counts = nonnegative_integer_marginals(consistent, marginals)
    sizes = {c.name: c.n_cells for shape in plan.shapes for c in shape.columns}
    errors = expected_errors(marginals, sizes, variances)
    frames = {}
    for shape, report, value, count, error in zip(plan.shapes, table_reports, consistent, counts, errors):
        sd = (error / shape.n_cells) ** 0.5  # every cell of a marginal has the same variance after consistency
        half = 1.959963984540054 * sd
        frames[shape.name] = labelled_frame(list(shape.columns), {
            "count": count,
            "noisy_count": _integral_or_float(np.round(value, 6)),
            "ci_lower": np.round(np.maximum(value - half, 0.0), 2),
            "ci_upper": np.round(np.maximum(value + half, 0.0), 2)})
        report["expected_cell_sd"] = round(sd, 4)
        report["post_processing"] = SEPARATE_POST
    k = len(marginals)
    return frames, {**plan.marginal_plan.report(),
                    "composition": f"sequential: the {k} marginals are of the same records, each measured with "
                                   f"epsilon {format_fraction(plan.epsilon / k)}",
                    "ci": "ci_lower/ci_upper: normal approximation, noisy_count ± 1.96 × expected_cell_sd"}


def _derive_marginals(plan: ReleasePlan, frames: dict, table_reports: list) -> tuple[dict, list, dict]:
    """Replace the full table by its marginals: sums of its released integer counts (and of its noisy values)."""
    (shape,), (full_report,) = plan.shapes, table_reports
    full = frames[plan.requests[0].name]
    axes = tuple(c.name for c in shape.columns)
    counts = full["count"].to_numpy().reshape(shape.shape)
    noisy = full["noisy_count"].to_numpy(np.float64).reshape(shape.shape)
    by_name = {c.name: c for c in shape.columns}
    out_frames, reports = {}, []
    for m in plan.marginals:
        name = table_name_for(m)
        cols = [by_name[c] for c in m]
        out_frames[name] = labelled_frame(cols, {
            "count": derive_marginal(counts, axes, m),
            "noisy_count": _integral_or_float(np.round(derive_marginal(noisy, axes, m), 6))})
        reports.append({
            "name": name, "columns": list(m), "algorithm": full_report["algorithm"],
            "epsilon": full_report["epsilon"], "delta": "0", "cells": math.prod(c.n_cells for c in cols),
            "shape": [c.n_cells for c in cols], "domain": {c.name: c.describe() for c in cols},
            "derived_from": full_report["name"], "post_processing": "sum of the full table's released counts",
        })
    full_table = {**plan.marginal_plan.report(),
                  "composition": "one measurement of the table over all the marginals' columns; each marginal is "
                                 "a sum of its non-negative integer counts, so all of them agree exactly (shared "
                                 "sub-marginals and grand total) and together cost the run's epsilon once",
                  "full_table": full_report}
    return out_frames, reports, full_table


def _requested_columns(columns, tables, schema: Schema | None, src: Source, unit: UnitBound | None) -> list[str]:
    """The columns the tables will use: those named, else every declared column, else every input column
    (but the privacy unit's)."""
    if columns is not None or tables is not None:
        return [c for t in _table_requests([], columns, tables) for c in t.columns]
    if schema is not None:
        return list(schema.columns)
    return [c for c in src.column_names() if unit is None or c != unit.column]


def _kinds(src: Source, names: list[str]) -> dict[str, str]:
    """Each undeclared column's kind from the stored schema; a CSV stores none, so its types are chosen
    privately during discovery (AUTO)."""
    if src.format == "csv":
        header = src.column_names()
        for name in names:
            if name not in header:
                raise DataError(f"{src.name}: column '{name}' not found in the input (it has: "
                                f"{', '.join(header[:20])})")
        return {name: AUTO for name in names}
    types = src.arrow_types()
    kinds = {}
    for name in names:
        if name not in types:
            shown = ", ".join(list(types)[:20])
            raise DataError(f"{src.name}: column '{name}' not found in the input (it has: {shown})")
        kind = kind_of(types[name])
        if kind is None:
            raise DataError(f"{src.name}: column '{name}' holds {types[name]}, which cannot be counted into a table")
        kinds[name] = kind
    return kinds


def _parse_delta(value: Any) -> Fraction:
    delta = parse_delta(value, "delta")
    if delta > Fraction(1, 1000):
        raise UsageError(f"delta must be between 0 and 1e-3 (it bounds the chance of a failure of privacy), "
                         f"got '{value}'")
    return delta


def _table_requests(default: list[str], columns, tables) -> list[TableRequest]:
    if columns is not None and tables is not None:
        raise UsageError("give either columns or tables, not both")
    if tables is not None:
        if tables and all(isinstance(t, TableRequest) for t in tables):
            check_table_names(list(tables))
            return list(tables)
        return parse_tables(list(tables), "tables")
    if columns is not None:
        cols = [c.strip() for c in columns.split(",")] if isinstance(columns, str) else [str(c) for c in columns]
        if not cols or not all(cols):
            raise UsageError("columns must be a non-empty, comma-separated list of column names")
        requests = [TableRequest(table_name_for(cols), tuple(cols))]
    else:
        requests = [TableRequest(name, (name,)) for name in default]
    check_table_names(requests)
    return requests


_VALUE_COLUMNS = ("count", "noisy_count", "ci_lower", "ci_upper")


def _table_shape(schema: Schema, request: TableRequest, max_cells: int = DEFAULT_MAX_CELLS) -> TableShape:
    if len(request.columns) > MAX_DIMENSIONS:
        raise UsageError(f"table '{request.name}': at most {MAX_DIMENSIONS} columns per table in this version")
    shape = TableShape(request.name, tuple(schema[c] for c in request.columns))
    labels = [label for column in shape.columns for label in column.label_names] + list(_VALUE_COLUMNS)
    for label in labels:
        if labels.count(label) > 1:
            raise UsageError(f"table '{request.name}': its output would have two columns named '{label}'; "
                             "rename a column in the data and the schema")
    if shape.n_cells > max_cells:
        raise UsageError(f"table '{request.name}': {shape.n_cells:,} cells is more than the limit of {max_cells:,} "
                         "(--max-cells); use coarser bins or fewer columns")
    return shape


def _tidy_table(shape: TableShape, estimate: Estimate, raw: bool) -> pd.DataFrame:
    """One row per cell in C order: dimension labels, count, noisy_count, ci_lower, ci_upper."""
    data: dict[str, Any] = dict(labelled_frame(list(shape.columns), {}))
    noisy = estimate.values.ravel()
    if raw:
        count = _integral_or_float(noisy)
    elif estimate.integers is not None:
        count = estimate.integers().ravel()
    else:
        count = nonnegative_integer_table(estimate.values, estimate.total).ravel()
    data["count"] = count
    data["noisy_count"] = _integral_or_float(np.round(noisy, 6))
    half = None
    if estimate.halfwidth is not None:
        half = estimate.halfwidth.ravel().astype(np.float64)
    elif estimate.variance is not None:
        half = 1.959963984540054 * np.sqrt(estimate.variance.ravel())
    if half is not None:
        data["ci_lower"] = _integral_or_float(np.round(np.maximum(noisy - half, 0.0), 2))
        data["ci_upper"] = _integral_or_float(np.round(np.maximum(noisy + half, 0.0), 2))
    else:
        # The same columns whatever the algorithm (auto's choice may change from run to run): empty, not absent.
        data["ci_lower"] = data["ci_upper"] = np.full(noisy.size, np.nan)
    return pd.DataFrame(data, copy=False)


def _rms_sd(variance: np.ndarray | None) -> float | None:
    """The root-mean-square standard deviation of the released cells before post-processing (public)."""
    if variance is None or variance.size == 0 or not np.all(np.isfinite(variance)):
        return None
    return round(float(np.sqrt(np.mean(variance))), 4)


def _integral_or_float(values: np.ndarray) -> np.ndarray:
    if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return values


def _human_bytes(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"  # pragma: no cover
