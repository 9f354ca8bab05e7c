"""Writing release files: the tables and report of a release into its staging folder, and single files atomically.

Where a release directory goes, and how it is moved into place, is :mod:`dphist.publishing.destination`; every file here
is flushed and fsynced before anything is renamed.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..declare.choices import FORMATS
from ..errors import DataError, UsageError
from .csv_text import csv_column
from .faults import checkpoint
from .destination import Destination, remove_tree, write_marker
from ..text import quoted

__all__ = ["FORMATS", "check_destination", "stage_release", "write_release", "write_text_atomic"]


def check_destination(out: str | os.PathLike, overwrite: bool, protect=()) -> Destination:
    """Fail (UsageError) before any data is read if the release could not be written to ``out``."""
    return Destination(Path(out), overwrite, [Path(p) for p in protect]).check()


def stage_release(staging: Path, tables: dict[str, pd.DataFrame], report: dict, fmt: str,
                  notices: dict[str, str] | None = None, extra: Callable[[Path], list[str]] | None = None) -> list[str]:
    """Write one ``<table>.<fmt>`` per table, ``report.json`` and any ``notices`` (file name -> text) into the
    existing folder ``staging``, each fsynced; returns the file names in order.  ``extra(staging)``, if given, then
    writes files made from the staged release (``--review``'s page) and returns their names: they are part of the
    release, hashed and published with it."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {quoted(fmt)} (choose one of {', '.join(FORMATS)})")
    names = []
    try:
        for name in tables:
            names.append(f"{name}.{fmt}")
            # A release's Tables hands out what to stream (a TidyTable) without building the whole frame.
            _write_table(staging / names[-1], tables.source(name) if hasattr(tables, "source") else tables[name],
                         fmt)
        names.append("report.json")
        _write_bytes(staging / "report.json", (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode())
        for name, text in (notices or {}).items():
            names.append(name)
            _write_bytes(staging / name, text.encode("utf-8"))
        if extra is not None:
            names.extend(extra(staging))
    except OSError as exc:
        raise DataError(f"cannot write the release: {exc.strerror or exc}") from None
    return names


def write_release(out: str | os.PathLike, tables: dict[str, pd.DataFrame], report: dict, fmt: str,
                  overwrite: bool, notices: dict[str, str] | None = None, protect=(),
                  extra: Callable[[Path], list[str]] | None = None) -> list[Path]:
    """Write a release directory without a ledger (test mode, the Python API's ``Release.write``): staged,
    marked and moved into place at once.  Returns the final paths of the files.  Raises UsageError if ``out``
    is occupied (``overwrite`` replaces only an earlier dphist release)."""
    destination = check_destination(out, overwrite, protect)
    run_id = uuid.uuid4().hex
    staging = destination.make_staging(run_id)
    try:
        checkpoint("staging")
        names = stage_release(staging, tables, report, fmt, notices, extra)
        write_marker(staging, run_id, None, bool(report.get("test_mode")))
        checkpoint("staged")
        destination.publish(staging, run_id)
    except OSError as exc:
        raise DataError(f"cannot write the release to {quoted(destination.out, '')}: {exc.strerror or exc}") from None
    finally:
        remove_tree(staging if staging.exists() else None)
    return [destination.out / n for n in names]


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


def _write_table(path: Path, frame, fmt: str) -> None:
    """``frame``: a DataFrame, or a table made in chunks (``chunks()`` and ``prototype()``: a TidyTable), which
    is streamed so that the file's text or Arrow data is never held whole."""
    if hasattr(frame, "chunks"):
        from ..products.output_file import write_frames

        with open(path, "wb") as fh:
            write_frames(fh, _after_each(frame.chunks(), "writing"), fmt, frame.prototype())
            fh.flush()
            os.fsync(fh.fileno())
        return
    # (A one-column CSV writes an empty field as "" to keep the line; release tables always have several.)
    if fmt == "csv" and len(frame) >= _STREAM_CSV_ROWS and len(frame.columns) > 1:
        _write_csv_by_chunks(path, frame)
        return
    if fmt == "csv":
        data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    elif fmt == "json":
        data = (frame.to_json(orient="records", force_ascii=False) + "\n").encode("utf-8")
    else:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
        data = sink.getvalue().to_pybytes()
    _write_bytes(path, data)


def _after_each(chunks, name: str):
    """``chunks``, with the fault checkpoint ``name`` after each one is written (a table half on disk)."""
    for chunk in chunks:
        yield chunk
        checkpoint(name)


# ---- CSV of big tables ---------------------------------------------------------------------------------------
#
# pandas' to_csv formats every cell in Python (about 6 s per million rows of a release table).  A big table is
# written by chunks instead, byte for byte as pandas writes it: each column's text comes from csv_text (Arrow
# and pandas' own formatting, see there), and Arrow joins the fields into lines.

_STREAM_CSV_ROWS = 1 << 16  # smaller tables go through pandas directly
_CSV_CHUNK = 1 << 20  # rows per chunk: bounds the memory of the text


def _write_csv_by_chunks(path: Path, frame: pd.DataFrame) -> None:
    columns = [csv_column(frame[name]) for name in frame.columns]
    with open(path, "wb") as fh:
        fh.write(frame.iloc[:0].to_csv(index=False, lineterminator="\n").encode("utf-8"))
        for start in range(0, len(frame), _CSV_CHUNK):
            stop = min(start + _CSV_CHUNK, len(frame))
            # Large strings (64-bit offsets): a chunk of long labels may pass 2 GB of text.
            fields = [column(start, stop).cast(pa.large_string()) for column in columns]
            comma, empty, newline = (pa.scalar(t, pa.large_string()) for t in (",", "", "\n"))
            lines = pc.binary_join_element_wise(pc.binary_join_element_wise(*fields, comma), empty, newline)
            offsets = lines.buffers()[1]
            first, last = (int(x) for x in np.frombuffer(offsets, dtype=np.int64, count=len(lines) + 1,
                                                         offset=lines.offset * 8)[[0, -1]])
            fh.write(memoryview(lines.buffers()[2])[first:last])
        fh.flush()
        os.fsync(fh.fileno())


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
