"""The facts of a disclosure review, collected from a release directory and the budget ledger: pure data, no HTML.

Everything here comes from the release's own files (report.json and the table files, all of it published) and from
the ledger's entries, read only.  The input data is never opened, so no true count can reach the page; the sizes
of the release's own files and the noisy totals of its tables are the only sizes it states (the input file's size
depends on the data without noise, which is why the report leaves it out).

:func:`gather` returns a :class:`Review`.  Its parts:

* the release: input name and format, dphist version, when (the ledger's entries, else report.json's time),
  files, every table with its columns' public domains, its algorithm and why (auto's reason);
* the spend: one :class:`SpendPart` per part of the release's one budget (discovery, a skipped table, the unit
  cap's measurement, each table or a marginal set measured once), each with the steps its record lists (noisy
  totals, levels, residual bases), and whether the parts add up to what the report says was spent;
* the ledger (:class:`LedgerFacts`): every release recorded for the data set, what is left under its cap, or why
  the ledger could not be read (never an error: the page says so);
* accuracy per table: the report's expected error, the 95 % intervals (or why there are none) and the cells
  flagged as unreliable (:data:`UNRELIABLE_WITH_INTERVAL`, :data:`UNRELIABLE_WITHOUT_INTERVAL`);
* what to watch (:class:`Watch`): test mode, an uncapped data set, clamping, dropped nulls, rows dropped by a unit
  cap, skipped tables, the report's warnings.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import DphistError, UsageError
from ...privacy import exact_fraction, format_fraction, total_of
from ...publishing.budget_status import budget_status
from ...publishing.destination import MARKER, sha256_file
from ...publishing.ledger import Ledger, default_ledger_path
from ...text import quoted
from ..plots.labels import axis_labels
from ..synth import ReleasedTable, load_report, read_table

__all__ = ["Review", "TableFacts", "ColumnFacts", "Cell", "Step", "SpendPart", "LedgerRun", "LedgerFacts", "Watch",
           "gather", "UNRELIABLE_WITH_INTERVAL", "UNRELIABLE_WITHOUT_INTERVAL", "MAX_CELLS_LISTED",
           "MAX_VALUES_LISTED"]

#: How a cell with a 95 % interval is judged unreliable (the page prints this sentence).
UNRELIABLE_WITH_INTERVAL = ("its 95 % interval is wider than its released count (ci_upper − ci_lower > count): the "
                            "noise could account for all of it; every released 0 with an interval above 0 is one")
#: How a cell of a table without intervals is judged unreliable (the page prints this sentence).
UNRELIABLE_WITHOUT_INTERVAL = ("the table has no per-cell interval, so a cell is flagged where its released count "
                               "is below twice the table's expected error per cell")
#: The most cells the page lists per table (the table's file holds them all).
MAX_CELLS_LISTED = 300
#: The most categories the page lists for one column.
MAX_VALUES_LISTED = 60


@dataclass(frozen=True)
class Step:
    """One measurement a budget recorded: what it measured, how, its cost (exact text in ``unit``) and noise."""

    what: str
    mechanism: str
    amount: str | None
    noise_sd: float | None
    noisy_values: int | None


@dataclass(frozen=True)
class SpendPart:
    """One part of the release's budget: a label, its amount (exact text), the steps its record lists, and
    whether they add up to it (None where the part lists no steps)."""

    label: str
    amount: str
    detail: str
    steps: list[Step]
    steps_add_up: bool | None


@dataclass(frozen=True)
class ColumnFacts:
    """A column's public domain as the report states it: its type and a line describing its bins or categories."""

    name: str
    kind: str
    bins: str
    values: list[str]
    values_left_out: int
    out_of_domain: str | None
    nulls: str | None


@dataclass(frozen=True)
class Cell:
    """One released cell: its labels, released count, 95 % interval (None where there is none), what the
    interval covers ("count", "bucket share", ""), and whether it is flagged unreliable."""

    labels: tuple[str, ...]
    count: float
    low: float | None
    high: float | None
    covers: str
    unreliable: bool


