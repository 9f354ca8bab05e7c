"""Writing release files: the tables and report of a release into its staging folder, and single files atomically.

Where a release directory goes, and how it is moved into place, is :mod:`dphist.publishing.destination`; every file here
is flushed and fsynced before anything is renamed.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..declare.choices import FORMATS
from ..errors import DataError, UsageError
from .faults import checkpoint
from .destination import Destination, remove_tree, write_marker
from ..text import quoted

__all__ = ["FORMATS", "check_destination", "stage_release", "write_release", "write_text_atomic"]


def check_destination(out: str | os.PathLike, overwrite: bool, protect=()) -> Destination:
    """Fail (UsageError) before any data is read if the release could not be written to ``out``."""
    return Destination(Path(out), overwrite, [Path(p) for p in protect]).check()


def stage_release(staging: Path, tables: dict[str, pd.DataFrame], report: dict, fmt: str,
                  notices: dict[str, str] | None = None) -> list[str]:
    """Write one ``<table>.<fmt>`` per table, ``report.json`` and any ``notices`` (file name -> text) into the
    existing folder ``staging``, each fsynced; returns the file names in order."""
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
    except OSError as exc:
        raise DataError(f"cannot write the release: {exc.strerror or exc}") from None
    return names


def write_release(out: str | os.PathLike, tables: dict[str, pd.DataFrame], report: dict, fmt: str,
                  overwrite: bool, notices: dict[str, str] | None = None, protect=()) -> list[Path]:
    """Write a release directory without a ledger (test mode, the Python API's ``Release.write``): staged,
    marked and moved into place at once.  Returns the final paths of the files.  Raises UsageError if ``out``
    is occupied (``overwrite`` replaces only an earlier dphist release)."""
    destination = check_destination(out, overwrite, protect)
    run_id = uuid.uuid4().hex
    staging = destination.make_staging(run_id)
    try:
        checkpoint("staging")
        names = stage_release(staging, tables, report, fmt, notices)
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
# written by chunks instead, byte for byte as pandas writes it: label columns repeat a few values, so each
# distinct value is formatted once, by pandas, and repeated; integers are cast by Arrow; floats are cast by Arrow
# and written with repr's rules, as pandas writes them; Arrow joins the fields into lines.

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


def csv_column(series: pd.Series):
    """A function (start, stop) -> the CSV text of those rows of ``series``, as a string array without nulls."""
    values = series.to_numpy() if isinstance(series.dtype, np.dtype) else None
    if values is not None and values.dtype.kind in "iu":
        return lambda start, stop: pc.cast(pa.array(values[start:stop]), pa.string())
    if values is not None and values.dtype == np.float64:
        return lambda start, stop: _float_text(values[start:stop])
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    text = pa.array(_pandas_fields(pd.Series(uniques, dtype=series.dtype)) + [""], type=pa.string())
    codes = np.where(codes < 0, len(uniques), codes)
    return lambda start, stop: text.take(codes[start:stop])


def _float_text(values: np.ndarray) -> pa.Array:
    """Floats as pandas writes them: repr, and NaN as an empty field.

    Arrow's cast writes the same shortest round-trip digits as repr; for 1e-4 <= |x| < 1e16 (and zeros)
    repr writes them plainly too, adding ".0" to whole numbers.  The rest (NaN, infinities, tiny and huge
    values, and any Arrow writes with an exponent) are written by repr itself.
    """
    text = pc.cast(pa.array(values), pa.string())
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(values)
        plain = ((magnitude >= 1e-4) & (magnitude < 1e16)) | (values == 0)
        plain &= ~pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
        whole = plain & (values == np.floor(values))  # written without a point when not in exponent form
    if whole.any():
        text = pc.if_else(pa.array(whole), pc.binary_join_element_wise(text, ".0", ""), text)
    other = np.flatnonzero(~plain)
    if len(other):
        written = ["" if v != v else repr(v) for v in values[other].tolist()]
        mask = np.zeros(len(values), dtype=bool)
        mask[other] = True
        text = pc.replace_with_mask(text, pa.array(mask), pa.array(written, type=pa.string()))
    return text


def _pandas_fields(values: pd.Series) -> list[str]:
    """Each value as pandas writes it as one field of a CSV row (quoted where it must be)."""
    written = pd.DataFrame({"v": values, "w": 0}).to_csv(index=False, header=False, lineterminator="\n")
    fields, pos = [], 0
    while pos < len(written):
        if written[pos] == '"':  # quoted: up to the quote not doubled
            end = pos + 1
            while True:
                end = written.index('"', end)
                if written.startswith('""', end):
                    end += 2
                    continue
                break
            end += 1
        else:
            end = written.index(",", pos)
        fields.append(written[pos:end])
        if not written.startswith(",0\n", end):  # a pandas change; fail loudly rather than misalign
            raise RuntimeError("unexpected CSV layout")
        pos = end + 3
    if len(fields) != len(values):  # pragma: no cover - a pandas change; fail loudly rather than misalign
        raise AssertionError("unexpected CSV layout")
    return fields


def _write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
