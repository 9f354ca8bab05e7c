"""Synthetic microdata from a published release (post-processing: reads the release, never the private data).

A table's released counts, normalised, are a distribution over its cells.  ``synthesize`` draws cells from it
(a multinomial sample of the requested number of rows), then a value inside each drawn cell: uniform over a
numeric bin [lower, upper), a uniform day of a date bin, the label of a categorical cell, and a missing value
for a null cell.  Rows re-binned with the release's bins therefore follow the released counts up to multinomial
sampling error, and every association the release does not contain (inside a bin, or between columns of
different tables) is absent.

Joint mode (``joint=True``) draws records over the columns of all the tables together, from the maximum-entropy
table fitted to all of them by iterative proportional fitting (:mod:`dphist.inference.ipf`).  Its limits:

- The fit reproduces the given tables but invents no association they do not contain: from {age×sex,
  sex×income} the synthetic age and income are independent given sex.
- The tables must agree (the same grand total, the same counts on shared columns, the same bins), as the tables
  of ``dphist release --marginals`` do; otherwise no table has all of them as marginals and synthesis refuses.
- With cycles among the tables (e.g. ab, bc, ca) the fit can converge slowly, and after 1000 sweeps it may still
  miss some marginals; the records are drawn anyway, with a warning.
- The fitted table over the union of the columns may have at most 2**24 cells, and each sweep costs
  O(cells × tables).

Reading.  A release directory may be damaged or hostile: ``load_report`` and ``read_table`` check report.json
and every table file (format, flat columns, numeric non-negative counts, bins, C order) and stop at the first
fault with a DataError naming the file, column and row.  Drawing.  ``plan_synthesis`` does every check first;
``Synthesis.chunks`` then draws the records a chunk (``CHUNK_ROWS``) at a time, so that writing any number of
them (``dphist synth``) holds one chunk in memory, not all the records.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataError, UsageError
from ..inference.ipf import fit_max_entropy
from ..algorithms.marginal_sets import derive_marginal
from ..text import quoted, quoted_list

__all__ = ["ReleasedBins", "ReleasedTable", "Synthesis", "CHUNK_ROWS", "load_report", "read_table", "choose_table",
           "plan_synthesis", "synthesize"]

_SUFFIXES = (".csv", ".parquet", ".json")
_KINDS = ("categorical", "numeric", "date")
CHUNK_ROWS = 1 << 20  # records drawn and written at a time: bounds synth's memory whatever --rows is


# ---- reading a release, trusting nothing -----------------------------------------------------------------------
#
# A release directory may be damaged or hostile.  Every check below turns what would be a crash into one line
# that names the file, the column and the row at fault (never a value: values are data).


@dataclass(frozen=True)
class ReleasedBins:
    """The bins of one column of a released table, read back: one entry per bin, in the order of the column's axis.

    ``text``: the released label (categorical) or lower bound (numeric, date), as read, for display and
    comparison; ``lower``/``upper``: the bounds as numbers (a date as days since 1970-01-01; 0 for a categorical
    or null bin); ``null``: the bin of missing values."""

    column: str
    kind: str
    text: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    null: np.ndarray

    @property
    def size(self) -> int:
        return len(self.text)

    def same_bins(self, other: "ReleasedBins") -> bool:
        """The same type and bins, a null bin matching a null bin."""
        return (self.kind == other.kind and self.size == other.size and _same(self.text, other.text)
                and bool(np.array_equal(self.null, other.null)) and bool(np.array_equal(self.lower, other.lower))
                and bool(np.array_equal(self.upper, other.upper)))


@dataclass(frozen=True)
class ReleasedTable:
    """A released table, checked: ``counts`` as released (float64, one axis per column, finite; non-negative
    whole numbers unless the table is --raw), its ``axes``, and the interval columns if it has them."""

    name: str
    path: Path
    meta: dict
    axes: tuple[ReleasedBins, ...]
    counts: np.ndarray
    ci: tuple[np.ndarray, np.ndarray] | None
    #: Per cell (flat), what its interval covers ("count", "bucket share", "" for none), if the file says.
    covers: np.ndarray | None = None
    #: Per cell (flat), its bucket's number (NaN for none), if the file has the column.
    bucket: np.ndarray | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(a.column for a in self.axes)

    @property
    def weights(self) -> np.ndarray:
        """The counts to sample from: a --raw table's negative noisy counts count as 0."""
        return np.maximum(self.counts, 0.0)


