"""The persistent privacy-budget ledger: what every release of a data set has spent, across runs and processes.

One SQLite file holds an append-only, hash-chained list of entries (docs/privacy.md §4).  A release goes

    RESERVE  (before any row is read: refused if it would take the spend past the cap; claims the run key)
    READ     (written just before the first row is read: from here on the budget is spent for good)
    COMMIT   (the release is complete in its staging folder; the entry holds the files' hashes)
    PUBLISH  (the release was moved into place)

and a failure before READ writes ABORT, which gives the reservation back; a run that read data and ended without
a complete release gets FAIL (it stays charged, and its run key is used up).  The release transaction itself (what
the disk holds in each state, and recovery after a kill) lives in :mod:`dphist.publishing.transaction`; this module only keeps
the entries.  Every write is one ``BEGIN IMMEDIATE`` transaction, so overlapping cron runs queue for the lock and
each sees the others' reservations.  Budgets are exact fractions, stored as text.

Each entry's hash is SHA-256 of the previous entry's hash and the entry's canonical JSON, so editing, deleting or
reordering rows breaks the chain (``verify``).  The cap is itself an entry (CAP), so changing it leaves a trace.

Budget definitions.  A release is charged in one of three definitions:

    pure         ε, and a δ only for partition selection     epsilon column ε, delta column δ
    zcdp         ρ (--rho)                                   epsilon column "" (none), delta 0; ρ in detail
    approximate  (ε, δ), run as ρ-zCDP with ρ = rho_for(ε, δ) epsilon ε, delta δ; ρ in detail; both guarantees hold

New RESERVE entries name their definition in the entry's ``detail`` JSON ("definition", and "rho" as an exact
fraction); an entry without one is pure, as is every entry written before definitions existed.  The table and
the hashes of old entries are unchanged, so old ledgers verify as they did, and the ρ and definition of new
entries are covered by the chain like every other field.  An entry with no ε (a zcdp RESERVE, a ρ CAP) holds the
empty string in its epsilon column: a dphist from before definitions stops on it rather than counting it as 0.

A data set is capped in ε with δ (its definition is "pure" if δ = 0, else "approximate") or in ρ ("zcdp"), and
every release is counted in the cap's definition, exactly (fractions), by :mod:`dphist.privacy.accountant` (this
module keeps the entries and asks it for the sums, the conversions and the checks against the cap):

    against a ρ cap    zcdp and approximate releases count their ρ; a pure release with δ = 0 counts ε²/2
                       (ε-DP implies ε²/2-zCDP: Bun and Steinke 2016, Prop. 1.4); a pure release with δ > 0 has
                       no ρ (no (ε, δ) guarantee with δ > 0 implies any zCDP bound) and is refused
    against an ε cap   pure and approximate releases count (ε, δ); a zcdp release has no (ε, δ) until a δ is
                       chosen for it, and is refused (release it with --epsilon E --delta D --noise gaussian, or
                       cap the data set in ρ)
    without a cap      everything is accepted and recorded

spent = the sum of the counted amounts of the RESERVE entries whose run has no ABORT; a refusal charges nothing.
A cap set after releases that cannot be counted in its definition (a pure release with δ > 0 before a ρ cap, a
zcdp release before an ε cap) is recorded, but the data set's spend then has no bound in that definition, so
every further release is refused until the cap is set in a definition that counts them all (``status`` says so
in ``cap_note``).  ``status`` also shows the other definition, converted: where the cap is in ρ (or there is no
cap and some release has no ε) the ε that the spent ρ and the cap's ρ imply at a reference δ (the δ given with the
ρ cap, else 1e-6) by the tight CKS20 conversion, rounded up; under an ε cap, the ρ its releases add up to when
every one of them has a ρ.

A ledger that cannot be used raises one of these, each one line with its own advice; nothing is written to it then:

    LedgerMissing      no file there (a reading command, or a typo in --ledger)          exit 2
    LedgerFull         the disk holding it is full: free space; the ledger is intact     exit 2
    LedgerLocked       another process holds it past the timeout: retry                  exit 4
    LedgerReadOnly     it cannot be written: check permissions and the mount             exit 2
    LedgerDamaged      not a file, not SQLite, not a dphist ledger, integrity or         exit 2 (verify: 1)
                       chain broken: restore it from a backup
    LedgerUnreadable   an I/O error that is none of the above: check the disk; the      exit 2
                       file need not be damaged
    LedgerError        their base, and a path that cannot be used (a broken link)        exit 2

Reading (``readonly``) never writes the file, so ``budget show``, ``history`` and ``verify`` work on a full disk.
Data set ids and run keys are checked here as everywhere (:mod:`dphist.declare.identifiers`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
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

from ..declare import identifiers
from ..privacy import format_fraction
from ..privacy.accountant import REFERENCE_DELTA, Cap, Charge, Spend, cap_note, charge_for, epsilon_at, \
    reference_delta, refusal, remaining
from ..errors import DphistError, UsageError
from ..text import quoted

__all__ = ["Ledger", "Reservation", "Existing", "OpenRun", "BudgetExhausted", "CapRequired", "LedgerLocked",
           "LedgerError", "LedgerMissing", "LedgerFull", "LedgerReadOnly", "LedgerDamaged", "LedgerUnreadable",
           "RunKeyBusy", "RunKeySpent", "default_ledger_path", "GENESIS", "ROW_UNIT", "DEFINITIONS",
           "REFERENCE_DELTA", "Charge", "Cap"]

GENESIS = "0" * 64
ROW_UNIT = "row"  # the privacy unit of every release so far: one record
KINDS = ("CAP", "RESERVE", "READ", "COMMIT", "PUBLISH", "FAIL", "ABORT")
_COLUMNS = ("seq", "ts", "dataset", "unit", "kind", "run_id", "run_key", "epsilon", "delta", "detail", "prev_hash")
_TABLE = ("seq", "ts", "dataset", "unit", "kind", "run_id", "run_key", "epsilon", "delta", "detail", "prev_hash",
          "hash")
DEFINITIONS = ("pure", "zcdp", "approximate")
_NO_EPSILON = ""  # the epsilon column of an entry that has no ε (a zcdp RESERVE, a ρ CAP)
#: Ledger writes after a run has read data must not give up as quickly as the reservation may (--lock-timeout 0):
#: they are short, and failing them would leave a paid-for release unpublished.
AFTER_READ_TIMEOUT = 600.0
#: An I/O error with less free space than this beside the ledger is taken for a full disk (a write needs a few
#: pages, the write-ahead log's index 32 KiB).
FULL_BELOW = 1 << 20


class BudgetExhausted(DphistError):
    """The release would take a data set past its cap (exit code 3).  No data was read."""

    exit_code = 3


class RunKeySpent(BudgetExhausted):
    """The run key's reservation read data and ended without a release: no new noise is ever drawn under it."""


