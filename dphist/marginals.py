"""Sets of marginal tables released from one measurement of the full table over their columns.

Strategy "full" (algorithms.md §6.4, option a): measure the contingency table over the union of the marginals'
columns once, post-process it to non-negative integers, and sum it down to each marginal.  Every marginal is then
a post-processing of one ε-DP release, so the set costs ε (not ε per marginal), and the marginals agree exactly:
any two share the same sub-marginals and the same grand total, because they are sums of the same integer table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .errors import UsageError

__all__ = ["parse_marginals", "union_of", "derive_marginal", "labelled_frame"]


def parse_marginals(value: Any) -> list[tuple[str, ...]]:
    """``"age,sex;sex,income"`` or ``[["age", "sex"], ["sex", "income"]]`` into tuples of column names."""
    if isinstance(value, str):
        groups = [[c.strip() for c in part.split(",")] for part in value.split(";") if part.strip()]
    else:
        try:
            groups = [[str(c).strip() for c in ([g] if isinstance(g, str) else g)] for g in value]
        except TypeError:
            raise UsageError("marginals must be like 'age,sex;sex,income' or a list of column lists") from None
    if not groups:
        raise UsageError("marginals: give at least one table, like 'age,sex;sex,income'")
    out = []
    for group in groups:
        if not group or not all(group):
            raise UsageError("marginals: every table needs column names, like 'age,sex;sex,income'")
        if len(set(group)) != len(group):
            raise UsageError(f"marginals: a column is listed twice in '{','.join(group)}'")
        if tuple(group) in out:
            raise UsageError(f"marginals: '{','.join(group)}' is listed twice")
        out.append(tuple(group))
    return out


def union_of(marginals: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The columns of all marginals, in order of first appearance (the full table's axes)."""
    return tuple(dict.fromkeys(c for m in marginals for c in m))


def derive_marginal(full: np.ndarray, axes: tuple[str, ...], columns: tuple[str, ...]) -> np.ndarray:
    """``full`` (one axis per name in ``axes``) summed over the axes not in ``columns``, with its axes in the
    order of ``columns``."""
    keep = [axes.index(c) for c in columns]
    drop = tuple(i for i in range(len(axes)) if i not in keep)
    summed = full.sum(axis=drop) if drop else full
    remaining = [i for i in range(len(axes)) if i in keep]  # axes left after the sum, in their old order
    return np.transpose(summed, [remaining.index(i) for i in keep])


def labelled_frame(columns: list, values: dict[str, np.ndarray]) -> pd.DataFrame:
    """A tidy table in C order over ``columns`` (schema column objects): their labels, then ``values`` (each
    an array of the table's shape)."""
    sizes = [c.n_cells for c in columns]
    n = int(np.prod(sizes, dtype=np.int64))
    flat = np.arange(n)
    data: dict[str, Any] = {}
    stride = n
    for column, size in zip(columns, sizes):
        stride //= size
        position = (flat // stride) % size
        for label, labels in column.labels().items():
            # Infer the label type once on the axis's few labels, then repeat them (fast for big tables).
            data[label] = pd.Series(pd.array(labels)).take(position).reset_index(drop=True)
    for name, array in values.items():
        data[name] = np.asarray(array).ravel()
    return pd.DataFrame(data)
