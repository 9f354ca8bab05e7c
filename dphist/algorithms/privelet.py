"""Privelet: noise on wavelet coefficients (Xiao, Wang, Gehrke, ICDE 2010; algorithms.md §2).

    strategy:  along each axis, the unnormalised Haar transform: the total of the axis and, for every split
               of a binary tree of ranges over it, the difference S(left half) − S(right half); on a d-way table
               the transforms are applied axis after axis (a Kronecker product), so every coefficient is an
               integer query
    measure:   every coefficient + DLap(ρ/ε), ρ = Π_k ρ_k, ρ_k = 1 + L_k, L_k = ⌈log₂ n_k⌉ (axes of at most 16
               cells are left untransformed, ρ_k = 1: "Privelet+")
    infer:     the inverse transform (the strategy is square and invertible, so this is the least-squares
               estimate), then the shared non-negative, total-preserving rounding

Sensitivity (add/remove of one record in cell i).  Along one Haar axis, the record adds 1 to the axis total and
±1 to the difference of every split whose range contains i: one split per level of the tree on i's path, at
most L = ⌈log₂ n⌉ of them (the tree splits a range of s cells into ⌊s/2⌋ and ⌈s/2⌉, so after L levels every range
is a single cell; no padding, nothing unmeasured).  So the L1 change is at most 1 + L, reached by a cell on a
deepest path.  For the d-way transform the coefficient vector of a unit table is the outer product of the
per-axis vectors, whose L1 norm is the product of the per-axis norms: ρ = Π_k (1 + L_k), and no more.
"""

from __future__ import annotations


import numpy as np

from ..inference import sum_by_parent
from ..privacy import PrivacyBudget
from ..trees import LabelTree, height_for, range_boundaries
from . import options as option
from .base import Algorithm, Estimate

__all__ = ["HaarAxis", "NominalAxis", "Privelet"]


class HaarAxis:
    """The unnormalised Haar transform along an axis of ``n`` cells (any n >= 1).

    Coefficients, in order: the axis total, then level by level the differences S(first child) − S(second
    child) of every range that splits on that level.  There are exactly n of them (a binary tree over n
    leaves has n − 1 splits), and the transform is invertible.
    """

    def __init__(self, n: int):
        self.n = n
        self.height = height_for(n, 2)
        self.sensitivity = 1 + self.height
        self.relative_scales = np.ones(n)
        cuts = range_boundaries(n, 2)
        self._levels = []  # per level: (first child of every node, index of nodes that split)
        for upper, lower in zip(cuts, cuts[1:]):
            first = np.searchsorted(lower, upper[:-1])
            children = np.searchsorted(lower, upper[1:]) - first
            self._levels.append((first, np.flatnonzero(children == 2), len(lower) - 1))

    def forward(self, x: np.ndarray, axis: int) -> np.ndarray:
        """The coefficients of ``x`` along ``axis`` (integer in, integer out)."""
        x = np.moveaxis(np.asarray(x), axis, -1)
        sums = [x]
        for first, _, _ in reversed(self._levels):
            sums.insert(0, np.add.reduceat(sums[0], first, axis=-1))
        parts = [sums[0]]
        for level, (first, split, _) in enumerate(self._levels):
            below = sums[level + 1]
            parts.append(below[..., first[split]] - below[..., first[split] + 1])
        return np.moveaxis(np.concatenate(parts, axis=-1), -1, axis)

    def inverse(self, coefficients: np.ndarray, axis: int) -> np.ndarray:
        """The table whose coefficients along ``axis`` are ``coefficients`` (float)."""
        c = np.moveaxis(np.asarray(coefficients, dtype=np.float64), axis, -1)
        sums = c[..., :1]
        position = 1
        for first, split, size in self._levels:
            d = c[..., position:position + split.size]
            position += split.size
            nxt = np.empty(c.shape[:-1] + (size,))
            nxt[..., first] = sums  # a range that does not split passes its sum down unchanged
            nxt[..., first[split]] = (sums[..., split] + d) / 2
            nxt[..., first[split] + 1] = (sums[..., split] - d) / 2
            sums = nxt
        return np.moveaxis(sums, -1, axis)

    def variance_factors(self) -> np.ndarray:
        """Per cell, the variance of the reconstructed cell when every coefficient has unit variance.

        A range's sum is (S_parent ± d)/2 with d independent of S_parent: v_child = (v_parent + 1)/4 on a
        split, v_child = v_parent otherwise; the total has v = 1.
        """
        v = np.ones(1)
        for first, split, size in self._levels:
            nxt = np.empty(size)
            nxt[first] = v
            nxt[first[split]] = nxt[first[split] + 1] = (v[split] + 1) / 4
            v = nxt
        return v


