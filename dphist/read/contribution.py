"""Contribution bounding: at most K rows of each privacy unit reach the counts (docs/algorithms.md §1.4, last row).

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

from ..privacy import BitSource
from ..text import as_text

__all__ = ["UnitColumn", "UnitBound", "UnitIds", "UnitRows", "bounded_rows", "row_priorities", "smallest_per_unit"]


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


class UnitRows:
    """How many rows each unit has in the input, all of them (before bounding), added up batch by batch from the
    dense ids of :class:`UnitIds`; rows with no unit (id -1) are not counted.  The true figures are private: they
    leave the counting pass only as the two clipped sums of :meth:`kept_and_excess`, which are measured with noise
    (docs/privacy.md §6)."""

    def __init__(self) -> None:
        self._rows = np.zeros(0, dtype=np.int64)

    def add(self, units: np.ndarray) -> None:
        """Count one batch's rows (``units``: their ids, -1 for a missing unit)."""
        counts = np.bincount(units[units >= 0], minlength=self._rows.size)
        if counts.size > self._rows.size:
            counts[:self._rows.size] += self._rows
            self._rows = counts
        else:
            self._rows += counts

    def kept_and_excess(self, max_rows: int, clip: int) -> tuple[int, int]:
        """(Σ_u min(rows_u, K), Σ_u min(max(rows_u − K, 0), C)) for K = ``max_rows`` and C = ``clip``: the rows
        bounding keeps, and the rows it drops with each unit's share counted up to C.  One unit moves the first by
        at most K and the second by at most C (and both together by at most K + C, as a unit over the cap adds K
        to the first)."""
        rows = self._rows
        return (int(np.minimum(rows, max_rows).sum()),
                int(np.minimum(np.maximum(rows - max_rows, 0), clip).sum()))


def bounded_rows(units: np.ndarray, max_rows: int, bits: BitSource) -> np.ndarray:
    """A mask keeping, of each unit's rows, the ``max_rows`` with the smallest random priorities (a uniform
    choice of K rows per unit, independent of the rows' values); rows with unit -1 are dropped."""
    keep = np.zeros(units.size, dtype=bool)
    keep[smallest_per_unit(units, row_priorities(bits, units.size), max_rows)] = True
    return keep


def row_priorities(bits: BitSource, n: int) -> np.ndarray:
    """One uniform 64-bit priority per row (uint64), drawn in row order: drawing a batch at a time gives the
    same priorities as drawing all rows at once."""
    words = bits.words(2 * n).astype(np.uint64)
    return (words[0::2] << np.uint64(32)) | words[1::2]


def smallest_per_unit(units: np.ndarray, priority: np.ndarray, max_rows: int) -> np.ndarray:
    """Positions of each unit's ``max_rows`` rows with the smallest (priority, position), grouped by unit and
    in that order within a unit; rows with a negative unit are never chosen."""
    n = units.size
    order = np.lexsort((priority, units))  # stable: equal priorities go to the earlier row
    grouped = units[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if n else np.zeros(0, dtype=np.int64)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    return order[(rank < max_rows) & (grouped >= 0)]
