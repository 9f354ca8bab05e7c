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

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Tree", "GridTree", "LabelTree", "SiblingGroups", "range_boundaries", "range_tree", "product_tree", "height_for"]


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
        # Bottom-up: each level adds up the level below through the parent map, O(nodes) per level.  (Float
        # counts are not copied: the last level may share memory with ``counts``.)
        sums = [np.asarray(flat, dtype=np.float64)]
        for level in range(self.levels - 1, 0, -1):
            sums.insert(0, np.bincount(self.parents[level], weights=sums[0], minlength=self.sizes[level - 1]))
        if integer:
            # float64 adds integers exactly below 2**53, far above any row count; the cells stay as given.
            sums = [np.rint(s).astype(np.int64) for s in sums[:-1]] + [flat.astype(np.int64, copy=False)]
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

    def sibling_groups(self, level: int) -> "SiblingGroups":
        """As :meth:`Tree.sibling_groups`; where every parent splits each axis into the same number of parts (a
        domain of a power of the branching), the order is a transpose of the node grid, without a sort."""
        parts = [np.diff(np.searchsorted(child, parent)) for parent, child in zip(self.cuts[level - 1], self.cuts[level])]
        if not all(p.size and np.all(p == p[0]) for p in parts):
            return super().sibling_groups(level)
        # Node grid axis k = (parent index, part within the parent): put all parent axes first, then the parts.
        split = [n for p in parts for n in (p.size, int(p[0]))]
        d = len(parts)
        index = np.int32 if self.sizes[level] < 2**31 else np.int64  # half the memory on big tables
        order = np.arange(self.sizes[level], dtype=index).reshape(split).transpose([*range(0, 2 * d, 2), *range(1, 2 * d, 2)])
        width = int(np.prod([int(p[0]) for p in parts]))
        return SiblingGroups(order.ravel(), np.full(self.sizes[level - 1], width, dtype=np.int64))

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

    ``blocks()`` hands out the groups of each size w as (ids, index) pairs: ``index`` is a (len(ids), w) matrix
    whose row r lists group ids[r]'s entries, so per-group work (a sort of each row) runs as numpy operations
    along rows: O(n log w) time and O(CHUNK_ENTRIES) extra memory per block, beyond the O(n) ordering.
    """

    CHUNK_ENTRIES = 1 << 20

    def __init__(self, order: np.ndarray, counts: np.ndarray) -> None:
        self.order, self.counts = order, counts
        self.first = np.cumsum(counts) - counts

    @classmethod
    def of(cls, groups: np.ndarray, n_groups: int) -> "SiblingGroups":
        """The grouping of ``groups`` (ids in [0, n_groups))."""
        groups = np.asarray(groups)
        counts = np.bincount(groups, minlength=n_groups)
        # Stable, so each group keeps its entries' order; a tree level in C order is made of runs of equal
        # ids, which this sort (timsort or radix) passes over in close to linear time.
        return cls(np.argsort(groups, kind="stable"), counts)

    def blocks(self):
        """Yield (ids, index) for every non-empty group, at most about CHUNK_ENTRIES entries per block."""
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
    parents = [np.zeros(0, dtype=np.int64)]
    for level in range(1, depth):
        # Per axis, the parent range of each child range; the node's parent combines them in C order.
        parent = np.zeros((1,) * len(shape), dtype=np.int64)
        for k in range(len(shape)):
            upper, lower = cuts[level - 1][k], cuts[level][k]
            axis_parent = np.searchsorted(upper, lower[:-1], side="right") - 1
            index = [None] * len(shape)
            index[k] = slice(None)
            parent = parent * (len(upper) - 1) + axis_parent[tuple(index)]
        parents.append(parent.ravel())
    return GridTree(tuple(shape), sizes, tuple(parents), cuts)


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