class CapRequired(BudgetExhausted):
    """The run requires a cap (``require_cap``) and the data set has none (exit code 3).  No data was read."""


class LedgerLocked(DphistError):
    """Another process held the ledger longer than the lock timeout (exit code 4).  No data was read."""

    exit_code = 4


class RunKeyBusy(LedgerLocked):
    """Another run holds the run key and has not finished (exit code 4).  No data was read."""


class LedgerError(DphistError):
    """The ledger file cannot be used (exit code 2); the subclasses say why.  Nothing was written to it."""

    exit_code = 2


class LedgerMissing(LedgerError):
    """There is no ledger file where one is read."""


class LedgerFull(LedgerError):
    """The disk (or the database's own limit) is full.  The ledger is intact; free space and run again."""


class LedgerReadOnly(LedgerError):
    """The ledger cannot be written (permissions, a read-only mount)."""


class LedgerDamaged(LedgerError):
    """Not SQLite, not a dphist ledger, or its contents are inconsistent: restore it from a backup."""


class LedgerUnreadable(LedgerError):
    """An I/O error that is neither a full disk nor damage: the file need not be damaged."""


_RESTORE = ("restore it from a backup and run 'dphist budget verify' (keep the damaged file; never start a new, "
            "empty ledger: it would forget what was spent)")