class NominalAxis:
    """The nominal wavelet along a categorical axis with a public hierarchy (algorithms.md §2.4), in integers.

    Coefficients: the axis total T(root), and for every child v of a group u with f_u >= 2 children the integer
    f_u·T(v) − T(u) (f_u times the paper's c_v = T(v) − T(u)/f_u).  Noise on it has the relative scale
    g_v = 2(f_u − 1) (the paper's Lap(λ/w_v) with w_v = f_u / (2(f_u − 1)), times f_u); the total has g = 1.

    Sensitivity (weighted, in units of the base scale): a record adds 1 to the total, and in each sibling group
    on its path changes its own node's coefficient by f − 1 and each of the f − 1 siblings' by 1: 2(f − 1) in
    all, divided by g = 2(f − 1), is 1 per group.  So Σ_c |Δc| / g_c = 1 + (groups on the path) ≤ h, the
    number of levels with a real split plus one; groups of one child carry no coefficient.
    """

    def __init__(self, levels: tuple[tuple[int, ...], ...], n: int):
        labels = [np.zeros(n, dtype=np.int64)] + [np.asarray(l, dtype=np.int64) for l in levels] + [np.arange(n)]
        tree = LabelTree.from_labels((n,), labels)
        self.n = n
        self._tree = tree
        self._groups = []  # per level >= 1: (kept child nodes, their parents, the parents' fan-out)
        splits_on_path = np.zeros(n, dtype=np.int64)
        scales = [np.ones(1)]
        for l in range(1, tree.levels):
            parent = tree.parents[l]
            fan_out = tree.child_counts[l - 1][parent]
            kept = np.flatnonzero(fan_out >= 2)
            self._groups.append((kept, parent[kept], fan_out[kept]))
            scales.append(2.0 * (fan_out[kept] - 1))
            splits_on_path += np.isin(tree.labels(l), kept)
        self.sensitivity = 1 + int(splits_on_path.max())
        self.relative_scales = np.concatenate(scales)

    def _sums(self, x: np.ndarray) -> list[np.ndarray]:
        """Node sums per level along the last axis (leading axes carried along)."""
        sums = [x]
        for l in range(self._tree.levels - 1, 0, -1):
            sums.insert(0, sum_by_parent(sums[0], self._tree.parents[l], self._tree.sizes[l - 1]))
        return sums

    def forward(self, x: np.ndarray, axis: int) -> np.ndarray:
        x = np.moveaxis(np.asarray(x), axis, -1)
        sums = self._sums(x)
        parts = [sums[0]]
        for l, (kept, parents, fan_out) in enumerate(self._groups, start=1):
            parts.append(fan_out * sums[l][..., kept] - sums[l - 1][..., parents])
        return np.moveaxis(np.concatenate(parts, axis=-1).astype(x.dtype), -1, axis)

    def inverse(self, coefficients: np.ndarray, axis: int) -> np.ndarray:
        """Least-squares reconstruction: back to c_v, siblings' mean removed (true sibling coefficients sum to
        0 and have equal variance, so this is the exact projection), then top-down T(v) = c_v + T(u)/f_u."""
        c = np.moveaxis(np.asarray(coefficients, dtype=np.float64), axis, -1)
        totals = c[..., :1]
        position = 1
        for l, (kept, parents, fan_out) in enumerate(self._groups, start=1):
            parent_all = self._tree.parents[l]
            fan_all = self._tree.child_counts[l - 1][parent_all]
            coef = c[..., position:position + kept.size] / fan_out
            position += kept.size
            group_mean = sum_by_parent(coef, parents, self._tree.sizes[l - 1]) / self._tree.child_counts[l - 1]
            coef = coef - group_mean[..., parents]
            nxt = totals[..., parent_all] / fan_all
            nxt[..., kept] += coef
            totals = nxt
        return np.moveaxis(totals, -1, axis)

    def variance_factors(self) -> np.ndarray:
        """Per cell, the variance of the reconstruction per unit of (base scale)² when a coefficient with
        relative scale g has variance g² (continuous Laplace: 2b², with the factor 2 applied by the caller)."""
        v = np.ones(1)
        for l, (kept, parents, fan_out) in enumerate(self._groups, start=1):
            parent_all = self._tree.parents[l]
            fan_all = self._tree.child_counts[l - 1][parent_all]
            nxt = v[parent_all] / fan_all**2
            g = 2.0 * (fan_out - 1)
            nxt[kept] += (g / fan_out) ** 2 * (1 - 1 / fan_out)
            v = nxt
        return v


