"""The 95 % interval columns of a released table, and what they cover (post-processing of an Estimate).

Every released table has the same four interval columns, whatever the algorithm (``auto``'s choice may change from
run to run; the file layout must not):

* ``ci_lower``, ``ci_upper``: noisy_count ± h, with h the Estimate's exact 95 % half-width where it gives one,
  else 1.96 × √variance (a normal approximation from the exact noise variance); rounded outward to 2 decimals
  (the interval only widens) and cut at 0 (what it covers is never negative).  Empty where the algorithm gives
  no interval.
* ``ci_covers``: "count" where the interval covers the cell's true count; "bucket share" where the algorithm
  spreads one estimated total evenly over a bucket of several cells (``Estimate.groups``) and the interval covers
  the bucket's true total ÷ its cells; empty where there is no interval.
* ``bucket``: for a "bucket share" row, its bucket's number: 0, 1, … in the order the buckets first appear in
  the table's rows (C order); empty otherwise.

The report's entry per table (:func:`describe`) says what the table's intervals cover, by which method, or why
there are none.  Everything here reads the Estimate only: no data, no budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["Z_95", "COUNT", "SHARE", "NONE", "COLUMNS", "halfwidth", "bounds", "buckets", "covers_column",
           "bucket_column", "empty_columns", "covers", "describe", "NO_VARIANCE"]

Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval
COUNT, SHARE, NONE = "count", "bucket share", "none"
#: The interval columns, after count and noisy_count.
COLUMNS = ("ci_lower", "ci_upper", "ci_covers", "bucket")
#: Why a table has no intervals when its algorithm says nothing about them (neither a variance nor a reason).
NO_VARIANCE = "the algorithm states no noise variance for its cells"
_CATEGORIES = pd.CategoricalDtype([COUNT, SHARE])


def halfwidth(estimate) -> np.ndarray | np.float64 | None:
    """The interval's half-width per cell (flat), or its one value where it is the same on every cell and stored
    so (a broadcast view: no memory per cell); None where the Estimate gives no interval."""
    if estimate.halfwidth is not None:
        return _per_cell(estimate.halfwidth)
    if estimate.variance is not None:
        return Z_95 * np.sqrt(_per_cell(estimate.variance))
    return None


def bounds(noisy: np.ndarray, half) -> tuple[np.ndarray, np.ndarray]:
    """``noisy`` ± ``half`` rounded outward to 2 decimals and cut at 0: (ci_lower, ci_upper) as the table has
    them."""
    lower = np.floor(np.round((noisy - half) * 100, 6)) / 100
    upper = np.ceil(np.round((noisy + half) * 100, 6)) / 100
    return np.maximum(lower, 0.0), np.maximum(upper, 0.0)


def buckets(groups: np.ndarray | None) -> np.ndarray | None:
    """From ``Estimate.groups``: per cell (flat, C order) its bucket's number where the bucket has several cells,
    numbered 0, 1, … in order of first appearance, and −1 for a bucket of one cell (its interval covers its
    count); None where there are no buckets of several cells."""
    if groups is None:
        return None
    flat = np.asarray(groups).ravel()
    _, first, inverse, sizes = np.unique(flat, return_index=True, return_inverse=True, return_counts=True)
    shared = sizes > 1
    if not shared.any():
        return None
    number = np.full(first.size, -1, dtype=np.int64)
    kept = np.flatnonzero(shared)
    number[kept[np.argsort(first[kept], kind="stable")]] = np.arange(kept.size, dtype=np.int64)
    return number[inverse.ravel()]


def covers_column(n: int, numbers: np.ndarray | None, has_interval: bool) -> Callable[[int, int], pd.Categorical]:
    """The ci_covers column of ``n`` cells as a function (start, stop) -> its rows: ``numbers`` from
    :func:`buckets` (None: every interval covers its count), empty everywhere without an interval."""
    def rows(start: int, stop: int) -> pd.Categorical:
        stop = min(stop, n)
        size = max(stop - start, 0)
        if not has_interval:
            codes = np.full(size, -1, dtype=np.int8)
        elif numbers is None:
            codes = np.zeros(size, dtype=np.int8)
        else:
            codes = (numbers[start:stop] >= 0).astype(np.int8)
        return pd.Categorical.from_codes(codes, dtype=_CATEGORIES)
    return rows


def bucket_column(n: int, numbers: np.ndarray | None) -> Callable[[int, int], pd.api.extensions.ExtensionArray]:
    """The bucket column of ``n`` cells as a function (start, stop) -> its rows (nullable integers)."""
    def rows(start: int, stop: int):
        stop = min(stop, n)
        size = max(stop - start, 0)
        if numbers is None:
            return pd.arrays.IntegerArray(np.zeros(size, dtype=np.int64), np.ones(size, dtype=bool))
        part = numbers[start:stop]
        return pd.arrays.IntegerArray(part.copy(), part < 0)
    return rows


def empty_columns(n: int) -> dict[str, Callable]:
    """The four interval columns of a table of ``n`` cells without intervals (all empty)."""
    nothing = lambda a, b: np.full(max(min(b, n) - a, 0), np.nan)  # noqa: E731
    return {"ci_lower": nothing, "ci_upper": nothing, "ci_covers": covers_column(n, None, False),
            "bucket": bucket_column(n, None)}


def covers(estimate) -> str:
    """What the table's intervals cover: COUNT, SHARE (some bucket has several cells) or NONE."""
    if estimate.halfwidth is None and estimate.variance is None:
        return NONE
    if estimate.groups is None:
        return COUNT
    sizes = np.unique(np.asarray(estimate.groups).ravel(), return_counts=True)[1]
    return SHARE if np.any(sizes > 1) else COUNT


def describe(estimate) -> dict:
    """The report's ``interval`` entry of a table released from ``estimate``: ``covers`` ("count", "bucket share"
    or "none"), ``method`` (one line), and ``reason`` where there is none."""
    what = covers(estimate)
    if what == NONE:
        return {"covers": NONE, "method": "none", "reason": estimate.no_interval or NO_VARIANCE}
    of = "each bucket's estimated total, over its cells" if what == SHARE else "each cell's estimate"
    if estimate.halfwidth is not None:
        method = (f"exact: noisy_count ± the exact 95 % half-width of the noise of {of} (the smallest whole "
                  "number q with P(|noise| <= q) >= 95 %)")
    else:
        method = (f"normal approximation: noisy_count ± 1.96 × the exact noise sd of {of}, given the released "
                  "structure")
    return {"covers": what, "method": method}


def _per_cell(values) -> np.ndarray | np.float64:
    """A flat per-cell array, or its one value where it is one value broadcast over the table (no copy)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size and not any(values.strides):
        return values.flat[0]
    return values.ravel()
