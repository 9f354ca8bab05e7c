"""Contribution bounding as the audit sees it: rows of units in, counts bounded per unit, identity noise out.

A case's tables are row lists, one ``(unit, cell)`` pair per row, rather than counts: the mechanism under audit
starts before counting.  Each run draws its own choice of at most K rows per unit with
:func:`~dphist.read.contribution.bounded_rows` (the code a release runs), counts them into 8 cells, and measures the
counts with identity on a budget whose protected unit is K rows, as a release with ``--max-rows-per-unit K``
does (the audit makes the budget with ``factor = MAX_ROWS``: :attr:`BoundedUnits.factor`).  Neighbouring tables differ by
one whole unit (any number of rows) or by one row of an existing unit; both must stay within ε.
"""

from __future__ import annotations


import numpy as np

from dphist.algorithms.base import Algorithm, Estimate
from dphist.algorithms.identity import Identity
from dphist.publishing.unit_cap import EXCESS_CLIP, noisy_sums
from dphist.read.contribution import UnitBound, UnitRows, bounded_rows
from dphist.privacy import BitSource, PrivacyBudget

__all__ = ["BoundedUnits", "UnboundedUnits", "unit_pairs", "CapDropped", "UnclippedDropped", "cap_pair", "MAX_ROWS",
           "CELLS"]

MAX_ROWS = 2
CELLS = 8


class BoundedUnits(Algorithm):
    """At most MAX_ROWS rows per unit (a random choice per run), counted and measured by identity, the budget
    protecting units of MAX_ROWS rows."""

    name = "unit-bounded-identity"
    summary = "contribution bounding per privacy unit, then identity (audit adapter)"
    #: One Python row choice per run: the audit runs it once per repetition.
    data_adaptive = True
    #: Rows per protected unit: the audit's budget scales every sensitivity by this.
    factor = MAX_ROWS

    def choose(self, units: np.ndarray, bits: BitSource) -> np.ndarray:
        return bounded_rows(units, MAX_ROWS, bits)

    def run(self, rows: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        units, cells = rows[:, 0], rows[:, 1]
        counts = np.bincount(cells[self.choose(units, budget.bits)], minlength=CELLS)
        return Identity().run(counts, budget)


class UnboundedUnits(BoundedUnits):
    """Mutant: every row of a unit counted (the bound forgotten), noise still for K rows per unit."""

    name = "mutant-unit-bound-forgotten"

    def choose(self, units: np.ndarray, bits: BitSource) -> np.ndarray:
        return np.ones(units.size, dtype=bool)


def unit_pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Row lists (unit, cell) and their neighbours: one whole unit of 5 rows more, and one row more of a unit
    below K rows (a row-level neighbour, which costs ε/K)."""
    base = np.array([[0, 0], [0, 3], [1, 1], [1, 1], [1, 5], [2, 2], [3, 7], [3, 6], [4, 4]], dtype=np.int64)
    whole = np.vstack([base, [[9, 0], [9, 0], [9, 1], [9, 2], [9, 3]]])
    one_row = np.vstack([base, [[4, 0]]])
    return [("one whole unit of 5 rows", base, whole), ("one row more of a unit below K", base, one_row)]


class CapDropped(Algorithm):
    """What a cap of MAX_ROWS rows per unit kept and dropped (each unit's dropped rows counted up to
    EXCESS_CLIP × MAX_ROWS), measured as a release under the cap measures it
    (:func:`~dphist.publishing.unit_cap.noisy_sums`, on a budget protecting units of MAX_ROWS rows)."""

    name = "unit-cap-dropped"
    summary = "the rows a unit cap kept and dropped, measured (audit adapter)"
    factor = MAX_ROWS

    def sums(self, rows: UnitRows) -> tuple[int, int]:
        return rows.kept_and_excess(MAX_ROWS, EXCESS_CLIP * MAX_ROWS)

    def run(self, rows: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        tally = UnitRows()
        tally.add(rows[:, 0])
        noisy, _ = noisy_sums(*self.sums(tally), budget, UnitBound("unit", MAX_ROWS))
        return Estimate(values=np.asarray(noisy, dtype=np.float64))


class UnclippedDropped(CapDropped):
    """Mutant: every dropped row counted (no clip at EXCESS_CLIP × K), noise still for the clipped sums."""

    name = "mutant-unit-cap-dropped-unclipped"

    def sums(self, rows: UnitRows) -> tuple[int, int]:
        kept, _ = rows.kept_and_excess(MAX_ROWS, 0)
        everything, _ = rows.kept_and_excess(2 ** 62, 0)
        return kept, everything - kept


def cap_pair() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Row lists (unit, cell) and the neighbour with one whole unit of 40 rows more: it adds K = 2 rows to the
    kept and 38 to the dropped, of which the clip counts 3K = 6 (the sums move by their whole sensitivity, K + 3K);
    without the clip they move by 40."""
    base = unit_pairs()[0][1]
    whole = np.vstack([base, np.column_stack([np.full(40, 9), np.arange(40) % CELLS])])
    return [("one whole unit of 40 rows", base, whole)]
