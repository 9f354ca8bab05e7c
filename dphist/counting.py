"""Rows to cells: the only step of the pipeline that reads individual records.

Each declared column maps a batch of values to an index along its axis (equal-width bins by arithmetic, other
edges by ``searchsorted``, categories through the batch's dictionary) plus a mask of rows to keep; a table's
flat cell index is the C-order combination of its axes, and ``numpy.bincount`` adds the batch into a dense int64
array of the table's shape.  One row adds 1 to exactly one cell of each table it is kept in, which is what the
add/remove sensitivity of every algorithm assumes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .contribution import UnitBound, UnitIds, bounded_rows
from .errors import DataError
from .noise import BitSource
from .schema import CategoricalColumn, Column, DateColumn, NumericColumn, normalise_label

__all__ = ["TableShape", "count_tables", "axis_index", "as_text"]


@dataclass(frozen=True)
class TableShape:
    """The public shape of one table: its columns (axes, in order) and their domains."""

    name: str
    columns: tuple[Column, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(c.n_cells for c in self.columns)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def count_tables(
    batches: Iterable[pa.RecordBatch], tables: list[TableShape], where: str = "input",
    unit: UnitBound | None = None, bits: BitSource | None = None,
) -> list[np.ndarray]:
    """Count every row of every batch into each table, in one pass.

    Returns one int64 array per table, of shape ``table.shape``.  Rows whose value is dropped by a column's
    policy (out of domain, unknown category, null) are left out of that table only.  ``where`` names the
    source in error messages.  With ``unit``, the batches also hold the unit column, and only the rows chosen by
    :func:`~dphist.contribution.bounded_rows` (at most ``unit.max_rows`` per unit, drawn with ``bits``) count:
    one unit then adds at most that many to each table.
    """
    flat = [np.zeros(t.n_cells, dtype=np.int64) for t in tables]
    held: list[list[np.ndarray]] = [[] for _ in tables]  # with a unit: each row's cell, -1 if dropped
    units, ids = [], UnitIds()
    for batch in batches:
        axes: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        if unit is not None:
            units.append(ids.encode(batch.column(unit.column)))
        for table, out, rows in zip(tables, flat, held):
            index = np.zeros(batch.num_rows, dtype=np.int64)
            keep = None
            for column in table.columns:
                if column.name not in axes:
                    try:
                        axes[column.name] = axis_index(column, batch.column(column.name))
                    except DataError as exc:
                        raise DataError(f"{where}: {exc}") from None
                idx, mask = axes[column.name]
                index *= column.n_cells
                index += idx
                if mask is not None:
                    keep = mask if keep is None else keep & mask
            if unit is not None:
                rows.append(index if keep is None else np.where(keep, index, -1))
                continue
            if keep is not None:
                index = index[keep]
            out += np.bincount(index, minlength=out.size)
    if unit is not None:
        chosen = bounded_rows(np.concatenate(units) if units else np.zeros(0, np.int64), unit.max_rows, bits)
        for out, rows in zip(flat, held):
            index = np.concatenate(rows) if rows else np.zeros(0, np.int64)
            index = index[chosen & (index >= 0)]
            out += np.bincount(index, minlength=out.size)
    return [out.reshape(t.shape) for t, out in zip(tables, flat)]


def axis_index(column: Column, values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
    """Map values to indices along ``column``'s axis.

    Returns ``(index, keep)``: an int64 array with one entry per value (entries of dropped rows are 0), and a
    bool mask of rows to keep, or None when every row is kept.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(column, NumericColumn):
        return _numeric_index(column, values)
    if isinstance(column, DateColumn):
        return _date_index(column, values)
    return _categorical_index(column, values)


def _finish(index: np.ndarray, keep: np.ndarray, null: np.ndarray, column: Column, null_cell: int):
    """Apply the null policy: a null goes to the extra cell or is dropped."""
    if null.any():
        if column.null_cell:
            index[null] = null_cell
            keep = keep | null
        else:
            keep = keep & ~null
    return index, (None if keep.all() else keep)