@dataclass
class TableFacts:
    """One released table as the review shows it."""

    name: str
    file: str | None
    columns: list[ColumnFacts]
    algorithm: str
    chosen_by: str | None  # "auto" when auto chose the algorithm
    reason: str | None  # auto's reason
    amount: str | None
    shared_amount: str | None  # where the amount shown is a whole marginal set's or the full table's
    cells: int
    shape: list[int]
    workload: str | None
    expected_error: dict
    expected_cell_sd: float | None
    interval: dict
    post_processing: str | None
    released_total: float
    listed: list[Cell]
    unreliable: int
    unreliable_rule: str | None
    raw: bool
    released: ReleasedTable | None = field(default=None, repr=False)
    meta: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class LedgerRun:
    """One release recorded in the ledger for the data set: when it was reserved, its run, state, amount,
    tables and folder; ``this`` marks the release under review."""

    when: str
    run_id: str
    state: str
    amount: str
    tables: str
    out: str
    run_key: str | None
    this: bool


@dataclass
class LedgerFacts:
    """What the ledger says, or why it says nothing: ``state`` is "recorded" (the release's reservation was
    found), "test mode" (never recorded), "no entry" (the report names none), "not found" (the ledger does not
    hold the release's entry) or "unreadable" (``message`` says why)."""

    path: str | None
    state: str
    message: str
    dataset: str | None = None
    unit: str | None = None
    runs: list[LedgerRun] = field(default_factory=list)
    caps: list[str] = field(default_factory=list)
    account: dict | None = None
    account_line: str | None = None
    uncapped: bool = False
    files_checked: str | None = None  # the release's files against the hashes the ledger committed


@dataclass(frozen=True)
class Watch:
    """One thing a reviewer must look at: ``level`` is "danger", "warn" or "info"."""

    level: str
    title: str
    text: str


@dataclass
class Review:
    """Everything the review page shows (see the module docstring)."""

    directory: str
    report: dict
    version: str
    input_name: str
    input_format: str
    when: str
    when_source: str
    test_mode: bool
    definition: str
    guarantee: str
    unit: str  # "epsilon" or "rho": what the parts of the budget are counted in
    amounts: list[tuple[str, str]]  # (what, exact text) of the release's requested and spent budget
    privacy_unit: str
    neighbouring: str
    bounding: list[str]
    noise: str
    composition: str
    files: list[tuple[str, int]]
    tables: list[TableFacts]
    spend: list[SpendPart]
    spend_total: str
    spend_stated: str
    spend_adds_up: bool
    marginals: dict | None
    ledger: LedgerFacts
    watch: list[Watch]
    notes: list[str]
    extra_files: list[str] = field(default_factory=list)


def gather(directory: str | os.PathLike, ledger: str | os.PathLike | None = None, *, shown_as: str | None = None,
           being_published: bool = False, extra_files: tuple[str, ...] = ()) -> Review:
    """The facts of the release in ``directory`` (UsageError if it is not one, DataError if its report or a table
    file is damaged), with what the ledger at ``ledger`` (default: $DPHIST_LEDGER, else the per-user ledger) says
    of its data set.  A ledger that is missing or cannot be read is stated in ``Review.ledger``, never raised.

    ``shown_as``: the folder name the page states (the release's destination when ``directory`` is its staging
    folder).  ``being_published``: the release is still in its transaction (its COMMIT is not written yet), so its
    files are not checked against the ledger.  ``extra_files``: files that will be in the release beside those in
    ``directory`` (the page itself)."""
    directory = Path(directory)
    report = load_report(directory)
    definition = str(report.get("definition", "pure"))
    unit = "epsilon" if definition == "pure" else "rho"
    tables = [_table(directory, meta, report) for meta in report["tables"]]
    spend, total, stated, adds_up = _spend(report, unit)
    facts = _ledger(report, directory, ledger, definition, being_published)
    when, when_source = _when(report, directory, facts)
    review = Review(
        directory=shown_as or str(directory), report=report, version=str(report.get("dphist_version", "?")),
        input_name=str((report.get("input") or {}).get("name", "?")),
        input_format=str((report.get("input") or {}).get("format", "?")),
        when=when, when_source=when_source, test_mode=bool(report.get("test_mode")), definition=definition,
        guarantee=str(report.get("guarantee", definition)), unit=unit, amounts=_amounts(report),
        privacy_unit=str(report.get("privacy_unit", "?")), neighbouring=str(report.get("neighbouring", "?")),
        bounding=_bounding(report), noise=str(report.get("noise", "?")),
        composition=str(report.get("composition", "")), files=_files(directory), tables=tables, spend=spend,
        spend_total=total, spend_stated=stated, spend_adds_up=adds_up, marginals=report.get("marginals"),
        ledger=facts, watch=[], notes=[str(n) for n in report.get("notes", []) if isinstance(n, str)],
        extra_files=list(extra_files))
    review.watch = _watch(review)
    return review


