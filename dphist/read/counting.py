"""Rows to cells: the only step of the pipeline that reads individual records.

Each declared column maps a batch of values to a code along its axis: 0..n-1 for its cells, n for "not counted
here" (out of domain, unknown category, or null without a null cell).  Whole numbers and dates go through a
lookup table; real numbers through a lookup on an exact binary grid (or, where no small grid fits, arithmetic
checked against the published edges, or ``searchsorted``); categories through the batch's dictionary.  A
table's flat cell is the C-order combination of its codes in the extended shape (n1 + 1, n2 + 1, ...),
``numpy.bincount`` adds a batch into it, and the slices of "not counted" codes are cut off at the end.  One
row adds 1 to exactly one cell of each table it is kept in, which is what the add/remove sensitivity of every
algorithm assumes; how many threads count does not change the counts.
"""

from __future__ import annotations

import functools
import math
import os
import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .contribution import UnitBound, UnitIds, UnitRows, row_priorities, smallest_per_unit
from ..text import as_text, quoted
from ..errors import DataError
from ..privacy import BitSource
from ..declare.schema import CategoricalColumn, Column, DateColumn, NumericColumn, normalise_label

__all__ = ["TableShape", "Axis", "count_tables", "as_text", "inner_cells", "days_since_epoch"]


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
        """The number of cells, a Python int (exact: a product of sizes never wraps around as int64 would)."""
        return math.prod(self.shape)