class _IdentityAxis:
    """An axis left untransformed (small domains): sensitivity 1, unit variance factors."""

    sensitivity = 1

    def __init__(self, n: int):
        self.n = n
        self.relative_scales = np.ones(n)

    def forward(self, x, axis):
        return np.asarray(x)

    def inverse(self, c, axis):
        return np.asarray(c, dtype=np.float64)

    def variance_factors(self):
        return np.ones(self.n)


class Privelet(Algorithm):
    name = "privelet"
    summary = "Haar wavelet coefficients with noise (Xiao et al. 2010); range queries, any number of columns"
    options = {"small_axis": (16, option.non_negative_int)}  # 0: transform every axis

    def axes_for(self, shape: tuple[int, ...], columns=None) -> list:
        """Per axis: the nominal wavelet for a categorical column with a declared hierarchy, else Haar, or no
        transform for axes of at most ``small_axis`` cells."""
        limit = self.params["small_axis"]
        axes = []
        for k, n in enumerate(shape):
            hierarchy = getattr(columns[k], "hierarchy", ()) if columns is not None else ()
            if hierarchy:
                axes.append(NominalAxis(hierarchy, n))
            else:
                axes.append(HaarAxis(n) if n > limit else _IdentityAxis(n))
        return axes

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # select: the wavelet coefficients, axis after axis, and each one's relative noise scale
        axes = self.axes_for(counts.shape, columns)
        coefficients = counts
        for k, axis in enumerate(axes):
            coefficients = axis.forward(coefficients, k)
        relative = _outer([a.relative_scales for a in axes])
        sensitivity = int(np.prod([a.sensitivity for a in axes]))

        # measure: every coefficient at once, with its weighted scale
        noisy, record = budget.laplace_weighted(coefficients, relative, sensitivity, budget.amount,
                                                "wavelet coefficients (weighted by their scale factors)",
                                                composition="one measurement of all coefficients; its weighted L1 "
                                                            "sensitivity is the product of the per-column factors")

        # infer: the inverse transform (any leading axes of the noisy answers are carried along)
        values = noisy
        lead = noisy.ndim - counts.ndim
        for k, axis in enumerate(axes):
            values = axis.inverse(values, lead + k)
        factors = _outer([a.variance_factors() for a in axes])
        uniform = bool(np.all(relative == 1))
        # Exact for uniform scales; otherwise the continuous-Laplace variance 2b², an upper bound.
        unit = record.noise_variance if uniform else 2 * float(record.scale) ** 2
        return Estimate(
            values=values,
            variance=unit * factors,
            structure={"transforms": [_kind(a) for a in axes],
                       "sensitivity_factors": [a.sensitivity for a in axes]},
        )


def _outer(vectors: list[np.ndarray]) -> np.ndarray:
    """The d-way table whose entry (i, j, ...) is vectors[0][i] · vectors[1][j] · ..."""
    out = np.ones(())
    for v in vectors:
        out = np.multiply.outer(out, np.asarray(v, dtype=np.float64))
    return out


def _kind(axis) -> str:
    return {HaarAxis: "haar", NominalAxis: "nominal", _IdentityAxis: "identity"}[type(axis)]