# ---- the release ------------------------------------------------------------------------------------------------


def _files(directory: Path) -> list[tuple[str, int]]:
    """The release's files (not its hidden marker) with their sizes in bytes."""
    files = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or not entry.is_file():
            continue
        files.append((entry.name, entry.stat().st_size))
    return files


def _when(report: dict, directory: Path, facts: LedgerFacts) -> tuple[str, str]:
    """When the release was made: its run's first ledger entry, else report.json's modification time."""
    for run in facts.runs:
        if run.this:
            return run.when, "the ledger's reservation entry"
    stamp = _dt.datetime.fromtimestamp((directory / "report.json").stat().st_mtime, _dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "report.json's modification time (the release has no ledger entry)"


def _amounts(report: dict) -> list[tuple[str, str]]:
    """The budget fields of the report, in the order a reader needs them."""
    names = [("epsilon_requested", "ε requested"), ("epsilon_spent", "ε spent"), ("delta_requested", "δ requested"),
             ("delta_spent", "δ spent"), ("delta_used", "δ used"), ("rho_requested", "ρ requested"),
             ("rho_spent", "ρ spent"), ("epsilon_implied", "ε implied"), ("delta_reference", "at the reference δ")]
    return [(label, str(report[key])) for key, label in names if report.get(key) is not None]


def _bounding(report: dict) -> list[str]:
    lines = []
    for key in ("contribution_bounding", "group_privacy"):
        block = report.get(key)
        if isinstance(block, dict) and block.get("rule"):
            lines.append(str(block["rule"]))
    if report.get("group_privacy_scaling"):
        lines.append(str(report["group_privacy_scaling"]))
    return lines


# ---- tables -----------------------------------------------------------------------------------------------------


def _table(directory: Path, meta: dict, report: dict) -> TableFacts:
    released = read_table(directory, meta)
    amount_key = "epsilon" if "epsilon" in meta else "rho" if "rho" in meta else None
    amount = None if amount_key is None else str(meta[amount_key])
    shared = None
    if meta.get("measured_in"):
        shared = f"the whole marginal set's {amount_key}, measured once for all its tables"
    elif meta.get("derived_from"):
        shared = f"the {amount_key} of the full table {meta['derived_from']}, of which this table is a sum"
    choice = meta.get("algorithm_choice") if isinstance(meta.get("algorithm_choice"), dict) else None
    interval = meta.get("interval") if isinstance(meta.get("interval"), dict) else {}
    errors = meta.get("expected_error") if isinstance(meta.get("expected_error"), dict) else {}
    raw = str(meta.get("post_processing", "")).startswith("none")
    cells, flagged, rule = _cells(released, errors, meta.get("expected_cell_sd"), meta.get("domain") or {})
    return TableFacts(
        name=str(meta["name"]), file=released.path.name,
        columns=[_column(c, meta["domain"][c]) for c in meta["columns"]],
        algorithm=str(meta.get("algorithm", "?")), chosen_by=None if choice is None else str(choice.get("by", "auto")),
        reason=None if choice is None else str(choice.get("reason", "")), amount=amount, shared_amount=shared,
        cells=int(np.prod(meta["shape"])), shape=list(meta["shape"]), workload=meta.get("workload"),
        expected_error=errors, expected_cell_sd=meta.get("expected_cell_sd"), interval=interval,
        post_processing=meta.get("post_processing"), released_total=float(np.sum(released.counts)),
        listed=cells[:MAX_CELLS_LISTED], unreliable=flagged, unreliable_rule=rule, raw=raw, released=released,
        meta=meta)


def _column(name: str, domain: dict) -> ColumnFacts:
    kind = str(domain.get("type"))
    values: list[str] = []
    left_out = 0
    if kind == "categorical":
        every = [str(v) for v in domain.get("values") or []]
        values, left_out = every[:MAX_VALUES_LISTED], max(0, len(every) - MAX_VALUES_LISTED)
        bins = f"{len(every)} categories"
    elif kind == "date":
        bins = f"from {domain.get('lower')} to {domain.get('upper')} (upper excluded), by {domain.get('unit', '?')}"
    else:
        bins = f"[{domain.get('lower')}, {domain.get('upper')})"
        if domain.get("edges") is not None:
            edges = [str(e) for e in domain["edges"]]
            shown = ", ".join(edges[:MAX_VALUES_LISTED]) + (f", … ({len(edges) - MAX_VALUES_LISTED} more)"
                                                            if len(edges) > MAX_VALUES_LISTED else "")
            bins += f", edges {shown}"
        elif domain.get("width") is not None:
            bins += f", bins of width {domain['width']}"
        if domain.get("bins") is not None:
            bins += f", {domain['bins']} bins"
    if domain.get("open_ends"):
        bins += "; the end bins also hold the values beyond the bounds"
    if domain.get("hierarchy"):
        bins += "; with a hierarchy"
    return ColumnFacts(name, kind, bins, values, left_out, domain.get("out_of_domain"), domain.get("nulls"))


def _cells(released: ReleasedTable, errors: dict, cell_sd, domains: dict) -> tuple[list[Cell], int, str | None]:
    """Every cell with its labels and interval, how many are flagged unreliable, and the rule used.  ``domains``:
    the report's domain per column (its open ends)."""
    counts = released.counts.ravel()
    n = counts.size
    low = high = None
    if released.ci is not None and np.isfinite(released.ci[0]).any():
        low, high = released.ci
    rule = None
    with np.errstate(invalid="ignore"):
        if low is not None:
            flagged = np.isfinite(low) & np.isfinite(high) & ((high - low) > counts)
            rule = UNRELIABLE_WITH_INTERVAL
        else:
            typical = _typical_error(errors, cell_sd)
            flagged = counts < 2 * typical if typical is not None else np.zeros(n, dtype=bool)
            rule = None if typical is None else f"{UNRELIABLE_WITHOUT_INTERVAL} ({_short(typical)})"
    labels = [_axis_labels(axis, domains.get(column)) for axis, column in zip(released.axes, released.columns)]
    index = np.unravel_index(np.arange(min(n, MAX_CELLS_LISTED)), released.counts.shape)
    covers = released.covers if released.covers is not None else np.full(n, "", dtype=object)
    cells = []
    for k in range(min(n, MAX_CELLS_LISTED)):
        cells.append(Cell(tuple(labels[a][index[a][k]] for a in range(len(labels))), float(counts[k]),
                          None if low is None or not np.isfinite(low[k]) else float(low[k]),
                          None if high is None or not np.isfinite(high[k]) else float(high[k]),
                          str(covers[k]), bool(flagged[k])))
    return cells, int(np.count_nonzero(flagged)), rule


def _typical_error(errors: dict, cell_sd) -> float | None:
    """The table's expected error per cell: the sd where the report gives it, else its rms or mean error."""
    cells = errors.get("cells") if isinstance(errors.get("cells"), dict) else {}
    for value in (cell_sd, cells.get("rms"), cells.get("mean_abs")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            return float(value)
    return None


def _axis_labels(axis, domain: dict | None) -> list[str]:
    """A label per bin, as the pictures have them (:func:`dphist.products.plots.labels.axis_labels`: ``[a, b)``, open
    end bins ``< b`` and ``≥ a``, dates in their unit, "missing"), but every category in full."""
    if axis.kind == "categorical":
        return ["missing" if axis.null[k] else str(axis.text[k]) for k in range(axis.size)]
    return axis_labels(axis, domain)


def _short(value: float) -> str:
    """A number as a reader wants it: whole numbers without a decimal point, others to 4 significant digits."""
    value = float(value)
    if math.isfinite(value) and value == round(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.4g}"


# ---- the spend --------------------------------------------------------------------------------------------------


def _steps(records, unit: str) -> list[Step]:
    steps = []
    for s in records or []:
        if not isinstance(s, dict):
            continue
        sd = s.get("noise_sd")
        steps.append(Step(str(s.get("what", "?")), str(s.get("mechanism", "?")),
                          None if s.get(unit) is None else str(s.get(unit)),
                          float(sd) if isinstance(sd, (int, float)) and not isinstance(sd, bool) else None,
                          s.get("noisy_values") if isinstance(s.get("noisy_values"), int) else None))
    return steps


def _part(label: str, amount, detail: str, steps: list[Step]) -> SpendPart:
    adds_up = None
    if steps and all(s.amount is not None for s in steps):
        adds_up = _exact(total_of(_exact(s.amount) for s in steps)) == _exact(amount)
    return SpendPart(label, str(amount), detail, steps, adds_up)


def _exact(value):
    """An amount as an exact fraction (amounts are exact decimal or p/q text in the report)."""
    try:
        return exact_fraction(value, "amount")
    except UsageError:
        return None


def _spend(report: dict, unit: str) -> tuple[list[SpendPart], str, str, bool]:
    """The parts of the release's budget, their exact sum, the spend the report states, and whether they agree."""
    parts = []
    discovery = report.get("discovery")
    if isinstance(discovery, dict) and discovery.get("epsilon") is not None:
        names = ", ".join(str(c.get("column")) for c in discovery.get("columns", []) if isinstance(c, dict))
        parts.append(_part("discovery", discovery["epsilon"], f"finding the domains of the undeclared columns "
                           f"{names} (δ {discovery.get('delta', '0')})", _steps(discovery.get("steps"), unit)))
        for skipped in discovery.get("skipped_tables", []) or []:
            parts.append(_part(f"table {skipped.get('name')} (skipped)", skipped.get(unit, skipped.get("epsilon")),
                               str(skipped.get("reason", "")), []))
    cap = report.get("unit_cap")
    if isinstance(cap, dict) and isinstance(cap.get("step"), dict):
        step = cap["step"]
        parts.append(_part("unit cap: what it dropped", step.get(unit), str(step.get("what", "")),
                           _steps([step], unit)))
    marginals = report.get("marginals") if isinstance(report.get("marginals"), dict) else None
    tables = report["tables"]
    if marginals is not None and marginals.get("strategy") == "residual" and tables:
        parts.append(_part("marginal set (residual bases, measured jointly)", tables[0].get(unit),
                           f"one measurement for the tables {', '.join(str(t['name']) for t in tables)}",
                           _steps(marginals.get("steps"), unit)))
    elif marginals is not None and isinstance(marginals.get("full_table"), dict):
        full = marginals["full_table"]
        parts.append(_part(f"full table {full.get('name')}", full.get(unit),
                           "measured once; every released marginal is a sum of it (free)",
                           _steps(full.get("steps"), unit)))
    else:
        for t in tables:
            if t.get("derived_from"):
                continue
            parts.append(_part(f"table {t['name']}", t.get(unit), str(t.get("algorithm", "")),
                               _steps(t.get("steps"), unit)))
    amounts = [_exact(p.amount) for p in parts]
    total = None if any(a is None for a in amounts) else total_of(amounts)
    stated = report.get(f"{unit}_spent")
    stated_exact = _exact(stated) if stated is not None else None
    adds_up = total is not None and stated_exact is not None and total == stated_exact
    return parts, ("?" if total is None else format_fraction(total)), str(stated), adds_up


# ---- the ledger -------------------------------------------------------------------------------------------------


def _ledger(report: dict, directory: Path, path, definition: str, being_published: bool) -> LedgerFacts:
    if report.get("test_mode"):
        return LedgerFacts(None, "test mode", "a test-mode release is never recorded in a ledger: it spent nothing "
                           "because it is not private")
    block = report.get("ledger")
    if not isinstance(block, dict) or not block.get("reservation_entry"):
        return LedgerFacts(None, "no entry", "the report names no ledger entry (a release returned by the Python "
                           "API without a ledger, or one made before dphist recorded it)")
    path = Path(path) if path is not None else default_ledger_path()
    try:
        book = Ledger(path, readonly=True)
    except DphistError as exc:
        return LedgerFacts(str(path), "unreadable", f"the ledger could not be read: {exc}")
    try:
        return _recorded(book, block, directory, being_published)
    except DphistError as exc:
        return LedgerFacts(str(path), "unreadable", f"the ledger could not be read: {exc}")
    finally:
        book.close()


def _recorded(book: Ledger, block: dict, directory: Path, being_published: bool) -> LedgerFacts:
    entry = str(block["reservation_entry"])
    unit = str(block.get("privacy_unit", "row"))
    # The report names the data set by its public name; the ledger may hold it under its full path: find the
    # account by the reservation's hash, trying the named data set first.
    named = str(block.get("dataset", ""))
    accounts = [named] + sorted({row["dataset"] for row in book.status() if row["dataset"] != named})
    for dataset in accounts:
        history = [e for e in book.history(dataset) if e["unit"] == unit]
        if any(e["hash"] == entry for e in history):
            break
    else:
        return LedgerFacts(str(book.path), "not found", f"the ledger {book.path} holds no entry {entry[:12]}… (this "
                           "release was recorded in another ledger: give it with --ledger)")
    runs, caps, this_run = _runs(history, entry, being_published)
    facts = LedgerFacts(str(book.path), "recorded", f"recorded in the ledger {book.path}", dataset, unit, runs, caps)
    status = budget_status(book, dataset, unit)
    if status:
        facts.account = status[0].fields
        facts.account_line = status[0].summary()
        if being_published:
            # written in the release's transaction: the ledger's count of releases does not hold this one yet
            facts.account_line += " (written before this release's commit: its spend is counted, the release not yet)"
        facts.uncapped = status[0].fields["definition"] == "none"
    if not being_published:
        facts.files_checked = _check_files(history, this_run, directory)
    return facts


def _runs(history: list[dict], entry: str, being_published: bool) -> tuple[list[LedgerRun], list[str], str | None]:
    """One row per reserved run (oldest first), the caps set, and the run id of the release under review
    (``being_published``: its COMMIT comes after this page is written)."""
    ends = {}
    for e in history:
        if e["kind"] in ("READ", "COMMIT", "PUBLISH", "FAIL", "ABORT"):
            ends[e["run_id"]] = e["kind"]
    words = {"RESERVE": "reserved (running, or died before reading)", "READ": "read, not finished",
             "COMMIT": "committed, not yet moved into place", "PUBLISH": "published",
             "FAIL": "failed after reading (budget spent)", "ABORT": "aborted before reading (budget given back)"}
    runs, caps, this_run = [], [], None
    for e in history:
        detail = e["detail"] if isinstance(e["detail"], dict) else {}
        if e["kind"] == "CAP":
            caps.append(f"{e['ts']}: cap {_charge_text(e, detail)}"
                        + (f" ({detail['reason']})" if detail.get("reason") else ""))
        if e["kind"] != "RESERVE":
            continue
        if e["hash"] == entry:
            this_run = e["run_id"]
        tables = detail.get("tables")
        state = words.get(ends.get(e["run_id"], "RESERVE"), "?")
        if e["hash"] == entry and being_published:
            state = "read; committed and published with this page"
        runs.append(LedgerRun(e["ts"], e["run_id"][:8], state,
                              _charge_text(e, detail), ", ".join(map(str, tables)) if isinstance(tables, list) else "",
                              str(detail.get("out", detail.get("command", ""))), e["run_key"], e["hash"] == entry))
    return runs, caps, this_run


def _charge_text(e: dict, detail: dict) -> str:
    """An entry's amount in words: ε (with δ), ρ, or both for (ε, δ) run as ρ."""
    definition = detail.get("definition", "pure")
    eps, delta, rho = e["epsilon"], e["delta"], detail.get("rho")
    parts = []
    if eps not in (None, ""):
        parts.append(f"ε {_decimal(eps)}")
        if delta not in (None, "", "0"):
            parts.append(f"δ {_decimal(delta)}")
    if rho is not None:
        parts.append(f"ρ {_decimal(rho)}")
    return ", ".join(parts) + ("" if definition == "pure" else f" ({definition})")


def _decimal(text) -> str:
    """A ledger amount (exact, stored as p/q) as the report writes it: a decimal where one is exact."""
    value = _exact(text)
    return str(text) if value is None else format_fraction(value)


def _check_files(history: list[dict], run_id: str | None, directory: Path) -> str | None:
    """Whether the release's files are those its COMMIT entry hashed."""
    committed = next((e["detail"].get("files") for e in history if e["run_id"] == run_id and e["kind"] == "COMMIT"
                      and isinstance(e["detail"], dict)), None)
    if not isinstance(committed, dict):
        return None
    present = {p.name for p in directory.iterdir() if p.is_file() and p.name != MARKER}
    changed = sorted(n for n in committed if n not in present or sha256_file(directory / n) != committed[n])
    extra = sorted(present - set(committed))
    if not changed and not extra:
        return f"all {len(committed)} files are those the ledger's COMMIT entry hashed (SHA-256)"
    words = []
    if changed:
        words.append(f"changed or missing since the commit: {', '.join(quoted(n) for n in changed)}")
    if extra:
        words.append(f"not part of the committed release: {', '.join(quoted(n) for n in extra)}")
    return "; ".join(words)


# ---- what to watch ------------------------------------------------------------------------------------------------


def _watch(review: Review) -> list[Watch]:
    r = review.report
    out = []
    if review.test_mode:
        out.append(Watch("danger", "TEST MODE: not private", str(r.get("warning") or "the noise was drawn from a "
                                                                 "seeded generator: this release is NOT private")))
    if not review.spend_adds_up:
        out.append(Watch("danger", "the spend does not add up", f"the parts listed add up to {review.unit} "
                         f"{review.spend_total}, but the report states {review.spend_stated} spent"))
    ledger = review.ledger
    if ledger.state in ("unreadable", "not found", "no entry"):
        out.append(Watch("warn", "ledger", ledger.message))
    if ledger.uncapped:
        out.append(Watch("warn", "no cap", f"the data set {quoted(ledger.dataset)} has no cap in the ledger: nothing "
                         "limits what its releases spend in all ('dphist budget set' sets one)"))
    if ledger.account and ledger.account.get("cap_note"):
        out.append(Watch("warn", "cap", str(ledger.account["cap_note"])))
    if ledger.files_checked and not ledger.files_checked.startswith("all "):
        out.append(Watch("danger", "files differ from the ledger's record", ledger.files_checked))
    cap = r.get("unit_cap")
    if isinstance(cap, dict):
        share = cap.get("dropped_share")
        span = cap.get("dropped_share_interval")
        out.append(Watch("warn", "rows dropped by the unit cap", f"at most {cap.get('max_rows_per_unit')} rows per "
                         f"{cap.get('unit_column')}: about {cap.get('rows_dropped')} rows dropped (noisy) of "
                         f"{cap.get('rows_kept')} kept (noisy); dropped share {share}"
                         + (f", 95 % range {span[0]} to {span[1]}" if isinstance(span, list) and len(span) == 2
                            else "")))
    discovery = r.get("discovery") if isinstance(r.get("discovery"), dict) else {}
    for skipped in discovery.get("skipped_tables", []) or []:
        out.append(Watch("warn", "skipped table", f"{skipped.get('name')}: {skipped.get('reason')}"))
    for column in discovery.get("columns", []) or []:
        if isinstance(column, dict) and column.get("failed"):
            out.append(Watch("warn", "skipped column", f"{column.get('column')}: {column['failed']}"))
    if discovery:
        out.append(Watch("info", "discovered domains", str(discovery.get("note", "domains were found privately"))))
    clamped, dropped_values, dropped_nulls = {}, {}, {}
    for table in review.tables:
        for c in table.columns:
            if c.out_of_domain == "clamp":
                clamped.setdefault(c.name, []).append(table.name)
            elif c.out_of_domain == "drop":
                dropped_values.setdefault(c.name, []).append(table.name)
            if c.nulls == "drop":
                dropped_nulls.setdefault(c.name, []).append(table.name)
    if clamped:
        out.append(Watch("info", "clamped values", "values outside the domain are counted in the nearest end bin "
                         f"(how many is not published): {', '.join(sorted(clamped))}"))
    if dropped_values:
        out.append(Watch("info", "out-of-domain values dropped", "rows with a value outside the domain are not "
                         f"counted (how many is not published): {', '.join(sorted(dropped_values))}"))
    if dropped_nulls:
        out.append(Watch("info", "missing values dropped", "rows missing a value are not counted (how many is not "
                         f"published): {', '.join(sorted(dropped_nulls))}"))
    for table in review.tables:
        if table.raw:
            out.append(Watch("warn", "raw counts", f"table {table.name} is --raw: unbiased noisy counts, possibly "
                             "negative, not post-processed"))
        if table.interval.get("covers") == "none":
            out.append(Watch("info", "no intervals", f"table {table.name}: {table.interval.get('reason', '')}"))
        if table.unreliable:
            out.append(Watch("warn", "unreliable cells", f"table {table.name}: {table.unreliable} of {table.cells} "
                             "cells flagged (see How accurate)"))
    marginals = review.marginals or {}
    agreement = marginals.get("rounded_agreement") if isinstance(marginals.get("rounded_agreement"), dict) else None
    if agreement is not None and not agreement.get("exact", True):
        out.append(Watch("info", "marginals after rounding", f"sums onto a shared sub-table differ by up to "
                         f"{agreement.get('max_difference')}: {agreement.get('why', '')}"))
    if r.get("delta_note"):
        out.append(Watch("info", "δ", str(r["delta_note"])))
    return out
