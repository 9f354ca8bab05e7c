"""Atomic release output: a whole release directory appears at once, or not at all.

Files are written into a staging directory beside the destination, each flushed and fsynced, then the staging
directory is renamed onto the destination.  A crash or error leaves the destination as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataError, UsageError

__all__ = ["FORMATS", "check_destination", "write_release", "write_text_atomic"]

FORMATS = ("csv", "parquet", "json")


def check_destination(out: str | os.PathLike, overwrite: bool) -> Path:
    """Fail (UsageError) before any data is read if the release could not be written to ``out``."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"output path {out} exists and is not a directory")
        if any(out.iterdir()) and not overwrite:
            raise UsageError(f"output directory {out} is not empty (use --overwrite to replace it)")
    parent = _existing_ancestor(out.absolute().parent)
    if not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write to {parent}: permission denied")
    return out


def write_release(out: str | os.PathLike, tables: dict[str, pd.DataFrame], report: dict, fmt: str,
                  overwrite: bool, notices: dict[str, str] | None = None) -> list[Path]:
    """Write one ``<table>.<fmt>`` per table, ``report.json`` and any ``notices`` (file name -> text) into
    ``out``, atomically.

    Returns the final paths.  Raises UsageError if ``out`` is occupied and ``overwrite`` is false.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format '{fmt}' (choose one of {', '.join(FORMATS)})")
    out = check_destination(out, overwrite)
    parent = out.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=parent))
    try:
        names = []
        for name, frame in tables.items():
            names.append(f"{name}.{fmt}")
            _write_table(staging / names[-1], frame, fmt)
        names.append("report.json")
        _write_bytes(staging / "report.json", (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode())
        for name, text in (notices or {}).items():
            names.append(name)
            _write_bytes(staging / name, text.encode("utf-8"))
        _fsync_dir(staging)
        _swap_into_place(staging, out)
        _fsync_dir(parent)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise DataError(f"cannot write the release to {out}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / n for n in names]


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a text file by temp file, fsync and rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.absolute().parent)
    os.close(fd)
    try:
        _write_bytes(Path(tmp), text.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_frame_atomic(path: str | os.PathLike, frame: pd.DataFrame, fmt: str) -> None:
    """Write one table (csv, parquet or json) by temp file, fsync and rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.absolute().parent)
    os.close(fd)
    try:
        _write_table(Path(tmp), frame, fmt)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _swap_into_place(staging: Path, out: Path) -> None:
    if not out.exists():
        os.rename(staging, out)
        return
    if not any(out.iterdir()):
        out.rmdir()
        os.rename(staging, out)
        return
    backup = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.absolute().parent))
    backup.rmdir()
    os.rename(out, backup)
    try:
        os.rename(staging, out)
    except OSError:
        os.rename(backup, out)
        raise
    shutil.rmtree(backup, ignore_errors=True)


def _write_table(path: Path, frame: pd.DataFrame, fmt: str) -> None:
    if fmt == "csv":
        data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    elif fmt == "json":
        data = (frame.to_json(orient="records", force_ascii=False) + "\n").encode("utf-8")
    else:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
        data = sink.getvalue().to_pybytes()
    _write_bytes(path, data)


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
