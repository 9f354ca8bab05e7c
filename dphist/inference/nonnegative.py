"""Post-processing of noisy answers: non-negativity that keeps the total, and integer rounding that keeps sums.

These steps read only noisy values and public facts, so they cost no privacy budget (docs/algorithms.md §6).
They run in a fixed order: (consistency, in algorithms that need it), then non-negativity, then rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..algorithms.strategies.trees import SiblingGroups, Tree, product_tree

__all__ = ["nonnegative_integer_table", "TreeFit", "tree_least_squares", "tree_nonnegative_least_squares",
           "NNLS_MAX_LEAVES", "grouped_simplex_projection",
           "grouped_rounding", "tree_nonnegative_integers", "sum_by_parent", "with_sum_measurement"]


#: Fan-out of the public tree used to make tables without a tree of their own non-negative.
LOCAL_BRANCHING = 4
#: Most leaves :func:`tree_nonnegative_least_squares` takes: its solver works on a dense (measured nodes × leaves)
#: matrix, a few MB and tens of milliseconds at this size.
NNLS_MAX_LEAVES = 512


def nonnegative_integer_table(estimate: np.ndarray, total: float | None = None) -> np.ndarray:
    """A non-negative integer table close to ``estimate`` that keeps its total and its local sums.

    The total (``estimate.sum()`` unless given) is clamped at zero and rounded.  Then, top-down over a public
    tree of blocks (LOCAL_BRANCHING splits per axis and level), each block's sub-blocks are projected onto the
    non-negative vectors with the block's already-final sum, and rounded to it.  Compared with one projection of
    the whole table, negative noise is absorbed by nearby cells rather than by every non-zero cell of the table,
    so range sums stay much closer to their noisy values (sparse DPBench tables: 3-10x lower range error).
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    if estimate.size == 0:
        return np.zeros(estimate.shape, dtype=np.int64)
    tree = product_tree(estimate.shape, LOCAL_BRANCHING)
    sums = tree.level_sums(estimate)
    if total is not None:
        sums[0] = np.array([float(total)])
    return tree_nonnegative_integers(tree, sums)


# --------------------------------------------------------------------------------------------------------------
# Trees: exact generalised least squares in two linear passes (docs/algorithms.md §3.2)


@dataclass
class TreeFit:
    """The least-squares consistent estimate of every node of a tree.

    ``values[l]``: estimates of the nodes of level l (children add up to their parent exactly).
    ``variances[l]``: the variance of each estimate (NaN where the measurements do not identify the node).
    """

    values: list[np.ndarray]
    variances: list[np.ndarray]


