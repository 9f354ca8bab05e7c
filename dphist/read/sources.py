"""Sources: CSV or Parquet files (one file, a directory, or a glob) and pandas DataFrames, read in Arrow
record batches, only the needed columns, so memory stays bounded whatever the number of rows.

A source checks its header against the schema before any row is read (missing and duplicate columns, declared
types against the file's types), then yields record batches whose columns have the Arrow types counting expects:
float64 for numeric columns, dictionary-encoded strings for categorical ones, timestamps or dates for dates
(CSV: date32, from ISO 8601 text; see :func:`~dphist.read.counting.days_since_epoch`).
"""

from __future__ import annotations

import csv
import glob as _glob
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .counting import days_since_epoch
from ..errors import DataError, UsageError
from .progress import Progress
from ..declare.schema import Column
from ..text import quoted, quoted_list

if TYPE_CHECKING:  # pandas is imported by whoever passes a DataFrame; reading files needs none of it
    import pandas as pd
    import pyarrow.dataset as pads

__all__ = ["Source", "open_source", "parquet_pieces", "remote_source", "kinds_of", "type_name", "input_text",
           "is_dataframe", "is_path"]

_CSV_BLOCK = 1 << 20  # bytes per CSV block; Arrow's streaming reader keeps a few dozen in flight
_PARQUET_BATCH = 1 << 17  # rows per Parquet batch
_DICT_STRING = pa.dictionary(pa.int32(), pa.string())


