"""Post-processing of noisy answers: non-negativity that keeps the total, and integer rounding that keeps sums.

These steps read only noisy values and public facts, so they cost no privacy budget (algorithms.md §6).
They run in a fixed order: (consistency, in algorithms that need it), then non-negativity, then rounding.
"""

from __future__ import annotations

import numpy as np

__all__ = ["project_to_simplex", "round_preserving_sum", "nonnegative_integer_table"]


def project_to_simplex(values: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``values`` onto {x >= 0, sum(x) = total}, for total >= 0.

    Returns a float array of the same shape.  This is the least-squares non-negative correction when all cells
    have equal variance; unlike clamping at zero it does not inflate the total on sparse tables
    (Duchi et al. 2008, O(n log n)).
    """
    if total < 0:
        raise ValueError("total must be non-negative")
    v = np.asarray(values, dtype=np.float64)
    flat = v.ravel()
    if flat.size == 0:
        return v.copy()
    if total == 0:
        return np.zeros_like(v)
    u = np.sort(flat)[::-1]
    excess = np.cumsum(u) - total
    k = np.arange(1, u.size + 1)
    support = np.nonzero(u - excess / k > 0)[0]
    rho = support[-1] if support.size else 0  # empty only when total is lost to float rounding
    theta = excess[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def round_preserving_sum(values: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of non-negative ``values`` to integers summing to ``total``.

    Requires sum(floor(values)) <= total <= sum(ceil(values)), which holds when ``total`` is the sum of
    ``values`` rounded either way.  Every entry moves by less than 1; ties go to the lower flat index.
    Returns an int64 array of the same shape.
    """
    v = np.asarray(values, dtype=np.float64)
    flat = v.ravel()
    floor = np.floor(flat)
    out = floor.astype(np.int64)
    need = int(total) - int(out.sum())
    if need < 0 or need > flat.size:
        raise ValueError("total is not reachable by rounding each entry up or down")
    if need:
        remainder = flat - floor
        order = np.argsort(-remainder, kind="stable")
        out[order[:need]] += 1
    return out.reshape(v.shape)


def nonnegative_integer_table(estimate: np.ndarray, total: float | None = None) -> np.ndarray:
    """A non-negative integer table close to ``estimate`` that keeps its total.

    The total (``estimate.sum()`` unless given) is clamped at zero and rounded to the nearest integer; the
    table is projected onto the non-negative tables with that total, then rounded with the total preserved.
    """
    target = max(float(estimate.sum() if total is None else total), 0.0)
    target_int = int(np.floor(target + 0.5))
    projected = project_to_simplex(estimate, float(target_int))
    return round_preserving_sum(projected, target_int)
