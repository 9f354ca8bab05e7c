"""Where a release directory goes, and how it gets there: checks before reading, staging, the marker, the move.

A release is written into a *staging* folder beside its destination, named for the run and the process that owns
it (``.<out>.dphist-staging.<run>.<pid>.<start>.<host>``), so a later run can tell whether its owner is gone.  The
release's *marker* ``.dphist-release.json`` (run id, run key, every file's SHA-256) is written last, so a staging
folder without one is partial.  :func:`release_mismatch` says how a folder differs from the release a run
committed: recovery publishes only a staging folder that holds exactly that.  Publishing renames the staging folder
onto the destination (an earlier release is first renamed aside to ``.<out>.dphist-old.<...>`` and removed after),
so readers see the old release or the new one, never a mixture.

``--overwrite`` replaces only a directory that holds an earlier dphist release (the marker, or the files of a
release made before markers existed), and never one that contains the input, the schema or the ledger.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError, UsageError
from ..text import quoted

__all__ = ["MARKER", "Destination", "Mismatch", "read_marker", "release_mismatch", "sweep_orphans"]

MARKER = ".dphist-release.json"
_STAGING = "dphist-staging"
_OLD = "dphist-old"
_TABLE_SUFFIXES = (".csv", ".parquet", ".json")


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _owner_tag() -> str:
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        start = "0"
    return f"{pid}.{start}.{_host_tag()}"


def _owner_gone(tag: str) -> bool:
    """True only when ``tag`` names a process of this host that has ended (or whose pid was reused)."""
    try:
        pid, start, host = tag.split(".")
        pid = int(pid)
    except ValueError:
        return False
    if host != _host_tag() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    if start == "0":
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode() != start
    except (OSError, IndexError):
        return False


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_marker(folder: Path) -> dict | None:
    """The release marker in ``folder``, or None if there is none or it is not a marker."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("files"), dict) or "run_id" not in marker:
        return None
    return marker


@dataclass(frozen=True)
class Mismatch:
    """How a folder differs from the release it should hold; ``str()`` says so in one phrase whose subject is the
    folder ("… does not exist", "… holds 'x', which is not part of the release").  File names are quoted as every echo is (dphist.text.quoted)."""

    absent: bool = False  # the folder is not there (or not a folder)
    marker: str | None = None  # what is wrong with its marker, if anything
    missing: tuple[str, ...] = ()  # committed files that are not there
    changed: tuple[str, ...] = ()  # committed files whose content (or kind) is not what was committed
    unreadable: tuple[str, ...] = ()  # entries that could not be read, with the reason
    extra: tuple[str, ...] = ()  # entries that are not part of the release

    @property
    def only_extra(self) -> bool:
        """Whether the release itself is intact, with things put beside it."""
        return bool(self.extra) and not (self.absent or self.marker or self.missing or self.changed or
                                         self.unreadable)

    def __str__(self) -> str:
        if self.absent:
            return "does not exist"
        parts = [self.marker] if self.marker else []
        if self.missing:
            parts.append(f"is missing {_names(self.missing)}")
        if self.changed:
            parts.append(f"has {_names(self.changed)} changed since the release was committed")
        if self.unreadable:
            parts.append(f"cannot be read ({_names(self.unreadable, quote=False)})")
        if self.extra:
            verb = "is" if len(self.extra) == 1 else "are"
            parts.append(f"holds {_names(self.extra)}, which {verb} not part of the release")
        return " and ".join(parts)


def _names(names: tuple[str, ...], quote: bool = True, shown: int = 3) -> str:
    """At most ``shown`` names, each quoted short (a name on disk is anyone's input), as "'a', 'b' and 2 more"."""
    texts = [quoted(n, "'" if quote else "", 40 if quote else 100) for n in names[:shown]]
    if len(names) > shown:
        return ", ".join(texts) + f" and {len(names) - shown} more"
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def release_mismatch(folder: Path, run_id: str, files: dict[str, str], *, alone: bool) -> Mismatch | None:
    """How ``folder`` differs from the release of run ``run_id`` whose files have the SHA-256 hashes ``files``
    (name -> hash, as its COMMIT entry states them); None when it holds that release.

    It holds it when its marker names ``run_id`` and exactly ``files``, and each of those files is there, a regular
    file with its hash.  ``alone``: nothing else may be in the folder either.  A staging folder is checked alone,
    because publishing moves it whole: anything in it would be published beside the release, covered by no hash.
    A published release is not (files put beside it since are the steward's).  Reads the folder, writes nothing."""
    if not folder.is_dir():
        return Mismatch(absent=True)
    try:
        present = {p.name: p for p in folder.iterdir()}
    except OSError as exc:
        return Mismatch(unreadable=(exc.strerror or str(exc),))
    marker = read_marker(folder)
    problem = ("holds no release marker" if marker is None else
               "holds the marker of another run" if marker["run_id"] != run_id else
               "has a release marker that does not list the committed files" if marker["files"] != files else None)
    missing, changed, unreadable = [], [], []
    for name, digest in sorted(files.items()):
        path = present.get(name)
        if path is None:
            missing.append(name)
            continue
        try:
            if path.is_symlink() or not path.is_file() or sha256_file(path) != digest:
                changed.append(name)
        except OSError as exc:
            unreadable.append(f"{quoted(name, limit=60)}: {exc.strerror or exc}")
    extra = sorted(set(present) - set(files) - {MARKER}) if alone else []
    found = Mismatch(False, problem, tuple(missing), tuple(changed), tuple(unreadable), tuple(extra))
    return None if found == Mismatch() else found