@dataclass
class Source:
    """A readable table.  ``name`` identifies it in messages; ``describe()`` is what the operator sees."""

    name: str
    files: list[Path]
    format: str  # "csv" | "parquet" | "dataframe"
    frame: pd.DataFrame | None = None

    # ---- metadata, read before any row ---------------------------------------------------------------------

    @property
    def public_name(self) -> str:
        """The input's file (or pattern) name without its directories, for the published report."""
        return self.name if self.format == "dataframe" else Path(self.name).name

    def describe(self) -> dict:
        out = {"name": self.name, "format": self.format}
        if self.files:
            out["size_bytes"] = sum(p.stat().st_size for p in self.files)
            out["files"] = len(self.files)
        return out

    def column_names(self) -> list[str]:
        if self.format == "csv":
            names = None
            for path in self.files:
                header = _csv_header(path)
                if names is not None and header != names:
                    raise DataError(f"{quoted(path, '')}: header differs from the first file's header "
                                    f"({quoted(self.files[0], '')})")
                names = header
        elif self.format == "parquet":
            for path in self.files:  # every file's footer, before any row is read (not only the first file's)
                try:
                    names_here = pq.read_schema(path).names
                except (pa.ArrowInvalid, OSError) as exc:
                    raise DataError(f"{quoted(path, '')}: {_parquet_problem(exc)}") from None
                dup = _first_duplicate(names_here)
                if dup is not None:
                    raise DataError(f"{quoted(path, '')}: column name {quoted(dup)} appears more than once in the file")
            names = self._dataset().schema.names
        else:
            names = [str(c) for c in self.frame.columns]
        dup = _first_duplicate(names)
        if dup is not None:
            raise DataError(f"{quoted(self.name, '')}: column name {quoted(dup)} appears more than once in the header")
        return names

    def arrow_types(self) -> dict[str, pa.DataType]:
        """Each column's stored type: Parquet's schema, the DataFrame's dtypes, or for CSV the types Arrow infers
        from the first block of the first file (reads that block, not the whole file)."""
        if self.format == "csv":
            try:
                reader = pacsv.open_csv(self.files[0], read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK),
                                        convert_options=pacsv.ConvertOptions(null_values=[""],
                                                                             strings_can_be_null=True))
            except (pa.ArrowInvalid, UnicodeDecodeError):
                raise DataError(f"{quoted(self.files[0], '')}: cannot be read as UTF-8 CSV with consistent column "
                                "types; declare the columns in a schema") from None
            schema = reader.schema
        elif self.format == "parquet":
            schema = self._dataset().schema
        else:
            schema = pa.Schema.from_pandas(self.frame, preserve_index=False)
        return {field.name: field.type for field in schema}

    def check_columns(self, columns: dict[str, Column]) -> None:
        """Fail (DataError) if a declared column is missing or its stored type cannot hold the declared kind."""
        names = self.column_names()
        for name, col in columns.items():
            if name not in names:
                raise DataError(f"{quoted(self.name, '')}: column {quoted(name)} not found in the input (it has: "
                                f"{quoted_list(names)})")
        if self.format == "csv":
            return  # CSV cells are text; their conversion is checked while reading
        types = self._arrow_schema()
        for name, col in columns.items():
            _check_type(self.name, name, col, types.field(name).type)

    # ---- rows ----------------------------------------------------------------------------------------------

    def progress_total(self) -> tuple[int, str]:
        """How much a full read is, for a progress bar: (rows, "rows") for Parquet and DataFrames, from metadata;
        (bytes, "bytes") for CSV, from the files' sizes."""
        if self.format == "csv":
            return sum(p.stat().st_size for p in self.files), "bytes"
        if self.format == "parquet":
            try:
                return sum(pq.read_metadata(p).num_rows for p in self.files), "rows"
            except (pa.ArrowInvalid, OSError) as exc:
                raise DataError(f"{quoted(self.name, '')}: {_parquet_problem(exc)}") from None
        return len(self.frame), "rows"

    def batches(self, columns: dict[str, Column], progress: Progress | None = None) -> Iterator[pa.RecordBatch]:
        """Yield record batches holding exactly ``columns`` (in that order).  Raises DataError on bad rows.

        With ``progress``, the work done is added to it as batches are read (see :meth:`progress_total`)."""
        if progress is None:
            yield from self._batches(columns, None)
            return
        for batch in self._batches(columns, progress):
            if self.format != "csv":
                progress.add(batch.num_rows)
            progress.show()
            yield batch

    def _batches(self, columns: dict[str, Column], progress: Progress | None) -> Iterator[pa.RecordBatch]:
        names = list(columns)
        if self.format == "csv":
            for path in self.files:
                yield from _csv_batches(path, columns, progress)
        elif self.format == "parquet":
            # Text columns stay dictionary-encoded as stored (codes, not strings); Arrow's scanner decodes the
            # next row groups on its threads while the current batches are counted, a bounded number ahead.
            import pyarrow.dataset as pads  # it imports pandas (~0.2 s): only Parquet input needs it

            categorical = [n for n, c in columns.items() if c.kind == "categorical"]
            fmt = pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(dictionary_columns=categorical))
            for path in self.files:
                try:
                    dataset = pads.dataset(str(path), format=fmt)
                    missing = [n for n in names if n not in dataset.schema.names]
                    if missing:
                        raise DataError(f"{quoted(path, '')}: column {quoted(missing[0])} is missing from this file")
                    for batch in dataset.to_batches(columns=names, batch_size=_PARQUET_BATCH,
                                                    batch_readahead=4, fragment_readahead=1):
                        yield batch
                except (pa.ArrowInvalid, OSError) as exc:
                    raise DataError(f"{quoted(path, '')}: {_parquet_problem(exc)}") from None
        else:
            frame = self.frame[names]
            try:
                table = pa.Table.from_pandas(frame, preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                raise DataError("DataFrame: a column holds values of mixed types that cannot be read") from None
            for name, col in columns.items():
                _check_type("DataFrame", name, col, table.schema.field(name).type)
            yield from table.to_batches(max_chunksize=_PARQUET_BATCH)

    def piece_batches(self, piece: tuple, columns: dict[str, Column]) -> Iterator[pa.RecordBatch]:
        """The batches of one piece of the input (see :func:`parquet_pieces`): ``(path, row_groups)`` of a
        Parquet file, or ``(path,)``, a whole CSV file."""
        names = list(columns)
        if self.format == "csv":
            yield from _csv_batches(Path(piece[0]), columns)
            return
        path, groups = piece
        categorical = [n for n, c in columns.items() if c.kind == "categorical"]
        try:
            reader = pq.ParquetFile(path, read_dictionary=categorical, pre_buffer=False)
            for batch in reader.iter_batches(batch_size=_PARQUET_BATCH, row_groups=groups, columns=names):
                yield batch.select(names)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{quoted(path, '')}: {_parquet_problem(exc)}") from None

    def inferred_batches(self) -> Iterator[pa.RecordBatch]:
        """Every column with the types the file itself suggests (for drafting a schema, not for releases)."""
        if self.format == "csv":
            options = pacsv.ConvertOptions(null_values=[""], strings_can_be_null=True)
            for path in self.files:
                try:
                    for batch, _ in _csv_blocks(path, options):
                        yield batch
                except (pa.ArrowInvalid, UnicodeDecodeError):
                    raise DataError(f"{quoted(path, '')}: cannot be read as UTF-8 CSV with consistent column types; "
                                    "write the schema by hand") from None
        elif self.format == "parquet":
            for path in self.files:
                try:
                    yield from pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=_PARQUET_BATCH)
                except (pa.ArrowInvalid, OSError) as exc:
                    raise DataError(f"{quoted(path, '')}: {_parquet_problem(exc)}") from None
        else:
            yield from pa.Table.from_pandas(self.frame, preserve_index=False).to_batches()

    def _dataset(self) -> pads.Dataset:
        import pyarrow.dataset as pads  # it imports pandas (~0.2 s): only Parquet input needs it

        try:
            return pads.dataset([str(p) for p in self.files], format="parquet")
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{quoted(self.name, '')}: {_parquet_problem(exc)}") from None

    def _arrow_schema(self) -> pa.Schema:
        if self.format == "parquet":
            return self._dataset().schema
        return pa.Schema.from_pandas(self.frame.head(0), preserve_index=False)