_READ_ONLY = ("{where}: read-only, so releases cannot be recorded in it; nothing was written (check the file's "
              "permissions and that its file system is not mounted read-only)")


def _primary(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``exc`` (SQLITE_IOERR for every SQLITE_IOERR_*), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _free_space(path: Path) -> int | None:
    """Bytes free to this user on the file system that holds ``path`` (or would), if it can be told."""
    for folder in (path, *path.absolute().parents):
        try:
            return shutil.disk_usage(folder).free
        except (OSError, ValueError):
            continue
    return None


def _full(path: Path) -> LedgerFull:
    free = _free_space(path)
    shown = "" if free is None else f" ({free // 1024:,} KiB free)"
    return LedgerFull(f"ledger {path}: the disk holding it is full{shown}; nothing was written and the ledger is "
                      "intact: free space there and run again (do not restore it from a backup: that would forget "
                      "what was spent since)")


def _unreadable(path: Path, what: str) -> LedgerUnreadable:
    return LedgerUnreadable(f"ledger {path}: cannot be read or written ({what}); that need not mean it is damaged: "
                            "check the disk, then run 'dphist budget verify' (do not replace it with a new ledger)")


def _sqlite_problem(path: Path, exc: sqlite3.Error, waited: float) -> DphistError:
    """The one-line error for SQLite's ``exc`` on the ledger at ``path``, by SQLite's result code: locked, read-only,
    full, damaged, or an I/O error (taken for a full disk when almost no space is left: SQLite reports a write
    that found no space in the log's index as an I/O error)."""
    code, text = _primary(exc), str(exc)
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return LedgerLocked(f"ledger {path}: still locked by another process after {waited:g} s")
    if code == sqlite3.SQLITE_READONLY:
        return LedgerReadOnly(_READ_ONLY.format(where=f"ledger {path}"))
    if code == sqlite3.SQLITE_FULL:
        return _full(path)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or \
            (isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)):
        return LedgerDamaged(f"ledger {path}: not a readable dphist ledger ({text}); {_RESTORE}")
    if code in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN):
        free = _free_space(path)
        if free is not None and free < FULL_BELOW:
            return _full(path)
        return _unreadable(path, text)
    return LedgerError(f"ledger {path}: {text}")