def load_report(directory: str | Path) -> dict:
    """The checked report.json of a release directory: a dict whose ``tables`` is a non-empty list of table
    entries, each with a plain file ``name``, distinct ``columns``, a ``shape`` of positive integers (one per
    column) and a ``domain`` giving each column a known ``type``.  UsageError if ``directory`` is not a release,
    DataError if its report is damaged."""
    directory = Path(directory)
    path = directory / "report.json"
    if not os.path.isfile(path):  # (False for a name stat cannot look up, too long say, rather than raising)
        raise UsageError(f"{quoted(directory, '')}: not a dphist release (no report.json)")
    try:
        report = json.loads(path.read_bytes())
    except OSError as exc:
        raise DataError(f"{quoted(path, '')}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested beyond the parser's depth
        raise DataError(f"{quoted(path, '')}: not valid JSON, so not a dphist release report") from None
    if not isinstance(report, dict) or not isinstance(report.get("tables"), list) or not report["tables"]:
        raise DataError(f"{quoted(path, '')}: not a dphist release report (no list of 'tables')")
    seen = set()
    for i, meta in enumerate(report["tables"], 1):
        _check_meta(path, i, meta)
        if meta["name"] in seen:
            raise DataError(f"{quoted(path, '')}: table {quoted(meta['name'])} is listed twice")
        seen.add(meta["name"])
    return report


def _check_meta(path: Path, i: int, meta) -> None:
    where = f"{quoted(path, '')}: table {i} of 'tables'"
    if not isinstance(meta, dict):
        raise DataError(f"{where} is not an object")
    name = meta.get("name")
    # The name becomes a file name in the release directory: nothing that could point elsewhere.
    if (not isinstance(name, str) or not name or name.startswith(".") or any(c in name for c in "/\\")
            or not name.isprintable()):
        raise DataError(f"{where}: 'name' must be a plain file name")
    where = f"{quoted(path, '')}: table {quoted(name)}"
    columns, shape, domain = meta.get("columns"), meta.get("shape"), meta.get("domain")
    if (not isinstance(columns, list) or not columns
            or not all(isinstance(c, str) and c and c.isprintable() for c in columns)
            or len(set(columns)) != len(columns)):
        raise DataError(f"{where}: 'columns' must be a list of distinct, printable column names")
    if (not isinstance(shape, list) or len(shape) != len(columns)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape)):
        raise DataError(f"{where}: 'shape' must list one positive whole number per column")
    if not isinstance(domain, dict):
        raise DataError(f"{where}: no 'domain' object")
    for column in columns:
        entry = domain.get(column)
        if not isinstance(entry, dict) or entry.get("type") not in _KINDS:
            raise DataError(f"{where}: 'domain' gives column {quoted(column)} no type ({', '.join(_KINDS)})")


def choose_table(report: dict, table: str | None, joint_hint: bool = False) -> dict:
    """The report entry of ``table``, or of the only table when ``table`` is None; UsageError otherwise."""
    names = [t["name"] for t in report["tables"]]
    if table is None:
        if len(names) != 1:
            also = ", or draw over all of them together with --joint" if joint_hint else ""
            raise UsageError(f"the release has {len(names)} tables: choose one with --table "
                             f"({quoted_list(names)}){also}")
        table = names[0]
    if table not in names:
        raise UsageError(f"the release has no table {quoted(table)} (it has: {quoted_list(names)})")
    return report["tables"][names.index(table)]


