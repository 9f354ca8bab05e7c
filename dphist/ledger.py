"""The persistent privacy-budget ledger: what every release of a data set has spent, across runs and processes.

One SQLite file holds an append-only, hash-chained list of entries (privacy-engineering.md §4).  A release goes

    RESERVE  (before any row is read: refused if spent + ε would exceed the cap; claims the run key)
    READ     (written just before the first row is read: from here on the budget is spent for good)
    COMMIT   (the release is complete in its staging folder; the entry holds the files' hashes)
    PUBLISH  (the release was moved into place)

and a failure before READ writes ABORT, which gives the reservation back; a run that read data and ended without
a complete release gets FAIL (it stays charged, and its run key is used up).  The release transaction itself (what
the disk holds in each state, and recovery after a kill) lives in :mod:`dphist.publish`; this module only keeps
the entries.  Every write is one ``BEGIN IMMEDIATE`` transaction, so overlapping cron runs queue for the lock and
each sees the others' reservations.  Budgets are exact fractions, stored as text.

spent(data set, unit) = Σ ε of its RESERVE entries whose run has no ABORT.  Each entry's hash is SHA-256 of the
previous entry's hash and the entry's canonical JSON, so editing, deleting or reordering rows breaks the chain
(``verify``).  The cap is itself an entry (CAP), so changing it leaves a trace.

A ledger that cannot be used (not a file, not SQLite, damaged, read-only, full) raises :class:`LedgerError` with
one line; nothing is written to it then.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
import urllib.parse
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from .privacy import format_fraction
from .errors import DphistError

__all__ = ["Ledger", "Reservation", "Existing", "OpenRun", "BudgetExhausted", "LedgerLocked", "LedgerError",
           "RunKeyBusy", "RunKeySpent", "default_ledger_path", "GENESIS", "ROW_UNIT"]

GENESIS = "0" * 64
ROW_UNIT = "row"  # the privacy unit of every release so far: one record
KINDS = ("CAP", "RESERVE", "READ", "COMMIT", "PUBLISH", "FAIL", "ABORT")
_COLUMNS = ("seq", "ts", "dataset", "unit", "kind", "run_id", "run_key", "epsilon", "delta", "detail", "prev_hash")
_TABLE = ("seq", "ts", "dataset", "unit", "kind", "run_id", "run_key", "epsilon", "delta", "detail", "prev_hash",
          "hash")
#: Ledger writes after a run has read data must not give up as quickly as the reservation may (--lock-timeout 0):
#: they are short, and failing them would leave a paid-for release unpublished.
AFTER_READ_TIMEOUT = 600.0


class BudgetExhausted(DphistError):
    """The release would take a data set past its cap (exit code 3).  No data was read."""

    exit_code = 3


class RunKeySpent(BudgetExhausted):
    """The run key's reservation read data and ended without a release: no new noise is ever drawn under it."""


class LedgerLocked(DphistError):
    """Another process held the ledger longer than the lock timeout (exit code 4).  No data was read."""

    exit_code = 4


class RunKeyBusy(LedgerLocked):
    """Another run holds the run key and has not finished (exit code 4).  No data was read."""


class LedgerError(DphistError):
    """The ledger file cannot be used: not a file, not SQLite, damaged, read-only or full (exit code 2)."""

    exit_code = 2