def count_tables(
    batches: Iterable[pa.RecordBatch], tables: list[TableShape], where: str = "input",
    unit: UnitBound | None = None, bits: BitSource | None = None, workers: int | None = None,
    unit_rows: UnitRows | None = None,
) -> list[np.ndarray]:
    """Count every row of every batch into each table, in one pass.

    Returns one int64 array per table, of shape ``table.shape``.  Rows whose value is dropped by a column's
    policy (out of domain, unknown category, null) are left out of that table only.  ``where`` names the
    source in error messages.  With ``unit``, the batches also hold the unit column, and only the rows chosen by
    :func:`~dphist.read.contribution.bounded_rows` (at most ``unit.max_rows`` per unit, drawn with ``bits``) count:
    one unit then adds at most that many to each table.  ``unit_rows``, with ``unit``, is told every unit's rows
    (all of them, kept or not), for measuring what bounding dropped.

    ``workers`` threads count batches while the next ones are read (default: one per two cores, at most 4,
    since Arrow's decoding keeps the other cores busy; one worker counts in the reading thread); the counts do
    not depend on it.  Memory: one accumulator per table and worker, plus the batches in flight.
    """
    if unit is not None:
        return _count_units(batches, tables, where, unit, bits, unit_rows)
    workers = max(1, min((os.cpu_count() or 1) // 2, 4)) if workers is None else max(1, int(workers))
    counters = [_Counter(tables, where) for _ in range(workers)]
    if workers == 1:
        for batch in batches:
            counters[0].add(batch)
    else:
        _run_threads(batches, counters)
    totals = [sum(parts) for parts in zip(*(c.finish() for c in counters))]
    return [inner_cells(total, table) for total, table in zip(totals, tables)]


# ---- a table's cells in the extended space ------------------------------------------------------------------
#
# Each axis maps a value to a code in 0..n, where n (one past the axis's last cell) means "not counted here".
# A table is counted in the extended space of shape (n1 + 1, n2 + 1, ...): a row dropped on any axis lands in
# a slice that is cut off at the end.  So counting needs no masks at all: codes, a C-order combination, one
# bincount.


def _ext_shape(table: TableShape) -> tuple[int, ...]:
    return tuple(n + 1 for n in table.shape)


def inner_cells(ext_flat: np.ndarray, table: TableShape) -> np.ndarray:
    """The table's own cells (int64, of ``table.shape``) out of its counts in the extended space, a flat
    array of prod(n_i + 1) cells whose last index on each axis holds the rows not counted there."""
    inner = ext_flat.reshape(_ext_shape(table))[tuple(slice(0, n) for n in table.shape)]
    return np.ascontiguousarray(inner, dtype=np.int64)


def _flat_codes(table: TableShape, codes: dict[str, np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Each row's cell in the table's extended space (C order), in ``out`` if given (one-column tables
    return the column's codes themselves)."""
    names = [c.name for c in table.columns]
    ext = _ext_shape(table)
    if len(names) == 1:
        return codes[names[0]]
    first = codes[names[0]]
    flat = np.multiply(first, ext[1], out=None if out is None else out[:len(first)])
    for i, name in enumerate(names[1:], start=1):
        flat += codes[name]
        if i + 1 < len(names):
            flat *= ext[i + 1]
    return flat


class _Counter:
    """Accumulates batches into every table's extended counts (one instance, with its own axes and their
    buffers, per worker thread).

    An axis hands over each batch as cells and a lookup from cells to codes (see :meth:`Axis.cells`).  A
    one-column table whose lookup is small beside the batch is counted in cell space and turned into codes
    only when the lookup changes and at the end (no per-row lookup at all); a column used by one table only
    goes through a copy of its lookup already multiplied by its stride in that table (no per-row multiply); a
    column shared by several tables is turned into codes once per batch.
    """

    def __init__(self, tables: list[TableShape], where: str) -> None:
        self.tables, self.where = tables, where
        self.axes = {c.name: Axis(c) for t in tables for c in t.columns}
        uses: dict[str, int] = {}
        for t in tables:
            for c in t.columns:
                uses[c.name] = uses.get(c.name, 0) + 1
        self.shared = {name for name, n in uses.items() if n > 1}
        self.sizes = [math.prod(_ext_shape(t)) for t in tables]
        self.strides = [_strides(_ext_shape(t)) for t in tables]
        self.counts = [np.zeros(n, dtype=np.int64) for n in self.sizes]
        # A table much bigger than a batch is not bincounted per batch (that would touch every cell each
        # time): its cells are buffered until they are worth one bincount over the whole table.
        self.pending: list[list[np.ndarray]] = [[] for _ in tables]
        self.pending_rows = [0] * len(tables)
        # One-column tables counted in cell space: (lookup, counts per cell) while that lookup holds.
        self.by_cell: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(tables)
        self.folded: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # (table, axis) -> lookup, x stride
        self.flat = np.empty(0, dtype=np.intp)  # each row's cell, reused from batch to batch
        self.part = np.empty(0, dtype=np.intp)  # one axis's share of it

    def codes(self, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
        """Each column's codes for this batch (buffers of the axes, valid until the next batch)."""
        return {name: _codes(*cells) for name, cells in self.cells(batch).items()}

    def cells(self, batch: pa.RecordBatch) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """Each column's (cells, lookup) for this batch (see :meth:`Axis.cells`)."""
        out = {}
        for name, axis in self.axes.items():
            try:
                out[name] = axis.cells(batch.column(name))
            except DataError as exc:
                raise DataError(f"{quoted(self.where, '')}: {exc}") from None
        return out

    def add(self, batch: pa.RecordBatch) -> None:
        cells = self.cells(batch)
        rows = batch.num_rows
        if len(self.flat) < rows:
            self.flat, self.part = np.empty(rows, dtype=np.intp), np.empty(rows, dtype=np.intp)
        shared: dict[str, np.ndarray] = {}  # codes of the columns several tables use, made once
        for i, table in enumerate(self.tables):
            if len(table.columns) == 1:
                cell, lookup = cells[table.columns[0].name]
                if lookup is not None and len(lookup) <= max(rows // 2, 1 << 10):
                    self._add_by_cell(i, cell, lookup)
                    continue
                flat = _codes(cell, lookup, self.flat[:rows])
            else:
                flat = self._flat(i, table, cells, shared, rows)
            if self.sizes[i] <= max(rows // 2, 1 << 12):
                self.counts[i] += np.bincount(flat, minlength=self.sizes[i])
                continue
            self.pending[i].append(flat.astype(np.int32 if self.sizes[i] < 2**31 else np.int64))  # a copy
            self.pending_rows[i] += len(flat)
            if self.pending_rows[i] >= self.sizes[i]:
                self._flush(i)

    def _flat(self, i: int, table: TableShape, cells: dict, shared: dict, rows: int) -> np.ndarray:
        """Each row's cell of table ``i`` in its extended space (C order), in this counter's buffer."""
        flat, part = self.flat[:rows], self.part[:rows]
        for j, (column, stride) in enumerate(zip(table.columns, self.strides[i])):
            cell, lookup = cells[column.name]
            out = flat if j == 0 else part
            if lookup is not None and column.name not in self.shared:
                self._folded(i, j, lookup, stride).take(cell, out=out, mode="clip")  # code x stride, in one gather
            else:
                if lookup is not None:
                    if column.name not in shared:
                        shared[column.name] = _codes(cell, lookup)
                    cell = shared[column.name]
                if stride == 1 and j > 0:
                    out = cell
                else:
                    np.multiply(cell, stride, out=out)
            if j > 0:
                flat += out
        return flat

    def _folded(self, i: int, j: int, lookup: np.ndarray, stride: int) -> np.ndarray:
        """``lookup * stride``, kept while the axis hands over the same lookup (a categorical column's changes
        with the batch's dictionary)."""
        held = self.folded.get((i, j))
        if held is None or held[0] is not lookup:
            held = self.folded[(i, j)] = (lookup, lookup * stride)
        return held[1]

    def _add_by_cell(self, i: int, cell: np.ndarray, lookup: np.ndarray) -> None:
        held = self.by_cell[i]
        if held is None or held[0] is not lookup:
            self._settle(i)
            held = self.by_cell[i] = (lookup, np.zeros(len(lookup), dtype=np.int64))
        counts = held[1]
        counts += np.bincount(cell, minlength=len(lookup))

    def _settle(self, i: int) -> None:
        """Move table ``i``'s counts per cell into its counts per code."""
        held = self.by_cell[i]
        if held is not None:
            np.add.at(self.counts[i], held[0], held[1])
            self.by_cell[i] = None

    def _flush(self, i: int) -> None:
        if self.pending[i]:
            self.counts[i] += np.bincount(np.concatenate(self.pending[i]), minlength=self.sizes[i])
            self.pending[i], self.pending_rows[i] = [], 0

    def finish(self) -> list[np.ndarray]:
        for i in range(len(self.tables)):
            self._flush(i)
            self._settle(i)
        return self.counts


def _strides(ext: tuple[int, ...]) -> list[int]:
    """C-order strides, in cells, of an array of shape ``ext``."""
    return [math.prod(ext[k + 1:]) for k in range(len(ext))]


def _codes(cells: np.ndarray, lookup: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    """Codes (intp) from an axis's cells and lookup: the cells themselves where there is no lookup."""
    if lookup is None:
        return cells
    return lookup.take(cells, out=out, mode="clip")


def _run_threads(batches: Iterable[pa.RecordBatch], counters: list[_Counter]) -> None:
    """Read batches in this thread and count them in one thread per counter; the first error wins."""
    jobs: queue.Queue = queue.Queue(maxsize=2 * len(counters))
    errors: list[BaseException] = []

    def work(counter: _Counter) -> None:
        while (batch := jobs.get()) is not None:
            if errors:
                continue  # drain: the reader stops at its next batch
            try:
                counter.add(batch)
            except BaseException as exc:  # re-raised in the reading thread
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in counters]
    for t in threads:
        t.start()
    try:
        for batch in batches:
            if errors:
                break
            jobs.put(batch)
    finally:
        for _ in threads:
            jobs.put(None)
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def _count_units(batches, tables, where, unit, bits, unit_rows=None) -> list[np.ndarray]:
    """Counting with a privacy unit: each row draws a random priority, and of each unit's rows the
    ``unit.max_rows`` with the smallest priorities count -- exactly :func:`~dphist.read.contribution.bounded_rows`
    over all the rows, kept as a running selection so that memory holds the rows still in the running (at
    most K per unit) rather than every row."""
    counter = _Counter(tables, where)
    ids = UnitIds()
    held = _UnitSelection(unit.max_rows)
    for batch in batches:
        units = ids.encode(batch.column(unit.column))
        if unit_rows is not None:
            unit_rows.add(units)
        codes = counter.codes(batch)
        cells = [_flat_codes(table, codes).astype(np.int32 if size < 2**31 else np.int64)  # copies
                 for table, size in zip(tables, counter.sizes)]
        held.add(units, row_priorities(bits, len(units)), cells)
    kept = held.finish(len(tables))
    return [inner_cells(np.bincount(cells, minlength=size), table)
            for table, size, cells in zip(tables, counter.sizes, kept)]


class _UnitSelection:
    """The rows with the K smallest (priority, arrival) of each unit seen so far.

    Rows are buffered and merged into the selection when the buffer is as big as the selection (or 1M rows),
    so each row is sorted O(log n) times in all, and memory stays within about twice the selection.
    """

    BUFFER = 1 << 20  # rows buffered at least before a merge

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self.parts: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []
        self.selected = self.pending = 0

    def add(self, units: np.ndarray, priority: np.ndarray, cells: list[np.ndarray]) -> None:
        self.parts.append((units, priority, cells))
        self.pending += len(units)
        if self.pending >= max(self.selected, self.BUFFER):
            self._merge()

    def _merge(self) -> None:
        if not self.parts:
            return
        units = np.concatenate([p[0] for p in self.parts])
        priority = np.concatenate([p[1] for p in self.parts])
        cells = [np.concatenate(c) for c in zip(*(p[2] for p in self.parts))]
        # Earlier rows come first in the buffer (the selection is kept in its own order), so ties still go to
        # the earlier row.
        chosen = smallest_per_unit(units, priority, self.max_rows)
        self.parts = [(units[chosen], priority[chosen], [c[chosen] for c in cells])]
        self.selected, self.pending = len(chosen), 0

    def finish(self, n_tables: int) -> list[np.ndarray]:
        """Each table's cells of the chosen rows."""
        self._merge()
        return self.parts[0][2] if self.parts else [np.zeros(0, np.int64) for _ in range(n_tables)]


# ---- axes: values to codes ---------------------------------------------------------------------------------

_LUT_MAX = 1 << 20  # the widest range of whole numbers mapped through a lookup table


class Axis:
    """One column, prepared once per counting pass and worker: ``codes(values)`` maps a batch's values to
    codes in ``0..n_cells``, where ``n_cells`` means the row is not counted (dropped by the column's policy);
    ``cells(values)`` gives the same codes in two steps, cells and a lookup from cells to codes, so that
    counting can fold its own arithmetic into the lookup or count cells before codes.

    The returned array is this axis's own buffer, overwritten by the next call.  Reusing buffers matters:
    fresh megabyte-sized temporaries for every batch cost more in page faults than the arithmetic.
    """

    def __init__(self, column: Column) -> None:
        self.column = column
        self.drop = column.n_cells
        self._scratch: dict[str, np.ndarray] = {}
        if isinstance(column, CategoricalColumn):
            self.null_code = len(column.values) if column.null_cell else self.drop
            self.positions = {label: i for i, label in enumerate(column.values)}
            self._cached: tuple[pa.Array, np.ndarray] | None = None
            return
        edges = np.asarray(column.edges, dtype=np.float64)
        bins = len(edges) - 1
        self.null_code = bins if column.null_cell else self.drop
        self.edges, self.bins = edges, bins
        self.lower, self.upper = float(edges[0]), float(edges[-1])
        clamp = column.out_of_domain != "drop"
        # Position p of a value: 0 below the domain, k for bin k - 1, bins + 1 at or above its upper end (and
        # bins + 2, the same, for +inf, which the correction below moves up once more).
        above = bins - 1 if clamp else self.drop
        self.position_code = np.array([0 if clamp else self.drop, *range(bins), above, above], dtype=np.intp)
        # bounds[p] <= v < bounds[p + 1] for a value at position p.  (No NaN here: comparing with NaN is slow.)
        self.bounds = np.concatenate([[-np.inf], edges, [np.inf]])
        self.scale = bins / (self.upper - self.lower)
        # Arithmetic is off by at most one position only while its rounding error (a few ulps of the largest
        # |edge| * scale) is far below one bin; a domain far from 0 for its width is searched instead.
        self.equal_width = (isinstance(column, NumericColumn) and column.equal_width
                            and max(abs(self.lower), abs(self.upper)) * self.scale < 2.0**40)
        # Whole numbers in [base, top] go through a table: exact, and cheaper than arithmetic.  (Only where
        # every whole number there is a double: past 2^53 the table's own float steps would merge values.)
        self.base, self.top = int(np.floor(self.lower)) - 1, int(np.ceil(self.upper))
        self.whole_lookup = None
        if self.top - self.base <= _LUT_MAX and max(abs(self.base), abs(self.top)) < 2**53:
            whole = np.arange(self.base, self.top + 1, dtype=np.float64)
            self.whole_lookup = self.position_code[np.searchsorted(edges, whole, side="right")]
            # ... and one more entry, past top, for nulls
            self.whole_lookup = np.append(self.whole_lookup, self.null_code).astype(np.intp)
        self._grid: _FineGrid | None | bool = False  # built on first use (whole numbers rarely need it)

    def _buffer(self, key: str, n: int, dtype) -> np.ndarray:
        buf = self._scratch.get(key)
        if buf is None or len(buf) < n:
            buf = self._scratch[key] = np.empty(n, dtype=dtype)
        return buf[:n]

    def codes(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Each value's code (intp, one per value; this axis's buffer)."""
        cells, lookup = self.cells(values)
        if lookup is None:
            return cells
        return lookup.take(cells, out=self._buffer("codes", len(cells), np.intp), mode="clip")

    def cells(self, values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(cells, lookup)``: the codes are ``lookup[cells]`` (cells, int32 or intp, always index the lookup,
        an intp array), or ``cells`` themselves where the lookup is None.  Both stay valid until the next call
        (a lookup that does not change between batches is the same object each time)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        column = self.column
        if isinstance(column, CategoricalColumn):
            return self._categorical(values)
        if isinstance(column, DateColumn):
            return self._whole_or_real(_date_days(column, values))
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return self._whole_or_real(values)

    # numbers and dates

    def _whole_or_real(self, values: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
        typ = values.type
        whole = (pa.types.is_signed_integer(typ) or typ in (pa.uint8(), pa.uint16(), pa.uint32())
                 or pa.types.is_date32(typ))
        if whole and self.whole_lookup is not None:
            return self._whole(values), self.whole_lookup
        if not pa.types.is_floating(typ):
            values = pc.cast(values.cast(pa.int32()) if pa.types.is_date32(typ) else values, pa.float64(),
                             safe=False)
        return self._real(values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))

    def _whole(self, values: pa.Array) -> np.ndarray:
        """Cells of whole numbers in ``whole_lookup``: the value less ``base`` (clipped), nulls past ``top``."""
        if pa.types.is_date32(values.type):
            values = values.cast(pa.int32())
        nulls = values.null_count
        v = (values.fill_null(0) if nulls else values).to_numpy(zero_copy_only=False)
        n = len(v)
        cells = np.clip(v, self.base, self.top, out=self._buffer("whole", n, np.int64), casting="unsafe")
        cells -= self.base
        if nulls:
            cells[values.is_null().to_numpy(zero_copy_only=False)] = len(self.whole_lookup) - 1
        return cells

    def _real(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        n = len(v)
        # NaN (Arrow's nulls arrive as NaN) is missing, never compared.  A finite sum rules NaN out in one pass.
        with np.errstate(invalid="ignore", over="ignore"):
            nan = None if np.isfinite(v.sum()) else np.isnan(v)
            if nan is not None and not nan.any():
                nan = None
            if self._grid is False:
                self._grid = _FineGrid.build(self.edges, self.position_code, self.drop)
                # The grid's lookup and, past its last cell, the null code (the grid is shared; this is not).
                self._grid_lookup = None if self._grid is None else np.append(self._grid.lookup, self.null_code)
            grid = self._grid
            if grid is not None and not grid.cut:
                cells = grid.cells(v, self)
                if nan is not None:
                    cells[nan] = len(grid.lookup)
                return cells, self._grid_lookup
            if grid is not None:
                codes = grid.codes(v, self)
            else:
                codes = self.position_code.take(self._positions(v), out=self._buffer("codes", n, np.intp),
                                                mode="clip")
        if nan is not None:
            codes[nan] = self.null_code
        return codes, None

    def _positions(self, v: np.ndarray) -> np.ndarray:
        """Each value's position (see ``position_code``); NaN lands anywhere in 0..bins + 2."""
        n = len(v)
        p = self._buffer("position", n, np.intp)
        if not self.equal_width:
            p[...] = np.searchsorted(self.edges, v, side="right")
            return p
        t = np.multiply(v, self.scale, out=self._buffer("real", n, np.float64))
        t += 1.0 - self.lower * self.scale
        np.clip(t, 0, self.bins + 1, out=t)
        p[...] = t  # truncation, which is floor here: t >= 0 (NaN gives some position, overwritten later)
        # Float rounding can put a value one position off near an edge; the published edges decide.
        # (p stays within 0..bins + 2 throughout, so the gathers need no bounds checks.)
        bound, off = t, self._buffer("off", n, np.bool_)  # t is free again: reuse it for the bounds
        np.less(v, self.bounds.take(p, out=bound, mode="clip"), out=off)
        p -= off
        p += 1
        np.greater_equal(v, self.bounds.take(p, out=bound, mode="clip"), out=off)
        p -= 1
        p += off
        return p

    # categories

    def _categorical(self, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Cells: the dictionary's indices (Arrow's own buffer, as a rule), nulls at the lookup's last entry."""
        values = as_text(values)
        if not pa.types.is_dictionary(values.type):
            values = pc.dictionary_encode(values)
        lookup = self._dictionary_lookup(values.dictionary)
        indices = values.indices
        if indices.null_count:
            indices = indices.fill_null(len(lookup) - 1)
        return indices.to_numpy(zero_copy_only=False), lookup

    def _dictionary_lookup(self, dictionary: pa.Array) -> np.ndarray:
        """Code of each dictionary entry, plus a last entry for null indices (cached while the dictionary
        repeats, as it does across the batches of a Parquet row group)."""
        if self._cached is not None and self._cached[0].equals(dictionary):
            return self._cached[1]
        lookup = np.full(len(dictionary) + 1, self.drop, dtype=np.intp)
        for i, label in enumerate(dictionary.to_pylist()):
            if label is None:
                lookup[i] = self.null_code
                continue
            if "\n" in label or "\r" in label:
                # Arrow's CSV reader lets a quoted field run across a line end; we never accept that as a label.
                raise DataError(f"column {quoted(self.column.name)}: a value spans a line break (unbalanced quotes in "
                                "the CSV?)")
            lookup[i] = self.positions.get(normalise_label(label), self.drop)
        lookup[-1] = self.null_code
        self._cached = (dictionary, lookup)
        return lookup


class _FineGrid:
    """Codes of real numbers through a lookup table over a grid of cells [j / s, (j + 1) / s), s a power of two.

    ``floor(v * s)`` is exact in binary floating point (multiplying by a power of two only changes the
    exponent), so a value's grid cell is never off by one, unlike arithmetic on the bin width.  A grid cell
    with no edge strictly inside lies in one bin, and the table gives its code; the few cells an edge cuts
    (none when the edges are multiples of 1 / s) are marked, and their values are looked up among the edges.
    Exact for every value, and about twice as fast as arithmetic checked against the edges.

    With an edge at 0 and s < 1, a tiny negative value times s would round to -0.0 and floor into cell 0, past
    the edge; such a grid takes ``floor(v)`` instead (exact too) and divides by 2^shift = 1 / s in integers,
    which floors as well.
    """

    TARGET = 1 << 16  # grid cells over the domain when the edges are not on a coarser grid (fits in cache)
    LIMIT = 1 << 18  # the most cells a grid may have

    def __init__(self, scale: float, first: int, lookup: np.ndarray, marked: int, shift: int = 0) -> None:
        self.scale, self.first, self.last, self.shift = scale, first, first + len(lookup) - 1, shift
        self.lookup, self.marked = lookup, marked
        self.cut = bool(np.any(lookup == marked))  # whether any cell needs a search among the edges
        # The clip bounds, in units of 1 / (scale * 2^shift): whole numbers, exact in a double.
        self.low, self.high = float(first << shift), float(((self.last + 1) << shift) - 1)
        self.cell_type = np.int32 if self.high - self.low < 2**31 else np.int64

    @classmethod
    def build(cls, edges: np.ndarray, position_code: np.ndarray, drop: int) -> _FineGrid | None:
        """A grid for these edges, or None where none is both small and exact."""
        return _grid_for(tuple(edges), tuple(position_code), drop)

    def cells(self, v: np.ndarray, axis: Axis) -> np.ndarray:
        """Each value's grid cell less ``first`` (0..last - first; this axis's buffer; NaN gives any cell).
        Five passes over the values, each a vectorised loop (the cast goes to int32 where it fits, which
        is several times cheaper than to int64)."""
        n = len(v)
        u = axis._buffer("real", n, np.float64)
        if self.scale == 1.0:
            np.clip(v, self.low, self.high, out=u)
        else:
            np.multiply(v, self.scale, out=u)
            np.clip(u, self.low, self.high, out=u)
        np.floor(u, out=u)
        u -= self.low  # exact: whole numbers below 2^53
        cells = axis._buffer("cells", n, self.cell_type)
        cells[...] = u
        if self.shift:
            cells >>= self.shift  # floor division by 2^shift: cells are >= 0
        return cells

    def codes(self, v: np.ndarray, axis: Axis) -> np.ndarray:
        """Each value's code (intp; this axis's buffer; NaN gives any code), the cut cells' values searched."""
        codes = self.lookup.take(self.cells(v, axis), out=axis._buffer("codes", len(v), np.intp), mode="clip")
        if self.cut and codes.max(initial=0) == self.marked:
            cut = np.flatnonzero(codes == self.marked)
            codes[cut] = axis.position_code[np.searchsorted(axis.edges, v[cut], side="right")]
        return codes


@functools.lru_cache(maxsize=64)
def _grid_for(edges_: tuple[float, ...], position_code: tuple[int, ...], drop: int) -> _FineGrid | None:
    edges = np.asarray(edges_, dtype=np.float64)
    lower, upper = float(edges[0]), float(edges[-1])
    span = upper - lower
    if not np.isfinite(span) or span <= 0:
        return None
    k_max = int(np.floor(np.log2(_FineGrid.TARGET / span)))
    k = k_max
    for coarser in range(k_max - 40, k_max + 1):
        scaled = np.ldexp(edges, coarser)
        if np.all(np.floor(scaled) == scaled):
            k = coarser  # every edge on this grid: no cell is cut
            break
    scaled = np.ldexp(edges, k)  # exact
    first, last = int(np.floor(scaled[0])) - 1, int(np.ceil(scaled[-1])) + 1
    # A grid coarser than 1 (s < 1) can round a tiny negative product to -0.0, which floors to cell 0:
    # harmless unless an edge is that close to 0, where it would cross a bin.  There the grid floors v itself
    # and shifts (see the class); where v's whole part is too long for that, it stays at s = 1.
    shift = 0
    if k < 0 and np.any(np.abs(edges) < 2.0**-1021):
        shift = -k
        if max(abs(first), abs(last) + 1) << shift >= 2**52:
            return _grid_at(scaled_edges=edges, k=0, position_code=position_code, drop=drop)
    return _grid_at(np.ldexp(edges, k), k, position_code, drop, shift)


def _grid_at(scaled_edges: np.ndarray, k: int, position_code: tuple[int, ...], drop: int,
             shift: int = 0) -> _FineGrid | None:
    """The grid of cells of width 2^-k (``scaled_edges`` = edges * 2^k, exact), or None if too big or cutting
    too many cells."""
    scaled = scaled_edges
    first, last = int(np.floor(scaled[0])) - 1, int(np.ceil(scaled[-1])) + 1
    size = last - first + 1
    if size > _FineGrid.LIMIT or max(abs(first), abs(last)) >= 2**52:
        return None
    # Cell j = [j / s, (j + 1) / s) is past edge e from cell ceil(e * s) on; a cell is cut by an edge strictly
    # inside it, which happens in cell floor(e * s) when e * s is not whole.
    past = np.cumsum(np.bincount((np.ceil(scaled) - first).astype(np.intp), minlength=size)[:size])
    lookup = np.asarray(position_code, dtype=np.intp)[past]
    inside = scaled != np.floor(scaled)
    cut = (np.floor(scaled[inside]) - first).astype(np.intp)
    if len(cut) > size // 8:
        return None
    marked = drop + 1
    lookup[cut] = marked
    scale = 1.0 if shift else float(np.ldexp(1.0, k))
    return _FineGrid(scale, first, lookup, marked, shift)


def _date_days(column: DateColumn, values: pa.Array) -> pa.Array:
    """Dates as days since 1970-01-01 (date32 or int64; see :func:`days_since_epoch`)."""
    try:
        return days_since_epoch(values)
    except ValueError:
        raise DataError(f"column {quoted(column.name)}: a value is not a date YYYY-MM-DD (declared date)") from None


#: An ISO 8601 date and time with a zone (Z or an offset from -12:00 to +14:00); group 1 is the date and time
#: as written, without the zone.
_ZONED = (r"^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}(?::\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?)\s*"
          r"(?:[Zz]|[+-](?:0\d|1[0-4])(?::?[0-5]\d)?)$")
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def days_since_epoch(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The calendar day of each value, as days since 1970-01-01: date32 values as they are, anything else as
    int64 (nulls stay null).  Exact for every representable date and timestamp, however far from 1970 (integer
    floor division, never a wrapping cast).

    * timestamps: the day of their wall-clock time (a zoned timestamp in its own zone);
    * text: ISO 8601 ``YYYY-MM-DD``, optionally with a time ``THH:MM[:SS[.fff]]``; a time with a zone (``Z``,
      ``+05:00``) counts as the date *as written*, the calendar date where it was recorded
      (2024-03-01T23:30:00-05:00 is 2024-03-01, not the UTC date 2024-03-02);
    * dictionary-encoded values: their dictionary converted once.

    Raises ValueError if a text value is not such a date (or the type is not a date, timestamp or text).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    typ = values.type
    if pa.types.is_dictionary(typ):
        days = days_since_epoch(values.dictionary)
        return days.take(values.indices)  # null indices give nulls
    if pa.types.is_date32(typ):
        return values
    if pa.types.is_null(typ):
        return values.cast(pa.date32())
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        text = pc.replace_substring_regex(pc.utf8_trim_whitespace(values), _ZONED, r"\1")
        try:
            values = pc.cast(text, pa.timestamp("us"))  # 'us' holds years 0001-9999 and fractional seconds
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ValueError("not a date") from None
        typ = values.type
    if pa.types.is_date64(typ):
        values, typ = values.cast(pa.int64()).cast(pa.timestamp("ms")), pa.timestamp("ms")
    if not pa.types.is_timestamp(typ):
        raise ValueError(f"not a date type: {typ}")
    if typ.tz is not None:
        values = pc.local_timestamp(values)  # the wall clock in its zone: the date it was recorded on
    ticks = values.cast(pa.int64())
    nulls = ticks.null_count
    raw = (ticks.fill_null(0) if nulls else ticks).to_numpy(zero_copy_only=False)
    days = np.floor_divide(raw, _PER_DAY[typ.unit])
    mask = ticks.is_null().to_numpy(zero_copy_only=False) if nulls else None
    return pa.array(days, type=pa.int64(), mask=mask)


