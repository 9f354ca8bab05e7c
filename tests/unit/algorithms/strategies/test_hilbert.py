"""The Hilbert order of a grid's cells (dphist/algorithms/strategies/hilbert.py): permutation, adjacency, known small orders,
speed, bad shapes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dphist.algorithms.strategies.hilbert import hilbert_index, hilbert_order, hilbert_rank
from dphist.errors import UsageError


def _cells(shape):
    return [divmod(int(f), shape[1]) for f in hilbert_order(shape)]


def test_known_small_orders():
    """Hand-derived: the order-1 curve is the U (0,0) (0,1) (1,1) (1,0); the order-2 curve is four U's, the
    first transposed and the last anti-transposed so that they join."""
    assert _cells((1, 1)) == [(0, 0)]
    assert _cells((2, 2)) == [(0, 0), (0, 1), (1, 1), (1, 0)]
    assert _cells((4, 4)) == [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2), (0, 3), (1, 3), (1, 2),
                              (2, 2), (2, 3), (3, 3), (3, 2), (3, 1), (2, 1), (2, 0), (3, 0)]


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (5, 3), (4, 4), (17, 9), (64, 64),
                                   (100, 3), (256, 256)])
def test_is_a_permutation_and_rank_inverts_it(shape):
    order = hilbert_order(shape)
    n = shape[0] * shape[1]
    assert order.dtype == np.int64 and order.shape == (n,)
    assert np.array_equal(np.sort(order), np.arange(n))
    rank = hilbert_rank(shape)
    assert np.array_equal(rank[order], np.arange(n)) and np.array_equal(order[rank], np.arange(n))
    table = np.arange(n).reshape(shape) * 3 + 1
    assert np.array_equal(table.ravel()[order][rank].reshape(shape), table)


@pytest.mark.parametrize("side", [2, 4, 8, 32, 256])
def test_consecutive_cells_are_neighbours_on_power_of_two_squares(side):
    rows, cols = np.divmod(hilbert_order((side, side)), side)
    steps = np.abs(np.diff(rows)) + np.abs(np.diff(cols))
    assert np.all(steps == 1)
    assert (rows[0], cols[0]) == (0, 0)


def test_other_shapes_keep_the_square_curve_order():
    """A non-square grid keeps the order of its embedding square's curve: the same relative order as the
    positions on the 2^k curve, and for a grid that fits in a half of the square most steps are still
    adjacent."""
    shape = (5, 7)
    rows, cols = np.divmod(hilbert_order(shape), shape[1])
    d = hilbert_index(rows, cols, 3)
    assert np.all(np.diff(d) > 0)
    square = hilbert_order((8, 8))
    inside = [f for f in square.tolist() if f // 8 < 5 and f % 8 < 7]
    assert [r * 7 + c for r, c in (divmod(f, 8) for f in inside)] == hilbert_order(shape).tolist()


def test_speed_at_65536_cells():
    hilbert_order((256, 256))
    best = min(_time(lambda: hilbert_order((256, 256))) for _ in range(3))
    assert best < 0.25  # a few ms measured (6 ms); the bound only catches a per-cell Python loop


def _time(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


@pytest.mark.parametrize("shape", [(4,), (2, 2, 2), (0, 3), (3, 0)])
def test_bad_shapes(shape):
    with pytest.raises(UsageError, match="2-D grid"):
        hilbert_order(shape)
