"""Mutually consistent marginals from separate noisy measurements (docs/algorithms.md §6.4, strategy "separate").

Each marginal i covers a set of columns S_i and is measured with independent noise of variance v_i per cell.
Their true values are sums of one table x over the union U of the columns.  Three steps, all post-processing:

1. **Exact least squares** (:func:`consistent_marginals`).  Write every table as the sum of its orthogonal
   ANOVA components T_α, one per column subset α ⊆ S (α = ∅ is the mean; α = {a} the main effect of a; ...).
   The α-component of marginal i is c_i·x_α, where x_α is the α-component of x and c_i = ∏_{a ∈ U∖S_i} n_a is
   the number of cells of x summed into one cell of marginal i; its noise is white noise projected on the
   α-subspace.  So each α is estimated separately, by the weighted mean of T_i,α / c_i over the marginals that
   contain α with weights ∝ c_i / v_i, and each marginal is rebuilt from the combined components.  This is the
   generalised least-squares estimate of all the marginals jointly (the noise is independent across α and
   across marginals), so every shared sub-marginal and the grand total agree exactly.  Components that only one
   marginal contains are left as measured.
2. **Expected error** (:func:`expected_errors`).  GLS is linear and unbiased, and the per-α structure gives the
   exact expected squared error of marginal i summed over its cells:

       E‖ŷ_i − y_i‖² = Σ_{α ⊆ S_i} d_α · c_i / Λ_α,   d_α = ∏_{a ∈ α} (n_a − 1),   Λ_α = Σ_{j: α ⊆ S_j} c_j / v_j,

   which is n_i·v_i when marginal i shares nothing.  The same quantity for one measurement of x with variance v
   per cell, each marginal a sum of it (strategy "full"), is n_i·c_i·v = |U|·v.
3. **Non-negative integers that keep the agreement** (:func:`nonnegative_integer_marginals`).  The sub-tables
   that two or more marginals share (the intersections S_i ∩ S_j, closed under intersection, and ∅) are fixed
   first, smallest first; each table is then made non-negative and integral with its largest shared sub-tables
   held fixed.  With one such sub-table that is a projection onto the simplex in each of its cells; with two it
   is a transportation problem, solved exactly as the L1-closest integer table by a linear program whose
   constraint matrix is totally unimodular (so its optimal vertex is integral).  Sets in which some table has
   three or more largest shared sub-tables (e.g. ab, bc, ca, abc) are refused: integer tables with three fixed
   margins may not exist.

Everything here reads only noisy values and public shapes.
"""

from __future__ import annotations

from itertools import combinations
from math import prod

import numpy as np

from .nonnegative import grouped_rounding, grouped_simplex_projection

__all__ = ["shared_subsets", "check_separable", "consistent_marginals", "expected_errors",
           "full_table_errors", "nonnegative_integer_marginals"]

Columns = tuple[str, ...]


def _canonical(columns, order: Columns) -> Columns:
    return tuple(sorted(columns, key=order.index))


def shared_subsets(marginals: list[Columns]) -> list[Columns]:
    """The column sets shared by two or more marginals: pairwise intersections closed under intersection, with
    ∅ (the grand total) first, then by size.  Columns are in the order of first appearance."""
    order = tuple(dict.fromkeys(c for m in marginals for c in m))
    nodes = {frozenset()}
    for a, b in combinations(marginals, 2):
        nodes.add(frozenset(a) & frozenset(b))
    changed = True
    while changed:
        new = {a & b for a, b in combinations(nodes, 2)} - nodes
        nodes |= new
        changed = bool(new)
    return sorted((_canonical(n, order) for n in nodes), key=lambda n: (len(n), [order.index(c) for c in n]))


def _downward_closure(nodes: list[Columns], order: Columns) -> list[Columns]:
    """Every subset of every node (each once, in canonical order)."""
    subsets = {frozenset(s) for n in nodes for r in range(len(n) + 1) for s in combinations(n, r)}
    return sorted((_canonical(s, order) for s in subsets), key=lambda s: (len(s), [order.index(c) for c in s]))


def _largest_below(table: Columns, nodes: list[Columns]) -> list[Columns]:
    """The largest shared column sets strictly inside ``table`` (none contains another)."""
    inside = [n for n in nodes if set(n) < set(table)]
    return [n for n in inside if not any(set(n) < set(o) for o in inside)]


def check_separable(marginals: list[Columns]) -> str | None:
    """None if strategy "separate" can make this set non-negative and integral; otherwise why not."""
    nodes = shared_subsets(marginals)
    for table in nodes + [tuple(m) for m in marginals]:
        below = _largest_below(table, nodes)
        if len(below) > 2:
            parts = ", ".join("{" + ",".join(b) + "}" for b in below)
            return (f"table {{{','.join(table)}}} shares {len(below)} sub-tables ({parts}) with other marginals; "
                    "integer tables with three fixed margins may not exist")
    return None


