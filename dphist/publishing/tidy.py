"""Released tables in tidy form: one row per cell in C order, the columns' labels, then the value columns.

A release of 2^24 cells is a table of 16M rows.  :class:`TidyTable` keeps only the value arrays and builds its
rows a chunk at a time, so writers stream it (Parquet row groups, CSV and JSON text) without ever holding a
full-size label column or a second copy of the table; a whole DataFrame is built only when asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["TidyTable", "Tables", "CHUNK_ROWS"]

#: Rows per chunk when a table is streamed (Parquet row group size, pyarrow's default too).
CHUNK_ROWS = 1 << 20


class TidyTable:
    """A table over ``columns`` (schema column objects), one row per cell in C order: each column's labels
    (``column.labels()``), then ``values``: name -> an array with one entry per cell (any shape), or a function
    ``(start, stop) -> array`` giving the entries of those cells (a column computed chunk by chunk).

    Holds the value arrays (flattened views) and each column's few labels; rows are made on demand.
    """

    def __init__(self, columns: list, values: dict[str, np.ndarray]) -> None:
        sizes = [c.n_cells for c in columns]
        self.n_rows = int(np.prod(sizes, dtype=np.int64))
        self._labels: list[tuple[str, Any, int, int]] = []  # (name, the axis's labels, stride, axis size)
        stride = self.n_rows
        for column, size in zip(columns, sizes):
            stride //= size
            for label, labels in column.labels().items():
                # The label type is inferred once on the axis's few labels (nullable ints/floats, strings).
                self._labels.append((label, pd.array(labels), stride, size))
        self.values = {name: array if callable(array) else np.asarray(array).ravel() for name, array in values.items()}
        for name, array in self.values.items():
            if not callable(array) and array.size != self.n_rows:
                raise ValueError(f"column {name}: {array.size} values for {self.n_rows} cells")

    def __len__(self) -> int:
        return self.n_rows

    @property
    def column_names(self) -> list[str]:
        return [name for name, *_ in self._labels] + list(self.values)

    def rows(self, start: int, stop: int) -> pd.DataFrame:
        """Rows ``start`` to ``stop`` (exclusive) as a DataFrame with a fresh RangeIndex."""
        stop = min(stop, self.n_rows)
        flat = np.arange(start, max(stop, start))
        data: dict[str, Any] = {}
        for name, labels, stride, size in self._labels:
            data[name] = labels.take((flat // stride) % size)
        for name, array in self.values.items():
            data[name] = array(start, stop) if callable(array) else array[start:stop]
        return pd.DataFrame(data, copy=False)

    def column(self, name: str) -> np.ndarray:
        """The value column ``name``, whole (flat)."""
        array = self.values[name]
        return array(0, self.n_rows) if callable(array) else array

    def frame(self) -> pd.DataFrame:
        """The whole table as one DataFrame."""
        return self.rows(0, self.n_rows)

    def chunks(self, rows: int | None = None) -> Iterator[pd.DataFrame]:
        """The table as consecutive DataFrames of at most ``rows`` (default CHUNK_ROWS) rows: at least one,
        empty for no cells."""
        rows = rows or CHUNK_ROWS
        yield self.rows(0, min(rows, self.n_rows))
        for start in range(rows, self.n_rows, rows):
            yield self.rows(start, start + rows)

    def prototype(self) -> pd.DataFrame:
        """No rows, the table's columns and dtypes (the column types of a file written in chunks)."""
        return self.rows(0, 0)


class Tables(Mapping):
    """Table name -> tidy DataFrame, each built on first access; ``source(name)`` gives what the writers
    stream (a :class:`TidyTable`, or a DataFrame for a table made whole)."""

    def __init__(self, tables: Mapping[str, TidyTable | pd.DataFrame]) -> None:
        self._sources = dict(tables)
        self._frames: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._frames:
            source = self._sources[name]
            self._frames[name] = source.frame() if isinstance(source, TidyTable) else source
        return self._frames[name]

    def __iter__(self):
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    def source(self, name: str) -> TidyTable | pd.DataFrame:
        return self._sources[name]

    def __repr__(self) -> str:
        return f"Tables({', '.join(f'{n}: {len(s)} rows' for n, s in self._sources.items())})"
