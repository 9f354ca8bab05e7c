"""A schema drafted with differential privacy: the discovery steps of a release, on their own.

``dphist schema --private INPUT --epsilon E`` spends E (and δ for text columns) to find every column's domain
exactly as a release without a schema would (docs/algorithms.md §9: DP bounds and equal-width bins for numbers and
dates, partition selection for text), and writes the result as a schema file.  Unlike the plain draft, every
value in it came from noisy counts, so the steward may freeze it and use it for all later releases, which then
spend nothing on discovery.  The ε and δ are charged to the ledger like a release.

It is its own command, so it makes its own root :class:`~dphist.privacy.PrivacyBudget` (E, δ, the bit source and
the privacy unit's row factor), hands it to :func:`~dphist.discovery.domains.discover`, and reports what that budget
recorded as spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import yaml

from ..read.contribution import UnitBound, UnitColumn
from .domains import DEFAULT_BINS, DEFAULT_MAX_CATEGORIES, DiscoveryPlan, discover
from ..errors import DataError, UsageError
from ..read.sources import Source, open_source
from ..publishing.ledger import ROW_UNIT
from ..publishing.planning import column_kinds, parse_discovery_delta, unit_bound, usable_delta
from ..privacy import (MIN_EPSILON, BitSource, PrivacyBudget, bit_source, format_fraction, parse_epsilon,
                       per_row_amount)
from ..declare.schema import Column, declaration
from ..text import first_of, quoted

__all__ = ["PrivateSchemaPlan", "PrivateSchema", "plan_private_schema", "run_private_schema"]


@dataclass
class PrivateSchemaPlan:
    """What ``schema --private`` will read and spend; checked before any row is read."""

    source: Source
    epsilon: Fraction
    delta: Fraction
    discovery: DiscoveryPlan
    unit: UnitBound | None
    seed: int | None
    #: Discovery runs under pure ε only (the ledger reads a plan's definition, ε, δ and ρ alike).
    definition = "pure"
    rho = None

    @property
    def ledger_unit(self) -> str:
        return ROW_UNIT if self.unit is None else f"unit:{self.unit.column}"

    @property
    def rows_per_protected_group(self) -> int:
        return self.unit.max_rows if self.unit else 1


@dataclass
class PrivateSchema:
    """The schema text (YAML with a header of what was spent), the columns found and the report."""

    text: str
    columns: dict[str, Column]
    report: dict


def plan_private_schema(source: Any, epsilon: Any, delta: Any = 0, columns: list[str] | str | None = None,
                        bins: int | None = None, max_categories: int | None = None,
                        privacy_unit: str | None = None, max_rows_per_unit: int | None = None,
                        seed: int | None = None, binning: str = "equal-width") -> PrivateSchemaPlan:
    """Validate the arguments and the input's header; reads no rows, spends nothing."""
    total = parse_epsilon(epsilon)
    unit = unit_bound(privacy_unit, max_rows_per_unit)
    src = open_source(source)
    names = [c.strip() for c in columns.split(",")] if isinstance(columns, str) else list(columns or [])
    if not names:
        names = [c for c in src.column_names() if unit is None or c != unit.column]
    if len(set(names)) != len(names):
        raise UsageError("a column is named twice in --columns")
    if unit is not None and unit.column not in src.column_names():
        raise DataError(f"{quoted(src.name, '')}: privacy-unit column {quoted(unit.column)} not found in the input")
    kinds = column_kinds(src, names)
    # As in a release: a δ no column can use (none may be text) is charged as 0, not refused.
    plan = DiscoveryPlan(kinds, total, usable_delta(parse_discovery_delta(delta), kinds), bins or DEFAULT_BINS,
                         max_categories or DEFAULT_MAX_CATEGORIES, binning)
    factor = unit.max_rows if unit else 1
    per_row = per_row_amount("pure", plan.column_epsilon, factor)  # discovery is pure ε
    if per_row < MIN_EPSILON:
        raise UsageError(f"{len(names)} columns would leave each epsilon {format_fraction(per_row)}"
                         f" per row, below the minimum {format_fraction(MIN_EPSILON)}: raise epsilon or name fewer "
                         "columns with --columns")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError("seed must be a non-negative integer")
    return PrivateSchemaPlan(src, total, plan.delta, plan, unit, seed)


def run_private_schema(plan: PrivateSchemaPlan) -> PrivateSchema:
    """Read the columns once and choose each one's domain from noisy counts (ε and δ as planned)."""
    bits: BitSource = bit_source(plan.seed)
    readers = dict(plan.discovery.readers())
    if plan.unit is not None:
        readers[plan.unit.column] = UnitColumn(plan.unit.column)
    budget = PrivacyBudget(plan.discovery.epsilon, plan.discovery.delta, bits=bits,
                           factor=plan.rows_per_protected_group)
    found, reports = discover(plan.discovery, plan.source.batches(readers), budget, plan.unit)
    if not found:
        raise DataError(f"{quoted(plan.source.name, '')}: no column's domain could be found privately: "
                        + first_of(f"column {quoted(r['column'])}: {r['failed']}" for r in reports if "failed" in r))
    # The budget's record: ε as measured (all of it: every column spends its share), δ as charged to the ledger
    # (a CSV column whose type came out numeric leaves its share of δ unused; the charge is not refunded).
    report = {"input": plan.source.public_name, "epsilon": format_fraction(budget.spent),
              "delta": format_fraction(budget.delta), "columns": reports,
              "steps": [m.report() for m in budget.measurements],
              **({"privacy_unit": plan.unit.column, "max_rows_per_unit": plan.unit.max_rows} if plan.unit else {})}
    ordered = {name: found[name] for name in plan.discovery.kinds if name in found}
    return PrivateSchema(_schema_text(report, ordered, plan.seed is not None), ordered, report)


def _schema_text(report: dict, columns: dict[str, Column], test_mode: bool) -> str:
    lines = [f"# Schema found with differential privacy by `dphist schema --private` from {report['input']}.",
             f"# Spent: epsilon {report['epsilon']}, delta {report['delta']}"
             + (f" (privacy unit {report['privacy_unit']}, at most {report['max_rows_per_unit']} rows each)"
                if "privacy_unit" in report else "") + ".",
             "# Every domain below was chosen from noisy counts (DP bounds and equal-width bins for numbers and",
             "# dates, partition selection for text), so it may be published and frozen: releases that use this",
             "# file spend nothing on discovery.  Coarsen or rename freely; do not add values read from the data.",
             "# Numeric and date bounds leave out about 1/400 of the rows at each end, which releases count in the",
             "# first or last bin (out_of_domain: clamp)."]
    if test_mode:
        lines.append("# TEST MODE: seeded noise; this schema is NOT differentially private.")
    for r in report["columns"]:
        if "failed" in r:
            lines.append(f"# {r['column']}: not found: {r['failed']}")
    lines.append("")
    body = {"columns": {name: declaration(column) for name, column in columns.items()}}
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False, allow_unicode=True,
                                                     default_flow_style=None, width=100)
