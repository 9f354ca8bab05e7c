"""Iterative proportional fitting (IPF): the maximum-entropy table with given marginals.

Pure numerics, no I/O.  ``fit_max_entropy`` takes marginal tables (each an array with one axis per column) and
returns a table over the union of their columns whose marginals equal them.  Among all non-negative tables with
those marginals it is the one of largest entropy, equivalently of smallest Kullback–Leibler divergence from the
uniform table: it adds no association between columns that the marginals do not contain.  For example, fitted to
{ab, bc} it is n_ab · n_bc / n_b, in which a and c are independent given b.

Cost: each sweep sums the table down to every marginal and rescales it, O(cells × marginals) time and one table
of memory (float64); a table over more than ``MAX_CELLS`` = 2**24 cells is refused before it is allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..text import quoted_list

__all__ = ["MAX_CELLS", "FitInfo", "fit_max_entropy"]

MAX_CELLS = 2**24


@dataclass(frozen=True)
class FitInfo:
    """How a fit ended: sweeps done, whether the tolerance was met, and the largest absolute difference between a
    fitted marginal cell and its target at the end."""

    iterations: int
    converged: bool
    max_deviation: float


def fit_max_entropy(marginals: list[tuple[tuple[str, ...], np.ndarray]], sizes: dict[str, int],
                    tol: float | None = None, max_iter: int = 1000) -> tuple[tuple[str, ...], np.ndarray, FitInfo]:
    """The maximum-entropy table over the union of the marginals' columns, fitted to them by IPF.

    ``marginals``: ``(columns, target)`` pairs, ``target`` a non-negative array with one axis per column, of
    length ``sizes[column]``.  Returns ``(axes, table, info)``: ``axes`` is the union of the columns in order of
    first appearance, ``table`` a float64 array with one axis per name in ``axes``, ``info`` a :class:`FitInfo`.

    Math.  Start from the uniform table with the first target's total.  One sweep rescales the table once per
    marginal, in the given order: every cell x is multiplied by target_m(x_m) / fit_m(x_m), where fit_m is the
    current table summed down to the marginal's columns (a cell whose target is 0 becomes 0; 0/0 counts as 0).
    The fit stops when every fitted marginal cell is within ``tol`` of its target (default: 1e-6 × the largest
    target total), checked before each sweep, or after ``max_iter`` sweeps, with ``info.converged`` False.

    When the targets are the marginals of some non-negative table (they agree on shared columns and totals), the
    fitted marginals converge to the targets and the table converges to the one of maximum entropy (minimum
    Kullback–Leibler divergence from uniform) among the tables with exactly those marginals; where a positive
    such table exists this limit is positive, of the product form ∏_m φ_m(x_m).  Without cycles among the
    marginals (e.g. {ab, bc}, listed in that order) one sweep is exact; with cycles (ab, bc, ca) convergence can
    be slow.  Targets that disagree (by more than ``tol``) have no fit and never meet it.

    Raises UsageError if the union table would have more than ``MAX_CELLS`` cells (before allocating it) and
    ValueError for malformed arguments.
    """
    axes = tuple(dict.fromkeys(c for columns, _ in marginals for c in columns))
    missing = [a for a in axes if a not in sizes]
    if not marginals or missing:
        raise ValueError(f"fit_max_entropy: give at least one marginal and a size for every column {missing}")
    shape = tuple(int(sizes[a]) for a in axes)
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise UsageError(f"a table over {quoted_list(axes)} would have {cells:,} cells, more than the 2**24 "
                         f"({MAX_CELLS:,}) a joint fit allows: use fewer or coarser columns")
    # Each target with its axes in the union's order and length-1 axes for the other columns, so that it
    # broadcasts against the table; ``drop`` names the axes a marginal sums over.
    targets = []
    for columns, target in marginals:
        target = np.asarray(target, dtype=np.float64)
        if len(set(columns)) != len(columns) or target.shape != tuple(sizes[c] for c in columns):
            raise ValueError(f"fit_max_entropy: the target over {columns} must have shape "
                             f"{tuple(sizes[c] for c in columns)}, one axis per distinct column")
        if not np.isfinite(target).all() or (target < 0).any():
            raise ValueError(f"fit_max_entropy: the target over {columns} must be finite and non-negative")
        order = sorted(range(len(columns)), key=lambda i: axes.index(columns[i]))
        aligned = np.transpose(target, order).reshape([sizes[a] if a in columns else 1 for a in axes])
        drop = tuple(i for i, a in enumerate(axes) if a not in columns)
        targets.append((aligned, drop))
    if tol is None:
        tol = 1e-6 * max(aligned.sum() for aligned, _ in targets)

    table = np.full(shape, targets[0][0].sum() / cells)
    iterations = 0
    while True:
        deviation = max(float(np.abs(table.sum(axis=drop, keepdims=True) - aligned).max())
                        for aligned, drop in targets)
        converged = bool(deviation <= tol)
        if converged or iterations >= max_iter:
            return axes, table, FitInfo(iterations, converged, deviation)
        for aligned, drop in targets:
            current = table.sum(axis=drop, keepdims=True)
            table *= np.divide(aligned, current, out=np.zeros_like(aligned), where=current > 0)
        iterations += 1
