"""Public tree structures over the cells of a table: hierarchies of nested partitions.

A :class:`Tree` is a list of levels (:class:`GridTree` for products of ranges, :class:`LabelTree` for any other
nested partitions).  Level 0 is the root (one node holding every cell); the last level holds one
node per cell, in the table's flat (C-order) cell order; every node of level l+1 lies inside exactly one node of
level l, its parent.  Because every level partitions the cells, one record adds 1 to exactly one node per level:
measuring k levels has L1 sensitivity k, or 1 per level.

A node that cannot be split further (a single cell above the last level) simply continues as the only child of
itself on the next level.  This keeps every level a full partition without padding the domain, and the repeated
measurements of such a node are ordinary measurements that the least-squares step combines.

Trees depend only on the table's shape and public parameters (branching), never on the counts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Tree", "GridTree", "LabelTree", "SiblingGroups", "GridGroups", "range_boundaries", "range_tree", "product_tree", "height_for"]


@dataclass(frozen=True, eq=False)
class Tree:
    """Nested partitions of the cells of a table of ``shape``.

    ``sizes[l]`` is the number of nodes on level l; ``parents[l]`` (l >= 1) maps each node of level l to its
    node on level l-1 (``parents[0]`` is empty).  ``labels(l)`` gives, for every flat cell, its node on level l.
    """

    shape: tuple[int, ...]
    sizes: tuple[int, ...]
    parents: tuple[np.ndarray, ...]

    @property
    def levels(self) -> int:
        return len(self.sizes)

    @property
    def n_cells(self) -> int:
        return self.sizes[-1]

    def labels(self, level: int) -> np.ndarray:
        raise NotImplementedError

    def level_sums(self, counts: np.ndarray) -> list[np.ndarray]:
        """The sum over every node, level by level.  Integer counts give exact int64 sums (below 2**53)."""
        flat = np.asarray(counts).ravel()
        integer = np.issubdtype(flat.dtype, np.integer)
        # Bottom-up: each level adds up the level below by sibling group, O(nodes) per level.  (Float counts are
        # not copied: the last level may share memory with ``counts``; integer ones stay as given.)
        sums = [flat.astype(np.int64, copy=False) if integer else np.asarray(flat, dtype=np.float64)]
        for level in range(self.levels - 1, 0, -1):
            level_sum = self.sibling_groups(level).sums(sums[0])
            # float64 adds integers exactly below 2**53, far above any row count.
            sums.insert(0, np.rint(level_sum).astype(np.int64) if integer else level_sum)
        return sums

    @cached_property
    def child_counts(self) -> tuple[np.ndarray, ...]:
        """Number of children of every node of level l (l < levels - 1)."""
        return tuple(np.bincount(self.parents[l + 1], minlength=self.sizes[l]) for l in range(self.levels - 1))

    def sibling_groups(self, level: int) -> "SiblingGroups":
        """The nodes of ``level`` (>= 1) grouped by parent, for per-sibling-group work (not cached: O(n) memory)."""
        return SiblingGroups.of(self.parents[level], self.sizes[level - 1])

    def describe(self) -> dict:
        return {"levels": self.levels, "nodes_per_level": list(self.sizes)}


@dataclass(frozen=True, eq=False)
class LabelTree(Tree):
    """A tree given by explicit cell labels per level (any nested partitions, e.g. a category hierarchy)."""

    label_arrays: tuple[np.ndarray, ...] = ()

    @classmethod
    def from_labels(cls, shape: tuple[int, ...], labels: list[np.ndarray]) -> "LabelTree":
        sizes = tuple(int(l.max()) + 1 for l in labels)
        parents = [np.zeros(0, dtype=np.int64)]
        for level in range(1, len(labels)):
            parent = np.zeros(sizes[level], dtype=np.int64)
            parent[labels[level]] = labels[level - 1]
            parents.append(parent)
        return cls(tuple(shape), sizes, tuple(parents), tuple(np.asarray(l) for l in labels))

    def labels(self, level: int) -> np.ndarray:
        return self.label_arrays[level]


@dataclass(frozen=True, eq=False)
class GridTree(Tree):
    """A product of per-axis range trees: ``cuts[l][k]`` are the boundaries of axis k on level l.

    Memory is proportional to the number of nodes: cell labels are computed only when asked for.
    """

    cuts: tuple[tuple[np.ndarray, ...], ...] = ()

    @cached_property
    def child_counts(self) -> tuple[np.ndarray, ...]:
        counts = []
        for upper, lower in zip(self.cuts[:-1], self.cuts[1:]):
            parts = [np.diff(np.searchsorted(child, parent)) for parent, child in zip(upper, lower)]
            counts.append(functools.reduce(np.multiply.outer, parts).ravel())  # C order over the parent grid
        return tuple(counts)

    def sibling_groups(self, level: int) -> "SiblingGroups":
        """As :meth:`Tree.sibling_groups`; where every parent splits each axis into the same number of parts (a
        domain of a power of the branching), a :class:`GridGroups`: reshapes of the node grid, no parent array."""
        parts = [np.diff(np.searchsorted(child, parent)) for parent, child in zip(self.cuts[level - 1], self.cuts[level])]
        if not all(p.size and np.all(p == p[0]) for p in parts):
            return super().sibling_groups(level)
        return GridGroups(tuple(p.size for p in parts), tuple(int(p[0]) for p in parts))

    def labels(self, level: int) -> np.ndarray:
        lab = np.zeros(self.shape, dtype=np.int64)
        for k, (cut, n) in enumerate(zip(self.cuts[level], self.shape)):
            axis_labels = np.searchsorted(cut, np.arange(n), side="right") - 1
            index = [None] * len(self.shape)
            index[k] = slice(None)
            lab = lab * (len(cut) - 1) + axis_labels[tuple(index)]
        return lab.ravel()


class SiblingGroups:
    """The entries of a grouping (group g: the entries with ``groups == g``, in their order) as index matrices.

    ``blocks()`` hands out the groups of each size w as (ids, key) pairs; ``take(values, key)`` is a
    (len(ids), w) matrix whose row r holds group ids[r]'s entries, so per-group work (a sort of each row) runs
    as numpy operations along rows: O(n log w) time and O(CHUNK_ENTRIES) extra memory per block, beyond the
    O(n) ordering (made on first use).  ``sums`` and ``subtract`` are the per-group sum and the per-group shift.
    """

    CHUNK_ENTRIES = 1 << 20

    def __init__(self, groups: np.ndarray, counts: np.ndarray) -> None:
        self.groups, self.counts = groups, counts
        self.first = np.cumsum(counts) - counts

    @classmethod
    def of(cls, groups: np.ndarray, n_groups: int) -> "SiblingGroups":
        """The grouping of ``groups`` (ids in [0, n_groups))."""
        groups = np.asarray(groups)
        return cls(groups, np.bincount(groups, minlength=n_groups))

    @cached_property
    def order(self) -> np.ndarray:
        # Stable, so each group keeps its entries' order; a tree level in C order is made of runs of equal
        # ids, which this sort (timsort or radix) passes over in close to linear time.
        return np.argsort(self.groups, kind="stable")

    def blocks(self):
        """Yield (ids, key) for every non-empty group, at most about CHUNK_ENTRIES entries per block."""
        sizes = np.unique(self.counts)
        for width in sizes[sizes > 0].tolist():
            ids = np.flatnonzero(self.counts == width) if sizes.size > 1 else np.arange(self.counts.size)
            step = max(1, self.CHUNK_ENTRIES // width)
            for lo in range(0, ids.size, step):
                chunk = ids[lo:lo + step]
                if sizes.size == 1:  # every group the same size: consecutive rows of the ordering
                    index = self.order[chunk[0] * width:(chunk[-1] + 1) * width].reshape(-1, width)
                else:
                    index = self.order[self.first[chunk][:, None] + np.arange(width)]
                yield chunk, index

    def take(self, values: np.ndarray, key) -> np.ndarray:
        """The block's groups as rows: ``values`` of their entries."""
        return values[key]

    def add(self, out: np.ndarray, key, rows: np.ndarray) -> None:
        """Add ``rows`` (as :meth:`take` gives them) to the block's entries of ``out``."""
        out[key] += rows

    def member(self, key, row: int, column: int) -> int:
        """The position in the values of the entry at (row, column) of the block's matrix."""
        return int(key[row, column])

    def sums(self, values: np.ndarray) -> np.ndarray:
        """The sum of each group's ``values`` (float; exact for integers below 2^53)."""
        out = np.zeros(self.counts.size)
        for start in range(0, values.size, self.CHUNK_ENTRIES):  # bincount copies its weights to float
            part = slice(start, start + self.CHUNK_ENTRIES)
            out += np.bincount(self.groups[part], weights=values[part], minlength=self.counts.size)
        return out

    def subtract(self, values: np.ndarray, per_group: np.ndarray) -> np.ndarray:
        """A new float array: each entry of ``values`` minus its group's ``per_group`` value."""
        out = np.empty(values.shape)
        for start in range(0, values.size, self.CHUNK_ENTRIES):
            part = slice(start, start + self.CHUNK_ENTRIES)
            np.subtract(values[part], per_group[self.groups[part]], out=out[part])
        return out


