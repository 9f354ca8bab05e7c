"""Audit cases for UGrid and AGrid (dphist/algorithms/grids.py): the honest algorithms and mutants that size their
grids from true counts.

UGrid, 4 × 4 cells, ε = 1, c = 1/10 (so the grid size reacts to a single record): D = one record in cell (0, 0),
D′ = two records there.  The grid part has ε_g = 9/10, so M = N·9: the mutant, which pays for the noisy total and
then uses max(1, true total), measures a 3 × 3 grid on D and a 4 × 4 grid on D′ with certainty; the number of
block counts, which the audit reads as the run's structure, tells the tables apart.

AGrid, 4 × 4 cells, ε = 1, with its level-1 floor lowered from 10 to 2 blocks per side (a public constant; the
mechanism is otherwise the same, and the table stays small enough for the audit's one-run-per-sample loop) and
c = 1000 (so the level-1 grid is the floor, 2 × 2), c2 = 1/10: D = the empty table, D′ = one record in cell
(0, 0).  The mutant sizes the level-2 grids from the TRUE level-1 counts: block (0, 0) stays one block on D
(count 0: side 1) and splits into 2 × 2 on D′ (count 1: ⌈√(1·(1/2)·(19/20)/(1/10))⌉ = 3, clipped to 2): caught
with certainty.  The honest algorithm sizes them from the noisy counts and must pass on the same pair.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .cases import Case

EPSILON = Fraction(1)


def _classes():
    from dphist.algorithms.grids import AGrid, UGrid, box_sums, grid_boxes  # noqa: PLC0415  (lazy, as the audit)

    class SmallAGrid(AGrid):
        """AGrid with a level-1 floor of 2 blocks per side (the paper's is 10), for 4 × 4 audit tables."""

        name = "agrid-floor-2"
        MIN_LEVEL1 = 2

    class TrueTotalUGrid(UGrid):
        """UGrid that pays for its noisy total and then sizes the grid from the true total (the bug)."""

        name = "mutant-ugrid-true-total"

        def noisy_total(self, counts, part):
            super().noisy_total(counts, part)
            return max(1, int(counts.sum()))

    class TrueCountAGrid(SmallAGrid):
        """AGrid whose level-2 grids are sized from the true level-1 counts (the bug)."""

        name = "mutant-agrid-true-level1-counts"

        def run(self, counts, budget, columns=None):
            self._true = np.asarray(counts, dtype=np.int64)
            self._next = 0
            return super().run(counts, budget, columns)

        def level1_blocks(self, shape, n_hat, eps):
            per_axis = super().level1_blocks(shape, n_hat, eps)
            lo, hi = grid_boxes((0, 0), shape, per_axis)
            self._true_level1 = box_sums(self._true, lo, hi)
            return per_axis

        def level2_side(self, noisy_count, eps):
            true = int(self._true_level1[self._next])
            self._next += 1
            return super().level2_side(true, eps)

    return UGrid, SmallAGrid, TrueTotalUGrid, TrueCountAGrid


def _pair(shape, cell, before: int) -> tuple[np.ndarray, np.ndarray]:
    data = np.zeros(shape, dtype=np.int64)
    data[cell] = before
    neighbour = data.copy()
    neighbour[cell] += 1
    return data, neighbour


def cases(mutants: bool = True) -> list:
    """The grid audit cases: honest UGrid and AGrid (module docstring) and, with ``mutants``, their true-count
    mutants on the same pairs."""
    UGrid, SmallAGrid, TrueTotalUGrid, TrueCountAGrid = _classes()
    u_data, u_neighbour = _pair((4, 4), (0, 0), 1)
    a_data, a_neighbour = _pair((4, 4), (0, 0), 0)
    u_opts = {"c": "1/10"}
    a_opts = {"c": 1000, "c2": "1/10"}
    out = [Case("ugrid (4, 4) one more record in a cell, c = 1/10", UGrid(**u_opts), u_data, u_neighbour, EPSILON),
           Case("agrid (4, 4) floor 2, add to an empty table, c2 = 1/10", SmallAGrid(**a_opts), a_data, a_neighbour,
                EPSILON)]
    if mutants:
        out += [Case("ugrid (4, 4) sizes the grid from the true total", TrueTotalUGrid(**u_opts), u_data,
                     u_neighbour, EPSILON, mutant=True),
                Case("agrid (4, 4) sizes level 2 from true level-1 counts", TrueCountAGrid(**a_opts), a_data,
                     a_neighbour, EPSILON, mutant=True)]
    return out


def ugrid_cases(mutants: bool = True) -> list:
    """UGrid's cases of :func:`cases` (the audit runs each algorithm's own cases by its name)."""
    return [c for c in cases(mutants) if c.name.startswith("ugrid")]


def agrid_cases(mutants: bool = True) -> list:
    """AGrid's cases of :func:`cases`."""
    return [c for c in cases(mutants) if c.name.startswith("agrid")]