def _is_legacy_release(folder: Path) -> bool:
    """A release written before markers existed: report.json from dphist, and only its tables beside it."""
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        tables = {t["name"] for t in report["tables"]}
        if "dphist_version" not in report:
            return False
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError):
        return False
    for entry in folder.iterdir():
        if not entry.is_file() or entry.is_symlink():
            return False
        if entry.name in ("report.json", "NOT_PRIVATE.txt"):
            continue
        if entry.suffix not in _TABLE_SUFFIXES or entry.stem not in tables:
            return False
    return True


def holds_release(folder: Path) -> bool:
    return read_marker(folder) is not None or _is_legacy_release(folder)


@dataclass
class Destination:
    """A release directory ``out``, checked before any data is read.

    ``protect``: paths that must never be inside what is replaced (the input files, the schema, the ledger).
    A symbolic link is followed: the release replaces the directory it points to, and the link stays."""

    out: Path
    overwrite: bool = False
    protect: list[Path] = field(default_factory=list)

    def __post_init__(self):
        self.out = Path(os.path.expanduser(str(self.out)))

    def check(self) -> "Destination":
        """Fail (UsageError, exit 2) if the release could not be written to ``out``; returns self with ``out``
        made absolute (and a symbolic link resolved)."""
        try:
            return self._check()
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a loop of links
            raise UsageError(f"output path {quoted(self.out)} cannot be used "
                             f"({getattr(exc, 'strerror', None) or exc})") from None

    def _check(self) -> "Destination":
        given = self.out
        out = Path(os.path.abspath(given))
        if out.is_symlink():
            target = out.resolve()
            if not target.exists():
                raise UsageError(f"output path {quoted(given, '')} is a symbolic link to {quoted(target, '')}, which "
                                 "does not exist")
            out = target
        for path in self.protect:
            path = Path(os.path.abspath(path))
            if path == out or out in path.parents:
                raise UsageError(f"output directory {quoted(given, '')} contains {quoted(path, '')}, which a release "
                                 "must never replace; choose another --out")
        if out.exists():
            if not out.is_dir():
                raise UsageError(f"output path {quoted(given, '')} exists and is not a directory")
            if any(out.iterdir()):
                if not self.overwrite:
                    raise UsageError(f"output directory {quoted(given, '')} is not empty (use --overwrite to replace "
                                     "it)")
                if not holds_release(out):
                    raise UsageError(f"output directory {quoted(given, '')} does not hold a dphist release, so "
                                     "--overwrite will not replace it; choose another --out or empty it yourself")
        parent = out.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise UsageError(f"cannot write to {quoted(out.parent, '')}: {quoted(parent, '')} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"cannot write to {quoted(parent, '')}: permission denied")
        self.out = out
        return self

    # ---- staging ---------------------------------------------------------------------------------------------

    def staging_path(self, run_id: str) -> Path:
        return self.out.parent / f".{self.out.name}.{_STAGING}.{run_id}.{_owner_tag()}"

    def _old_path(self, run_id: str) -> Path:
        return self.out.parent / f".{self.out.name}.{_OLD}.{run_id}.{_owner_tag()}"

    def make_staging(self, run_id: str) -> Path:
        """Create the run's staging folder (and the destination's parents); first clear orphans of dead runs."""
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            sweep_orphans(self.out)
            staging = self.staging_path(run_id)
            staging.mkdir()
        except OSError as exc:
            raise DataError(f"cannot write the release to {quoted(self.out, '')}: {exc.strerror or exc}") from None
        return staging

    def publish(self, staging: Path, run_id: str) -> None:
        """Move the complete staging folder onto ``out`` (replacing an earlier release there)."""
        out = self.out
        if out.exists() and any(out.iterdir()) and not (self.overwrite and holds_release(out)):
            raise DataError(f"output directory {quoted(out, '')} was filled by something else while the release was "
                            "being made; the release was not published")
        old = self._old_path(run_id)
        if out.exists():
            os.rename(out, old)
        try:
            os.rename(staging, out)
        except OSError:
            if old.exists():
                os.rename(old, out)
            raise
        _fsync_dir(out.parent)
        shutil.rmtree(old, ignore_errors=True)


def write_marker(staging: Path, run_id: str, run_key: str | None, test_mode: bool) -> dict[str, str]:
    """Write the marker last, naming every file already in ``staging`` with its SHA-256; returns that map."""
    files = {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.name != MARKER}
    marker = {"dphist_release": 1, "run_id": run_id, "run_key": run_key, "test_mode": test_mode, "files": files}
    with open(staging / MARKER, "wb") as fh:
        fh.write((json.dumps(marker, indent=2, sort_keys=True) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())
    _fsync_dir(staging)
    return files


def sweep_orphans(out: Path) -> list[Path]:
    """Remove the staging and aside folders of ``out`` left by processes of this host that have ended, except
    staging folders with a marker outside test mode: a release a ledger run may have paid for, complete or not,
    which its recovery publishes or leaves to the steward (:func:`dphist.publishing.transaction.recover`), and which may hold
    files that are not dphist's.  An aside folder whose destination is missing is an interrupted swap: it is put
    back.  Returns what was removed or restored."""
    done = []
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return done
    prefix = f".{out.name}."
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir() or entry.is_symlink():
            continue
        kind, _, rest = entry.name[len(prefix):].partition(".")
        if kind not in (_STAGING, _OLD):
            continue
        _, _, owner = rest.partition(".")
        if not _owner_gone(owner):
            continue
        if kind == _OLD and not out.exists():
            os.rename(entry, out)
        elif kind == _STAGING and (marker := read_marker(entry)) is not None and not marker.get("test_mode"):
            continue  # a ledger run's paid-for release: its recovery decides (dphist.publishing.transaction.recover)
        else:
            shutil.rmtree(entry, ignore_errors=True)
        done.append(entry)
    return done


def remove_tree(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