def read_table(directory: str | Path, meta: dict) -> ReleasedTable:
    """Read and check the table that the (checked) report entry ``meta`` describes: its file is
    ``<name>.csv``, ``.parquet`` or ``.json`` (the first present); it must hold one flat column per label
    (``col`` for a categorical column, ``col_lower`` and ``col_upper`` for numeric and date ones) and
    ``count``, and one row per cell in C order over the columns.  DataError, naming the file, column and row,
    for anything else."""
    directory = Path(directory)
    name = meta["name"]
    path = next((directory / f"{name}{s}" for s in _SUFFIXES if os.path.exists(directory / f"{name}{s}")), None)
    if path is None:
        raise DataError(f"{quoted(directory, '')}: table {quoted(name)} is listed in report.json but its file is "
                        "missing")
    if not os.path.isfile(path):
        raise DataError(f"{quoted(path, '')}: not a regular file")
    kinds = {c: meta["domain"][c]["type"] for c in meta["columns"]}
    needed = [key for c in meta["columns"] for key in _label_columns(c, kinds[c])] + ["count"]
    frame = _read_frame(path, needed)
    n = math.prod(meta["shape"])
    if len(frame) != n:
        raise DataError(f"{quoted(path, '')}: {len(frame)} rows, but report.json gives the table shape {meta['shape']} "
                        f"({n} cells, one row each)")
    for key in frame.columns:
        _check_flat(path, key, frame[key])
    axes = []
    stride = n
    for column, size in zip(meta["columns"], meta["shape"]):
        stride //= size
        axes.append(_axis(path, frame, column, kinds[column], size, stride, meta["columns"], meta["domain"][column]))
    counts = _counts(path, frame["count"], str(meta.get("post_processing", "")).startswith("none"))
    ci = None
    if {"ci_lower", "ci_upper"} <= set(frame.columns):
        ci = tuple(_numbers(path, key, frame[key], empty_ok=True) for key in ("ci_lower", "ci_upper"))
    covers = _covers(path, frame["ci_covers"]) if "ci_covers" in frame.columns else None
    bucket = _numbers(path, "bucket", frame["bucket"], empty_ok=True) if "bucket" in frame.columns else None
    return ReleasedTable(name, path, meta, tuple(axes), counts.reshape(meta["shape"]), ci, covers, bucket)


def _covers(path: Path, values: pd.Series) -> np.ndarray:
    """The ci_covers column as text per cell ("" where empty): DataError at a value it cannot hold."""
    empty = np.asarray(values.isna(), dtype=bool)
    text = np.where(empty, "", values.astype(object).to_numpy()).astype(str)
    wrong = np.flatnonzero(~np.isin(text, ["", "count", "bucket share"]))
    if wrong.size:
        raise DataError(f"{quoted(path, '')}: row {wrong[0] + 1}: column 'ci_covers' holds {quoted(text[wrong[0]])}, "
                        "not 'count', 'bucket share' or nothing")
    return text


def _closed_ends(path: Path, frame: pd.DataFrame, column: str, position: np.ndarray, domain: dict) -> pd.DataFrame:
    """``frame`` with the empty outer labels of the end bins filled in from the domain's bounds."""
    bins = domain.get("bins")
    if not isinstance(bins, int) or bins < 2:
        raise DataError(f"{quoted(path, '')}: report.json: the domain of {quoted(column)} has open ends but not two "
                        "bins or more")
    frame = frame.copy()
    for key, bin_index, bound in ((f"{column}_lower", 0, domain.get("lower")),
                                  (f"{column}_upper", bins - 1, domain.get("upper"))):
        values = frame[key].to_numpy(object).copy()
        rows = (position == bin_index) & np.asarray(pd.isna(values), dtype=bool)
        values[rows] = bound
        frame[key] = values
    return frame


def _read_frame(path: Path, needed: list[str]) -> pd.DataFrame:
    """The ``needed`` columns of a table file (and the interval columns if present), read by its extension."""
    fmt = path.suffix[1:]
    wanted = needed + ["ci_lower", "ci_upper", "ci_covers", "bucket"]
    try:
        if fmt == "parquet":
            schema = pq.read_schema(path)
            _require(path, needed, schema.names)
            for field in schema:
                kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
                if field.name in wanted and pa.types.is_nested(kind):
                    raise DataError(f"{quoted(path, '')}: column {quoted(field.name)} is nested ({kind}), but a "
                                    "released table has one value per cell")
            table = pq.read_table(path, columns=[c for c in wanted if c in schema.names])
            return table.to_pandas()
        if fmt == "csv":
            frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
        else:
            frame = pd.read_json(path, orient="records")
    except DataError:
        raise
    except (OSError, ValueError, TypeError, OverflowError, RecursionError, pa.ArrowException):
        raise DataError(f"{quoted(path, '')}: cannot be read as a {fmt.upper() if fmt != 'parquet' else 'Parquet'} "
                        "table (damaged, or not the format its name says)") from None
    _require(path, needed, list(frame.columns))
    return frame[[c for c in wanted if c in frame.columns]]


