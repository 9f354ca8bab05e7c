"""The release transaction: reserve, read, stage, commit, publish, and recovery after a crash at any point.

Every release outside test mode runs through :func:`charged_run` (the CLI's ``release`` and ``schema --private``,
the Python API's :func:`dphist.release`).  The states, what the ledger and the disk hold in each, and what the
next run (or ``dphist budget recover``) does when a run was killed there:

    state      ledger                       disk                              recovery of a dead run
    planned    nothing                      nothing                           nothing to do
    reserved   RESERVE (budget counted,     nothing                           ABORT: budget given back, key
               key claimed)                                                   freed
    reading    + READ (spent for good)      maybe a partial staging folder    FAIL: staging removed, budget
                                                                              stays spent, key used up
    staged     + READ                       a complete staging folder         COMMIT, then as below
                                            (marker with the files' hashes)
    committed  + COMMIT (files' hashes)     the complete staging folder       move it into place, PUBLISH
    published  + PUBLISH                    the release at --out              nothing to do

A run that fails (an error, SIGINT, SIGTERM) removes its staging folder and records ABORT before READ or FAIL
after it; from COMMIT to PUBLISH, SIGINT and SIGTERM are held back so a release is never half published.
Recovery only touches runs whose process is known to have ended (same host, pid gone or reused).

The fault suite stops runs at the checkpoints ``reserved``, ``read``, ``computed``, ``staging``, ``writing`` (after
each chunk of a table streamed into staging, :mod:`dphist.io.writers`), ``staged``, ``committed``, ``moved`` and
``published`` (:mod:`dphist.faults`).
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .privacy import format_fraction
from .errors import DataError, DphistError, Terminated, UsageError, after_reading
from .faults import checkpoint
from .io.destination import Destination, is_complete, read_marker, remove_tree, sweep_orphans, write_marker
from .ledger import ROW_UNIT, Existing, Ledger, LedgerError, LedgerLocked, OpenRun, Reservation

__all__ = ["Charged", "FileRelease", "charged_run", "default_dataset_id", "recover"]


@dataclass
class Charged:
    """What a charged run produced: ``value`` (what ``work`` returned), or ``existing`` when the run key had
    already been committed (then nothing ran and nothing was spent)."""

    dataset: str
    value: object = None
    existing: Existing | None = None
    commit_entry: str | None = None
    info: dict = field(default_factory=dict)
    paths: list[Path] = field(default_factory=list)


@dataclass
class FileRelease:
    """Where a release's files go: a :class:`Destination` (checked by :func:`charged_run` before the reservation)
    and ``write(value, staging) -> file names``, which writes the computed release into the staging folder."""

    destination: Destination
    write: Callable[[object, Path], list[str]]
    test_mode: bool = False


def default_dataset_id(source) -> str:
    """The ledger's name for a data set: the absolute path it was read from (globs kept as patterns); every
    in-memory DataFrame shares one id, which is conservative (their budgets add up)."""
    if getattr(source, "format", None) == "dataframe":
        return "python:DataFrame"
    return str(Path(os.path.expanduser(str(source.name))).absolute())


def charged_run(plan, work: Callable[[dict], object], ledger: Ledger, dataset_id: str | None = None,
                run_key: str | None = None, detail: dict | None = None,
                files: FileRelease | None = None) -> Charged:
    """Run ``work(ledger_info)`` (which reads the data) with the plan's budget reserved, then commit it.

    The reservation is in the plan's ``definition`` (default "pure"): pure reserves ``plan.epsilon`` and
    ``plan.delta``; zcdp ``plan.rho`` alone; approximate ``plan.epsilon``, ``plan.delta`` and ``plan.rho``.

    With ``files``, the value is written into a staging folder, committed with its files' hashes and moved into
    place (the table in the module docstring).  ``ledger_info`` is the block for the published report.  A run
    key already committed returns ``existing`` and spends nothing; one held by a live run raises RunKeyBusy
    (exit 4) and one used up by a run that read data raises RunKeySpent (exit 3), both before reading."""
    dataset = dataset_id or default_dataset_id(plan.source)
    unit = getattr(plan, "ledger_unit", ROW_UNIT)  # budgets per row and per person are separate accounts
    run_id = uuid.uuid4().hex
    info = {**(detail or {}), "command": (detail or {}).get("command", "release")}
    if files is not None:
        try:
            files.destination.check()
        except UsageError:
            # An occupied --out is no error for a retry whose run key was already released there.
            existing = _claimed(ledger, dataset, unit, run_key) if run_key is not None else None
            if existing is None:
                raise
            return Charged(dataset, existing=existing)
        out = files.destination.out
        info.update(out=str(out), staging=str(files.destination.staging_path(run_id)),
                    overwrite=files.destination.overwrite)
    # The plan's definition says what the ledger is charged: pure ε (δ for partition selection), zcdp ρ alone, or
    # approximate (ε, δ) run as ρ-zCDP (both recorded; the data set's cap counts the one it is set in).
    definition = getattr(plan, "definition", "pure")
    epsilon = None if definition == "zcdp" else plan.epsilon
    rho = getattr(plan, "rho", None) if definition != "pure" else None
    reserved = ledger.reserve(dataset, unit, epsilon, getattr(plan, "delta", 0) or 0, run_key, detail=info,
                              recover=recover, run_id=run_id, rho=rho)
    if isinstance(reserved, Existing):
        return Charged(dataset, existing=reserved)
    report_info = {"dataset": dataset_id or plan.source.public_name, "privacy_unit": unit,
                   "reservation_entry": reserved.entry_hash,
                   "epsilon_spent_before": _text(reserved.spent_before),
                   "epsilon_cap": _text(reserved.cap),
                   **({"run_key": run_key} if run_key else {})}
    if reserved.definition != "pure" or reserved.rho_cap is not None:  # pure releases keep the report they had
        report_info.update(rho_spent_before=_text(reserved.rho_spent_before), rho_cap=_text(reserved.rho_cap))
    staging, reading = None, False
    try:
        checkpoint("reserved")
        with _reading(ledger, reserved):
            reading = True
            checkpoint("read")
            value = work(report_info)
            checkpoint("computed")
            if files is None:
                commit_detail = {"returned_to": info["command"]}
            else:
                staging = files.destination.make_staging(run_id)
                checkpoint("staging")
                names = files.write(value, staging)
                hashes = write_marker(staging, run_id, run_key, files.test_mode)
                checkpoint("staged")
                commit_detail = {"out": str(files.destination.out), "staging": str(staging), "files": hashes}
            with _signals_held():
                entry = ledger.commit(reserved, commit_detail, run_key)
                checkpoint("committed")
                if files is not None:
                    files.destination.publish(staging, run_id)
                    checkpoint("moved")
                try:
                    ledger.published(reserved, {"published": True})
                except DphistError:
                    pass  # the release is in place; recovery records PUBLISH once this process has ended
                checkpoint("published")
    except BaseException as exc:
        remove_tree(staging)
        if reading:
            # The one place that knows the run read data: every failure from here on says its budget stays spent
            # (and none says so before), whatever raised it.
            raise after_reading(exc) from None
        if not isinstance(exc, (LedgerError, LedgerLocked)):  # stopped before the read: give the budget back
            try:
                ledger.abort(reserved, f"{_reason(exc)} before reading any data")
            except DphistError:
                pass  # the next run's recovery gives it back once this process has ended
        raise
    paths = [] if files is None else [files.destination.out / n for n in names]
    return Charged(dataset, value=value, commit_entry=entry, info=report_info, paths=paths)


def _text(value) -> str | None:
    return None if value is None else format_fraction(value)


def _claimed(ledger: Ledger, dataset: str, unit: str, run_key: str) -> Existing | None:
    """The run key's committed release, after recovering dead runs; None if the key is free; raises RunKeyBusy
    or RunKeySpent if a run holds or used it up."""
    recover(ledger)  # its own transaction, so what it records stays even if the key is refused
    return ledger.claimed(dataset, unit, run_key)


@contextmanager
def _reading(ledger: Ledger, reserved: Reservation) -> Iterator[None]:
    """Record the read before any row is read; on failure give the reservation back if that never happened,
    and otherwise record that the run ended without a release (unless it was committed)."""
    read = False
    try:
        ledger.mark_read(reserved)  # from here the budget stays spent, whatever happens
        read = True
        yield
    except BaseException as exc:
        reason = _reason(exc)
        try:
            if not read:
                ledger.abort(reserved, f"{reason} before reading any data")
            elif not ledger.committed_run(reserved.run_id):
                ledger.fail(reserved, f"{reason} after reading data; no release was published")
        except DphistError:
            pass  # the ledger itself failed (full, locked): the next run's recovery records the end
        raise


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    if isinstance(exc, Terminated):
        return "stopped (SIGTERM)"
    return f"failed ({type(exc).__name__})"


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the commit and the move run, so either both happen or recovery sees a
    COMMIT it can finish; a signal that arrived meanwhile is acted on when the block ends.  (Handlers, not a
    signal mask: a process-directed signal would go to one of Arrow's threads, which do not block it.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending:
            handler = previous[pending[0]]
            if callable(handler):
                handler(pending[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), pending[0])


# --------------------------------------------------------------------------------------------------------------
# Recovery


def recover(ledger: Ledger) -> list[str]:
    """Finish or clean up every run of this host whose process has ended, inside the caller's ledger
    transaction (it joins it; alone it takes its own).  Returns one line per run it touched.

    Before READ: ABORT (the ledger does that by itself).  After READ without COMMIT: a complete staging folder is
    committed and published; anything else is removed and the run FAILs.  After COMMIT: the staging folder is
    moved into place (PUBLISH).  Never draws noise and never reads data."""
    lines = []
    with ledger.transaction():
        ledger.release_dead()
        for run in ledger.open_runs():
            if run.alive:
                continue
            try:
                lines.append(_recover_run(ledger, run))
            except (OSError, DataError) as exc:  # e.g. its folder is on a disk that is gone: try again next time
                lines.append(f"run {run.run_id[:8]}: not recovered yet ({getattr(exc, 'strerror', None) or exc})")
    return lines


def _recover_run(ledger: Ledger, run: OpenRun) -> str:
    r = run.as_reservation()
    staging = Path(run.detail["staging"]) if run.detail.get("staging") else None
    out = Path(run.detail["out"]) if run.detail.get("out") else None
    name = f"run {run.run_id[:8]} ({run.dataset}{', key ' + run.run_key if run.run_key else ''})"
    if out is not None:
        sweep_orphans(out)  # an interrupted swap is put back first
    if run.stage == "READ":
        if staging is None or not is_complete(staging, run.run_id):
            remove_tree(staging)
            ledger.fail(r, "the process ended after reading data, before its release was complete; the partial "
                           "output was removed")
            return f"{name}: ended after reading data with no complete release: stays charged, nothing published"
        marker = read_marker(staging)
        ledger.commit(r, {"out": str(out), "staging": str(staging), "files": marker["files"], "recovered": True},
                      run.run_key)
    elif run.stage == "RESERVE":  # pragma: no cover - release_dead aborted it
        return f"{name}: given back"
    elif staging is None or out is None:
        ledger.published(r, {"published": False, "reason": "the process ended after its commit"})
        return f"{name}: committed; nothing to move"
    if staging is not None and staging.exists():
        destination = Destination(out, bool(run.detail.get("overwrite")))
        try:
            destination.publish(staging, run.run_id)
        except (OSError, DataError) as exc:
            remove_tree(staging)
            reason = getattr(exc, "strerror", None) or str(exc)
            ledger.published(r, {"published": False, "reason": f"could not be moved into place: {reason}"})
            return f"{name}: committed, but could not be moved to {out} ({reason}); its budget stays spent"
        ledger.published(r, {"published": True, "recovered": True})
        return f"{name}: finished: the release it paid for is now at {out}"
    held = read_marker(out) if out.exists() else None
    if held is not None and held.get("run_id") == run.run_id:
        ledger.published(r, {"published": True, "recovered": True})
        return f"{name}: was already in place at {out}"
    ledger.published(r, {"published": False, "reason": "its staging folder is gone"})
    return f"{name}: committed, but its files are gone; its budget stays spent"
