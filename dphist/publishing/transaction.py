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
                                                                              (these two only if the hashes
                                                                              match: see below)
    published  + PUBLISH                    the release at --out              nothing to do

A run that fails (an error, SIGINT, SIGTERM) removes its staging folder and records ABORT before READ or FAIL
after it; from COMMIT to PUBLISH, SIGINT and SIGTERM are held back so a release is never half published.
Recovery only touches runs whose process is known to have ended (same host, pid gone or reused).

Recovery trusts the disk only as far as the hashes go.  It commits and publishes a staging folder only if it
holds exactly the files its marker and (once committed) its COMMIT entry name, with those hashes, and the marker of
that run; it records a release moved into place before the kill as published only if the files there still have
them.  A folder that differs (a file put in, changed or taken out) is left as it is, nothing is recorded, and the
run stays open, so the next recovery tries again once the steward has put it right: closing it would throw away
a release whose budget is spent for good, often over one stray file, and an open run costs nothing more (its
budget is counted already; its run key stays claimed, as it must).  Deleting the folder gives the release up:
the next recovery then records it as gone.

A retry with a run key that was committed reports the release only if its destination still holds it with the
commit's hashes; otherwise it exits 3 (:class:`RunKeyUnpublished`: nothing read or spent, no new noise under the
key), or 4 while the committing process may still be moving it there.

The fault suite stops runs at the checkpoints ``reserved``, ``read``, ``computed``, ``staging``, ``writing`` (after
each chunk of a table streamed into staging, :mod:`dphist.publishing.writers`), ``staged``, ``committed``, ``moved`` and
``published`` (:mod:`dphist.publishing.faults`).
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

from ..privacy import format_fraction
from ..errors import DataError, DphistError, Terminated, UsageError, after_reading
from ..declare import identifiers
from .faults import checkpoint
from ..text import quoted
from .destination import (Destination, Mismatch, read_marker, release_mismatch, remove_tree, sweep_orphans,
                          write_marker)
from .ledger import (ROW_UNIT, Existing, Ledger, LedgerError, LedgerLocked, OpenRun, Reservation, RunKeyBusy,
                     RunKeySpent)

__all__ = ["Charged", "FileRelease", "Recovered", "RunKeyUnpublished", "charged_run", "default_dataset_id", "recover"]


class RunKeyUnpublished(RunKeySpent):
    """The run key's release was paid for but is not at its destination as committed: it is gone or was changed
    there, or recovery left it in its staging folder for the steward.  Exit 3: this run read and spent nothing,
    and no new noise is drawn under the key."""


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
    """The ledger's name for a data set given no id: the real path of its file, or of the directory holding the
    files of a directory or glob (:func:`dphist.declare.identifiers.default_dataset_id`); every in-memory DataFrame
    shares one id, which is conservative (their budgets add up)."""
    if getattr(source, "format", None) == "dataframe":
        return "python:DataFrame"
    return identifiers.default_dataset_id(str(source.name))


def charged_run(plan, work: Callable[[dict], object], ledger: Ledger, dataset_id: str | None = None,
                run_key: str | None = None, detail: dict | None = None,
                files: FileRelease | None = None, require_cap: bool = False) -> Charged:
    """Run ``work(ledger_info)`` (which reads the data) with the plan's budget reserved, then commit it.

    The reservation is in the plan's ``definition`` (default "pure"): pure reserves ``plan.epsilon`` and
    ``plan.delta``; zcdp ``plan.rho`` alone; approximate ``plan.epsilon``, ``plan.delta`` and ``plan.rho``.

    With ``files``, the value is written into a staging folder, committed with its files' hashes and moved into
    place (the table in the module docstring).  ``ledger_info`` is the block for the published report.  A run
    key already committed, whose release is at its destination with the committed hashes, returns ``existing``
    and spends nothing; one held by a live run raises RunKeyBusy (exit 4), and one used up by a run that read
    data, or whose release is not (or no longer) at its destination as committed, raises RunKeySpent or
    RunKeyUnpublished (exit 3), all before reading.
    ``require_cap``: refuse (CapRequired, exit 3, before reading) a data set that has no cap."""
    dataset = default_dataset_id(plan.source) if dataset_id is None else dataset_id
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
            return Charged(dataset, existing=_in_place(ledger, dataset, run_key, existing))
        out = files.destination.out
        info.update(out=str(out), staging=str(files.destination.staging_path(run_id)),
                    overwrite=files.destination.overwrite)
    # The plan's definition says what the ledger is charged: pure ε (δ for partition selection), zcdp ρ alone, or
    # approximate (ε, δ) run as ρ-zCDP (both recorded; the data set's cap counts the one it is set in).
    definition = getattr(plan, "definition", "pure")
    epsilon = None if definition == "zcdp" else plan.epsilon
    rho = getattr(plan, "rho", None) if definition != "pure" else None
    try:
        reserved = ledger.reserve(dataset, unit, epsilon, getattr(plan, "delta", 0) or 0, run_key, detail=info,
                                  recover=recover, run_id=run_id, rho=rho, require_cap=require_cap)
    except RunKeyBusy as busy:
        raise _unfinished(ledger, dataset, unit, run_key, busy) from None
    if isinstance(reserved, Existing):
        return Charged(dataset, existing=_in_place(ledger, dataset, run_key, reserved))
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
    try:
        return ledger.claimed(dataset, unit, run_key)
    except RunKeyBusy as busy:
        raise _unfinished(ledger, dataset, unit, run_key, busy) from None


