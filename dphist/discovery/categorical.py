"""The categories of a text column, found privately by partition selection (docs/algorithms.md §9.3).

(ε, δ)-DP: the candidates are the labels of the rows kept by contribution bounding (a label seen only in dropped
rows would be a candidate one unit added without being counted); every candidate's count gets noise of scale m/ε
(Δ = 1), and a label is kept if its noisy count exceeds m + t, with t the smallest integer for which
P(noise > t) ≤ δ′ = 1 − (1 − δ)^(1/m).  A label held by the protected unit alone (count ≤ m, at most m such labels)
then appears with probability at most δ.  Rare categories are suppressed by design; how many candidates there were
is private and is not reported.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..declare.schema import normalise_label, parse_schema
from ..privacy import PrivacyBudget, discrete_laplace_tail, format_fraction
from ..text import quoted

__all__ = ["categorical_domain", "present_labels"]


def present_labels(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """The labels that occur in ``codes`` (ids into ``labels``; -1 for missing), and ``codes`` renumbered to
    them.  Partition selection's candidates must be exactly the labels of the counted rows."""
    present = np.unique(codes[codes >= 0])
    renumber = np.full(len(labels) + 1, -1, dtype=np.int64)  # the last slot maps -1 to -1
    renumber[present] = np.arange(present.size)
    return renumber[codes.astype(np.int64)], [labels[i] for i in present]


def categorical_domain(name: str, codes: np.ndarray, labels: list[str], max_categories: int,
                       budget: PrivacyBudget):
    """Partition selection over ``labels`` (the candidates: exactly the labels of the counted rows), spending all
    of ``budget`` (ε and δ); the threshold is set for the budget's protected unit of m = ``budget.factor`` rows."""
    if budget.delta <= 0:
        raise ValueError(f"column {quoted(name)}: partition selection needs delta > 0")
    counts = np.bincount(codes[codes >= 0], minlength=len(labels))
    threshold = budget.partition_threshold()  # a unit of m rows may hold m labels alone: δ′ each, and m more
    # One noisy count per label present in the data: how many there are is itself private (not published).
    noisy, _ = budget.laplace(counts, 1, budget.epsilon,
                              f"{name}: partition selection (count per label, kept above {threshold})",
                              composition="parallel over disjoint labels", delta=budget.delta, publish_count=False)
    kept = np.flatnonzero(noisy > threshold)
    if kept.size > max_categories:  # the largest noisy counts; ties by label, never by data order
        kept = np.array(sorted(kept, key=lambda i: (-noisy[i], labels[i]))[:max_categories])
    values = sorted(normalise_label(labels[i]) for i in kept)
    # A category of ``sure`` rows or more is missed only if its noise is at most threshold − sure.
    sure = math.ceil(Fraction(3, 2) * threshold)
    missed = discrete_laplace_tail(budget.scale(1, budget.epsilon), sure - threshold - 1)
    report = {"column": name, "kind": "categorical", "method": "partition selection (Laplace threshold)",
              "epsilon": format_fraction(budget.epsilon), "delta": format_fraction(budget.delta),
              "threshold": threshold, "categories": len(values),
              "keeps": {"threshold_rows": threshold, "kept_from_rows": sure, "missed_at_most": float(f"{missed:.2g}"),
                        "note": f"a category is kept when its noisy count is above {threshold} rows: one of {sure} "
                                f"rows or more is missed with probability at most {missed:.2g}, one of fewer than "
                                f"{threshold} rows is kept rarely, and one held by a single protected unit alone "
                                "with probability at most delta"}}
    if not values:
        return None, {**report, "failed": "no category is held by enough records to be released with this "
                      "epsilon and delta; declare its values in a schema"}
    declaration = {"type": "categorical", "values": values, "nulls": "category"}
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    return column, {**report, "domain": column.describe(),
                    "capped": bool(np.count_nonzero(noisy > threshold) > max_categories)}
