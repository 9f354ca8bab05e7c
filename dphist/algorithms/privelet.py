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

from fractions import Fraction

import numpy as np

from ..noise import BitSource, discrete_laplace_variance
from ..trees import height_for, range_boundaries
from .base import Algorithm, Estimate, measure

__all__ = ["HaarAxis", "Privelet"]


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


class _IdentityAxis:
    """An axis left untransformed (small domains): sensitivity 1, unit variance factors."""

    sensitivity = 1

    def __init__(self, n: int):
        self.n = n

    def forward(self, x, axis):
        return np.asarray(x)

    def inverse(self, c, axis):
        return np.asarray(c, dtype=np.float64)

    def variance_factors(self):
        return np.ones(self.n)


def _small_axis(value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError("must be a non-negative integer (0: transform every axis)")
    return int(value)


class Privelet(Algorithm):
    name = "privelet"
    summary = "Haar wavelet coefficients with noise (Xiao et al. 2010); range queries, any number of columns"
    options = {"small_axis": (16, _small_axis)}

    def axes_for(self, shape: tuple[int, ...]) -> list:
        limit = self.params["small_axis"]
        return [HaarAxis(n) if n > limit else _IdentityAxis(n) for n in shape]

    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource) -> Estimate:
        axes = self.axes_for(counts.shape)
        coefficients = counts
        for k, axis in enumerate(axes):
            coefficients = axis.forward(coefficients, k)
        sensitivity = int(np.prod([a.sensitivity for a in axes]))
        noisy, record = measure(coefficients, sensitivity, epsilon, bits, "wavelet coefficients",
                                composition="one measurement of all coefficients (L1 sensitivity is the product "
                                            "of the per-column factors)")
        values = noisy
        lead = noisy.ndim - counts.ndim  # repetitions (audits) come first
        for k, axis in enumerate(axes):
            values = axis.inverse(values, lead + k)
        factors = np.ones(counts.shape)
        for k, axis in enumerate(axes):
            shape = [1] * counts.ndim
            shape[k] = counts.shape[k]
            factors = factors * axis.variance_factors().reshape(shape)
        return Estimate(
            values=values,
            measurements=[record],
            variance=discrete_laplace_variance(record.scale) * factors,
            structure={"transforms": ["haar" if isinstance(a, HaarAxis) else "identity" for a in axes],
                       "sensitivity_factors": [a.sensitivity for a in axes]},
            noisy=[noisy],
        )