def default_ledger_path() -> Path:
    """``$DPHIST_LEDGER``, else ``$XDG_DATA_HOME/dphist/ledger.sqlite`` (``~/.local/share/dphist/...``)."""
    if os.environ.get("DPHIST_LEDGER"):
        return Path(os.environ["DPHIST_LEDGER"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dphist" / "ledger.sqlite"


@dataclass(frozen=True)
class Reservation:
    run_id: str
    dataset: str
    unit: str
    epsilon: Fraction
    delta: Fraction
    entry_hash: str
    spent_before: Fraction
    cap: Fraction | None
    run_key: str | None = None


@dataclass(frozen=True)
class Existing:
    """A committed release with the same run key: where it is, and the hash of its COMMIT entry."""

    run_id: str
    detail: dict
    entry_hash: str


@dataclass(frozen=True)
class OpenRun:
    """A reservation that has not reached an end (PUBLISH, FAIL or ABORT), as the ledger records it.

    ``stage`` is the furthest state recorded: "RESERVE", "READ" or "COMMIT"; ``detail`` is the RESERVE entry's
    detail (what the run said it would write, and its process), ``commit`` the COMMIT entry's detail."""

    run_id: str
    dataset: str
    unit: str
    run_key: str | None
    stage: str
    detail: dict
    commit: dict | None

    @property
    def local(self) -> bool:
        return self.detail.get("host") == socket.gethostname()

    @property
    def alive(self) -> bool:
        """False only when the run's process is known to be gone (same host, pid ended or reused)."""
        return not self.local or _alive(int(self.detail.get("pid", -1)), self.detail.get("pid_start"))

    def as_reservation(self) -> Reservation:
        return Reservation(self.run_id, self.dataset, self.unit, Fraction(0), Fraction(0), "", Fraction(0), None,
                           self.run_key)


def _process_start(pid: int) -> str | None:
    """The kernel's start time of process ``pid`` (so a reused pid is not taken for the original), if known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    if pid <= 0:
        return True  # unknown: keep the reservation charged
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None or _process_start(pid) in (None, start)


def process_identity() -> dict:
    """This process as the ledger records it: pid, the kernel's start time of the pid, and the host."""
    return {"pid": os.getpid(), "pid_start": _process_start(os.getpid()), "host": socket.gethostname()}


def _hash(prev: str, body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256((prev + text).encode()).hexdigest()


class Ledger:
    """A ledger file.  ``timeout`` is how long the first transaction of a run waits for another process's
    transaction (then LedgerLocked).  ``readonly`` opens it for reading only, and never creates it."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float = 30.0, readonly: bool = False):
        self.path = Path(path) if path is not None else default_ledger_path()
        self.timeout = float(timeout)
        self.readonly = readonly
        self._depth = 0
        try:
            self._check_path()
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte: Path's checks raise
            raise LedgerError(f"ledger {str(self.path)!r}: not a usable path "
                              f"({getattr(exc, 'strerror', None) or exc})") from None
        try:
            if readonly:
                # mode=ro still reads what the write-ahead log holds; where the folder cannot be written (no -shm
                # file can be made) the file is read as it stands on disk.
                flag = "mode=ro" if os.access(self.path.parent, os.W_OK) else "immutable=1"
                uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?" + flag
                self._db = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
                self._check_table(create=False)
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            self._set_up()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: cannot open ({exc.strerror or exc})") from None

    def _set_up(self) -> None:
        """Check the file is a dphist ledger (before anything is written to a file that may not be ours), switch
        it to write-ahead logging and create the table if new.  Processes opening a new file together can get
        SQLITE_BUSY here without SQLite's busy wait (switching the journal mode), so that is retried until the
        timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._check_table(create=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._check_table(create=True)
                return
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)

    def _check_path(self) -> None:
        """Refuse, before SQLite touches it, a path that is not (or cannot become) a regular writable file."""
        where = f"ledger {self.path}"
        if self.path.exists() or self.path.is_symlink():
            if not self.path.exists():
                raise LedgerError(f"{where}: a broken symbolic link")
            if not self.path.is_file():
                raise LedgerError(f"{where}: not a regular file")
            if not self.readonly and not os.access(self.path, os.R_OK | os.W_OK):
                raise LedgerError(f"{where}: read-only (releases must be recorded in it; check its permissions)")
        elif self.readonly:
            raise LedgerError(f"{where}: no such file (nothing has been recorded there)")
        else:
            parent = self.path.parent
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
            if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
                raise LedgerError(f"{where}: cannot be created in {parent}")

    def _check_table(self, create: bool) -> None:
        """The entries table exists with dphist's columns (or is created, in a new file).  Another process may be
        creating it at this moment, so only the entries table itself is judged."""
        names = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "entries" in names:
            found = tuple(row[1] for row in self._db.execute("PRAGMA table_info(entries)"))
            if found != _TABLE:
                raise LedgerError(f"ledger {self.path}: its entries table does not have dphist's columns")
            return
        if names:
            raise LedgerError(f"ledger {self.path}: an SQLite file that is not a dphist ledger")
        if create:
            self._db.execute("""CREATE TABLE IF NOT EXISTS entries (
                seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, dataset TEXT NOT NULL, unit TEXT NOT NULL,
                kind TEXT NOT NULL, run_id TEXT NOT NULL, run_key TEXT, epsilon TEXT NOT NULL, delta TEXT NOT NULL,
                detail TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)""")
            self._db.execute("CREATE INDEX IF NOT EXISTS by_run ON entries (run_id, kind)")
            self._db.execute("CREATE INDEX IF NOT EXISTS by_dataset ON entries (dataset, unit, kind)")

    def close(self) -> None:
        self._db.close()

    # ----------------------------------------------------------------------------------------------------------
    # Writing

    def set_cap(self, dataset: str, unit: str, epsilon, delta=0, reason: str = "") -> str:
        """Set the data set's cap (a CAP entry); returns its hash.  A cap below what is already spent is
        allowed (it stops further releases) and says so in the entry."""
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        with self.transaction():
            spent = self._spent(dataset, unit)
            detail = {"reason": reason, "operator": _operator(), "spent_at_change": _pair(*spent)}
            return self._append(dataset, unit, "CAP", uuid.uuid4().hex, None, epsilon, delta, detail)

    def reserve(self, dataset: str, unit: str, epsilon, delta=0, run_key: str | None = None,
                detail: dict | None = None, recover: Callable[[Ledger], None] | None = None,
                run_id: str | None = None) -> Reservation | Existing:
        """Reserve a release's budget before any data is read, claiming ``run_key`` in the same transaction.

        Returns the committed release instead if ``run_key`` was committed (nothing is charged).  Raises
        RunKeyBusy (exit 4) if another run holds the key, RunKeySpent (exit 3) if the key's run read data and
        ended without a release, BudgetExhausted past the cap, LedgerLocked if the lock is not had within the
        timeout.  ``recover(ledger)`` runs first inside the transaction (see :func:`dphist.publish.recover`)."""
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        with self.transaction():
            self.release_dead()
            if recover is not None:
                recover(self)
            try:  # a refusal still commits what recovery recorded
                return self._reserve(dataset, unit, epsilon, delta, run_key, detail, run_id)
            except (BudgetExhausted, LedgerLocked) as exc:
                refusal = exc
        raise refusal

    def _reserve(self, dataset, unit, epsilon, delta, run_key, detail, run_id) -> Reservation | Existing:
        if run_key is not None:
            done = self.claimed(dataset, unit, run_key)
            if done is not None:
                return done
        spent_eps, spent_delta = self._spent(dataset, unit)
        cap = self._cap(dataset, unit)
        if cap is not None and (spent_eps + epsilon > cap[0] or spent_delta + delta > cap[1]):
            left = (max(cap[0] - spent_eps, Fraction(0)), max(cap[1] - spent_delta, Fraction(0)))
            raise BudgetExhausted(
                f"data set '{dataset}': this release needs epsilon {format_fraction(epsilon)}"
                + (f", delta {format_fraction(delta)}" if delta else "")
                + f" but only epsilon {format_fraction(left[0])}"
                + (f", delta {format_fraction(left[1])}" if cap[1] or delta else "")
                + f" of the cap {format_fraction(cap[0])} is left (see 'dphist budget show')")
        run_id = run_id or uuid.uuid4().hex
        info = {**(detail or {}), **process_identity()}
        entry = self._append(dataset, unit, "RESERVE", run_id, run_key, epsilon, delta, info)
        return Reservation(run_id, dataset, unit, epsilon, delta, entry, spent_eps,
                           None if cap is None else cap[0], run_key)

    def claimed(self, dataset: str, unit: str, run_key: str) -> Existing | None:
        """The run key's state: its committed release, or None if it is free; raises if a run holds it."""
        row = self._db.execute(
            "SELECT run_id, detail FROM entries r WHERE dataset=? AND unit=? AND kind='RESERVE' AND run_key=? AND "
            "NOT EXISTS (SELECT 1 FROM entries a WHERE a.run_id=r.run_id AND a.kind='ABORT') ORDER BY seq DESC "
            "LIMIT 1", (dataset, unit, run_key)).fetchone()
        if row is None:
            return None
        run_id, info = row[0], json.loads(row[1])
        kinds = {k for (k,) in self._db.execute("SELECT kind FROM entries WHERE run_id=?", (run_id,))}
        if "COMMIT" in kinds:  # complete; if its process still runs, it is moving the files into place now
            return self.committed(dataset, unit, run_key)
        if "FAIL" in kinds:
            raise RunKeySpent(f"run key '{run_key}' of data set '{dataset}' was used by a run that read the data "
                              "and ended without a release; its budget stays spent and no new noise is drawn "
                              "under this key (release again with a new --run-key)")
        where = f"process {info.get('pid')} on {info.get('host')}"
        raise RunKeyBusy(f"run key '{run_key}' of data set '{dataset}' is held by another run ({where}) that has "
                         "not finished; nothing was read or spent (retry later; if that run was killed on "
                         "another host, run 'dphist budget recover' there)")

    def committed(self, dataset: str, unit: str, run_key: str | None) -> Existing | None:
        """The committed release with this run key, if any."""
        if run_key is None:
            return None
        done = self._query("SELECT run_id, detail, hash FROM entries WHERE dataset=? AND unit=? AND "
                           "kind='COMMIT' AND run_key=? ORDER BY seq DESC LIMIT 1", (dataset, unit, run_key))
        done = done[0] if done else None
        return None if done is None else Existing(done[0], json.loads(done[1]), done[2])

    def committed_run(self, run_id: str) -> bool:
        """Whether the run has a COMMIT entry."""
        return self._has(run_id, "COMMIT")

    def mark_read(self, r: Reservation) -> str:
        """Record that the run is about to read data: from now on its reservation is never given back."""
        with self.transaction(AFTER_READ_TIMEOUT):
            return self._append(r.dataset, r.unit, "READ", r.run_id, None, 0, 0, {})

    def commit(self, r: Reservation, detail: dict, run_key: str | None = None) -> str:
        """Record that the release is complete (``detail``: where it goes, and the files' hashes)."""
        with self.transaction(AFTER_READ_TIMEOUT):
            return self._append(r.dataset, r.unit, "COMMIT", r.run_id, run_key or r.run_key, 0, 0, detail)

    def published(self, r: Reservation, detail: dict) -> str:
        """Record that the committed release was moved into place (or, ``detail["published"]`` false, could
        not be)."""
        with self.transaction(AFTER_READ_TIMEOUT):
            return self._append(r.dataset, r.unit, "PUBLISH", r.run_id, None, 0, 0, detail)

    def fail(self, r: Reservation, reason: str) -> str:
        """Record that a run which read data ended without a release: it stays charged; its run key is used up."""
        with self.transaction(AFTER_READ_TIMEOUT):
            return self._append(r.dataset, r.unit, "FAIL", r.run_id, None, 0, 0, {"reason": reason})

    def abort(self, r: Reservation, reason: str) -> bool:
        """Give a reservation back, if its run never read data; returns whether it was given back."""
        with self.transaction(AFTER_READ_TIMEOUT):
            if self._has(r.run_id, "READ"):
                return False
            if not self._has(r.run_id, "ABORT"):
                self._append(r.dataset, r.unit, "ABORT", r.run_id, None, 0, 0, {"reason": reason})
            return True

    # ----------------------------------------------------------------------------------------------------------
    # Reading

    def open_runs(self) -> list[OpenRun]:
        """Every reservation without an end (PUBLISH, FAIL or ABORT), oldest first."""
        rows = self._query(
            "SELECT run_id, dataset, unit, run_key, detail FROM entries r WHERE kind='RESERVE' AND NOT EXISTS "
            "(SELECT 1 FROM entries o WHERE o.run_id=r.run_id AND o.kind IN ('PUBLISH', 'FAIL', 'ABORT')) "
            "ORDER BY seq")
        runs = []
        for run_id, dataset, unit, run_key, detail in rows:
            later = dict(self._query("SELECT kind, detail FROM entries WHERE run_id=? AND kind IN ('READ', "
                                     "'COMMIT')", (run_id,)))
            stage = "COMMIT" if "COMMIT" in later else "READ" if "READ" in later else "RESERVE"
            runs.append(OpenRun(run_id, dataset, unit, run_key, stage, json.loads(detail),
                                json.loads(later["COMMIT"]) if "COMMIT" in later else None))
        return runs

    def status(self, dataset: str | None = None) -> list[dict]:
        """Per (data set, unit): cap, spent and remaining (exact, as text), releases and the last entry's time."""
        if not self.readonly:
            with self.transaction():
                self.release_dead()
        rows = self._query("SELECT DISTINCT dataset, unit FROM entries" + (" WHERE dataset=?" if dataset
                           else "") + " ORDER BY dataset, unit", (dataset,) if dataset else ())
        out = []
        for ds, unit in rows:
            spent = self._spent(ds, unit)
            cap = self._cap(ds, unit)
            releases = self._query("SELECT COUNT(*) FROM entries WHERE dataset=? AND unit=? AND kind='COMMIT'",
                                   (ds, unit))[0][0]
            last = self._query("SELECT ts FROM entries WHERE dataset=? AND unit=? ORDER BY seq DESC LIMIT 1",
                               (ds, unit))[0][0]
            out.append({"dataset": ds, "unit": unit, "epsilon_spent": format_fraction(spent[0]),
                        "delta_spent": format_fraction(spent[1]),
                        "epsilon_cap": None if cap is None else format_fraction(cap[0]),
                        "delta_cap": None if cap is None else format_fraction(cap[1]),
                        "epsilon_remaining": None if cap is None else format_fraction(max(cap[0] - spent[0], 0)),
                        "releases": releases, "last_entry": last})
        return out

    def history(self, dataset: str) -> list[dict]:
        """Every entry of the data set, oldest first."""
        rows = self._query("SELECT " + ", ".join(_COLUMNS) + ", hash FROM entries WHERE dataset=? ORDER BY seq",
                           (dataset,))
        return [{**dict(zip(_COLUMNS + ("hash",), row)), "detail": json.loads(row[9])} for row in rows]

    def verify(self) -> list[str]:
        """Problems with the file or the hash chain (empty if intact): SQLite's integrity check, a recomputed
        hash that differs, or a broken link."""
        try:
            checked = [r[0] for r in self._db.execute("PRAGMA integrity_check")]
        except sqlite3.Error as exc:
            return [f"the file is damaged ({exc})"]
        if checked != ["ok"]:
            return [f"the file is damaged (SQLite integrity check: {checked[0]})"]
        problems, prev = [], GENESIS
        try:
            for row in self._db.execute("SELECT " + ", ".join(_COLUMNS) + ", hash FROM entries ORDER BY seq"):
                body = dict(zip(_COLUMNS, row))
                if body["prev_hash"] != prev:
                    problems.append(f"entry {body['seq']}: does not follow the entry before it (deleted or reordered)")
                if _hash(body["prev_hash"], {k: v for k, v in body.items() if k != "prev_hash"}) != row[-1]:
                    problems.append(f"entry {body['seq']}: contents do not match its hash (edited)")
                prev = row[-1]
        except sqlite3.Error as exc:
            problems.append(f"the entries cannot be read ({exc})")
        return problems

    def head(self) -> str:
        row = self._query("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1")
        return row[0][0] if row else GENESIS

    # ----------------------------------------------------------------------------------------------------------

    @contextmanager
    def transaction(self, timeout: float | None = None):
        """One BEGIN IMMEDIATE transaction, waiting up to ``timeout`` (default: the ledger's) for other writers,
        then LedgerLocked.  Nested calls join the outer transaction."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        if self.readonly:
            raise LedgerError(f"ledger {self.path}: opened read-only")
        wait = self.timeout if timeout is None else max(timeout, self.timeout)
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(exc, wait) from None
        self._depth = 1
        try:
            yield self
        except BaseException:
            self._depth = 0
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the transaction is gone already (SQLite rolls back on some errors by itself)
            raise
        self._depth = 0
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise self._error(exc, wait) from None

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error, wait: float | None = None) -> DphistError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return LedgerLocked(f"ledger {self.path}: still locked by another process after "
                                f"{self.timeout if wait is None else wait:g} s")
        if "readonly" in text or "read-only" in text:
            return LedgerError(f"ledger {self.path}: read-only (releases must be recorded in it)")
        if "full" in text:
            return LedgerError(f"ledger {self.path}: the disk or the database is full")
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError) or \
                "malformed" in text or "not a database" in text:
            return LedgerError(f"ledger {self.path}: not a readable dphist ledger ({text}); see 'dphist budget "
                               "verify' and restore it from a backup")
        return LedgerError(f"ledger {self.path}: {text}")

    def _append(self, dataset, unit, kind, run_id, run_key, epsilon, delta, detail) -> str:
        if not self._depth:
            raise RuntimeError("ledger entries are appended inside a transaction")
        try:
            seq = (self._db.execute("SELECT MAX(seq) FROM entries").fetchone()[0] or 0) + 1
            body = {"seq": seq, "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": dataset,
                    "unit": unit, "kind": kind, "run_id": run_id, "run_key": run_key,
                    "epsilon": str(Fraction(epsilon)), "delta": str(Fraction(delta)),
                    "detail": json.dumps(detail, sort_keys=True)}
            prev = self.head()
            digest = _hash(prev, body)
            self._db.execute("INSERT INTO entries (" + ", ".join(_COLUMNS) + ", hash) VALUES (" +
                             ", ".join("?" * (len(_COLUMNS) + 1)) + ")",
                             (*[body[c] for c in _COLUMNS[:-1]], prev, digest))
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        return digest

    def _has(self, run_id: str, kind: str) -> bool:
        return bool(self._query("SELECT 1 FROM entries WHERE run_id=? AND kind=?", (run_id, kind)))

    def _spent(self, dataset: str, unit: str) -> tuple[Fraction, Fraction]:
        eps, delta = Fraction(0), Fraction(0)
        for e, d in self._query("SELECT epsilon, delta FROM entries r WHERE dataset=? AND unit=? AND "
                                "kind='RESERVE' AND NOT EXISTS (SELECT 1 FROM entries a WHERE "
                                "a.run_id=r.run_id AND a.kind='ABORT')", (dataset, unit)):
            eps += Fraction(e)
            delta += Fraction(d)
        return eps, delta

    def _cap(self, dataset: str, unit: str) -> tuple[Fraction, Fraction] | None:
        row = self._query("SELECT epsilon, delta FROM entries WHERE dataset=? AND unit=? AND kind='CAP' "
                          "ORDER BY seq DESC LIMIT 1", (dataset, unit))
        return None if not row else (Fraction(row[0][0]), Fraction(row[0][1]))

    def release_dead(self) -> None:
        """Give back the reservations of runs on this host whose process died before reading data."""
        with self.transaction():
            self._abort_dead()

    def _abort_dead(self) -> None:
        for run in self.open_runs():
            if run.stage == "RESERVE" and not run.alive:
                self._append(run.dataset, run.unit, "ABORT", run.run_id, None, 0, 0,
                             {"reason": f"process {run.detail.get('pid')} ended before reading any data"})


def _pair(eps: Fraction, delta: Fraction) -> dict:
    return {"epsilon": format_fraction(eps), "delta": format_fraction(delta)}


def _operator() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER", "unknown")