def _bin_values(v: np.ndarray, edges: np.ndarray, equal_width: bool, out_of_domain: str, null: np.ndarray):
    bins = len(edges) - 1
    lower, upper = edges[0], edges[-1]
    with np.errstate(invalid="ignore"):
        inside = (v >= lower) & (v < upper)
        if equal_width:
            idx = np.floor((v - lower) * (bins / (upper - lower)))
            idx = np.nan_to_num(idx, nan=0.0, posinf=bins - 1, neginf=0.0)
            idx = np.clip(idx, 0, bins - 1).astype(np.int64)
            # Float rounding can put a value one bin off near an edge; the published edges are the truth.
            idx -= v < edges[idx]
            idx += (v >= edges[np.minimum(idx + 1, bins)]) & (idx < bins - 1)
        else:
            idx = np.searchsorted(edges, v, side="right").astype(np.int64) - 1
        idx = np.clip(idx, 0, bins - 1)  # clamps values below lower / at or above upper into the edge bins
    keep = ~null
    if out_of_domain == "drop":
        keep &= inside
    return idx, keep


def _numeric_index(column: NumericColumn, values: pa.Array):
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if not (pa.types.is_floating(values.type)):
        values = pc.cast(values, pa.float64(), safe=False)
    v = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    null = np.isnan(v)  # arrow nulls arrive as NaN; a NaN value is treated as missing, never compared
    edges = np.asarray(column.edges, dtype=np.float64)
    idx, keep = _bin_values(v, edges, column.equal_width, column.out_of_domain, null)
    return _finish(idx, keep, null, column, column.bins)


def _date_index(column: DateColumn, values: pa.Array):
    typ = values.type
    try:
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            values = pc.cast(values, pa.timestamp("s"))
            typ = values.type
        if pa.types.is_timestamp(typ):
            # Floor to whole days in the timestamp's own frame: a date is what the calendar said.
            values = pc.cast(pc.floor_temporal(values, unit="day"), pa.date32())
        elif pa.types.is_date64(typ):
            values = pc.cast(values, pa.date32())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise DataError(f"column '{column.name}': a value is not a date YYYY-MM-DD (declared date)") from None
    days = values.cast(pa.int32()).to_numpy(zero_copy_only=False)
    null = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    v = np.where(null, 0, np.nan_to_num(days.astype(np.float64)))
    edges = np.asarray(column.edges, dtype=np.float64)
    idx, keep = _bin_values(v, edges, False, column.out_of_domain, null)
    return _finish(idx, keep, null, column, column.bins)


def as_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Values as the text labels categories are matched on: text as it is (a dictionary of text stays
    dictionary-encoded), integral floats written as integers (3.0 -> "3"), anything else cast to text."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        if pa.types.is_string(values.type.value_type) or pa.types.is_large_string(values.type.value_type):
            return values
        values = values.dictionary_decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        if pa.types.is_floating(values.type):
            values = pc.if_else(pc.equal(values, pc.floor(values)), pc.cast(values, pa.int64(), safe=False), values)
        values = pc.cast(values, pa.string())
    return values


def _categorical_index(column: CategoricalColumn, values: pa.Array):
    values = as_text(values)
    if not pa.types.is_dictionary(values.type):
        values = pc.dictionary_encode(values)
    dictionary = values.dictionary.to_pylist()
    positions = {label: i for i, label in enumerate(column.values)}
    lookup = np.full(len(dictionary) + 1, -1, dtype=np.int64)
    for i, label in enumerate(dictionary):
        if label is None:
            continue
        if "\n" in label or "\r" in label:
            # Arrow's CSV reader lets a quoted field run across a line end; we never accept that as a label.
            raise DataError(f"column '{column.name}': a value spans a line break (unbalanced quotes in the CSV?)")
        lookup[i] = positions.get(normalise_label(label), -1)
    codes = values.indices.fill_null(len(dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
    null = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    null_labels = [i for i, label in enumerate(dictionary) if label is None]
    if null_labels:
        null |= np.isin(codes, null_labels)
    mapped = lookup[codes]
    keep = mapped >= 0
    idx = np.maximum(mapped, 0)
    return _finish(idx, keep, null, column, len(column.values))
