"""Executing a release plan: the one path from a checked plan to a published release (docs/architecture.md §1).

    reserve ─► read ─────────────────► measure ──────────────────► post-process + output ──► commit
    (ledger)   (discovery, then the    (each table's algorithm on    (assemble.py: tidy tables, (ledger; files
               one counting pass)      its part of one budget)       report)                    moved into place)

:func:`execute` holds the switch between test mode and a charged run: with a seed the noise is seeded, nothing is
private and the ledger is never touched; otherwise the run happens inside the release transaction
(:func:`dphist.publishing.transaction.charged_run`), which reserves the plan's budget before any row is read and commits it with the
files.  :func:`run_plan` is the middle: it makes the release's one budget (:func:`release_budget`: a
:class:`~dphist.privacy.PrivacyBudget` of ε, or a :class:`~dphist.privacy.ZCDPBudget` of ρ), splits it into the
discovery's part, one part per table and, under a unit cap, the part that measures what the cap dropped
(:mod:`dphist.publishing.unit_cap`), reads, measures and hands over to :mod:`dphist.publishing.assemble`.  A
marginal set of strategy residual gets one part for all its tables, and its residual bases are measured jointly
from the counted tables (:func:`dphist.algorithms.residual_planner.measure_from_marginals` under zCDP,
:func:`dphist.algorithms.residual_laplace.measure_laplace` under pure ε).
The CLI's ``release`` and ``schema --private`` and the Python API's :func:`dphist.release` all run through here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..declare import identifiers
from ..algorithms import Algorithm
from ..read.contribution import UnitColumn, UnitRows
from ..read.counting import TableShape
from ..discovery.domains import TextAs, discover
from ..read.engines import count as count_with
from ..errors import DataError
from .destination import Destination
from .writers import check_destination
from ..declare.job import TableRequest
from .ledger import Ledger
from .assemble import MeasuredTable, Release, ResidualSet, discovery_report, release_report, released_tables
from ..algorithms.residual_laplace import measure_laplace
from ..algorithms.residual_planner import measure_from_marginals
from .planning import ReleasePlan
from .unit_cap import measure_dropped
from ..privacy import BitSource, PrivacyBudget, ZCDPBudget, bit_source, total_of
from ..read.progress import Progress
from .transaction import Charged, FileRelease, charged_run
from ..text import first_of, quoted

__all__ = ["execute", "charged", "run_plan", "release_budget", "ReleaseFiles"]


@dataclass(frozen=True)
class ReleaseFiles:
    """Where a release's files go: the folder ``out``, the file format, whether an earlier dphist release there
    may be replaced, and files it must never replace (the input, the schema, the ledger).  ``extra(staging,
    ledger)``: writes files made from the staged release into its staging folder and returns their names (the
    review page of ``release --review``), given the ledger's path (None in test mode); they are hashed, committed
    and published with the release."""

    out: str | os.PathLike
    format: str = "csv"
    overwrite: bool = False
    protect: tuple = ()
    extra: Callable[[Path, Path | None], list[str]] | None = None


def execute(plan: ReleasePlan, *, ledger: Ledger | str | os.PathLike | None = None, dataset_id: str | None = None,
            run_key: str | None = None, lock_timeout: float | None = None, detail: dict | None = None,
            files: ReleaseFiles | None = None, progress: bool = False,
            on_test_mode: Callable[[], None] | None = None, require_cap: bool = False) -> Charged:
    """Run the release ``plan``: test mode or a charged run (see :func:`charged`), writing ``files`` if given.
    ``value`` of the result is the :class:`~dphist.publishing.assemble.Release`; its report holds the ledger block of a
    charged run.  ``progress``: a progress bar of the counting pass on stderr."""

    def work(ledger_info: dict | None) -> Release:
        result = run_plan(plan, progress)
        if ledger_info is not None:
            result.report["ledger"] = ledger_info
        return result
    return charged(plan, work, ledger=ledger, dataset_id=dataset_id, run_key=run_key, lock_timeout=lock_timeout,
                   detail=detail, files=files, on_test_mode=on_test_mode, require_cap=require_cap)


def charged(plan, work: Callable[[dict | None], Any], *, ledger: Ledger | str | os.PathLike | None = None,
            dataset_id: str | None = None, run_key: str | None = None, lock_timeout: float | None = None,
            detail: dict | None = None, files: ReleaseFiles | None = None,
            on_test_mode: Callable[[], None] | None = None, require_cap: bool = False) -> Charged:
    """Run ``work`` (which reads the data and draws the noise) the way ``plan`` demands; the one switch between
    test mode and a charged run, for every command that spends budget.

    Test mode (``plan.seed`` set): ``work(None)`` runs at once on seeded noise and no ledger is opened; the
    files, if any, are checked before and written after it (stamped NOT private).  ``on_test_mode`` is called
    once every check has passed, just before the data is read (the CLI's banner).  ``dataset`` of the result is
    None.

    Otherwise: the release transaction of :func:`dphist.publishing.transaction.charged_run` in ``ledger`` (a Ledger, a path,
    or None for the default one), under ``dataset_id`` and ``run_key``: the plan's budget (ε and δ, or ρ) is
    reserved before ``work(ledger_info)`` reads anything, and committed with the files' hashes.  ``lock_timeout``: seconds to
    wait for another run holding the ledger (default: the ledger's).  ``require_cap``: refuse a data set that has
    no cap (CapRequired, exit 3), checked in the reservation's transaction, before anything is read.

    ``dataset_id`` and ``run_key`` are checked and normalised first, in test mode too (UsageError: an empty one,
    whitespace at an end, an unprintable character, more than 200 characters; :mod:`dphist.declare.identifiers`)."""
    if dataset_id is not None:
        dataset_id = identifiers.dataset_id(dataset_id, "dataset_id")
    if run_key is not None:
        run_key = identifiers.run_key(run_key, "run_key")
    if plan.seed is not None:
        destination = None if files is None else check_destination(files.out, files.overwrite, files.protect)
        if on_test_mode is not None:
            on_test_mode()
        value = work(None)
        paths = [] if files is None else value.write(destination.out, files.format, files.overwrite, files.protect,
                                                     _extra(files, None))
        return Charged(None, value=value, paths=paths)
    if isinstance(ledger, Ledger):
        book = ledger
    else:
        book = Ledger(ledger) if lock_timeout is None else Ledger(ledger, timeout=lock_timeout)
    file_release = None
    if files is not None:
        destination = Destination(Path(files.out), files.overwrite, [*map(Path, files.protect), book.path])
        file_release = FileRelease(destination, lambda release, staging: release.stage(staging, files.format,
                                                                                       _extra(files, book.path)))
    return charged_run(plan, work, book, dataset_id, run_key, detail, files=file_release, require_cap=require_cap)


def _extra(files: ReleaseFiles, ledger: Path | None) -> Callable[[Path], list[str]] | None:
    """The files' ``extra`` writer bound to the run's ledger, or None."""
    if files.extra is None:
        return None
    return lambda staging: files.extra(staging, ledger)


def run_plan(plan: ReleasePlan, progress: bool = False) -> Release:
    """Read the data once, measure every table with noise, post-process, and build the report.

    On its own it charges no ledger: :func:`execute` runs it inside the release transaction.  ``progress``: draw
    a progress bar of the counting pass on stderr (for a terminal; see :mod:`dphist.read.progress`)."""
    # The release's one budget: every noisy step below draws from it, or from one of its parts.
    budget = release_budget(plan, bit_source(plan.seed))
    joint = _joint(plan)
    discovery_budget, table_budgets, unit_cap_budget = _split(plan, budget, joint)
    if joint:  # one part for the whole marginal set, measured at once below; every table is in it
        table_budgets = table_budgets * len(plan.requests)
    tables = [_Table(r, s, a, b) for r, s, a, b in zip(plan.requests, plan.shapes, plan.algorithms, table_budgets)]

    # Read: the undeclared columns' domains first (paid from the discovery part), then the one counting pass.
    discovered = None
    if plan.discovery is not None:
        discovered = _discover_domains(plan, discovery_budget)
        tables = [tables[i].reshaped(discovered.shapes[i]) for i in discovered.usable]
    unit_rows = UnitRows() if unit_cap_budget is not None else None
    counts = _count(plan, [t.shape for t in tables], discovered, budget.bits, progress, unit_rows)

    # Measure: each table's algorithm on its own part of the budget (whose record becomes the report's steps), or
    # a residual marginal set's bases jointly on the set's one part.
    residual = None
    if joint:
        residual = _measure_residual_set(plan, tables, counts, table_budgets[0])
        measured = []
    else:
        measured = [MeasuredTable(t.request, t.shape, t.algorithm, t.budget,
                                  t.algorithm.run(table_counts, t.budget, columns=t.shape.columns))
                    for t, table_counts in zip(tables, counts)]
    del counts  # the true counts are not needed again (a big table's would double the memory of what follows)
    # Under a unit cap: how many rows it dropped, measured on its own part (docs/privacy.md §6).
    unit_cap = None if unit_cap_budget is None else measure_dropped(unit_rows, unit_cap_budget, plan.unit)

    # Post-process and output: free, from the noisy values and public facts only.
    frames, table_reports, marginals = released_tables(plan, measured, residual)
    # A skipped table's part was charged in the ledger before discovery ran: it is counted as spent.
    skipped = total_of(b.amount for i, b in enumerate(table_budgets) if discovered and i not in discovered.usable)
    report = release_report(plan, budget, skipped, table_reports, discovered and discovered.report, marginals,
                            unit_cap)
    return Release(frames, report, operator=plan.source.describe())


def release_budget(plan: ReleasePlan, bits: BitSource) -> PrivacyBudget:
    """The release's one root budget for ``plan``: a :class:`~dphist.privacy.PrivacyBudget` of (ε, δ) under
    "pure"; a :class:`~dphist.privacy.ZCDPBudget` of ρ under "zcdp" and "approximate" (the (ε, δ) of an
    approximate plan holds because ρ = rho_for(ε, δ)).  Both carry the protected group's row factor and ``bits``;
    their amounts (``.amount``) are in the plan's unit, as ``plan.budgets`` are."""
    factor = plan.rows_per_protected_group
    if plan.definition == "pure":
        return PrivacyBudget(plan.epsilon, plan.delta, bits=bits, factor=factor)
    return ZCDPBudget(plan.rho, bits=bits, factor=factor)


# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """A planned table with its part of the budget."""

    request: TableRequest
    shape: TableShape
    algorithm: Algorithm
    budget: PrivacyBudget

    def reshaped(self, shape: TableShape) -> _Table:
        return _Table(self.request, shape, self.algorithm, self.budget)


@dataclass
class _Discovered:
    """What discovery found: the final shape of every table (by index into the plan), the indices of the tables
    that can be released, the report's ``discovery`` block, and how to read the columns it chose a type for."""

    shapes: dict[int, TableShape]
    usable: list[int]
    report: dict
    readers: dict[str, TextAs]


def _joint(plan: ReleasePlan) -> bool:
    """Whether the plan's tables are a marginal set measured jointly (strategy residual)."""
    return plan.marginal_plan is not None and plan.marginal_plan.strategy == "residual"


def _split(plan: ReleasePlan, budget: PrivacyBudget,
           joint: bool = False) -> tuple[PrivacyBudget | None, list[PrivacyBudget], PrivacyBudget | None]:
    """The discovery's part (all of δ), one part per table and the unit cap's part, as planned (the first and the
    last may be None); they add up to the budget exactly.  ``joint``: the tables' parts as one part (a list of
    one), the sum of what they were planned to get."""
    discovery = [plan.discovery.epsilon] if plan.discovery is not None else []
    unit_cap = [plan.unit_cap] if plan.unit_cap is not None else []
    table_shares = [total_of(plan.budgets)] if joint else list(plan.budgets)
    shares = discovery + table_shares + unit_cap
    parts = budget.split(shares, delta_shares=[1] * len(discovery) + [0] * (len(shares) - len(discovery)))
    tables = parts[len(discovery):len(discovery) + len(table_shares)]
    return (parts[0] if discovery else None), tables, (parts[-1] if unit_cap else None)


def _measure_residual_set(plan: ReleasePlan, tables: list[_Table], counts: list,
                          budget: PrivacyBudget) -> ResidualSet:
    """Strategy residual: the residual plan's bases measured once from the counted marginal tables, on the set's
    one ``budget`` (docs/algorithms.md §11): with discrete Gaussian noise per basis under zCDP, by the Laplace plan
    under pure ε (§11.1).  Each count table's axes are put in the plan's attribute order."""
    marginal_plan = plan.marginal_plan
    residual_plan = marginal_plan.residual
    ordered = {}
    for t, table_counts in zip(tables, counts):
        columns = [c.name for c in t.shape.columns]
        key = marginal_plan.indices(tuple(columns))
        axes = sorted(range(len(columns)), key=lambda k: marginal_plan.attributes.index(columns[k]))
        ordered[key] = np.transpose(np.asarray(table_counts), axes)
    if marginal_plan.laplace is not None:
        measurements = measure_laplace(marginal_plan.laplace, ordered, budget, marginal_plan.attributes)
    else:
        measurements = measure_from_marginals(residual_plan, ordered, budget)
    return ResidualSet([t.request for t in tables], [t.shape for t in tables], budget, measurements)


def _unit_reader(plan: ReleasePlan) -> dict[str, UnitColumn]:
    return {} if plan.unit is None else {plan.unit.column: UnitColumn(plan.unit.column)}


def _discover_domains(plan: ReleasePlan, budget: PrivacyBudget) -> _Discovered:
    """Read the undeclared columns once and fix their domains from noisy counts paid from ``budget``; check the
    tables that can still be released against their final shapes."""
    src, shapes = plan.source, plan.shapes
    found, columns = discover(plan.discovery, src.batches({**plan.discovery.readers(), **_unit_reader(plan)}),
                              budget, plan.unit)
    failed = {c["column"] for c in columns if "failed" in c}
    usable = [i for i, shape in enumerate(shapes) if not any(c.name in failed for c in shape.columns)]
    if not usable:
        raise DataError(f"{quoted(src.name, '')}: no table can be released: "
                        + first_of(f"column {quoted(c['column'])}: {c['failed']}" for c in columns if "failed" in c))
    final = {i: TableShape(shapes[i].name, tuple(found.get(c.name, c) for c in shapes[i].columns)) for i in usable}
    for i, shape in final.items():
        plan.algorithms[i].check(shape.shape)
        if shape.n_cells > plan.max_cells:
            raise DataError(f"table {quoted(shape.name)}: its discovered domain has {shape.n_cells:,} cells, more than "
                            f"the limit of {plan.max_cells:,} (--max-cells); declare coarser bins in a schema")
    skipped = [i for i in range(len(shapes)) if i not in final]
    # A CSV column whose type discovery chose as a number or a date is read as text converted the way discovery
    # read it, so a value that does not look like that type is missing (its null cell), as it was to discovery,
    # rather than an error after the budget is spent.
    chosen = {c["column"]: c["type"]["chosen"] for c in columns if isinstance(c.get("type"), dict)}
    readers = {name: TextAs(name, kind) for name, kind in chosen.items() if kind != "categorical"}
    return _Discovered(final, usable, discovery_report(plan, columns, budget.measurements, skipped), readers)


def _count(plan: ReleasePlan, shapes: list[TableShape], discovered: _Discovered | None, bits: BitSource,
           progress: bool, unit_rows: UnitRows | None = None) -> list:
    """The one pass over the rows that counts every table (apart from discovery's).  Contribution bounding's row
    choice is randomness, not noise: it reads the release's bit source.  ``unit_rows`` is told every unit's rows."""
    needed = {c.name: c for shape in shapes for c in shape.columns}
    if discovered is not None:
        needed.update({name: reader for name, reader in discovered.readers.items() if name in needed})
    needed.update({k: v for k, v in _unit_reader(plan).items() if k not in needed})
    src = plan.source
    bar = Progress(*src.progress_total()) if progress and src.files else None
    try:
        return count_with(plan.engine, plan.master, src, needed, shapes, plan.unit, bits, bar, unit_rows)
    finally:
        if bar is not None:
            bar.close()
