"""One output file (``synth``, ``plot``, ``schema -o``): checked before any work, written whole or not at all.

``check_output_file`` refuses, with one line (UsageError, exit 2) and without leaving anything, a path that
could not be written: a folder that does not exist or cannot be written to, a path that is a folder, an
unknown file type, or an existing file without ``--overwrite``.  ``atomic_output`` then writes through a hidden
temp file beside the target (``.<name>.<random>.tmp``), fsyncs it and renames it onto the target at the end; any
failure or Ctrl-C removes the temp file, so nothing partial is ever left.  ``write_frames`` streams a sequence
of frames (chunks of one table) into such a file as CSV, Parquet (one row group per chunk) or JSON, so that
memory is bounded by one chunk, not the table.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import DataError, UsageError
from ..text import quoted

if TYPE_CHECKING:  # the frames come from callers that have pandas loaded; checking a path needs none of it
    import pandas as pd

__all__ = ["check_output_file", "atomic_output", "write_frames", "TABLE_SUFFIXES"]

TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".json": "json"}


def check_output_file(path: str | os.PathLike, overwrite: bool, suffixes: Collection[str] | None = None,
                      option: str = "--out") -> Path:
    """``path`` as a Path if a file can be written there; otherwise UsageError with one line naming the path.

    ``suffixes``: the allowed file name endings, lower case with their dot (None: any).  An existing regular
    file is refused unless ``overwrite``; a folder, or anything else that is not a regular file (a FIFO, a
    device), is always refused.  Nothing is left on disk (a probe file is created beside ``path`` and removed
    at once).  Control characters in a path are shown escaped, so the message stays one line.
    """
    text = os.fspath(path)
    path, shown = Path(text), _shown(text)
    if not text:
        raise UsageError(f"{option} is empty: give a file name")
    if "\0" in text:
        raise UsageError(f"{option} {shown}: a file name cannot hold a NUL character")
    if text.endswith(("/", os.sep)):
        raise UsageError(f"{option} {shown} names a folder: give a file name")
    try:
        return _check_path(path, shown, overwrite, suffixes, option)
    except OSError as exc:  # what stat says of a name it cannot look up (too long, a loop of links, ...)
        raise UsageError(f"{option} {shown}: {exc.strerror or type(exc).__name__}") from None


def _check_path(path: Path, shown: str, overwrite: bool, suffixes: Collection[str] | None, option: str) -> Path:
    if path.is_dir():
        raise UsageError(f"{option} {shown} is a folder: give a file name")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise UsageError(f"{option} {shown}: unknown file type {quoted(path.suffix or '(none)')} (use "
                         f"{', '.join(sorted(suffixes))})")
    if path.exists() or path.is_symlink():
        if path.exists() and not path.is_file():
            raise UsageError(f"{option} {shown} exists and is not a regular file")
        if not overwrite:
            raise UsageError(f"{shown} exists (use --overwrite to replace it)")
    parent = path.absolute().parent
    if not parent.exists():
        raise UsageError(f"{option} {shown}: the folder {_shown(parent)} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{option} {shown}: {_shown(parent)} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {shown}: cannot write to the folder {_shown(parent)} (permission denied)")
    # What access() cannot tell (root on a read-only or special file system, a full inode table): create the
    # temp file the writer will need, and remove it at once.
    try:
        fd, probe = _temp_beside(path)
    except OSError as exc:
        raise UsageError(f"{option} {shown}: cannot create a file in the folder {_shown(parent)} "
                         f"({exc.strerror or type(exc).__name__})") from None
    os.close(fd)
    os.unlink(probe)
    return path


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through: a hidden temp file beside it, flushed, fsynced and renamed onto
    ``path`` when the block ends normally (with the permissions of the file it replaces, else 0666 less the
    umask).  If the block raises (Ctrl-C included) the temp file is removed and the exception goes on; an
    OSError (disk full, say) becomes a DataError naming ``path``."""
    path = Path(path)
    parent = path.absolute().parent
    try:
        fd, name = _temp_beside(path)
    except OSError as exc:
        raise DataError(f"cannot write {_shown(path)}: {exc.strerror or type(exc).__name__}") from None
    tmp = Path(name)
    try:
        os.fchmod(fd, _mode(path))
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"cannot write {_shown(path)}: {exc.strerror or type(exc).__name__}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the folder is synced; best effort
        fd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_frames(fh: BinaryIO, frames: Iterable[pd.DataFrame], fmt: str,
                 prototype: pd.DataFrame | None = None) -> int:
    """Write ``frames``, the consecutive chunks of one table (at least one, possibly empty), to ``fh`` as one
    ``fmt`` file; returns the number of rows.  Holds one chunk at a time.

    The bytes are those of the whole table written at once by ``DataFrame.to_csv(index=False,
    lineterminator="\\n")`` or ``to_json(orient="records", force_ascii=False)`` plus a newline (a JSON array).
    Parquet: one row group per chunk, with the column types of ``prototype`` (a small frame with the table's
    columns and dtypes; default: the first chunk), so that a chunk where a column happens to be all missing
    keeps the column's type.
    """
    if fmt not in ("csv", "parquet", "json"):
        raise ValueError(f"write_frames: unknown format {fmt!r}")
    rows = 0
    writer = None
    wrote = False  # JSON: whether a record was written (a comma goes before each later chunk's records)
    schema = None if prototype is None else pa.Table.from_pandas(prototype, preserve_index=False).schema
    if fmt == "json":
        fh.write(b"[")
    try:
        for i, frame in enumerate(frames):
            rows += len(frame)
            if fmt == "csv":
                _write_csv(fh, frame, header=i == 0)
            elif fmt == "json":
                body = frame.to_json(orient="records", force_ascii=False)[1:-1]  # without the brackets
                if body:
                    fh.write((b"," if wrote else b"") + body.encode("utf-8"))
                    wrote = True
            else:
                if schema is None:
                    schema = pa.Table.from_pandas(frame, preserve_index=False).schema
                table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(fh, schema)
                writer.write_table(table, row_group_size=max(len(frame), 1))
        if fmt == "json":
            fh.write(b"]\n")
        elif fmt == "parquet" and writer is None:
            if schema is None:
                raise ValueError("write_frames: no frames and no prototype to take the Parquet columns from")
            writer = pq.ParquetWriter(fh, schema)  # a file with the columns and no rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def _write_csv(fh: BinaryIO, frame: pd.DataFrame, header: bool) -> None:
    """One chunk as ``frame.to_csv(index=False, header=header, lineterminator="\\n")`` writes it, byte for byte.

    pandas formats every float in Python (most of the time of a numeric chunk), so a chunk of several columns
    is formatted column by column with the release writer's Arrow formatter (the same text) and joined by
    Arrow.  A one-column chunk goes through pandas, which quotes an empty field alone on its line."""
    if len(frame.columns) < 2 or len(frame) == 0:
        fh.write(frame.to_csv(index=False, header=header, lineterminator="\n").encode("utf-8"))
        return
    from ..publishing.csv_text import csv_column  # loads pandas, which checking a path does not need

    if header:
        fh.write(frame.iloc[:0].to_csv(index=False, lineterminator="\n").encode("utf-8"))
    # Large strings (64-bit offsets): a chunk of long labels may pass 2 GB of text.
    fields = [csv_column(frame[name])(0, len(frame)).cast(pa.large_string()) for name in frame.columns]
    lines = pc.binary_join_element_wise(*fields, pa.scalar(",", pa.large_string()))
    whole = pa.LargeListArray.from_arrays(pa.array([0, len(lines)], pa.int64()), lines)
    fh.write(pc.binary_join(whole, pa.scalar("\n", pa.large_string()))[0].as_buffer())
    fh.write(b"\n")


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new hidden temp file in ``path``'s folder, named after it (cut short: the name must stay under the
    file system's 255 bytes even when ``path``'s own name is close to it)."""
    return tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.absolute().parent)


def _shown(path) -> str:
    """A path for a one-line message (:func:`~dphist.text.quoted`: escaped, bounded)."""
    return quoted(os.fspath(path), "")


def _mode(path: Path) -> int:
    """The permissions the file gets: those of the file it replaces, else what ``open`` would give (0666 less
    the umask), not mkstemp's private 0600."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)  # read the umask (it can only be read by setting it), then put it back
        os.umask(mask)
        return 0o666 & ~mask
