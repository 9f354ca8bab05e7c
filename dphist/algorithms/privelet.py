"""Privelet: noise on wavelet coefficients (Xiao, Wang, Gehrke, ICDE 2010; docs/algorithms.md §2).

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

Under zCDP (``budget.noise == "gaussian"``, docs/algorithms.md §1.4, §8) the coefficients get discrete Gaussian noise
of variance σ²·g_c², σ² = Δ₂²/(2ρ), with a relative scale g_c per coefficient:

* ``weights=uniform``: g = 1 on every Haar coefficient.  A record changes the total and one difference per level
  by 1, so Δ₂² = 1 + L per Haar axis.
* ``weights=l2`` (the default under Gaussian noise): the level weights re-derived for L2.  With g_l on every
  coefficient of level l (level 0: the total), a record's weighted change is Σ_l 1/g_l² (one coefficient per
  level on its path), and the all-ranges average variance is σ²·Σ_l c_l g_l², c_l the average over all ranges of
  the variance their answer takes from unit-variance noise on level l (:meth:`HaarAxis.level_costs`, exact, from
  the §2.2 formula).  Minimising (Σ_l 1/g_l²)(Σ_l c_l g_l²) gives, by Cauchy-Schwarz, g_l² ∝ 1/√c_l and the
  error (Σ_l √c_l)², against (1 + L)·Σ_l c_l for uniform weights.  The g_l are rounded to 8 significant bits
  (the optimum is flat) so that the products of per-axis scales are exact in float64, and Δ₂² is computed
  exactly from the rounded values.

For a d-way table the weighted change of the outer-product coefficients is the product of the per-axis sums
(Σ over a product of squares), so Δ₂² = Π_k Δ₂,k², and for a product workload the average variance is the
product of the per-axis ones, so the per-axis optimum is the joint one.  Nominal axes keep their relative scales
2(f − 1) (not re-derived), with Δ₂² = 1 + Σ over the groups on the worst path of f/(4(f − 1)).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..privacy.samplers import discrete_gaussian_variance

from ..inference.nonnegative import sum_by_parent
from ..privacy import PrivacyBudget
from .strategies.trees import LabelTree, height_for, range_boundaries
from . import options as option
from .base import Algorithm, Estimate, Step

__all__ = ["HaarAxis", "NominalAxis", "Privelet", "outer"]


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
        self._cuts = cuts
        self._levels = []  # per level: (first child of every node, index of nodes that split)
        for upper, lower in zip(cuts, cuts[1:]):
            first = np.searchsorted(lower, upper[:-1])
            children = np.searchsorted(lower, upper[1:]) - first
            self._levels.append((first, np.flatnonzero(children == 2), len(lower) - 1))
        # The level of every coefficient (0: the total), in coefficient order.
        self.level_of = np.repeat(np.arange(self.height + 1), [1] + [split.size for _, split, _ in self._levels])
        self.level_scales = np.ones(self.height + 1)

    @property
    def l2_squared(self) -> Fraction:
        """Σ_c (Δc / g_c)² for one record in the worst cell: 1/g_0² for the total plus 1/g_l² for every level
        whose split lies on the cell's path (a deepest cell has one on every level).  Exact in the float g_l."""
        return max(sum((Fraction(float(self.level_scales[l])) ** -2 for l in levels), Fraction(0))
                   for levels in self._path_levels())

    def _path_levels(self) -> set[tuple[int, ...]]:
        """The distinct sets of levels with a split on a cell's path (level 0, the total, on every path)."""
        paths = [(0,)]
        for level, (first, split, size) in enumerate(self._levels, start=1):
            nxt = [None] * size
            splits = set(split.tolist())
            for node, start in enumerate(first.tolist()):
                if node in splits:
                    nxt[start] = nxt[start + 1] = paths[node] + (level,)
                else:
                    nxt[start] = paths[node]
            paths = nxt
        return set(paths)

    def use_weights(self, level_scales) -> None:
        """Give every coefficient of level l the relative noise scale ``level_scales[l]``."""
        self.level_scales = np.asarray(level_scales, dtype=np.float64)
        self.relative_scales = self.level_scales[self.level_of]

    def level_costs(self) -> np.ndarray:
        """c_l, l = 0..L: the variance that unit-variance noise on every coefficient of level l adds to a range
        query, averaged over all n(n+1)/2 ranges (exact).

        A range's answer from the inverse is Σ_c M[R, c]·y_c, so c_l = Σ_{c in level l} ‖W M e_c‖² / |W| with
        ‖W z‖² = m·ΣD² − (ΣD)² over the prefix sums D of z (m = n + 1).  A difference coefficient's column
        M e_c lives on its node's range and sums to zero, so its D vanishes outside the node: the columns of one
        level have disjoint prefix sums, and one inverse transform per level gives all of them (O(n L))."""
        n = self.n
        ranges = n * (n + 1) / 2
        costs = np.empty(self.height + 1)
        for level in range(self.height + 1):
            unit = (self.level_of == level).astype(np.float64)
            d = np.zeros(n + 1)
            np.cumsum(self.inverse(unit, 0), out=d[1:])
            if level == 0:
                centred = d - d.mean()
                costs[0] = (n + 1) * np.dot(centred, centred) / ranges
                continue
            parents = self._cuts[level - 1][:-1]  # each node of the level above starts a disjoint block of D
            per_node = np.add.reduceat(d[:n], parents)
            costs[level] = ((n + 1) * np.dot(d, d) - np.dot(per_node, per_node)) / ranges
        return costs

    def l2_weights(self) -> np.ndarray:
        """The L2-optimal level scales g_l ∝ c_l^(-1/4), rounded to 8 significant bits, normalised so that
        Σ_l 1/g_l² is about L + 1 (the noise σ² then stays comparable to uniform weights)."""
        g = self.level_costs() ** -0.25
        g = g * math.sqrt(np.sum(g**-2.0) / (self.height + 1))
        return np.array([_short(v) for v in g])

    def variance_factors_by_class(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scales, F)``: the distinct relative scales G_j of the coefficients, and F[i, j] the variance of cell
        i when every coefficient of scale G_j has unit variance and the others none (Σ_j F[:, j] is
        :meth:`variance_factors`)."""
        scales, klass = np.unique(self.level_scales, return_inverse=True)
        v = np.zeros((1, scales.size))
        v[0, klass[0]] = 1.0
        for level, (first, split, size) in enumerate(self._levels, start=1):
            nxt = np.empty((size, scales.size))
            nxt[first] = v
            step = np.zeros(scales.size)
            step[klass[level]] = 1.0
            nxt[first[split]] = nxt[first[split] + 1] = (v[split] + step) / 4
            v = nxt
        return scales, v

    def forward(self, x: np.ndarray, axis: int) -> np.ndarray:
        """The coefficients of ``x`` along ``axis`` (integer in, integer out)."""
        x = np.moveaxis(np.asarray(x), axis, -1)
        sums = [x]
        for first, split, size in reversed(self._levels):
            below = sums[0]
            pairs = _all_pairs(first, split, size)
            sums.insert(0, below[..., 0::2] + below[..., 1::2] if pairs else np.add.reduceat(below, first, axis=-1))
        parts = [sums[0]]
        for level, (first, split, size) in enumerate(self._levels):
            below = sums[level + 1]
            if _all_pairs(first, split, size):  # every range splits in two: strided views, no index arrays
                parts.append(below[..., 0::2] - below[..., 1::2])
            else:
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
            if _all_pairs(first, split, size):  # every range splits in two: strided views, no index arrays
                np.add(sums, d, out=nxt[..., 0::2])
                np.subtract(sums, d, out=nxt[..., 1::2])
                nxt /= 2
            else:
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


def _all_pairs(first: np.ndarray, split: np.ndarray, size: int) -> bool:
    """Whether a level's ranges are all pairs of cells, in order (first = 0, 2, 4, ..., every one split)."""
    return first.size * 2 == size and split.size == first.size


