"""Audit cases for DAWA (dphist/algorithms/dawa.py): the honest algorithm and a mutant whose partition reads the
true deviations.

The pair, on 8 cells at ε = 1 with the default options (ratio 2/5: ε₁ = 2/5 for the partition, Δ = 15/4, noise
scale b = Δ/ε₁ = 9.375 on the deviations of the two top levels, 2b on the level of pairs; ε₂ = 3/5, bucket
penalty λ = 5/3; split threshold τ_I = λ + (4/5)·g_I·b, 9.17 on the top levels): D = [5, 0, 0, 0, 0, 0, 0, 0] and
D′ = D with one record added to cell 0.  With the true deviations, D's root has dev 1.75·5 = 8.75 ≤ 9.17 (one
bucket) and D′'s root 10.5 > 9.17 while its half [0, 4) has 1.5·6 = 9 ≤ 9.17: two buckets.  The mutant's number
of bucket counts, which the audit reads as the run's structure, tells the tables apart with certainty
(``true_buckets`` checks it).  The honest algorithm adds noise to each deviation and must pass on the same pair.

Mutant ``mutant-dawa-half-sensitivity``: states half the deviations' Δ, so their noise is half what the proof
needs.  It runs with ratio 9/10 (most of ε on the partition, so the leak, 2·ε₁ + ε₂ = 1.9 at ε = 1, is large)
on an empty table against one record in cell 0.  Measured at n_test = 300,000: lower bound 1.45 (seed 0) and
1.35 (seed 1) with the first bucket tree, 1.36 (seed 0) with the workload-aware one, while the honest DAWA with ratio 9/10 on the same pair gave 0.56.  At the default ratio 2/5 the
halved Δ leaks only 1.4 and showed 1.04 and 0.84: not a reliable case.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .cases import Case

EPSILON = Fraction(1)


def _heavy_first_cell(cells: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(D, D′): ``count`` records in cell 0 of an otherwise empty table of ``cells``, and one more there."""
    data = np.zeros(cells, dtype=np.int64)
    data[0] = count
    neighbour = data.copy()
    neighbour[0] += 1
    return data, neighbour


def flip_pair() -> tuple[np.ndarray, np.ndarray]:
    """(D, D′) as in the module docstring: 8 cells, 5 records in cell 0 against 6."""
    return _heavy_first_cell(8, 5)


def _mutant_class():
    from dphist.algorithms.dawa import DAWA, candidate_costs  # noqa: PLC0415  (the audit imports the algorithms lazily)

    class TrueCostDAWA(DAWA):
        """DAWA that pays for and draws its noisy deviations, then partitions on the true ones (the bug)."""

        name = "mutant-dawa-true-costs"

        def run(self, counts, budget, columns=None):
            self._true = np.asarray(counts, dtype=np.int64)
            if self._true.ndim == 2:  # the partition sees the grid read along the Hilbert curve
                from dphist.algorithms.strategies.hilbert import hilbert_order  # noqa: PLC0415

                self._true = self._true.ravel()[hilbert_order(self._true.shape)]
            return super().run(counts, budget, columns)

        def partition(self, n, starts, stops, noisy_costs, penalty, noise_scale):
            true_costs = candidate_costs(self._true, starts, stops) / (stops - starts)
            return super().partition(n, starts, stops, true_costs, penalty, noise_scale)

    return TrueCostDAWA


def _half_sensitivity_class():
    from dphist.algorithms.dawa import DAWA  # noqa: PLC0415

    class HalfSensitivityDAWA(DAWA):
        """DAWA that states half the sensitivity of its noisy deviations (the bug)."""

        name = "mutant-dawa-half-sensitivity"

        def partition_sensitivity(self, n):
            return super().partition_sensitivity(n) / 2

    return HalfSensitivityDAWA


def true_buckets(table: np.ndarray, epsilon: Fraction = EPSILON) -> int:
    """The number of buckets the true deviations give on ``table`` under the default options (what the mutant
    measures), with the same public penalty and noise scale as a run at ``epsilon``.  A 2-D ``table`` is read
    along the Hilbert curve and gets the 2-D defaults, as a run does."""
    from dphist.algorithms.dawa import DAWA, candidate_costs, candidate_sensitivity, candidate_weights, dyadic_candidates

    algo = DAWA().in_force(table.ndim)  # the 2-D defaults, as in a run
    if table.ndim == 2:
        from dphist.algorithms.strategies.hilbert import hilbert_order  # noqa: PLC0415

        table = table.ravel()[hilbert_order(table.shape)]
    ratio = algo.params["ratio"]
    penalty = float(algo.params["penalty"] / ((1 - ratio) * epsilon))
    starts, stops = dyadic_candidates(table.size)
    noise_scale = float(candidate_sensitivity(table.size) / (ratio * epsilon)) * candidate_weights(table.size, starts,
                                                                                                   stops)
    costs = candidate_costs(table, starts, stops) / (stops - starts)
    return algo.partition(table.size, starts, stops, costs, penalty, noise_scale).size - 1


def prefix_pair() -> tuple[np.ndarray, np.ndarray]:
    """32 cells, so the partition reads prefix deviations on its top level: 12 records in cell 0 against 13."""
    return _heavy_first_cell(32, 12)


def grid_pair() -> tuple[np.ndarray, np.ndarray]:
    """A 4 × 4 grid, read along the Hilbert curve (which starts at cell (0, 0)): 3 records in cell (0, 0) against
    4.  On the 16-cell sequence, with the 2-D defaults, the true deviations give 1 bucket against 3
    (``true_buckets``)."""
    data, neighbour = _heavy_first_cell(16, 3)
    return data.reshape(4, 4), neighbour.reshape(4, 4)


def cases(mutants: bool = True) -> list:
    """The honest DAWA on the flip pair (8 cells: L1 deviations only) and on the prefix pair (32 cells: the top
    level's cost is the prefix deviation); with ``mutants``, the true-cost mutant on the prefix pair and the
    half-sensitivity mutant (ratio 9/10) on an empty table against one record.  Measured at n_test = 300,000
    (seed 0): the honest prefix pair 0.44 (5 records in cell 0: 0.51), the true-cost mutant on it 6.85."""
    from dphist.algorithms.dawa import DAWA  # noqa: PLC0415

    data, neighbour = flip_pair()
    wide, wide_neighbour = prefix_pair()
    out = [Case("dawa (8,) one record moves the best partition", DAWA(), data, neighbour, EPSILON),
           Case("dawa (32,) one record in a heavy first cell (prefix deviations)", DAWA(), wide, wide_neighbour,
                EPSILON)]
    if mutants:
        cls = _mutant_class()
        out.append(Case(f"{cls.name} (32,) partitions on the true costs", cls(), wide, wide_neighbour, EPSILON,
                        mutant=True))
        half = _half_sensitivity_class()
        empty, one = _heavy_first_cell(8, 0)
        out.append(Case(f"{half.name} (8,) ratio 9/10, add to the first cell of an empty table",
                        half(ratio=Fraction(9, 10)), empty, one, EPSILON, mutant=True))
    # 2-D (added last, so the cases above keep their positions and seeds)
    grid, grid_neighbour = grid_pair()
    out.append(Case("dawa (4, 4) Hilbert order, one record in a heavy first cell", DAWA(), grid, grid_neighbour,
                    EPSILON))
    if mutants:
        cls = _mutant_class()
        out.append(Case(f"{cls.name} (4, 4) Hilbert order, partitions on the true costs", cls(), grid,
                        grid_neighbour, EPSILON, mutant=True))
    return out
