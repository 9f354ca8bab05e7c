"""The persistent privacy-budget ledger: what every release of a data set has spent, across runs and processes.

One SQLite file holds an append-only, hash-chained list of entries (privacy-engineering.md §4).  A release goes

    RESERVE  (before any row is read: refused if spent + ε would exceed the cap)
    READ     (written just before the first row is read: from here on the budget is spent for good)
    COMMIT   (after the release files are in place)

and a failure before READ writes ABORT, which gives the reservation back.  A process killed before READ never
read data, so the next transaction on the ledger gives its reservation back too (``_release_dead``); killed
after READ, it stays charged.  Every write is one ``BEGIN IMMEDIATE`` transaction, so overlapping cron runs queue
for the lock and each sees the others' reservations.  Budgets are exact fractions, stored as text.

spent(data set, unit) = Σ ε of its RESERVE entries whose run has no ABORT.  Each entry's hash is SHA-256 of the
previous entry's hash and the entry's canonical JSON, so editing, deleting or reordering rows breaks the chain
(``verify``).  The cap is itself an entry (CAP), so changing it leaves a trace.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from .accountant import format_fraction
from .errors import DphistError, UsageError

__all__ = ["Ledger", "Reservation", "Existing", "BudgetExhausted", "LedgerLocked", "default_ledger_path",
           "GENESIS", "ROW_UNIT"]

GENESIS = "0" * 64
ROW_UNIT = "row"  # the privacy unit of every release so far: one record
KINDS = ("CAP", "RESERVE", "READ", "COMMIT", "ABORT")
_COLUMNS = ("seq", "ts", "dataset", "unit", "kind", "run_id", "run_key", "epsilon", "delta", "detail", "prev_hash")


class BudgetExhausted(DphistError):
    """The release would take a data set past its cap (exit code 3).  No data was read."""

    exit_code = 3


class LedgerLocked(DphistError):
    """Another process held the ledger longer than the lock timeout (exit code 4).  No data was read."""

    exit_code = 4


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


@dataclass(frozen=True)
class Existing:
    """A committed release with the same run key: where it is, and the hash of its COMMIT entry."""

    run_id: str
    detail: dict
    entry_hash: str


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


def _hash(prev: str, body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256((prev + text).encode()).hexdigest()


class Ledger:
    """A ledger file.  ``timeout`` is how long to wait for another process's transaction (then LedgerLocked)."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float = 30.0):
        self.path = Path(path) if path is not None else default_ledger_path()
        self.timeout = float(timeout)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("""CREATE TABLE IF NOT EXISTS entries (
                seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, dataset TEXT NOT NULL, unit TEXT NOT NULL,
                kind TEXT NOT NULL, run_id TEXT NOT NULL, run_key TEXT, epsilon TEXT NOT NULL, delta TEXT NOT NULL,
                detail TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)""")
            self._db.execute("CREATE INDEX IF NOT EXISTS by_run ON entries (run_id, kind)")
            self._db.execute("CREATE INDEX IF NOT EXISTS by_dataset ON entries (dataset, unit, kind)")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        except OSError as exc:
            raise UsageError(f"ledger {self.path}: cannot open ({exc.strerror or exc})") from None

    def close(self) -> None:
        self._db.close()

    # ----------------------------------------------------------------------------------------------------------
    # Writing

    def set_cap(self, dataset: str, unit: str, epsilon, delta=0, reason: str = "") -> str:
        """Set the data set's cap (a CAP entry); returns its hash.  A cap below what is already spent is
        allowed (it stops further releases) and says so in the entry."""
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        with self._transaction():
            spent = self._spent(dataset, unit)
            detail = {"reason": reason, "operator": _operator(), "spent_at_change": _pair(*spent)}
            return self._append(dataset, unit, "CAP", uuid.uuid4().hex, None, epsilon, delta, detail)

    def reserve(self, dataset: str, unit: str, epsilon, delta=0, run_key: str | None = None,
                detail: dict | None = None) -> Reservation | Existing:
        """Reserve a release's budget before any data is read.  Returns the committed release instead if
        ``run_key`` was already committed (nothing is charged); raises BudgetExhausted past the cap."""
        epsilon, delta = Fraction(epsilon), Fraction(delta)
        with self._transaction():
            self._release_dead()
            done = self.committed(dataset, unit, run_key)
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
            run_id = uuid.uuid4().hex
            info = {**(detail or {}), "pid": os.getpid(), "pid_start": _process_start(os.getpid()),
                    "host": socket.gethostname()}
            entry = self._append(dataset, unit, "RESERVE", run_id, run_key, epsilon, delta, info)
            return Reservation(run_id, dataset, unit, epsilon, delta, entry, spent_eps,
                               None if cap is None else cap[0])

    def committed(self, dataset: str, unit: str, run_key: str | None) -> Existing | None:
        """The committed release with this run key, if any."""
        if run_key is None:
            return None
        done = self._db.execute("SELECT run_id, detail, hash FROM entries WHERE dataset=? AND unit=? AND "
                                "kind='COMMIT' AND run_key=? ORDER BY seq DESC LIMIT 1",
                                (dataset, unit, run_key)).fetchone()
        return None if done is None else Existing(done[0], json.loads(done[1]), done[2])

    def mark_read(self, r: Reservation) -> str:
        """Record that the run is about to read data: from now on its reservation is never given back."""
        with self._transaction():
            return self._append(r.dataset, r.unit, "READ", r.run_id, None, 0, 0, {})

    def commit(self, r: Reservation, detail: dict, run_key: str | None = None) -> str:
        """Record that the release is in place (``detail``: where, and the files' hashes)."""
        with self._transaction():
            return self._append(r.dataset, r.unit, "COMMIT", r.run_id, run_key, 0, 0, detail)

    def abort(self, r: Reservation, reason: str) -> bool:
        """Give a reservation back, if its run never read data; returns whether it was given back."""
        with self._transaction():
            if self._has(r.run_id, "READ"):
                return False
            self._append(r.dataset, r.unit, "ABORT", r.run_id, None, 0, 0, {"reason": reason})
            return True

    # ----------------------------------------------------------------------------------------------------------
    # Reading

    def status(self, dataset: str | None = None) -> list[dict]:
        """Per (data set, unit): cap, spent and remaining (exact, as text), releases and the last entry's time."""
        with self._transaction():
            self._release_dead()
        rows = self._db.execute("SELECT DISTINCT dataset, unit FROM entries" + (" WHERE dataset=?" if dataset
                                else "") + " ORDER BY dataset, unit", (dataset,) if dataset else ()).fetchall()
        out = []
        for ds, unit in rows:
            spent = self._spent(ds, unit)
            cap = self._cap(ds, unit)
            releases = self._db.execute("SELECT COUNT(*) FROM entries WHERE dataset=? AND unit=? AND kind='COMMIT'",
                                        (ds, unit)).fetchone()[0]
            last = self._db.execute("SELECT ts FROM entries WHERE dataset=? AND unit=? ORDER BY seq DESC LIMIT 1",
                                    (ds, unit)).fetchone()[0]
            out.append({"dataset": ds, "unit": unit, "epsilon_spent": format_fraction(spent[0]),
                        "delta_spent": format_fraction(spent[1]),
                        "epsilon_cap": None if cap is None else format_fraction(cap[0]),
                        "delta_cap": None if cap is None else format_fraction(cap[1]),
                        "epsilon_remaining": None if cap is None else format_fraction(max(cap[0] - spent[0], 0)),
                        "releases": releases, "last_entry": last})
        return out

    def history(self, dataset: str) -> list[dict]:
        """Every entry of the data set, oldest first."""
        cursor = self._db.execute("SELECT " + ", ".join(_COLUMNS) + ", hash FROM entries WHERE dataset=? ORDER BY seq",
                                  (dataset,))
        return [{**dict(zip(_COLUMNS + ("hash",), row)), "detail": json.loads(row[9])} for row in cursor]

    def verify(self) -> list[str]:
        """Problems with the hash chain (empty if intact): a recomputed hash that differs, or a broken link."""
        problems, prev = [], GENESIS
        for row in self._db.execute("SELECT " + ", ".join(_COLUMNS) + ", hash FROM entries ORDER BY seq"):
            body = dict(zip(_COLUMNS, row))
            if body["prev_hash"] != prev:
                problems.append(f"entry {body['seq']}: does not follow the entry before it (deleted or reordered)")
            if _hash(body["prev_hash"], {k: v for k, v in body.items() if k != "prev_hash"}) != row[-1]:
                problems.append(f"entry {body['seq']}: contents do not match its hash (edited)")
            prev = row[-1]
        return problems

    def head(self) -> str:
        row = self._db.execute("SELECT hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        return row[0] if row else GENESIS

    # ----------------------------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self):
        """One BEGIN IMMEDIATE transaction: waits up to the timeout for other writers, then LedgerLocked."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._error(exc) from None
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self._db.execute("ROLLBACK")
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.OperationalError) -> DphistError:
        if "locked" in str(exc) or "busy" in str(exc):
            return LedgerLocked(f"ledger {self.path}: still locked by another process after {self.timeout:g} s")
        return UsageError(f"ledger {self.path}: {exc}")

    def _append(self, dataset, unit, kind, run_id, run_key, epsilon, delta, detail) -> str:
        seq = (self._db.execute("SELECT MAX(seq) FROM entries").fetchone()[0] or 0) + 1
        body = {"seq": seq, "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": dataset,
                "unit": unit, "kind": kind, "run_id": run_id, "run_key": run_key,
                "epsilon": str(Fraction(epsilon)), "delta": str(Fraction(delta)),
                "detail": json.dumps(detail, sort_keys=True)}
        prev = self.head()
        digest = _hash(prev, body)
        self._db.execute("INSERT INTO entries (" + ", ".join(_COLUMNS) + ", hash) VALUES (" +
                         ", ".join("?" * (len(_COLUMNS) + 1)) + ")", (*[body[c] for c in _COLUMNS[:-1]], prev, digest))
        return digest

    def _has(self, run_id: str, kind: str) -> bool:
        return self._db.execute("SELECT 1 FROM entries WHERE run_id=? AND kind=?", (run_id, kind)).fetchone() is not None

    def _spent(self, dataset: str, unit: str) -> tuple[Fraction, Fraction]:
        eps, delta = Fraction(0), Fraction(0)
        for e, d in self._db.execute("SELECT epsilon, delta FROM entries r WHERE dataset=? AND unit=? AND "
                                     "kind='RESERVE' AND NOT EXISTS (SELECT 1 FROM entries a WHERE "
                                     "a.run_id=r.run_id AND a.kind='ABORT')", (dataset, unit)):
            eps += Fraction(e)
            delta += Fraction(d)
        return eps, delta

    def _cap(self, dataset: str, unit: str) -> tuple[Fraction, Fraction] | None:
        row = self._db.execute("SELECT epsilon, delta FROM entries WHERE dataset=? AND unit=? AND kind='CAP' "
                               "ORDER BY seq DESC LIMIT 1", (dataset, unit)).fetchone()
        return None if row is None else (Fraction(row[0]), Fraction(row[1]))

    def _release_dead(self) -> None:
        """Give back the reservations of runs on this host whose process died before reading data."""
        host = socket.gethostname()
        open_runs = self._db.execute(
            "SELECT dataset, unit, run_id, detail FROM entries r WHERE kind='RESERVE' AND NOT EXISTS "
            "(SELECT 1 FROM entries o WHERE o.run_id=r.run_id AND o.kind IN ('READ', 'COMMIT', 'ABORT'))").fetchall()
        for dataset, unit, run_id, detail in open_runs:
            info = json.loads(detail)
            if info.get("host") == host and not _alive(int(info.get("pid", -1)), info.get("pid_start")):
                self._append(dataset, unit, "ABORT", run_id, None, 0, 0,
                             {"reason": f"process {info.get('pid')} ended before reading any data"})


def _pair(eps: Fraction, delta: Fraction) -> dict:
    return {"epsilon": format_fraction(eps), "delta": format_fraction(delta)}


def _operator() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER", "unknown")
