"""The Hilbert-curve order of the cells of an r × c grid, for linearising a 2-D table (DAWA in 2-D, as in Li et al.
2014 and dpcomp_core).

The grid is embedded in the smallest 2^k × 2^k square holding it (k = ⌈log₂ max(r, c)⌉, 0 for a single cell);
the curve of order k visits every cell of the square, and the order kept is the curve's order restricted to the
cells inside the grid.  For a power-of-two square, consecutive cells of the order are 4-neighbours; for other
shapes the curve leaves the grid and comes back, so a few consecutive pairs are not adjacent.

Cell (i, j) (row i, column j) has flat index i·c + j (C order, as ``numpy.ravel``).  The orientation: the curve
starts at (0, 0) and, on the 2 × 2 square, visits (0, 0), (0, 1), (1, 1), (1, 0).  Everything here is a
function of the shape only (public); no data is read.
"""

from __future__ import annotations

import numpy as np

from ...errors import UsageError

__all__ = ["hilbert_index", "hilbert_order", "hilbert_rank"]


def hilbert_index(rows: np.ndarray, cols: np.ndarray, order: int) -> np.ndarray:
    """The position d (0 … 4^order − 1) of each cell (rows[i], cols[i]) on the Hilbert curve of the 2^order ×
    2^order square (int64 arrays of the same shape).  Vectorised: ``order`` passes over the arrays.

    At each scale s = 2^(order−1) … 1 the quadrant (bit s of the row, bit s of the column) adds
    s²·(quadrant rank) to d, then the coordinates are turned into the quadrant's own frame (a transpose in the
    first quadrant, an anti-transpose in the last), which is what makes the sub-curves join up."""
    x = np.array(rows, dtype=np.int64, copy=True)
    y = np.array(cols, dtype=np.int64, copy=True)
    if x.shape != y.shape:
        raise ValueError("rows and cols must have the same shape")
    d = np.zeros(x.shape, dtype=np.int64)
    side = np.int64(1) << order
    s = side >> 1
    while s > 0:
        rx = (x & s) > 0
        ry = (y & s) > 0
        d += s * s * ((3 * rx.astype(np.int64)) ^ ry.astype(np.int64))
        # quadrant frame: when ry = 0, reflect (if rx = 1) then swap the coordinates
        flip = ~ry & rx
        x = np.where(flip, side - 1 - x, x)
        y = np.where(flip, side - 1 - y, y)
        swap = ~ry
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        s >>= 1
    return d


def _order_of(shape: tuple[int, ...]) -> int:
    if len(shape) != 2 or any(int(n) < 1 for n in shape):
        raise UsageError(f"a Hilbert order needs a 2-D grid of at least one cell per axis (here {tuple(shape)})")
    return max(0, (max(int(n) for n in shape) - 1).bit_length())


def hilbert_order(shape: tuple[int, int]) -> np.ndarray:
    """The flat (C-order) indices of the r × c grid's cells in Hilbert order: ``counts.ravel()[hilbert_order(
    counts.shape)]`` is the table read along the curve.  A permutation of 0 … r·c − 1 (int64); O(r·c·log) time."""
    order = _order_of(tuple(shape))
    r, c = (int(n) for n in shape)
    rows, cols = np.divmod(np.arange(r * c, dtype=np.int64), c)
    # stable sort: the curve's positions are distinct, so the order is unique anyway
    return np.argsort(hilbert_index(rows, cols, order), kind="stable").astype(np.int64)


def hilbert_rank(shape: tuple[int, int]) -> np.ndarray:
    """The inverse permutation: entry f is the position along the curve (0 … r·c − 1) of the cell with flat
    index f, so ``linear[hilbert_rank(shape)].reshape(shape)`` puts a sequence read along the curve back on the
    grid."""
    perm = hilbert_order(shape)
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size, dtype=np.int64)
    return rank