class GridGroups(SiblingGroups):
    """The sibling groups of a grid level whose every parent splits axis k into ``parts[k]`` equal runs.

    The level's nodes form a grid of shape (m_k · c_k) in C order, and node (i_1, ..., i_d) has the parent
    (i_1 // c_1, ..., i_d // c_d) of the parents' grid m.  Every operation is a reshape of that grid (a view)
    and, for the rows of a block, one transpose: no parent array, no ordering, no gather.
    """

    def __init__(self, parents: tuple[int, ...], parts: tuple[int, ...]) -> None:
        self.m, self.c = tuple(parents), tuple(parts)
        d = len(self.m)
        self.split = tuple(n for pair in zip(self.m, self.c) for n in pair)
        self.width = math.prod(self.c)
        self.perm = (*range(0, 2 * d, 2), *range(1, 2 * d, 2))  # parent axes first, then the parts
        self.unperm = tuple(np.argsort(self.perm).tolist())
        super().__init__(None, np.full(math.prod(self.m), self.width, dtype=np.int64))

    @cached_property
    def order(self) -> np.ndarray:
        index = np.int32 if math.prod(self.split) < 2**31 else np.int64
        return np.arange(math.prod(self.split), dtype=index).reshape(self.split).transpose(self.perm).ravel()

    def blocks(self):
        rest = math.prod(self.m[1:])
        step = max(1, self.CHUNK_ENTRIES // (rest * self.width))
        for a in range(0, self.m[0], step):
            b = min(a + step, self.m[0])
            yield np.arange(a * rest, b * rest), (a, b)

    def take(self, values: np.ndarray, key) -> np.ndarray:
        a, b = key
        return values.reshape(self.split)[a:b].transpose(self.perm).reshape(-1, self.width)

    def add(self, out: np.ndarray, key, rows: np.ndarray) -> None:
        a, b = key
        view = out.reshape(self.split)[a:b]
        view += rows.reshape((b - a,) + self.m[1:] + self.c).transpose(self.unperm)

    def member(self, key, row: int, column: int) -> int:
        a, _ = key
        parent = np.unravel_index(row, (self.m[0] - a,) + self.m[1:])
        part = np.unravel_index(column, self.c)
        node = [(p + (a if k == 0 else 0)) * c + j for k, (p, c, j) in enumerate(zip(parent, self.c, part))]
        return int(np.ravel_multi_index(node, [m * c for m, c in zip(self.m, self.c)]))

    def sums(self, values: np.ndarray) -> np.ndarray:
        summed = values.reshape(self.split).sum(axis=tuple(range(1, 2 * len(self.m), 2)))
        return summed.ravel().astype(np.float64, copy=False)

    def subtract(self, values: np.ndarray, per_group: np.ndarray) -> np.ndarray:
        shift = per_group.reshape(tuple(n for m in self.m for n in (m, 1)))
        return np.subtract(values.reshape(self.split), shift, dtype=np.float64).reshape(-1)


def height_for(n: int, b: int) -> int:
    """The number of splits a b-ary tree needs to reach single cells: the least h with b**h >= n (integers only)."""
    h, reach = 0, 1
    while reach < n:
        reach *= b
        h += 1
    return h


def range_boundaries(n: int, b: int) -> list[np.ndarray]:
    """Boundaries of a b-ary tree of contiguous ranges over [0, n), level by level.

    Level l is an array of cut points 0 = c_0 < c_1 < ... < c_k = n; a node of size s on one level has
    min(b, s) children whose sizes differ by at most one (no padding).  The last level is every cell.
    """
    if n < 1 or b < 2:
        raise ValueError("need n >= 1 and b >= 2")
    levels = [np.array([0, n], dtype=np.int64)]
    while len(levels[-1]) - 1 < n:
        cuts = levels[-1]
        lo, size = cuts[:-1], np.diff(cuts)
        k = np.minimum(size, b)
        # child i of a node spans lo + floor(i*s/k) .. lo + floor((i+1)*s/k)
        node = np.repeat(np.arange(lo.size), k)
        i = np.arange(node.size) - np.repeat(np.cumsum(k) - k, k)
        starts = lo[node] + (i * size[node]) // k[node]
        levels.append(np.append(starts, n))
    return levels


def _tree_from_axes(shape: tuple[int, ...], axes: list[list[np.ndarray]]) -> GridTree:
    """Combine per-axis range boundaries level by level (axes that are finished repeat their last level)."""
    depth = max(len(a) for a in axes)
    axes = [a + [a[-1]] * (depth - len(a)) for a in axes]
    cuts = tuple(tuple(a[level] for a in axes) for level in range(depth))
    sizes = tuple(int(np.prod([len(c) - 1 for c in level_cuts])) for level_cuts in cuts)
    return GridTree(tuple(shape), sizes, _GridParents(cuts), cuts)


class _GridParents(Sequence):
    """A grid tree's parent arrays, level by level, each made on first use (the last level's has one entry per
    cell: a big table's post-processing never asks for it)."""

    def __init__(self, cuts) -> None:
        self._cuts = cuts
        self._made: dict[int, np.ndarray] = {0: np.zeros(0, dtype=np.int64)}

    def __len__(self) -> int:
        return len(self._cuts)

    def __getitem__(self, level):
        if isinstance(level, slice):
            return tuple(self[i] for i in range(*level.indices(len(self))))
        level = range(len(self))[level]
        if level not in self._made:
            d = len(self._cuts[0])
            # Per axis, the parent range of each child range; the node's parent combines them in C order.
            parent = np.zeros((1,) * d, dtype=np.int64)
            for k in range(d):
                upper, lower = self._cuts[level - 1][k], self._cuts[level][k]
                axis_parent = np.searchsorted(upper, lower[:-1], side="right") - 1
                index = [None] * d
                index[k] = slice(None)
                parent = parent * (len(upper) - 1) + axis_parent[tuple(index)]
            self._made[level] = parent.ravel()
        return self._made[level]


def range_tree(n: int, b: int) -> GridTree:
    """The b-ary tree of ranges over a 1-D domain of n cells (Hay et al.; any n, no padding)."""
    return _tree_from_axes((n,), [range_boundaries(n, b)])


def product_tree(shape: tuple[int, ...], branching: int | tuple[int, ...]) -> GridTree:
    """A d-dimensional hierarchy: every level splits each axis b_k ways (b = 2 in 2-D is the quadtree).

    Node counts per level are the products of the per-axis counts; leaves are single cells.
    """
    shape = tuple(int(s) for s in shape)
    bs = (branching,) * len(shape) if isinstance(branching, int) else tuple(branching)
    if len(bs) != len(shape):
        raise ValueError("one branching factor per axis")
    return _tree_from_axes(shape, [range_boundaries(n, b) for n, b in zip(shape, bs)])