def tree_least_squares(tree: Tree, noisy: list[np.ndarray | None], noise_variance: list) -> TreeFit:
    """Generalised least squares for measurements of tree nodes with independent noise.

    ``noisy[l]`` holds the noisy counts of level l (None: the level is not measured); ``noise_variance[l]`` is the
    noise variance of each (a scalar or one per node; ``math.inf`` marks a node that is not measured).  Returns
    the minimum-variance linear unbiased estimate of every node, which is exactly additive, and its variances.
    Linear time: one bottom-up pass (the best estimate of each node from its own subtree) and one top-down pass
    (spreading each parent's residual over its children in proportion to their variances).  Noisy arrays may
    carry leading axes (independent repetitions, for audits); the variances may not.
    """
    L = tree.levels
    y = [np.zeros(tree.sizes[l]) if noisy[l] is None else np.asarray(noisy[l], dtype=np.float64) for l in range(L)]
    # Where every level has one noise variance and every node of a level the same number of children (a grid
    # tree over a power of its branching), every node of a level has the same variances too: they are kept as
    # one number per level (the same formulas on scalars), which saves several full-size arrays per level.
    uniform = (all(noisy[l] is None or np.ndim(noise_variance[l]) == 0 for l in range(L))
               and all(c.size and c.min() == c.max() for c in tree.child_counts))
    if uniform:
        var = [np.float64(np.inf if noisy[l] is None else noise_variance[l]) for l in range(L)]
    else:
        var = [np.full(tree.sizes[l], np.inf) if noisy[l] is None else
               np.broadcast_to(np.asarray(noise_variance[l], dtype=np.float64), (tree.sizes[l],)) for l in range(L)]
    # Without repetitions, sums over siblings and shifts by parent go through the level's sibling groups (on a
    # grid over a power of the branching: reshapes, with no parent array for the leaves).
    flat = uniform and all(v.ndim == 1 for v in y)
    siblings = [None] + [tree.sibling_groups(l) if flat else None for l in range(1, L)]
    z, V = [None] * L, [None] * L
    S, VS = [None] * L, [None] * L
    if uniform:
        z[-1] = y[-1] if np.isfinite(var[-1]) else np.zeros_like(y[-1])
    else:
        z[-1] = np.where(np.isinf(var[-1]), 0.0, y[-1])
    V[-1] = var[-1].copy()
    for l in range(L - 2, -1, -1):
        if flat:
            S[l] = siblings[l + 1].sums(z[l + 1])
        else:
            S[l] = sum_by_parent(z[l + 1], tree.parents[l + 1], tree.sizes[l])
        if uniform:
            VS[l] = tree.child_counts[l][0] * V[l + 1]
        else:
            VS[l] = np.bincount(tree.parents[l + 1], weights=V[l + 1], minlength=tree.sizes[l])
        own, below = var[l], VS[l]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(np.isinf(own), 0.0, np.where(np.isinf(below), 1.0, below / (own + below)))
            w = np.where((own == 0) & (below == 0), 0.5, w)
            z[l] = w * y[l] + (1 - w) * S[l]
            V[l] = np.where(np.isinf(own), below, np.where(np.isinf(below), own, own * below / (own + below)))
            V[l] = np.where((own == 0) & (below == 0), 0.0, V[l])
    values, variances = [z[0]], [V[0]]
    for l in range(L - 1):
        if uniform:  # equal variances split a residual equally (what _residual_shares gives for them)
            share = 1.0 / tree.child_counts[l][0]
            with np.errstate(invalid="ignore"):
                variances.append(V[l + 1] + share**2 * (variances[l] - VS[l]))
            if flat:  # z + share * residual of the parent, as a shift by group
                values.append(siblings[l + 1].subtract(z[l + 1], -share * (values[l] - S[l])))
            else:
                values.append(z[l + 1] + share * (values[l] - S[l])[..., tree.parents[l + 1]])
            continue
        parent = tree.parents[l + 1]
        share = _residual_shares(V[l + 1], VS[l], parent, tree.child_counts[l])
        values.append(z[l + 1] + share * (values[l] - S[l])[..., parent])
        with np.errstate(invalid="ignore"):
            variances.append(V[l + 1] + share**2 * (variances[l] - VS[l])[parent])
    if uniform:  # one read-only view per level, shaped like the general case's arrays
        variances = [np.broadcast_to(np.float64(v), (size,)) for v, size in zip(variances, tree.sizes)]
    return TreeFit(values, variances)


