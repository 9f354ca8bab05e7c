"""Contribution bounding: at most K rows of each privacy unit reach the counts (algorithms.md §1.4, last row).

When one person (patient, household, account) can own many rows, "one record" is the wrong privacy unit.  With
``--privacy-unit COLUMN --max-rows-per-unit K`` the rows are grouped by COLUMN, and of each unit's rows K are
kept, chosen uniformly at random by a random priority per row that does not depend on any value.  A unit then
changes every table by at most K rows, so an algorithm that is ε'-DP for one row is Kε'-DP for one unit (group
privacy), and a release aimed at ε per unit runs its algorithms at ε / K.  ``--group-size c`` protects groups
of c units the same way: ε / (K·c) per row.  Rows whose unit is missing cannot be bounded and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .noise import BitSource

__all__ = ["UnitColumn", "UnitBound", "UnitIds", "bounded_rows"]


@dataclass(frozen=True)
class UnitColumn:
    """The privacy-unit column as the reader sees it: any values, read as text labels (never binned)."""

    name: str
    kind: str = "categorical"


@dataclass(frozen=True)
class UnitBound:
    """Keep at most ``max_rows`` rows per value of ``column``."""

    column: str
    max_rows: int


class UnitIds:
    """Dense integer ids for unit values, consistent across batches (-1 for a missing unit)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def encode(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        from .counting import as_text  # (counting imports this module)

        values = as_text(values)
        if not pa.types.is_dictionary(values.type):
            values = pc.dictionary_encode(values)
        ids = self._ids
        lookup = np.array([-1 if v is None else ids.setdefault(v, len(ids)) for v in values.dictionary.to_pylist()]
                          + [-1], dtype=np.int64)
        codes = values.indices.fill_null(len(values.dictionary)).to_numpy(zero_copy_only=False)
        return lookup[codes.astype(np.int64)]

    def labels(self) -> list[str]:
        """Every value seen, in id order."""
        return list(self._ids)


def bounded_rows(units: np.ndarray, max_rows: int, bits: BitSource) -> np.ndarray:
    """A mask keeping, of each unit's rows, the ``max_rows`` with the smallest random priorities (a uniform
    choice of K rows per unit, independent of the rows' values); rows with unit -1 are dropped."""
    n = units.size
    words = bits.words(2 * n).astype(np.uint64)
    priority = (words[0::2] << np.uint64(32)) | words[1::2]
    order = np.lexsort((priority, units))
    grouped = units[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if n else np.array([], dtype=np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, n]))
    keep = np.empty(n, dtype=bool)
    keep[order] = (np.arange(n) - first < max_rows) & (grouped >= 0)
    return keep