def _component_weights(marginals: list[Columns], sizes: dict[str, int], variances: list[float]):
    union = tuple(dict.fromkeys(c for m in marginals for c in m))
    # c_i relative to the smallest: only ratios c_i / c_j matter, and |U| itself may overflow a float.
    log_c = [sum(np.log(sizes[a]) for a in union if a not in m) for m in marginals]
    shift = min(log_c)
    c = [float(np.exp(lc - shift)) for lc in log_c]
    return union, c, [ci / v for ci, v in zip(c, variances)]


def expected_errors(marginals: list[Columns], sizes: dict[str, int], variances: list[float]) -> list[float]:
    """E‖ŷ_i − y_i‖² (summed over the cells of marginal i) after exact least-squares consistency, for
    independent noise of variance ``variances[i]`` on every cell of marginal i."""
    _, c, precision = _component_weights(marginals, sizes, variances)
    out = []
    for i, m in enumerate(marginals):
        total = 0.0
        for r in range(len(m) + 1):
            for alpha in combinations(m, r):
                lam = sum(p for p, other in zip(precision, marginals) if set(alpha) <= set(other))
                total += prod(sizes[a] - 1 for a in alpha) * c[i] / lam
        out.append(total)
    return out


def full_table_errors(marginals: list[Columns], sizes: dict[str, int], variance: float) -> list[float]:
    """E‖ŷ_i − y_i‖² for each marginal summed from one measurement of the table over all their columns with
    independent noise of ``variance`` per cell: |U|·v for every marginal (|U| the full table's cells)."""
    union = tuple(dict.fromkeys(c for m in marginals for c in m))
    cells = prod(sizes[a] for a in union)
    return [float(cells) * variance for _ in marginals]


def _to_order(table: np.ndarray, columns: Columns, order: Columns) -> np.ndarray:
    """``table`` (axes ``columns``) with its axes in canonical ``order``."""
    target = _canonical(columns, order)
    return np.transpose(table, [columns.index(c) for c in target])


def _component(table: np.ndarray, columns: Columns, alpha: Columns) -> np.ndarray:
    """The ANOVA α-component of ``table`` (axes ``columns``, α ⊆ columns, both in the same order), as an array
    over ``columns`` with size-1 axes outside α: Σ_{β ⊆ α} (−1)^{|α∖β|} mean over the axes outside β."""
    out = 0.0
    for r in range(len(alpha) + 1):
        for beta in combinations(alpha, r):
            axes = tuple(k for k, c in enumerate(columns) if c not in beta)
            mean = table.mean(axis=axes, keepdims=True) if axes else table
            out = out + (-1) ** (len(alpha) - r) * mean
    return out


def consistent_marginals(noisy: list[np.ndarray], marginals: list[Columns], variances: list[float]) -> list[np.ndarray]:
    """The generalised least-squares estimates of all the marginals from their separate noisy measurements.

    ``noisy[i]`` has one axis per column of ``marginals[i]`` (in that order) and independent noise of variance
    ``variances[i]`` per cell.  Returns float arrays of the same shapes whose sums over any shared columns (and
    grand totals) agree exactly, up to float rounding.
    """
    sizes = {c: n for m, y in zip(marginals, noisy) for c, n in zip(m, y.shape)}
    union, c, precision = _component_weights(marginals, sizes, variances)
    ordered = [_to_order(np.asarray(y, dtype=np.float64), tuple(m), union) for y, m in zip(noisy, marginals)]
    cols = [_canonical(m, union) for m in marginals]
    out = [y.copy() for y in ordered]
    for alpha in _downward_closure(shared_subsets(list(marginals)), union):
        having = [i for i, m in enumerate(cols) if set(alpha) <= set(m)]
        # Each marginal's α-component, divided by c_i, as an array over α alone: all estimate x_α.
        own = {i: np.reshape(_component(ordered[i], cols[i], alpha) / c[i], [sizes[a] for a in alpha])
               for i in having}
        weight = sum(precision[i] for i in having)
        combined = sum(precision[i] * own[i] for i in having) / weight
        for i in having:
            shape = [sizes[a] if a in alpha else 1 for a in cols[i]]
            out[i] += c[i] * np.reshape(combined - own[i], shape)
    return [np.transpose(y, [cols[i].index(col) for col in marginals[i]]) for i, y in enumerate(out)]


def _groups(columns: Columns, sub: Columns, sizes: dict[str, int]) -> np.ndarray:
    """For each cell of the table over ``columns`` (C order), the flat index of its cell in the table over
    ``sub`` ⊆ ``columns`` (both in canonical order)."""
    index = np.zeros([sizes[a] for a in columns], dtype=np.int64)
    stride = 1
    for a in reversed(sub):
        shape = [sizes[a] if b == a else 1 for b in columns]
        index = index + np.arange(sizes[a]).reshape(shape) * stride
        stride *= sizes[a]
    return index.ravel()


def _project(table: np.ndarray, columns: Columns, sub: Columns) -> np.ndarray:
    axes = tuple(k for k, c in enumerate(columns) if c not in sub)
    return table.sum(axis=axes) if axes else table