def tree_nonnegative_least_squares(tree: Tree, noisy: list[np.ndarray | None], noise_variance: list) -> np.ndarray:
    """The leaves x ≥ 0 that minimise Σ_nodes (y_node − Σ_{leaf ∈ node} x_leaf)² / v_node over the measured nodes
    (the weighted least squares of :func:`tree_least_squares`, constrained to non-negative leaves).

    Same inputs as :func:`tree_least_squares` (one repetition: no leading axes).  Returns the leaves (float,
    ``tree.sizes[-1]`` of them); their sum is the fit's total, which may differ from the unconstrained fit's.
    Where the unconstrained fit has no negative leaf it is returned as it is: when the leaves are measured
    (as every tree of DAWA's is) the objective is strictly convex, so it is then the constrained minimum too.
    At most ``NNLS_MAX_LEAVES`` leaves.  Post-processing: it reads only noisy values and public variances."""
    leaves = tree.sizes[-1]
    if leaves > NNLS_MAX_LEAVES:
        raise ValueError(f"tree_nonnegative_least_squares takes at most {NNLS_MAX_LEAVES} leaves (here {leaves})")
    unconstrained = tree_least_squares(tree, noisy, noise_variance).values[-1]
    if unconstrained.min(initial=0.0) >= 0:
        return unconstrained
    from scipy.optimize import lsq_linear, nnls  # noqa: PLC0415  (slow to import; most runs never get here)
    rows, targets = [], []
    for level in range(tree.levels):
        if noisy[level] is None:
            continue
        variance = np.broadcast_to(np.asarray(noise_variance[level], dtype=np.float64), (tree.sizes[level],))
        measured = np.flatnonzero(np.isfinite(variance))
        weight = 1.0 / np.sqrt(variance[measured])
        member = np.zeros((tree.sizes[level], leaves))
        member[tree.labels(level), np.arange(leaves)] = 1.0  # node × leaf incidence of this level
        rows.append(member[measured] * weight[:, None])
        targets.append(np.asarray(noisy[level], dtype=np.float64)[measured] * weight)
    matrix, target = np.vstack(rows), np.concatenate(targets)
    try:
        solution, _ = nnls(matrix, target, maxiter=50 * leaves)
    except RuntimeError:  # the active-set method ran out of steps: the bounded solver reaches the same minimum
        solution = np.maximum(lsq_linear(matrix, target, bounds=(0, np.inf), method="bvls").x, 0.0)
    return solution