class NominalAxis:
    """The nominal wavelet along a categorical axis with a public hierarchy (docs/algorithms.md §2.4), in integers.

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
        # Weighted squared change per sibling group on the path: own node ((f−1)/g)² = 1/4, each of the f − 1
        # siblings (1/g)², in all f/(4(f − 1)); plus 1 for the total.  The worst path is the maximum.
        worst = np.zeros(n, dtype=object)
        worst[:] = Fraction(1)
        for l in range(1, tree.levels):
            parent = tree.parents[l]
            fan_out = tree.child_counts[l - 1][parent]
            node_term = np.array([Fraction(int(f), 4 * (int(f) - 1)) if f >= 2 else Fraction(0) for f in fan_out],
                                 dtype=object)
            worst = worst + node_term[tree.labels(l)]
        self.l2_squared = max(worst.tolist())

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

    def variance_factors_by_class(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scales, F)`` as :meth:`HaarAxis.variance_factors_by_class`: unit variance per coefficient of each
        distinct relative scale (the total's scale is 1)."""
        scales = np.unique(self.relative_scales)
        v = np.zeros((1, scales.size))
        v[0, np.searchsorted(scales, 1.0)] = 1.0
        for l, (kept, parents, fan_out) in enumerate(self._groups, start=1):
            parent_all = self._tree.parents[l]
            fan_all = self._tree.child_counts[l - 1][parent_all]
            nxt = v[parent_all] / (fan_all**2)[:, None]
            klass = np.searchsorted(scales, 2.0 * (fan_out - 1))
            np.add.at(nxt, (kept, klass), (1 - 1 / fan_out) / fan_out**2)
            v = nxt
        return scales, v