def _in_place(ledger: Ledger, dataset: str, run_key: str, existing: Existing) -> Existing:
    """``existing`` (the run key's COMMIT) if its destination holds its release: the marker of its run and the
    committed files with their hashes.  Otherwise raises RunKeyBusy while the committing process may still be
    moving it there, else RunKeyUnpublished.  Draws nothing either way: one release per run key."""
    out, files = existing.detail.get("out"), existing.detail.get("files")
    if out is None or files is None:
        return existing  # committed without files (nothing on disk to check)
    # The run is looked up before the disk, so one that finishes in between is found at its destination.
    run = _open_run(ledger, existing.run_id)
    mismatch = release_mismatch(Path(out), existing.run_id, files, alone=False)
    if mismatch is None:
        return existing
    if run is not None:
        if run.alive:
            raise RunKeyBusy(f"run key '{run_key}' of data set '{dataset}' is held by another run (process "
                             f"{run.detail.get('pid')} on {run.detail.get('host')}) that committed its release and "
                             f"has not finished moving it to {quoted(out, '')}; nothing was read or spent (retry in a "
                             "moment; if that run was killed on another host, run 'dphist budget recover' there)")
        raise _left_error(run, dataset, run_key)
    raise RunKeyUnpublished(
        f"run key '{run_key}' of data set '{dataset}': its release was committed to {quoted(out, '')}, but that folder "
        f"{mismatch}; that run's budget stays spent, no new noise is drawn under this key, and this run read and "
        "spent nothing (restore the release there as it was committed, from a backup; or release again under a "
        "new --run-key, which spends the budget again)")


def _unfinished(ledger: Ledger, dataset: str, unit: str, run_key: str, busy: RunKeyBusy) -> DphistError:
    """What to raise for a run key held by a run without an end: ``busy`` while its process may still run, else
    (recovery, which runs first, could not finish it) RunKeyUnpublished saying why its release was left."""
    run = next((r for r in ledger.open_runs() if (r.dataset, r.unit, r.run_key) == (dataset, unit, run_key)), None)
    return busy if run is None or run.alive else _left_error(run, dataset, run_key)


def _left_error(run: OpenRun, dataset: str, run_key: str) -> RunKeyUnpublished:
    """Why the release of ``run`` (ended, without an end in the ledger) was not published, for a retry."""
    found = _find_release(run)
    if found.mismatch is None:  # recovery failed on something else (a disk error)
        why, what = "recovery could not finish it", "put right what 'dphist budget recover' names"
    else:
        why, what = f"recovery left it as it is: {found.describe()}", _what_to_do(found.mismatch)
    return RunKeyUnpublished(
        f"run key '{run_key}' of data set '{dataset}': its run ended before its release was recorded as published, "
        f"and {why}; that run's budget stays spent, no new noise is drawn under this key, and this run read and "
        f"spent nothing ({what}, then run 'dphist budget recover'; or release again under a new --run-key, which "
        "spends the budget again)")


def _open_run(ledger: Ledger, run_id: str) -> OpenRun | None:
    return next((r for r in ledger.open_runs() if r.run_id == run_id), None)


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


@dataclass(frozen=True)
class Recovered:
    """A run that recovery touched: ``line`` says what it did.  ``left``: it could not finish the run, which
    stays open (its budget spent, its run key claimed) and is tried again by the next recovery."""

    run_id: str
    line: str
    left: bool = False


def recover(ledger: Ledger) -> list[Recovered]:
    """Finish or clean up every run of this host whose process has ended, inside the caller's ledger
    transaction (it joins it; alone it takes its own).  Returns what it did, one entry per run it touched.

    Before READ: ABORT (the ledger does that by itself).  After READ without COMMIT: a staging folder without a
    marker is partial (the marker is written last) and is removed, and the run FAILs; one that holds exactly what
    its marker names is committed and published.  After COMMIT: the staging folder is moved into place (PUBLISH)
    if it holds exactly the committed files.  A folder that differs is left as it is and the run stays open (the
    module docstring says why).  Never draws noise and never reads data."""
    done = []
    with ledger.transaction():
        ledger.release_dead()
        for run in ledger.open_runs():
            if run.alive:
                continue
            try:
                done.append(_recover_run(ledger, run))
            except (OSError, DataError) as exc:  # e.g. its folder is on a disk that is gone: try again next time
                reason = getattr(exc, "strerror", None) or str(exc)
                done.append(Recovered(run.run_id, f"run {run.run_id[:8]}: not recovered yet ({reason})", left=True))
    return done