def with_sum_measurement(estimates: np.ndarray, variances: np.ndarray, total: float,
                         variance: float) -> tuple[np.ndarray, np.ndarray]:
    """Independent unbiased estimates z_j (variances v_j) of disjoint parts, refitted with one more independent
    measurement T of their sum (variance V): the least-squares estimate θ_j = z_j + v_j·(T − Σz)/(V + Σv), which
    adds up to the inverse-variance combination of Σz and T, and its variances v_j − v_j²/(V + Σv).  Returns
    (θ, variances)."""
    z, v = np.asarray(estimates, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    pooled = float(variance) + float(v.sum())
    return z + v * ((float(total) - float(z.sum())) / pooled), v - v * v / pooled


def sum_by_parent(values: np.ndarray, parent: np.ndarray, size: int) -> np.ndarray:
    """Add up the last axis of ``values`` into ``size`` parents (leading axes are independent repetitions)."""
    if values.ndim == 1:
        return np.bincount(parent, weights=values, minlength=size)
    from scipy import sparse  # (only for repeated answers: the audit's; a release never loads scipy.sparse)

    flat = values.reshape(-1, values.shape[-1])
    summed = sparse.csr_matrix((np.ones(parent.size), (parent, np.arange(parent.size))),
                               shape=(size, parent.size)) @ flat.T
    return np.asarray(summed).T.reshape(values.shape[:-1] + (size,))


def _residual_shares(child_var, sum_var, parent, counts):
    """The fraction of its parent's residual each child takes: V_child / V_sum, with the limits handled.

    Infinite child variance (an unidentified subtree) takes the residual, shared equally among such siblings;
    a zero sum of variances (all children exact) shares equally.
    """
    parent_sum = sum_var[parent]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = child_var / parent_sum
    infinite = np.isinf(child_var)
    if infinite.any() or np.isinf(parent_sum).any() or (parent_sum == 0).any():
        n_inf = np.bincount(parent, weights=infinite.astype(float), minlength=sum_var.size)[parent]
        share = np.where(np.isinf(parent_sum), np.where(infinite, 1.0 / np.maximum(n_inf, 1), 0.0), share)
        share = np.where(parent_sum == 0, 1.0 / counts[parent], share)
    return share


def grouped_simplex_projection(values: np.ndarray, groups: np.ndarray | None, totals: np.ndarray,
                               siblings: SiblingGroups | None = None) -> np.ndarray:
    """Project each group of ``values`` onto {v >= 0, sum(v) = totals[group]} (Euclidean), all groups at once.

    ``groups[i]`` is the group of values[i]; ``totals`` are >= 0.  Returns a float array like ``values``.  This is
    the least-squares non-negative correction when the values have equal variance; unlike clamping at zero it
    keeps the total (Duchi et al. 2008: sort each group, then one shift per group).  Time O(n log w) for groups
    of at most w entries (a tree's sibling groups: w is the fan-out); extra memory O(n) plus O(chunk).
    ``siblings`` is the grouping of ``groups`` if already known (a tree level's :meth:`Tree.sibling_groups`;
    ``groups`` may then be None).
    """
    values = np.asarray(values, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.float64)
    theta = np.zeros(totals.size)
    lost = []
    siblings = siblings or SiblingGroups.of(groups, totals.size)
    for ids, key in siblings.blocks():
        rows = siblings.take(values, key)
        u = np.sort(rows, axis=1)[:, ::-1]  # each group in decreasing order
        cs = np.cumsum(u, axis=1)
        t = totals[ids]
        active = u - (cs - t[:, None]) / np.arange(1, u.shape[1] + 1) > 0
        # The active set is a prefix of each sorted group; its length fixes the shift theta of the group.
        rho = active.sum(axis=1)
        last = cs[np.arange(ids.size), np.maximum(rho, 1) - 1]
        theta[ids] = np.where(rho > 0, (last - t) / np.maximum(rho, 1), np.inf)
        # A group whose total was lost to float rounding (rho == 0) gets its whole total on its largest entry.
        for r in np.flatnonzero((rho == 0) & (t > 0)):
            lost.append((siblings.member(key, r, int(np.argmax(rows[r]))), t[r]))
    out = siblings.subtract(values, theta)
    np.maximum(out, 0.0, out=out)
    for i, total in lost:
        out[i] = total
    return out


def grouped_rounding(values: np.ndarray, groups: np.ndarray | None, totals: np.ndarray,
                     siblings: SiblingGroups | None = None) -> np.ndarray:
    """Largest-remainder rounding within each group so that group g sums to the integer ``totals[g]``.

    Each entry moves by less than one when the group's real sum is within one of its total; among equal
    remainders the entry that comes first in ``values`` goes first.  int64 result; time O(n log w) for groups of
    at most w entries.  ``siblings``: as for :func:`grouped_simplex_projection`.
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.empty(values.shape, dtype=np.int64)
    for start in range(0, values.size, SiblingGroups.CHUNK_ENTRIES):  # no full-size temporaries
        part = slice(start, start + SiblingGroups.CHUNK_ENTRIES)
        out[part] = np.floor(values[part])
    siblings = siblings or SiblingGroups.of(groups, totals.size)
    # float dust can ask for one unit too many or too few
    need = np.clip(totals - siblings.sums(out).round().astype(np.int64), 0, siblings.counts)
    for ids, key in siblings.blocks():
        rows = siblings.take(values, key)
        # Stable: equal remainders keep the group's order, which is the entries' order in ``values``.
        by_remainder = np.argsort(np.floor(rows) - rows, axis=1, kind="stable")
        rank = np.empty_like(by_remainder)
        np.put_along_axis(rank, by_remainder, np.arange(rows.shape[1])[None, :], axis=1)
        siblings.add(out, key, rank < need[ids, None])
    return out


def tree_nonnegative_integers(tree: Tree, values: list[np.ndarray]) -> np.ndarray:
    """Non-negative integer cell counts that add up exactly through the whole tree.

    ``values[l]`` are real estimates of the nodes of level l (e.g. a :class:`TreeFit`'s values).  Top-down: the
    root estimate is clamped at 0 and rounded; then on each level every sibling group is projected onto the
    non-negative vectors with its parent's (already final) sum and rounded to it (docs/algorithms.md §6.2-6.3).
    Returns int64 counts of shape ``tree.shape``.  Time O(n log b) for fan-out b; extra memory a few arrays of
    the leaves' size (the projection of a level, its rounding and the sibling order).
    """
    real = np.array([max(float(values[0][0]), 0.0)])
    whole = np.rint(real).astype(np.int64)
    for l in range(1, tree.levels):
        siblings = tree.sibling_groups(l)
        real = grouped_simplex_projection(values[l], None, whole.astype(np.float64), siblings)
        whole = grouped_rounding(real, None, whole, siblings)
        del real
    return whole.reshape(tree.shape)