class _IdentityAxis:
    """An axis left untransformed (small domains): sensitivity 1, unit variance factors."""

    sensitivity = 1
    l2_squared = Fraction(1)

    def __init__(self, n: int):
        self.n = n
        self.relative_scales = np.ones(n)

    def variance_factors_by_class(self):
        return np.ones(1), np.ones((self.n, 1))

    def forward(self, x, axis):
        return np.asarray(x)

    def inverse(self, c, axis):
        return np.asarray(c, dtype=np.float64)

    def variance_factors(self):
        return np.ones(self.n)


class Privelet(Algorithm):
    name = "privelet"
    summary = "Haar wavelet coefficients with noise (Xiao et al. 2010); range queries, any number of columns"
    options = {"small_axis": (16, option.non_negative_int),  # 0: transform every axis
               "weights": ("auto", option.choice("auto", "uniform", "l2"))}
    option_help = {"weights": "Haar level weights under zCDP: uniform, or l2 (re-derived for Gaussian noise; "
                              "auto: l2 under zCDP, the paper's under pure epsilon)"}

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

    def weights_for(self, noise: str) -> str:
        """The Haar level weights a budget of ``noise`` gets: "l2" is for Gaussian noise only (its scales are not
        whole numbers, which weighted Laplace noise needs)."""
        weights = self.params["weights"]
        if weights == "auto":
            return "l2" if noise == "gaussian" else "uniform"
        if weights == "l2" and noise != "gaussian":
            raise UsageError("privelet: weights=l2 is for zCDP budgets (Gaussian noise); use weights=uniform")
        return weights

    def transforms(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list:
        """The per-axis transforms a run under ``noise`` applies (:meth:`axes_for`), with the Haar level weights
        of :meth:`weights_for` in place: their ``relative_scales`` are the coefficients' relative noise scales and
        their ``inverse`` is the estimate's.  Public: from the shape, the columns and the options only."""
        axes = self.axes_for(shape, columns)
        if self.weights_for(noise) == "l2":
            for axis in axes:
                if isinstance(axis, HaarAxis):
                    axis.use_weights(axis.l2_weights())
        return axes

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """One weighted measurement of every coefficient with the whole budget: Δ the product of the axes'
        factors, the largest relative scale the product of theirs."""
        axes = self.transforms(shape, columns, noise)
        relative = math.prod((Fraction(float(np.max(a.relative_scales))) for a in axes), start=Fraction(1))
        l2_squared = (math.prod((a.l2_squared for a in axes), start=Fraction(1)) if noise == "gaussian"
                      else Fraction(1))
        return [Step("wavelet coefficients", "measure", Fraction(1), Fraction(math.prod(a.sensitivity for a in axes)),
                     l2_squared, relative)]

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        gaussian = budget.noise == "gaussian"
        weights = self.weights_for(budget.noise)
        # select: the wavelet coefficients, axis after axis, and each one's relative noise scale
        axes = self.transforms(counts.shape, columns, budget.noise)
        coefficients = counts
        for k, axis in enumerate(axes):
            coefficients = axis.forward(coefficients, k)
        relative = outer([a.relative_scales for a in axes])
        sensitivity = int(np.prod([a.sensitivity for a in axes]))
        if gaussian:
            return self._run_gaussian(counts, budget, axes, coefficients, relative, sensitivity, weights)

        # measure: every coefficient at once, with its weighted scale
        noisy, record = budget.laplace_weighted(coefficients, relative, sensitivity, budget.amount,
                                                "wavelet coefficients (weighted by their scale factors)",
                                                composition="one measurement of all coefficients; its weighted L1 "
                                                            "sensitivity is the product of the per-column factors")

        # infer: the inverse transform
        values = _inverse(axes, noisy, counts.ndim)
        factors = outer([a.variance_factors() for a in axes])
        uniform = bool(np.all(relative == 1))
        # Exact for uniform scales; otherwise the continuous-Laplace variance 2b², an upper bound.
        unit = record.noise_variance if uniform else 2 * float(record.scale) ** 2
        return Estimate(
            values=values,
            variance=unit * factors,
            structure={"transforms": [_kind(a) for a in axes],
                       "sensitivity_factors": [a.sensitivity for a in axes]},
        )

    def _run_gaussian(self, counts, budget, axes, coefficients, relative, sensitivity, weights) -> Estimate:
        """Discrete Gaussian noise of variance σ²·g_c² on coefficient c, σ² = Δ₂²/(2ρ), Δ₂² = Π_k Δ₂,k²."""
        l2_squared = math.prod((a.l2_squared for a in axes), start=Fraction(1))
        _check_exact_products(axes)
        noisy, record = budget.measure_weighted(
            coefficients, relative, sensitivity, l2_squared, budget.amount,
            f"wavelet coefficients ({weights} level weights)",
            composition="one measurement of all coefficients; its weighted squared L2 sensitivity is the product "
                        "of the per-column factors")
        values = _inverse(axes, noisy, counts.ndim)
        return Estimate(
            values=values,
            variance=gaussian_cell_variance(axes, record.sigma2),
            structure={"transforms": [_kind(a) for a in axes],
                       "sensitivity_factors": [a.sensitivity for a in axes],
                       "l2_sensitivity_squared_factors": [round(float(a.l2_squared), 6) for a in axes],
                       "noise": "gaussian", "weights": weights,
                       "level_scales": [[float(g) for g in a.level_scales] if isinstance(a, HaarAxis) else None
                                        for a in axes]},
        )


def gaussian_cell_variance(axes, sigma2) -> np.ndarray:
    """The exact variance of every reconstructed cell when coefficient c has discrete Gaussian noise of variance
    parameter σ²·g_c² (g_c the product of its per-axis relative scales).

    The inverse is a Kronecker product, so cell i's variance is Σ over the combinations j of per-axis scale
    classes of Var DG(σ²·Π_k G_k[j_k]²) · Π_k F_k[i_k, j_k] (:meth:`HaarAxis.variance_factors_by_class`).  When
    every combination's exact variance is its continuous one times the same factor (σ² large: the discrete
    Gaussian's variance is σ² up to e^(−2π²σ²)), the sum factorises and is computed as a product."""
    classes = [a.variance_factors_by_class() for a in axes]
    combos = list(np.ndindex(*[scales.size for scales, _ in classes]))
    exact = {}
    for combo in combos:
        g2 = math.prod(float(classes[k][0][j]) ** 2 for k, j in enumerate(combo))
        exact[combo] = discrete_gaussian_variance(Fraction(sigma2) * Fraction(g2))
    base = discrete_gaussian_variance(Fraction(sigma2))
    separable = all(abs(v - base * math.prod(float(classes[k][0][j]) ** 2 for k, j in enumerate(c)))
                    <= 1e-13 * v for c, v in exact.items())
    if separable:
        return base * outer([(F * scales**2).sum(axis=1) for scales, F in classes])
    out = 0.0
    for combo, v in exact.items():
        out = out + v * outer([F[:, j] for (_, F), j in zip(classes, combo)])
    return np.asarray(out)


def _check_exact_products(axes) -> None:
    """The relative scales are per-axis floats multiplied in float64; the sensitivity Π_k Δ₂,k² is exact only if
    those products are exact, which 8-bit mantissas (and small whole numbers) guarantee: check it."""
    per_axis = [np.unique(a.relative_scales) for a in axes]
    for combo in np.ndindex(*[p.size for p in per_axis]):
        values = [float(per_axis[k][j]) for k, j in enumerate(combo)]
        if Fraction(math.prod(values)) != math.prod((Fraction(v) for v in values), start=Fraction(1)):
            raise ValueError("privelet: a product of relative noise scales is not exact in float64")


def _short(value: float, bits: int = 8) -> float:
    """``value`` rounded to ``bits`` significant bits (products of a few such numbers are exact in float64)."""
    mantissa, exponent = math.frexp(value)
    return math.ldexp(round(mantissa * 2**bits) / 2**bits, exponent)


def _inverse(axes, noisy: np.ndarray, ndim: int) -> np.ndarray:
    """The table of ``ndim`` axes whose coefficients are ``noisy``: every axis's inverse transform in turn (leading
    axes of ``noisy`` beyond the table's, such as an audit's replicated runs, are carried along)."""
    values = noisy
    lead = noisy.ndim - ndim
    for k, axis in enumerate(axes):
        values = axis.inverse(values, lead + k)
    return values


def outer(vectors: list[np.ndarray]) -> np.ndarray:
    """The d-way table whose entry (i, j, ...) is vectors[0][i] · vectors[1][j] · ..."""
    out = np.ones(())
    for v in vectors:
        out = np.multiply.outer(out, np.asarray(v, dtype=np.float64))
    return out


def _kind(axis) -> str:
    return {HaarAxis: "haar", NominalAxis: "nominal", _IdentityAxis: "identity"}[type(axis)]