def _require(path: Path, needed: list[str], have: list) -> None:
    missing = [c for c in needed if c not in have]
    if missing:
        raise DataError(f"{quoted(path, '')}: no column {quoted(missing[0])}" + (f" (nor {len(missing) - 1} more)"
                                                                if len(missing) > 1 else ""))


def _check_flat(path: Path, key: str, values: pd.Series) -> None:
    """One scalar per cell: JSON can hold lists and objects in a cell, Parquet nested types."""
    if values.dtype != object:
        return
    nested = np.flatnonzero([isinstance(v, (list, dict, tuple, set, np.ndarray)) for v in values])
    if nested.size:
        raise DataError(f"{quoted(path, '')}: column {quoted(key)} holds a list or object instead of a value (row "
                        f"{nested[0] + 1})")


def _axis(path: Path, frame: pd.DataFrame, column: str, kind: str, size: int, stride: int,
          columns: list[str], domain: dict | None = None) -> ReleasedBins:
    """The bins of ``column``: row k·stride holds bin k, and every row must repeat its bin's labels (C order).
    The bins' bounds are parsed before the order is checked, so that a bound that is not a number or date is
    reported as such when it is in a bin's first row (elsewhere, as a row that differs from its bin).  End bins
    whose outer label is empty by design (``open_ends`` in the report's domain: they also hold the values
    clamped from beyond the bounds) are drawn between the domain's bounds."""
    position = (np.arange(len(frame)) // stride) % size  # each row's index along this column's axis
    first = np.arange(size) * stride
    keys = _label_columns(column, kind)
    if kind != "categorical" and (domain or {}).get("open_ends"):
        frame = _closed_ends(path, frame, column, position, domain)
    labels = {key: frame[key].to_numpy(object)[first] for key in keys}
    if kind == "categorical":
        text = labels[column]
        lower = upper = np.zeros(size)
        null = np.asarray(pd.isna(text), dtype=bool)
    else:
        parse = _number if kind == "numeric" else _day
        bounds = []
        for key in keys:
            null = np.asarray(pd.isna(labels[key]), dtype=bool)
            parsed = np.zeros(size)
            for k in np.flatnonzero(~null):
                parsed[k] = parse(path, key, labels[key][k], first[k] + 1)
            bounds.append((parsed, null))
        (lower, null), (upper, null_upper) = bounds
        if (null != null_upper).any():
            row = first[np.flatnonzero(null != null_upper)[0]] + 1
            raise DataError(f"{quoted(path, '')}: row {row}: one of {quoted(column + '_lower')} and "
                            f"{quoted(column + '_upper')} is empty, not both")
        with np.errstate(over="ignore"):
            wide = ~null & ~np.isfinite(upper - lower)
        if wide.any():  # a draw inside it would overflow
            raise DataError(f"{quoted(path, '')}: row {first[np.flatnonzero(wide)[0]] + 1}: the bin of "
                            f"{quoted(column)} is wider than a float holds")
        if (~null & (lower >= upper)).any():
            row = first[np.flatnonzero(~null & (lower >= upper))[0]] + 1
            raise DataError(f"{quoted(path, '')}: row {row}: the bin of {quoted(column)} is empty "
                            f"({quoted(column + '_lower', '')} is not "
                            f"below {quoted(column + '_upper', '')})")
        text = labels[keys[0]]
    for key in keys:
        values = frame[key].to_numpy(object)
        differs = ~_equal(labels[key][position], values)
        if differs.any():
            raise DataError(f"{quoted(path, '')}: row {np.flatnonzero(differs)[0] + 1}: column {quoted(key)} differs "
                            "from the other "
                            f"rows of its bin, so the rows are not in the order report.json describes (C order "
                            f"over {quoted_list(columns)})")
    return ReleasedBins(column, kind, text, lower, upper, null)


def _number(path: Path, key: str, value, row: int) -> float:
    if not isinstance(value, (bool, np.bool_)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            pass
        else:
            if math.isfinite(number):
                return number
    raise DataError(f"{quoted(path, '')}: row {row}: column {quoted(key)} holds a value that is not a finite number")


def _day(path: Path, key: str, value, row: int) -> float:
    """Days since 1970-01-01 of a date label: a date, a datetime at midnight, or an ISO date text."""
    day = None
    if isinstance(value, _dt.datetime):
        day = value.date() if value.time() == _dt.time() and value.tzinfo is None else None
    elif isinstance(value, _dt.date):
        day = value
    elif isinstance(value, str):
        try:
            day = _dt.date.fromisoformat(value)
        except ValueError:
            pass
    if day is None:
        raise DataError(f"{quoted(path, '')}: row {row}: column {quoted(key)} holds a value that is not a date "
                        "(YYYY-MM-DD)")
    return float(day.toordinal() - _EPOCH.toordinal())


def _numbers(path: Path, key: str, values: pd.Series, empty_ok: bool = False) -> np.ndarray:
    """A column of numbers as float64: DataError at the first text, true/false, empty (unless ``empty_ok``) or
    infinite cell."""
    if pd.api.types.is_bool_dtype(values.dtype):
        raise DataError(f"{quoted(path, '')}: column {quoted(key)} holds true/false values, not numbers")
    numbers = pd.to_numeric(values, errors="coerce")
    empty = np.asarray(values.isna(), dtype=bool)
    text = ~empty & np.asarray(pd.isna(numbers), dtype=bool)
    if text.any():
        raise DataError(f"{quoted(path, '')}: row {np.flatnonzero(text)[0] + 1}: column {quoted(key)} holds text, not "
                        "a number")
    out = np.asarray(numbers, dtype=np.float64)
    if empty.any() and not empty_ok:
        raise DataError(f"{quoted(path, '')}: row {np.flatnonzero(empty)[0] + 1}: column {quoted(key)} is empty")
    infinite = np.isinf(out)
    if infinite.any():
        raise DataError(f"{quoted(path, '')}: row {np.flatnonzero(infinite)[0] + 1}: column {quoted(key)} is infinite")
    return out


def _counts(path: Path, values: pd.Series, raw: bool) -> np.ndarray:
    """The released counts: numbers, and (unless the table is --raw) non-negative whole numbers.  A --raw
    table's counts are the unbiased noisy estimates: fractional, and negative at times."""
    counts = _numbers(path, "count", values)
    if raw:
        return counts
    for bad, what in ((counts < 0, "a negative count"), (counts != np.floor(counts), "a count that is not a whole "
                                                                                   "number")):
        if bad.any():
            raise DataError(f"{quoted(path, '')}: row {np.flatnonzero(bad)[0] + 1}: column 'count' holds {what}, which "
                            "only a --raw release has")
    return counts


def _label_columns(column: str, kind: str) -> list[str]:
    """The columns of a released table that label ``column``'s bins."""
    return [column] if kind == "categorical" else [f"{column}_lower", f"{column}_upper"]


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality of labels, a missing label (null bin) matching a missing one."""
    missing_a, missing_b = np.asarray(pd.isna(a), dtype=bool), np.asarray(pd.isna(b), dtype=bool)
    # Missing labels become None before comparing: pd.NA (Parquet's nulls) has no truth value.
    a, b = np.where(missing_a, None, a), np.where(missing_b, None, b)
    with np.errstate(invalid="ignore"):
        return (np.asarray(a == b, dtype=bool) & ~missing_a & ~missing_b) | (missing_a & missing_b)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return len(a) == len(b) and bool(np.all(_equal(a, b)))


# ---- drawing records, a chunk at a time --------------------------------------------------------------------------


@dataclass(frozen=True)
class Synthesis:
    """A checked, ready draw of ``rows`` records: cells with probability ∝ ``weights`` (one axis per entry of
    ``axes``), then a value inside each cell's bin on every axis.

    ``chunks(rng)`` yields the records in frames of at most ``chunk_rows`` rows (at least one frame, empty when
    ``rows`` is 0), so memory is bounded by one chunk and the weights, whatever ``rows`` is.  Each chunk is a
    multinomial sample of its size, shuffled: independent chunks of independent records, the same distribution
    as one multinomial sample of ``rows`` (their cell counts add up to one), and with one chunk the same draw.
    With more cells than ``chunk_rows`` (a big joint fit) each record's cell is drawn by inverting the cumulative
    weights instead, the same distribution at O(log cells) per record rather than O(cells) per chunk.
    """

    axes: tuple[ReleasedBins, ...]
    weights: np.ndarray
    rows: int
    chunk_rows: int = CHUNK_ROWS

    def __post_init__(self):
        if self.chunk_rows < 1:
            raise ValueError("Synthesis: chunk_rows must be positive")

    @property
    def columns(self) -> list[str]:
        return [a.column for a in self.axes]

    def chunks(self, rng: np.random.Generator) -> Iterator[pd.DataFrame]:
        flat = self.weights.ravel()
        left = self.rows
        if flat.size <= self.chunk_rows:  # the common case: fewer cells than records in a chunk
            p, cells = flat / flat.sum(), np.arange(flat.size)
        else:  # a multinomial costs O(cells) per chunk: draw each record's cell from the cumulative weights
            cdf, last = np.cumsum(flat), int(np.flatnonzero(flat > 0)[-1])
        while True:
            m = min(left, self.chunk_rows)
            if flat.size <= self.chunk_rows:
                drawn = np.repeat(cells, rng.multinomial(m, p))
                rng.shuffle(drawn)
            else:
                # Cell k is drawn iff cdf[k-1] <= u·total < cdf[k]: never a cell of weight 0; u·total can round
                # up to the total, which belongs to the last cell of positive weight.
                drawn = np.minimum(np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right"), last)
            index = np.unravel_index(drawn, self.weights.shape)
            yield pd.DataFrame({a.column: _values(a, i, None if a.kind == "categorical" else rng.random(m))
                                for a, i in zip(self.axes, index)})
            left -= m
            if left == 0:
                return

    def prototype(self) -> pd.DataFrame:
        """A few records with the columns and types of the drawn ones (every bin's lowest value): what a
        writer needs to know of the columns before the first chunk."""
        n = max(a.size for a in self.axes)
        return pd.DataFrame({a.column: _values(a, np.arange(n) % a.size, np.zeros(n)) for a in self.axes})


def plan_synthesis(directory: str | Path, rows: int, table: str | None = None, joint: bool = False,
                   chunk_rows: int | None = None) -> Synthesis:
    """Check everything a draw of ``rows`` records needs (options, release, tables, the joint fit) and return
    it, ready to draw in chunks of ``chunk_rows`` records [CHUNK_ROWS]: UsageError for wrong options, DataError
    for a damaged release, before any record is drawn."""
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 0:
        raise UsageError("rows must be a non-negative integer")
    if joint and table is not None:
        raise UsageError("--table and --joint exclude each other: --joint draws over all the tables")
    report = load_report(directory)
    if joint and len(report["tables"]) > 1:
        axes, weights = _joint(directory, report)
    else:
        released = read_table(directory, choose_table(report, table, joint_hint=True))
        axes, weights = released.axes, released.weights
        what = f"{quoted(released.path, '')}: column 'count'"
        with np.errstate(over="ignore"):
            total = float(weights.sum())
        if not math.isfinite(total):
            raise DataError(f"{what}: the counts add up to more than a float holds")
        if total <= 0:
            raise DataError(f"{what}: every released count is 0, so there is nothing to sample from")
    return Synthesis(tuple(axes), weights, int(rows), chunk_rows or CHUNK_ROWS)


def synthesize(directory: str | Path, rows: int, table: str | None = None,
               rng: np.random.Generator | None = None, joint: bool = False) -> pd.DataFrame:
    """``rows`` synthetic records drawn from one released table (``table``; optional if there is only one), or
    with ``joint`` from all of them together.

    Columns are the table's columns, in order; with ``joint``, the union of all tables' columns in order of first
    appearance, drawn from the maximum-entropy table fitted to every table (see the module docstring for its
    limits; a release of one table gives the same records as without ``joint``).  Joint mode raises DataError if
    the tables disagree (grand totals, counts on shared columns, or bins), and warns (RuntimeWarning) if the fit
    did not converge.  Randomness: ``rng`` (default: fresh OS entropy); it needs no cryptographic strength, since
    the release is already private and this is post-processing.  All records are in memory: to write many,
    stream ``plan_synthesis(...).chunks(rng)`` instead.
    """
    plan = plan_synthesis(directory, rows, table, joint)
    frames = list(plan.chunks(rng or np.random.default_rng()))
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _joint(directory: str | Path, report: dict) -> tuple[list[ReleasedBins], np.ndarray]:
    """The axes and the maximum-entropy table fitted to every table of the release."""
    axes: dict[str, tuple[str, ReleasedBins]] = {}  # column -> (first table with it, its bins)
    tables = [read_table(directory, meta) for meta in report["tables"]]
    for t in tables:
        for axis in t.axes:
            first = axes.setdefault(axis.column, (t.name, axis))
            if not first[1].same_bins(axis):
                raise DataError(f"column {quoted(axis.column)} has different bins in tables {quoted(first[0])} and "
                                f"{quoted(t.name)}, so they cannot be fitted together")
        with np.errstate(over="ignore"):
            total = float(t.weights.sum())
        if not math.isfinite(total):
            raise DataError(f"{quoted(t.path, '')}: column 'count': the counts add up to more than a float holds")
    for a, b in itertools.combinations(tables, 2):
        shared = tuple(c for c in a.columns if c in b.columns)
        # Exact comparison: released counts are integers, exact in float64.
        if a.weights.sum() != b.weights.sum():
            why = "their grand totals differ"
        elif shared and not np.array_equal(derive_marginal(a.weights, a.columns, shared),
                                           derive_marginal(b.weights, b.columns, shared)):
            why = f"their counts over {', '.join(shared)} differ"
        else:
            continue
        raise DataError(f"tables {quoted(a.name)} and {quoted(b.name)} do not agree ({why}), so IPF has no exact fit: "
                        "release them together, e.g. with `dphist release --marginals`")
    if tables[0].weights.sum() <= 0:
        raise DataError("the released tables: every released count is 0, so there is nothing to sample from")
    sizes = {column: axis.size for column, (_, axis) in axes.items()}
    names, fit, info = fit_max_entropy([(t.columns, t.weights) for t in tables], sizes)
    if not info.converged:
        warnings.warn(f"the joint fit did not converge in {info.iterations} sweeps: a fitted marginal cell is off "
                      f"its released count by up to {info.max_deviation:.3g}", RuntimeWarning, stacklevel=4)
    if not (np.isfinite(fit).all() and fit.sum() > 0):
        raise DataError("the released tables: the joint fit overflowed (counts too large to fit)")
    return [axes[c][1] for c in names], fit


def _values(axis: ReleasedBins, index: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """One value per record inside its bin, ``index`` giving each record's bin and ``u`` a uniform number in
    [0, 1) per record (unused for categorical columns): the label; ``lower + u·(upper − lower)`` for numbers; the
    day ``lower + ⌊u·(upper − lower)⌋`` for dates; a missing value for the null bin."""
    if axis.kind == "categorical":
        return axis.text[index]
    lo, hi, null = axis.lower[index], axis.upper[index], axis.null[index]
    if axis.kind == "numeric":
        # Uniform on [lower, upper): lower + (upper - lower)·u can round up to upper when u is near 1.
        values = np.minimum(lo + (hi - lo) * u, np.nextafter(hi, -np.inf))
        values[null] = np.nan
        return values
    days = np.minimum(lo + np.floor((hi - lo) * u), hi - 1)  # a uniform day of the bin (rounding as above)
    dates = (np.datetime64("1970-01-01", "D") + days.astype("timedelta64[D]")).astype(object)  # datetime.date
    dates[null] = None
    return dates


_EPOCH = _dt.date(1970, 1, 1)