def _is_dataframe(source) -> bool:
    """Whether ``source`` is a pandas DataFrame, without importing pandas: an object can only be a DataFrame if
    pandas has been imported already (the command line reads files and never loads it for this)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(source, pandas.DataFrame)


# What to do instead, for inputs a caller of the Python API may plausibly pass (checked by type name, so that
# neither pandas nor numpy need be imported).
_INPUT_HINTS = {
    "Series": "a pandas Series is one column without a table: pass series.to_frame()",
    "ndarray": "a numpy array has no column names: pass pandas.DataFrame(array, columns=[...])",
    "list": "for several files pass their directory or a glob pattern such as 'data/*.csv'",
    "tuple": "for several files pass their directory or a glob pattern such as 'data/*.csv'",
    "bytes": "decode a bytes path with os.fsdecode()",
}


def is_path(value: Any) -> bool:
    """Whether ``value`` is a path as dphist takes one: a str, or an os.PathLike that gives a str."""
    return isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str)


def input_text(source: Any) -> str:
    """The path ``source`` names, as text (a str, or an os.PathLike giving one); UsageError naming its type for
    anything else (a pandas DataFrame is a source too, but not a path: see :func:`is_dataframe`)."""
    if is_path(source):
        return os.fspath(source)
    kind = type(os.fspath(source) if isinstance(source, os.PathLike) else source).__name__
    hint = _INPUT_HINTS.get(kind)
    raise UsageError(f"the input must be a path (str or os.PathLike) or a pandas DataFrame, not {quoted(kind, '')}"
                     + (f"; {hint}" if hint else ""))


def is_dataframe(source: Any) -> bool:
    """Whether ``source`` is a pandas DataFrame (see :func:`_is_dataframe`)."""
    return _is_dataframe(source)


def open_source(source) -> Source:
    """Resolve a path (file, directory, or glob pattern) or a pandas DataFrame into a Source.

    Raises UsageError for anything else (:func:`input_text`), DataError if nothing readable is there.  Reads no
    rows.
    """
    if _is_dataframe(source):
        other = next((c for c in source.columns if not isinstance(c, str)), None)
        if other is not None:  # a file's columns are named by text, and so are a schema's and the tables'
            raise UsageError(f"DataFrame: column names must be texts, not {quoted(type(other).__name__, '')} "
                             f"({quoted(other)}): rename them, e.g. frame.rename(columns=str)")
        dup = _first_duplicate([str(c) for c in source.columns])
        if dup is not None:
            raise DataError(f"DataFrame: column name {quoted(dup)} appears more than once")
        return Source("DataFrame", [], "dataframe", source)
    text = input_text(source)
    path = Path(text)
    try:
        path.stat()
    except FileNotFoundError:
        pass
    except OSError as exc:  # a name too long, a loop of links, a component that is a file: no input there
        raise DataError(f"input cannot be opened: {quoted(text, '')}: {exc.strerror}") from None
    except ValueError:  # a NUL character, which no file name can hold
        raise DataError(f"input name holds a NUL character: {quoted(text)}") from None
    # A path that exists is taken as written, even with glob characters in its name (data[1].csv); only a
    # path that does not exist is expanded as a pattern.
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _format_of(p) is not None)
        if not files:
            raise DataError(f"{quoted(text, '')}: directory holds no .csv or .parquet files")
    elif path.exists():
        _check_regular(path)
        files = [path]
    elif any(ch in text for ch in "*?["):
        # is_file() (a stat, nothing opened) leaves out named pipes, devices and sockets.
        files = sorted(Path(p) for p in _glob.glob(text, recursive=True) if Path(p).is_file())
        if not files:
            raise DataError(f"no files match {quoted(text, '')}")
    else:
        raise DataError(f"input not found: {quoted(text, '')}")
    formats = {_format_of(p) or "csv" for p in files}
    if len(formats) > 1:
        raise DataError(f"{quoted(text, '')}: mixes CSV and Parquet files; point at one kind")
    fmt = formats.pop()
    if fmt == "parquet" or (len(files) == 1 and _looks_like_parquet(files[0])):
        fmt = "parquet"
    for p in files:
        if not os.access(p, os.R_OK):
            raise DataError(f"{quoted(p, '')}: permission denied")
    return Source(text, files, fmt)


def remote_source(url: str) -> Source:
    """A URL another engine reads (s3://, hdfs://, ...): nothing is checked or read here.  The format is taken
    from the name (".csv" anywhere in it means CSV, else Parquet)."""
    return Source(url, [], "csv" if ".csv" in url.lower() else "parquet")


def parquet_pieces(source: Source, rows: int) -> list[tuple[str, list[int]]]:
    """The Parquet input cut into pieces of whole row groups, about ``rows`` rows each (from the metadata)."""
    pieces = []
    for path in source.files:
        try:
            meta = pq.read_metadata(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{quoted(path, '')}: {_parquet_problem(exc)}") from None
        groups, held = [], 0
        for i in range(meta.num_row_groups):
            groups.append(i)
            held += meta.row_group(i).num_rows
            if held >= rows:
                pieces.append((str(path), groups))
                groups, held = [], 0
        if groups:
            pieces.append((str(path), groups))
    return pieces


# --------------------------------------------------------------------------------------------------------------
# helpers


def _check_regular(path: Path) -> None:
    """Refuse (DataError) anything but a regular file, from a stat alone: opening a named pipe would block
    until a writer came, and a device or socket is no data set."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise DataError(f"input not found or not accessible: {quoted(path, '')}") from None
    if not stat.S_ISREG(mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise DataError(f"{quoted(path, '')}: is {kind}; the input must be a regular file, a directory or a glob of "
                        "files")


def _format_of(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if ".parquet" in suffixes or ".pq" in suffixes:
        return "parquet"
    if ".csv" in suffixes:
        return "csv"
    return None


def _looks_like_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _first_duplicate(names: list[str]) -> str | None:
    seen = set()
    for n in names:
        if n in seen:
            return n
        seen.add(n)
    return None


def _parquet_problem(exc: Exception) -> str:
    """A fixed description of a Parquet failure.  Library messages are not passed on: they may quote data."""
    message = str(exc)
    if "magic bytes" in message or "Parquet file size is 0" in message:
        return "not a Parquet file"
    if "No match for FieldRef" in message or "not found" in message.lower():
        return "a needed column is missing from this file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return "damaged or unreadable Parquet data"


_EVERY_KIND = frozenset({"numeric", "date", "categorical"})


def kinds_of(typ: pa.DataType) -> frozenset[str]:
    """The kinds a column of this stored type can be counted as (the one table every reader, the draft and
    discovery go by): numbers (integers, floats of any width, decimals) as numeric or as their text labels; dates
    and timestamps (with or without a time zone) as dates or labels; text as labels or ISO dates; booleans,
    times of day and durations as labels; a column of nulls only as anything.  Empty for what no table can count:
    nested values (lists, structs, maps, unions), bytes (binary: not text), intervals and the rest."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_null(typ):
        return _EVERY_KIND
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return frozenset({"categorical", "date"})
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        return frozenset({"numeric", "categorical"})
    if pa.types.is_date(typ) or pa.types.is_timestamp(typ):
        return frozenset({"date", "categorical"})
    if pa.types.is_boolean(typ) or pa.types.is_time(typ) or pa.types.is_duration(typ) or _is_string_view(typ):
        return frozenset({"categorical"})
    return frozenset()


def _is_string_view(typ: pa.DataType) -> bool:
    return getattr(pa.types, "is_string_view", lambda t: False)(typ)


def type_name(typ: pa.DataType) -> str:
    """A stored type for a message: "text" for strings, else Arrow's name, quoted (a struct's name lists its
    fields', which the file chose)."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return "text"
    return quoted(typ, "")


def _check_type(where: str, name: str, col: Column, typ: pa.DataType) -> None:
    kinds = kinds_of(typ)
    if col.kind not in kinds:
        held = type_name(typ)
        why = f"{held}, which no table can count" if not kinds else held
        raise DataError(f"{quoted(where, '')}: column {quoted(name)} is declared {col.kind} but holds {why}")


# ---- CSV --------------------------------------------------------------------------------------------------------


def _csv_header(path: Path) -> list[str]:
    """The header row's names.  Decodes the header line alone, so bad bytes further down are not blamed on it."""
    try:
        with open(path, "rb") as fh:
            raw = fh.readline(1 << 20)
    except IsADirectoryError:
        raise DataError(f"{quoted(path, '')}: is a directory, not a file") from None
    if not raw:
        raise DataError(f"{quoted(path, '')}: the file is empty (no header row)")
    try:
        line = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{quoted(path, '')}: the header row is not valid UTF-8 text") from None
    try:
        header = next(csv.reader([line], strict=True))
    except (csv.Error, StopIteration):
        raise DataError(f"{quoted(path, '')}: the header row is not valid CSV") from None
    if not header or all(not h.strip() for h in header):
        raise DataError(f"{quoted(path, '')}: the header row is empty")
    return header


def _csv_types(columns: dict[str, Column]) -> dict[str, pa.DataType]:
    # Dates are read as text and converted by :func:`_csv_converted`: Arrow's own timestamp conversion refuses
    # ISO times with a zone (Z, +05:00).  Dictionary-encoded, so each distinct date is parsed once per block.
    # So are columns that convert their own text (``from_text``: a type chosen by discovery).
    kinds = {"numeric": pa.float64(), "categorical": _DICT_STRING, "date": _DICT_STRING}
    return {name: _DICT_STRING if hasattr(col, "from_text") else kinds[col.kind] for name, col in columns.items()}


def _csv_converted(batch: pa.RecordBatch, columns: dict[str, Column]) -> pa.RecordBatch:
    """The batch with its text converted: a column's own ``from_text`` if it has one, declared dates to date32
    (see :func:`~dphist.read.counting.days_since_epoch`).  Raises ValueError if a declared date is not a date."""
    def convert(name: str, values: pa.Array) -> pa.Array:
        col = columns[name]
        if hasattr(col, "from_text"):
            return col.from_text(values)
        return days_since_epoch(values).cast(pa.int32()).cast(pa.date32())  # four-digit years fit date32

    changed = [name for name, col in columns.items() if col.kind == "date" or hasattr(col, "from_text")]
    if not changed:
        return batch
    arrays = [convert(name, batch.column(name)) if name in changed else batch.column(name)
              for name in batch.schema.names]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _csv_batches(path: Path, columns: dict[str, Column], progress: Progress | None = None) -> Iterator[pa.RecordBatch]:
    names = list(columns)
    convert = pacsv.ConvertOptions(
        include_columns=names,
        column_types=_csv_types(columns),
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    size, told = path.stat().st_size, 0
    try:
        for batch, block in _csv_blocks(path, convert, "utf8"):
            if progress is not None:
                # Each batch is parsed from one block of the file, so a block's worth of bytes is done.  (Counting
                # the bytes exactly would route Arrow's reads through Python and slow them down.)
                step = min(block, size - told)
                progress.add(step)
                told += step
            yield _csv_converted(batch.select(names), columns)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(_diagnose_csv(path, columns, exc)) from None
    unclosed = _unclosed_quote(path)
    if unclosed is not None:
        raise DataError(f"{quoted(path, '')}: line {unclosed}: a quoted field is never closed (unbalanced quotes); the "
                        "rows after it would be read as part of that field")
    if progress is not None:
        progress.add(size - told)  # compressed files, and the last block's rounding


#: The largest block a CSV is read in (Arrow parses a block at a time, and a row must fit in one).
_CSV_MAX_BLOCK = 1 << 30


def _csv_blocks(path: Path, convert: pacsv.ConvertOptions, encoding: str = "utf8"
                ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Arrow's record batches of a CSV file, each with the block size it was read at.

    A row longer than a block (a valid quoted field of 150 MB, say) stops Arrow's reader ("straddling
    object"): the file is then read again with a block four times bigger (up to the file's size, at most
    ``_CSV_MAX_BLOCK``), skipping the rows already given, so every row is given exactly once, in order.
    Other errors, and a row that fits no block, are raised as Arrow raised them.
    """
    block, given = _CSV_BLOCK, 0
    size = path.stat().st_size
    while True:
        # Big blocks are parsed on one thread, so that no more than one or two of them are held at a time.
        read = pacsv.ReadOptions(block_size=block, encoding=encoding, use_threads=block <= _CSV_BLOCK)
        skip = given
        try:
            for batch in pacsv.open_csv(path, read_options=read, convert_options=convert):
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                if skip:
                    batch, skip = batch.slice(skip), 0
                given += batch.num_rows
                yield batch, block
            return
        except pa.ArrowInvalid as exc:
            if given == 0 and "Empty CSV file" in str(exc):
                return  # a header alone with no line end: no rows (the header was checked before)
            if not _straddles(exc) or block >= min(_CSV_MAX_BLOCK, max(size, _CSV_BLOCK)):
                raise
            block = min(block * 4, _CSV_MAX_BLOCK, max(size + 1, _CSV_BLOCK))


_COMPRESSED = {".gz", ".bz2", ".zst", ".lz4", ".br", ".xz", ".zip"}


def _unclosed_quote(path: Path) -> int | None:
    """The line where a quoted field opens that never closes, or None.

    Arrow reads a quote left open at the end of the file as a field running to the end, silently taking every
    row after it.  A valid file has an even number of quote characters (they open and close fields, and are
    doubled inside them), so the bytes are counted first (about 2 GB a second); only an odd count is looked
    at with the csv module, which also accepts a literal quote inside an unquoted field (5'11").  Compressed
    files are not checked."""
    if path.suffix.lower() in _COMPRESSED:
        return None
    quotes = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            quotes += chunk.count(b'"')
    if quotes % 2 == 0:
        return None
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, 2 * _CSV_MAX_BLOCK))
    try:
        with open(path, encoding="utf-8-sig", newline="", errors="replace") as fh:
            reader = csv.reader(fh, strict=True)  # strict: a quote open at the end is an error, not a field
            start = 1
            for _ in reader:
                start = reader.line_num + 1
    except csv.Error as error:
        return start if "end of data" in str(error) or "EOF" in str(error) else None
    finally:
        csv.field_size_limit(limit)
    return None


def _straddles(exc: Exception) -> bool:
    """Whether Arrow stopped at a row longer than its block (its message suggests a bigger block size)."""
    return "straddl" in str(exc) or "block size" in str(exc)


def _diagnose_csv(path: Path, columns: dict[str, Column], exc: Exception) -> str:
    """Find the first bad row with the standard csv module (error path only) and describe it without values."""
    header = _csv_header(path)
    index = {name: header.index(name) for name in columns}
    limit = csv.field_size_limit()
    # A valid field may be as long as the longest row Arrow reads: the csv module's own limit (128 KB) would
    # report such a field as malformed.
    csv.field_size_limit(max(limit, 2 * _CSV_MAX_BLOCK))
    try:
        with open(path, encoding="utf-8-sig", newline="", errors="strict") as fh:
            reader = csv.reader(fh, strict=True)
            next(reader)
            for row in reader:
                line = reader.line_num
                if len(row) != len(header):
                    return f"{quoted(path, '')}: line {line}: expected {len(header)} fields, found {len(row)}"
                for name, col in columns.items():
                    cell = row[index[name]]
                    if cell == "" or hasattr(col, "from_text"):  # (a column converting its own text never fails)
                        continue
                    if col.kind == "numeric" and not _is_number(cell):
                        return (f"{quoted(path, '')}: line {line}, column {quoted(name)}: value is not a number "
                                "(declared numeric)")
                    if col.kind == "date" and not _is_date(cell):
                        return (f"{quoted(path, '')}: line {line}, column {quoted(name)}: value is not a date "
                                "YYYY-MM-DD (declared date)")
    except UnicodeDecodeError:
        return f"{quoted(path, '')}: the file is not valid UTF-8 text (re-encode it as UTF-8)"
    except csv.Error as error:
        if "field larger than field limit" in str(error):
            return _too_long(path)
        if "end of data" in str(error) or "EOF" in str(error):
            return f"{quoted(path, '')}: line {reader.line_num}: a quoted field is never closed (unbalanced quotes)"
        return (f"{quoted(path, '')}: line {reader.line_num}: malformed CSV (a quote inside an unquoted field, or "
                "text after a closing quote)")
    finally:
        csv.field_size_limit(limit)
    if _straddles(exc):
        return _too_long(path)
    message = str(exc)
    if "UTF8" in message or "UTF-8" in message:
        return f"{quoted(path, '')}: the file is not valid UTF-8 text (re-encode it as UTF-8)"
    column = re.search(r"column #(\d+)", message)
    if column and int(column.group(1)) < len(header):
        return f"{quoted(path, '')}: column {quoted(header[int(column.group(1))])}: a value cannot be read as declared"
    return f"{quoted(path, '')}: malformed CSV that the reader rejects (check quoting and line ends)"


def _too_long(path: Path) -> str:
    return (f"{quoted(path, '')}: a row is longer than {_CSV_MAX_BLOCK / (1 << 20):g} MB, the longest row dphist "
            "reads; shorten its long text fields or leave them out of the file")


# Unambiguous (one way to match each digit), so a 6 MB run of digits is matched in linear time, not backtracked.
_PLAIN_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")


def _is_number(text: str) -> bool:
    """Whether Arrow reads ``text`` as a float64 (Python's float() is more lenient: '1_000', non-ASCII digits)."""
    if _PLAIN_NUMBER.match(text):
        return True
    try:
        pc.cast(pa.array([text]), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _is_date(text: str) -> bool:
    """Whether ``text`` is a date the counting pass reads (:func:`~dphist.read.counting.days_since_epoch`)."""
    try:
        days_since_epoch(pa.array([text], pa.string()))
    except ValueError:
        return False
    return True
