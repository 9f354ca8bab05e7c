"""Noisy measurements as frozen records: what an inference step reads.

A run selects public queries, measures them through its budget and infers an estimate from the answers.  Each
measurement is recorded as the noisy answers to one named public query with their noise variance; the inference
step of an algorithm is a function of the public plan its run selected and a list of these records.  A
measurement taken elsewhere and independently, such as auto's noisy total of the table, is one more record of
the same kind, so folding it in is the same inference step on a longer list: post-processing, no new noise.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Measurement", "TOTAL", "total_measurement", "total_measurements", "pooled_total", "by_query"]

#: The query of a measurement of the whole table's total (one number per run).
TOTAL = "the table's total"


@dataclass(frozen=True, eq=False)
class Measurement:
    """The noisy answers to one public query.

    ``query``: a public name of what was measured (hashable, e.g. ``("tree level", 2)`` or :data:`TOTAL`);
    ``values``: the noisy answers, as the budget returned them (an array whose last axis runs over the query's
    answers and whose leading axes, if any, over replicated runs; a float for a total); ``variance``: the noise
    variance of each answer, in records squared (the same for every answer of the query)."""

    query: Hashable
    values: Any
    variance: Any


def total_measurement(value: float, variance: float) -> Measurement:
    """A measurement of the table's total: ``value`` with noise variance ``variance`` (records squared)."""
    return Measurement(TOTAL, value, variance)


def total_measurements(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The measurements of the table's total among ``measurements``, in their order."""
    return [m for m in measurements if m.query == TOTAL]


def pooled_total(measurements: Iterable[Measurement]) -> Measurement | None:
    """The measurements of the table's total among ``measurements`` as one: None if there is none, the one
    itself if there is one, else their inverse-variance combination (the least-squares estimate of the total from
    all of them, of variance 1/Σ(1/v)).  Independent measurements of one query are summed up by this one exactly,
    so an inference step that folds in a single total folds in any number."""
    found = total_measurements(measurements)
    if len(found) < 2:
        return found[0] if found else None
    precision = sum(1 / float(m.variance) for m in found)
    return total_measurement(sum(float(m.values) / float(m.variance) for m in found) / precision, 1 / precision)


def by_query(measurements: Iterable[Measurement]) -> dict:
    """The measurements other than totals, by query (each query is measured once)."""
    return {m.query: m for m in measurements if m.query != TOTAL}