@dataclass(frozen=True)
class _Found:
    """Where a dead run's release is: ``place`` is "staging" (its staging folder is there), "in place" (--out
    holds the marker of the run: it was moved before the kill) or "gone"; ``mismatch`` says how ``folder``
    differs from the committed release (None: it holds exactly that)."""

    place: str
    folder: Path | None = None
    mismatch: Mismatch | None = None

    def describe(self) -> str:
        """The folder and what is wrong with it, as a clause ("its staging folder X holds 'y', ...")."""
        where = "its staging folder" if self.place == "staging" else "its release at"
        return f"{where} {quoted(self.folder, '')} {self.mismatch}"


def _folders(run: OpenRun) -> tuple[Path | None, Path | None]:
    """The run's staging folder and destination, as its RESERVE entry named them (None for a run without files)."""
    staging, out = run.detail.get("staging"), run.detail.get("out")
    return (Path(staging) if staging else None), (Path(out) if out else None)


def _committed_files(run: OpenRun) -> dict[str, str] | None:
    """The hashes the run's release must have: its COMMIT entry's; before COMMIT, its staging marker's (None when
    there is no marker: the staging folder is partial, or the run wrote no files)."""
    if run.commit is not None:
        return run.commit.get("files")
    staging, _ = _folders(run)
    marker = read_marker(staging) if staging is not None else None
    return None if marker is None else marker["files"]


def _find_release(run: OpenRun) -> _Found:
    """Where the release of a dead run is, checked against the hashes it must have.  Reads, writes nothing."""
    staging, out = _folders(run)
    files = _committed_files(run)
    if files is None or out is None:
        return _Found("gone")
    if staging is not None and (staging.exists() or staging.is_symlink()):
        return _Found("staging", staging, release_mismatch(staging, run.run_id, files, alone=True))
    held = read_marker(out)
    if held is not None and held.get("run_id") == run.run_id:
        return _Found("in place", out, release_mismatch(out, run.run_id, files, alone=False))
    return _Found("gone")


def _what_to_do(mismatch: Mismatch) -> str:
    if mismatch.only_extra:
        return "move what is not part of the release out of that folder"
    return "put the release's files back as they were committed (or delete that folder to give the release up)"


def _recover_run(ledger: Ledger, run: OpenRun) -> Recovered:
    r = run.as_reservation()
    staging, out = _folders(run)
    name = f"run {run.run_id[:8]} ({run.dataset}{', key ' + run.run_key if run.run_key else ''})"
    if out is not None:
        sweep_orphans(out)  # an interrupted swap is put back first
    if run.stage == "RESERVE":  # pragma: no cover - release_dead aborted it
        return Recovered(run.run_id, f"{name}: given back")
    if run.stage == "READ" and _committed_files(run) is None:
        # Killed before its marker, which is written last: partial, and nothing in it is anyone else's.
        remove_tree(staging)
        ledger.fail(r, "the process ended after reading data, before its release was complete; the partial "
                       "output was removed")
        return Recovered(run.run_id, f"{name}: ended after reading data with no complete release: stays charged, "
                                     "nothing published")
    if staging is None or out is None:
        ledger.published(r, {"published": False, "reason": "the process ended after its commit"})
        return Recovered(run.run_id, f"{name}: committed; nothing to move")
    found = _find_release(run)
    if found.mismatch is not None:  # nothing recorded, nothing removed: the steward decides (module docstring)
        return Recovered(run.run_id, f"{name}: not published, and left as it is: {found.describe()}; its budget "
                                     f"stays spent ({_what_to_do(found.mismatch)}, then run 'dphist budget recover' "
                                     "again)", left=True)
    if run.stage == "READ":
        ledger.commit(r, {"out": str(out), "staging": str(staging), "files": _committed_files(run),
                          "recovered": True}, run.run_key)
    if found.place == "staging":
        destination = Destination(out, bool(run.detail.get("overwrite")))
        try:
            destination.publish(staging, run.run_id)
        except (OSError, DataError) as exc:
            remove_tree(staging)
            reason = getattr(exc, "strerror", None) or str(exc)
            ledger.published(r, {"published": False, "reason": f"could not be moved into place: {reason}"})
            return Recovered(run.run_id, f"{name}: committed, but could not be moved to {out} ({reason}); its "
                                         "budget stays spent")
        ledger.published(r, {"published": True, "recovered": True})
        return Recovered(run.run_id, f"{name}: finished: the release it paid for is now at {out}")
    if found.place == "in place":
        ledger.published(r, {"published": True, "recovered": True})
        return Recovered(run.run_id, f"{name}: was already in place at {out}")
    ledger.published(r, {"published": False, "reason": "its staging folder is gone"})
    return Recovered(run.run_id, f"{name}: committed, but its files are gone; its budget stays spent")