def nonnegative_integer_marginals(estimates: list[np.ndarray], marginals: list[Columns]) -> list[np.ndarray]:
    """Non-negative integer tables close to consistent ``estimates`` that agree exactly on every shared
    sub-table and on the grand total.

    Shared sub-tables are fixed first (∅, then by size), each from the estimate of a marginal containing it; a
    table with one largest fixed sub-table is projected onto the non-negative values with each fixed cell's sum
    (Euclidean) and rounded to it by largest remainders; a table with two is the L1-closest non-negative integer
    table with both held fixed.  Requires :func:`check_separable` to pass.  Returns int64 arrays shaped like
    ``estimates``.
    """
    marginals = [tuple(m) for m in marginals]
    sizes = {c: n for m, y in zip(marginals, estimates) for c, n in zip(m, np.shape(y))}
    union = tuple(dict.fromkeys(c for m in marginals for c in m))
    cols = [_canonical(m, union) for m in marginals]
    ordered = [_to_order(np.asarray(y, dtype=np.float64), m, union) for y, m in zip(estimates, marginals)]
    nodes = shared_subsets(marginals)
    fixed: dict[Columns, np.ndarray] = {}

    def settle(columns: Columns, target: np.ndarray) -> np.ndarray:
        below = _largest_below(columns, nodes)
        if not columns:
            return np.rint(np.maximum(target, 0.0)).astype(np.int64)
        if len(below) == 1:
            (sub,) = below
            groups = _groups(columns, sub, sizes)
            totals = fixed[sub].ravel()
            real = grouped_simplex_projection(target.ravel(), groups, totals.astype(np.float64))
            return grouped_rounding(real, groups, totals).reshape(target.shape)
        if len(below) == 2:
            return _transport(target, [_groups(columns, b, sizes) for b in below],
                              [fixed[b].ravel() for b in below])
        raise ValueError(f"{columns}: {len(below)} largest shared sub-tables; see check_separable")

    for node in nodes:
        source = next(i for i, m in enumerate(cols) if set(node) <= set(m))
        fixed[node] = settle(node, _project(ordered[source], cols[source], node))
    out = []
    for i, m in enumerate(marginals):
        whole = fixed[cols[i]] if cols[i] in fixed else settle(cols[i], ordered[i])
        out.append(np.transpose(whole, [cols[i].index(col) for col in m]))
    return out


def _transport(target: np.ndarray, groups: list[np.ndarray], totals: list[np.ndarray]) -> np.ndarray:
    """The non-negative integer table x minimising Σ|x − target| with Σ_{cells in group g} x = totals[k][g] for
    both groupings k (two fixed margins that agree on their common total).

    The cost |x − y| is replaced by its linear interpolation between integers (equal at every integer), written
    as three bounded parts per cell: x = b + u − t + p with b = max(⌊y⌋, 0), u ∈ [0, 1], t ∈ [0, b], p ≥ 0.  The
    equality rows are the incidence matrix of a bipartite graph (cells are edges between their two groups), so
    the matrix is totally unimodular and the optimal vertex is integral.
    """
    # scipy.optimize takes ~0.2 s to import: only the marginal sets that need a transport load it.
    from scipy import sparse
    from scipy.optimize import linprog

    y = target.ravel()
    n = y.size
    base = np.maximum(np.floor(y), 0.0)
    frac = y - base
    slope_up = np.where(frac >= 0, 1.0 - 2.0 * frac, 1.0)  # cost of moving from b to b + 1
    g0, g1 = groups
    n0 = totals[0].size
    rows = np.concatenate([g0, n0 + g1])
    cells = np.concatenate([np.arange(n), np.arange(n)])
    incidence = sparse.csr_matrix((np.ones(2 * n), (rows, cells)), shape=(n0 + totals[1].size, n))
    a_eq = sparse.hstack([incidence, -incidence, incidence]).tocsc()
    b_eq = np.concatenate(totals).astype(np.float64) - incidence @ base
    bounds = np.concatenate([np.column_stack([np.zeros(n), np.ones(n)]),
                             np.column_stack([np.zeros(n), base]),
                             np.column_stack([np.zeros(n), np.full(n, np.inf)])])
    cost = np.concatenate([slope_up, np.ones(n), np.ones(n)])
    result = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs-ds")
    if result.status != 0:
        raise RuntimeError(f"transportation problem not solved: {result.message}")
    u, t, p = np.split(result.x, 3)
    x = base + u - t + p
    whole = np.rint(x).astype(np.int64)
    if np.abs(x - whole).max(initial=0.0) > 1e-6 or (whole < 0).any():
        raise RuntimeError("transportation problem: the solution is not a non-negative integer table")
    for g, tot in zip(groups, totals):
        if not np.array_equal(np.bincount(g, weights=whole, minlength=tot.size).astype(np.int64), tot):
            raise RuntimeError("transportation problem: the solution does not keep the fixed margins")
    return whole.reshape(target.shape)