def _os_problem(path: Path, exc: OSError) -> LedgerError:
    """The one-line error for an OSError met while opening the ledger at ``path`` (or making its folder)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _full(path)
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return LedgerReadOnly(_READ_ONLY.format(where=f"ledger {path}"))
    if exc.errno == errno.EIO:
        return _unreadable(path, exc.strerror or str(exc))
    return LedgerError(f"ledger {path}: cannot open ({exc.strerror or exc})")


def default_ledger_path() -> Path:
    """``$DPHIST_LEDGER``, else ``$XDG_DATA_HOME/dphist/ledger.sqlite`` (``~/.local/share/dphist/...``)."""
    if os.environ.get("DPHIST_LEDGER"):
        return Path(os.environ["DPHIST_LEDGER"])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dphist" / "ledger.sqlite"


@dataclass(frozen=True)
class Reservation:
    """A reservation.  ``epsilon`` is None for a zcdp release; ``spent_before`` and ``cap`` are in ε (None where
    the spend has no ε, or the cap is not in ε), ``rho_spent_before`` and ``rho_cap`` in ρ (None likewise)."""

    run_id: str
    dataset: str
    unit: str
    epsilon: Fraction | None
    delta: Fraction
    entry_hash: str
    spent_before: Fraction | None
    cap: Fraction | None
    run_key: str | None = None
    rho: Fraction | None = None
    definition: str = "pure"
    rho_spent_before: Fraction | None = None
    rho_cap: Fraction | None = None


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
    transaction (then LedgerLocked).  ``readonly`` opens it for reading only: it never creates, writes or
    changes the file (LedgerMissing if there is none), so it works on a full disk."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float = 30.0, readonly: bool = False):
        self.path = Path(path) if path is not None else default_ledger_path()
        self.timeout = float(timeout)
        self.readonly = readonly
        self._depth = 0
        self._blank = False  # read-only, and the file has no table yet (an empty file): nothing recorded
        try:
            self._check_path()
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte: Path's checks raise
            raise LedgerError(f"ledger {quoted(self.path)}: not a usable path "
                              f"({getattr(exc, 'strerror', None) or exc})") from None
        try:
            if readonly:
                self._open_readonly()
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            self._set_up()
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        except OSError as exc:
            raise _os_problem(self.path, exc) from None

    def _open_readonly(self) -> None:
        """Open for reading only.  ``mode=ro`` reads what the write-ahead log holds too, but needs the log's
        index (the -shm file) made or sized, which a full disk or a folder that cannot be written refuses; then,
        if the log is empty or absent, the file as it stands on disk is the whole ledger and is read as such
        (``immutable=1``).  A log that holds entries is never skipped: that would show less spent than was."""
        uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?"
        try:
            self._db = sqlite3.connect(uri + "mode=ro", uri=True, timeout=self.timeout, isolation_level=None)
            self._check_table(create=False)
            return
        except sqlite3.Error as exc:
            if getattr(self, "_db", None) is not None:
                self._db.close()
            if _primary(exc) not in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY) or \
                    self._log_holds_entries():
                raise
        self._db = sqlite3.connect(uri + "immutable=1", uri=True, timeout=self.timeout, isolation_level=None)
        self._check_table(create=False)

    def _log_holds_entries(self) -> bool:
        try:
            return os.stat(str(self.path) + "-wal").st_size > 0
        except FileNotFoundError:
            return False

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
                raise LedgerDamaged(f"{where}: not a regular file, so not a ledger (check --ledger; if the ledger "
                                    f"was there, {_RESTORE})")
            if not self.readonly and not os.access(self.path, os.R_OK | os.W_OK):
                raise LedgerReadOnly(_READ_ONLY.format(where=where))
        elif self.readonly:
            raise LedgerMissing(f"{where}: no such file, so nothing has been recorded there (check --ledger and "
                                "$DPHIST_LEDGER; the first release creates the ledger)")
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
                raise LedgerDamaged(f"ledger {self.path}: its entries table does not have dphist's columns; "
                                    f"{_RESTORE}")
            # Found, perhaps just created by another process between two checks of this one: from here on every
            # read must see the table, or this process would chain its entries to nothing and count no spend.
            self._blank = False
            return
        if names:
            raise LedgerDamaged(f"ledger {self.path}: an SQLite file that is not a dphist ledger (check --ledger); "
                                f"{_RESTORE}")
        # An empty file, which the first write makes a ledger: only a read-only ledger reads it as having no
        # entries (a writable one creates the table below, or finds it on its next check).
        self._blank = self.readonly and not create
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

    def set_cap(self, dataset: str, unit: str, epsilon=None, delta=0, reason: str = "", *, rho=None) -> str:
        """Set the data set's cap (a CAP entry) in ε with δ, or in ρ (``rho``; ``delta`` is then the reference δ at
        which the spend is shown as (ε, δ), nothing is counted against it); returns the entry's hash.  A cap
        below what is already spent is allowed (it stops further releases) and says so in the entry; so is one
        that earlier releases cannot be counted in (every further release is then refused: ``status`` shows
        ``cap_note``).  ``dataset`` is checked and normalised as every data set id is (UsageError)."""
        dataset = identifiers.account(dataset)
        if (epsilon is None) == (rho is None):
            raise UsageError("a cap is set in epsilon (with delta) or in rho: give exactly one of them")
        delta = Fraction(delta)
        if not 0 <= delta < 1:
            raise UsageError(f"the cap's delta must be at least 0 and less than 1, got {format_fraction(delta)}")
        if rho is not None:
            rho = Fraction(rho)
            if rho < 0:
                raise UsageError(f"the cap's rho must be at least 0, got {format_fraction(rho)}")
        with self.transaction():
            spend = self._spend(dataset, unit)
            detail = {"reason": reason, "operator": _operator(), "spent_at_change": spend.as_text()}
            if rho is not None:
                detail.update(definition="zcdp", rho=str(rho))
            return self._append(dataset, unit, "CAP", uuid.uuid4().hex, None, epsilon, delta, detail)

    def reserve(self, dataset: str, unit: str, epsilon, delta=0, run_key: str | None = None,
                detail: dict | None = None, recover: Callable[[Ledger], None] | None = None,
                run_id: str | None = None, *, rho=None, require_cap: bool = False) -> Reservation | Existing:
        """Reserve a release's budget before any data is read, claiming ``run_key`` in the same transaction.

        The release's definition follows from what is given: ``epsilon`` (and a ``delta`` for partition selection)
        alone is pure; ``rho`` alone (epsilon None, delta 0) is zcdp; ``epsilon``, ``delta`` > 0 and ``rho`` (at
        most rho_for(ε, δ), so the (ε, δ) claim holds) is approximate.  It is counted in the cap's definition (the
        module docstring); a release that cannot be counted there is refused like one past the cap.

        Returns the committed release instead if ``run_key`` was committed (nothing is charged).  Raises
        RunKeyBusy (exit 4) if another run holds the key, RunKeySpent (exit 3) if the key's run read data and
        ended without a release, BudgetExhausted past the cap or in the wrong definition (exit 3, nothing
        charged), CapRequired (exit 3, nothing charged) if ``require_cap`` and the data set has no cap in this
        unit, LedgerLocked if the lock is not had within the timeout, UsageError for amounts that name no
        definition or a data set id or run key that is not a usable name (:mod:`dphist.declare.identifiers`).
        ``recover(ledger)`` runs first inside the transaction (see :func:`dphist.publishing.transaction.recover`)."""
        dataset = identifiers.account(dataset)
        run_key = None if run_key is None else identifiers.run_key(run_key, "run key")
        charge = charge_for(epsilon, delta, rho)
        with self.transaction():
            self.release_dead()
            if recover is not None:
                recover(self)
            try:  # a refusal still commits what recovery recorded
                return self._reserve(dataset, unit, charge, run_key, detail, run_id, require_cap)
            except (BudgetExhausted, LedgerLocked) as exc:
                refusal = exc
        raise refusal

    def _reserve(self, dataset, unit, charge: Charge, run_key, detail, run_id,
                 require_cap: bool) -> Reservation | Existing:
        if run_key is not None:
            done = self.claimed(dataset, unit, run_key)
            if done is not None:
                return done
        spend = self._spend(dataset, unit)
        cap = self._cap(dataset, unit)
        if cap is not None:
            why = refusal(dataset, cap, spend, charge)
            if why is not None:
                raise BudgetExhausted(why)
        elif require_cap:
            raise CapRequired(_no_cap(dataset, unit))
        run_id = run_id or uuid.uuid4().hex
        info = {**(detail or {}), **process_identity(), "definition": charge.definition}
        info.pop("rho", None)  # only the ledger's own ρ is ever read back from an entry
        if charge.rho is not None:
            info["rho"] = str(charge.rho)
        entry = self._append(dataset, unit, "RESERVE", run_id, run_key, charge.epsilon, charge.delta, info)
        return Reservation(run_id, dataset, unit, charge.epsilon, charge.delta, entry, spend.epsilon,
                           None if cap is None else cap.epsilon, run_key, charge.rho, charge.definition,
                           spend.rho, None if cap is None else cap.rho)

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
        """Per (data set, unit), amounts as exact text (None where the spend or cap has no figure in that
        definition):

        ``definition`` (the cap's: "pure", "approximate", "zcdp", or "none"), ``epsilon_spent``,
        ``delta_spent``, ``epsilon_cap``, ``delta_cap``, ``epsilon_remaining`` (the ε account: pure and
        approximate releases), ``rho_spent``, ``rho_cap``, ``rho_remaining`` (the ρ account: zcdp and approximate
        releases, and pure ones with δ = 0 as ε²/2); shown as converted, where the cap is in ρ or (uncapped) some
        release has no ε: ``reference_delta`` and the ε that the spent ρ (``epsilon_spent_at_delta``) and the ρ
        cap (``epsilon_cap_at_delta``) imply at it by the tight CKS20 conversion, as decimals rounded up;
        ``cap_note`` (why no release fits the cap's definition any more, else None); ``releases`` and
        ``last_entry``."""
        given_back: set[str] = set()
        if self.readonly:  # what release_dead would give back, shown as given back without writing it
            given_back = {r.run_id for r in self.open_runs() if r.stage == "RESERVE" and not r.alive}
        else:
            with self.transaction():
                self.release_dead()
        rows = self._query("SELECT DISTINCT dataset, unit FROM entries" + (" WHERE dataset=?" if dataset
                           else "") + " ORDER BY dataset, unit", (dataset,) if dataset else ())
        out = []
        for ds, unit in rows:
            spend = self._spend(ds, unit, given_back)
            cap = self._cap(ds, unit)
            releases = self._query("SELECT COUNT(*) FROM entries WHERE dataset=? AND unit=? AND kind='COMMIT'",
                                   (ds, unit))[0][0]
            last = self._query("SELECT ts FROM entries WHERE dataset=? AND unit=? ORDER BY seq DESC LIMIT 1",
                               (ds, unit))[0][0]
            eps_cap = None if cap is None else cap.epsilon
            rho_cap = None if cap is None else cap.rho
            row = {"dataset": ds, "unit": unit, "definition": "none" if cap is None else cap.definition,
                   "epsilon_spent": _text(spend.epsilon), "delta_spent": _text(spend.delta),
                   "epsilon_cap": _text(eps_cap), "delta_cap": None if eps_cap is None else _text(cap.delta),
                   "epsilon_remaining": _text(remaining(eps_cap, spend.epsilon)),
                   "rho_spent": _text(spend.rho), "rho_cap": _text(rho_cap),
                   "rho_remaining": _text(remaining(rho_cap, spend.rho)),
                   "reference_delta": None, "epsilon_spent_at_delta": None, "epsilon_cap_at_delta": None,
                   "cap_note": None if cap is None else cap_note(cap, spend),
                   "releases": releases, "last_entry": last}
            ref = reference_delta(cap, spend)
            if ref is not None:
                row.update(reference_delta=format_fraction(ref),
                           epsilon_spent_at_delta=_text(epsilon_at(spend.rho, ref)),
                           epsilon_cap_at_delta=_text(epsilon_at(rho_cap, ref)))
            out.append(row)
        return out

    def history(self, dataset: str) -> list[dict]:
        """Every entry of the data set, oldest first."""
        rows = self._query("SELECT " + ", ".join(_COLUMNS) + ", hash FROM entries WHERE dataset=? ORDER BY seq",
                           (dataset,))
        return [{**dict(zip(_COLUMNS + ("hash",), row)), "detail": json.loads(row[9])} for row in rows]

    def verify(self) -> list[str]:
        """Problems with the file or the hash chain (empty if intact): SQLite's integrity check, a recomputed
        hash that differs, or a broken link.  A failure that says nothing about the file's contents (a full
        disk, an I/O error, a lock) raises its error instead: the ledger could not be checked."""
        try:
            checked = [r[0] for r in self._db.execute("PRAGMA integrity_check")]
        except sqlite3.Error as exc:
            return [self._damage(exc)]
        if checked != ["ok"]:
            return [f"the file is damaged (SQLite integrity check: {checked[0]})"]
        if self._blank:
            return []
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
            problems.append(self._damage(exc))
        return problems

    def _damage(self, exc: sqlite3.Error) -> str:
        """``exc`` as a problem of the file, if it is damage; otherwise raise it (the file was not checked)."""
        problem = self._error(exc)
        if not isinstance(problem, LedgerDamaged):
            raise problem from None
        return f"the file is damaged ({exc})"

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
        if self._blank:
            return []
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error, wait: float | None = None) -> DphistError:
        return _sqlite_problem(self.path, exc, self.timeout if wait is None else wait)

    def _append(self, dataset, unit, kind, run_id, run_key, epsilon, delta, detail) -> str:
        if not self._depth:
            raise RuntimeError("ledger entries are appended inside a transaction")
        try:
            seq = (self._db.execute("SELECT MAX(seq) FROM entries").fetchone()[0] or 0) + 1
            body = {"seq": seq, "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "dataset": dataset,
                    "unit": unit, "kind": kind, "run_id": run_id, "run_key": run_key,
                    "epsilon": _NO_EPSILON if epsilon is None else str(Fraction(epsilon)),
                    "delta": str(Fraction(delta)),
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

    def _charges(self, dataset: str, unit: str, given_back: set[str] = frozenset()) -> list[Charge]:
        """What each RESERVE entry of the data set whose run has no ABORT (and is not in ``given_back``) was
        charged."""
        return [_entry_charge(self.path, *row[1:]) for row in self._query(
            "SELECT run_id, epsilon, delta, detail FROM entries r WHERE dataset=? AND unit=? AND kind='RESERVE' AND "
            "NOT EXISTS (SELECT 1 FROM entries a WHERE a.run_id=r.run_id AND a.kind='ABORT')", (dataset, unit))
            if row[0] not in given_back]

    def _spend(self, dataset: str, unit: str, given_back: set[str] = frozenset()) -> Spend:
        return Spend.of(self._charges(dataset, unit, given_back))

    def _cap(self, dataset: str, unit: str) -> Cap | None:
        row = self._query("SELECT epsilon, delta, detail FROM entries WHERE dataset=? AND unit=? AND kind='CAP' "
                          "ORDER BY seq DESC LIMIT 1", (dataset, unit))
        if not row:
            return None
        eps, delta, detail = row[0]
        info = json.loads(detail)
        if info.get("definition") == "zcdp" and eps == _NO_EPSILON and "rho" in info:
            return Cap("zcdp", None, Fraction(delta), Fraction(info["rho"]))
        if eps == _NO_EPSILON:
            raise LedgerDamaged(f"ledger {self.path}: a CAP entry of data set '{dataset}' has neither epsilon nor "
                                f"rho; {_RESTORE}")
        eps, delta = Fraction(eps), Fraction(delta)
        return Cap("pure" if delta == 0 else "approximate", eps, delta, None)

    def release_dead(self) -> None:
        """Give back the reservations of runs on this host whose process died before reading data."""
        with self.transaction():
            self._abort_dead()

    def _abort_dead(self) -> None:
        for run in self.open_runs():
            if run.stage == "RESERVE" and not run.alive:
                self._append(run.dataset, run.unit, "ABORT", run.run_id, None, 0, 0,
                             {"reason": f"process {run.detail.get('pid')} ended before reading any data"})


def _entry_charge(path, eps: str, delta: str, detail: str) -> Charge:
    """The charge a RESERVE entry records.  An entry that names no definition is pure (every entry written before
    definitions existed)."""
    info = json.loads(detail)
    definition = info.get("definition", "pure")
    rho = Fraction(info["rho"]) if definition in ("zcdp", "approximate") and "rho" in info else None
    if definition not in DEFINITIONS or (definition != "pure" and rho is None) or \
            (eps == _NO_EPSILON) != (definition == "zcdp"):
        raise LedgerDamaged(f"ledger {path}: a RESERVE entry with an inconsistent budget definition "
                            f"({definition!r}); {_RESTORE}")
    return Charge(definition, None if eps == _NO_EPSILON else Fraction(eps), Fraction(delta), rho)


def _no_cap(dataset: str, unit: str) -> str:
    """Why a run that requires a cap was refused, with the command that sets one."""
    per = "" if unit == ROW_UNIT else f" --privacy-unit {shlex.quote(unit.removeprefix('unit:'))}"
    return (f"data set '{identifiers.shown(dataset)}'{'' if unit == ROW_UNIT else ' (' + unit + ')'} has no cap, and "
            f"this run requires one (--require-cap or DPHIST_REQUIRE_CAP); nothing was read or charged. Set one: "
            f"dphist budget set {shlex.quote(dataset)} --epsilon E{per} (or --rho R)")


def _text(value: Fraction | None) -> str | None:
    return None if value is None else format_fraction(value)


def _operator() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER", "unknown")
