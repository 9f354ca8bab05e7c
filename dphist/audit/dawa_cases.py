"""Audit cases for DAWA (dphist/algorithms/dawa.py): the honest algorithm and a mutant whose partition reads the
true deviations.

The pair, on 8 cells at ε = 1 with the default options (ratio 2/5: ε₁ = 2/5 for the partition, noise scale
b = Δ/ε₁ = 4.25/0.4 = 10.625 on each deviation; ε₂ = 3/5, bucket penalty λ = 5/3; split threshold
τ = λ + 0.4·b = 5.92): D = [3, 0, 0, 0, 0, 0, 0, 0] and D′ = D with one record added to cell 0.  With the true
deviations, D's root has dev 1.75·3 = 5.25 ≤ τ (one bucket) and D′'s root 7 > τ, its half [0, 4) 6 > τ, and
[0, 2) 4 ≤ τ: three buckets.  The mutant's number of bucket counts, which the audit reads as the run's
structure, tells the tables apart with certainty (``true_buckets`` checks it).  The honest algorithm adds noise
of scale b to each deviation and must pass on the same pair.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

EPSILON = Fraction(1)


def flip_pair() -> tuple[np.ndarray, np.ndarray]:
    """(D, D′) as in the module docstring."""
    data = np.zeros(8, dtype=np.int64)
    data[0] = 3
    neighbour = data.copy()
    neighbour[0] += 1
    return data, neighbour


def _mutant_class():
    from ..algorithms.dawa import DAWA, deviations  # noqa: PLC0415  (the audit imports the algorithms lazily)

    class TrueCostDAWA(DAWA):
        """DAWA that pays for and draws its noisy deviations, then partitions on the true ones (the bug)."""

        name = "mutant-dawa-true-costs"

        def run(self, counts, budget, columns=None):
            self._true = np.asarray(counts, dtype=np.int64)
            return super().run(counts, budget, columns)

        def partition(self, n, starts, stops, noisy_costs, penalty, noise_scale):
            true_costs = deviations(self._true, starts, stops) / (stops - starts)
            return super().partition(n, starts, stops, true_costs, penalty, noise_scale)

    return TrueCostDAWA


def true_buckets(table: np.ndarray, epsilon: Fraction = EPSILON) -> int:
    """The number of buckets the true deviations give on ``table`` under the default options (what the mutant
    measures), with the same public penalty and noise scale as a run at ``epsilon``."""
    from ..algorithms.dawa import DAWA, candidate_sensitivity, deviations, dyadic_candidates  # noqa: PLC0415

    algo = DAWA()
    ratio = algo.params["ratio"]
    penalty = float(algo.params["penalty"] / ((1 - ratio) * epsilon))
    noise_scale = float(candidate_sensitivity(table.size) / (ratio * epsilon))
    starts, stops = dyadic_candidates(table.size)
    costs = deviations(table, starts, stops) / (stops - starts)
    return algo.partition(table.size, starts, stops, costs, penalty, noise_scale).size - 1


def cases(mutants: bool = True) -> list:
    """The honest DAWA on the flip pair and, with ``mutants``, the true-cost mutant on the same pair."""
    from ..algorithms.dawa import DAWA  # noqa: PLC0415
    from .runner import Case  # noqa: PLC0415

    data, neighbour = flip_pair()
    out = [Case("dawa (8,) one record moves the best partition", DAWA(), data, neighbour, EPSILON)]
    if mutants:
        cls = _mutant_class()
        out.append(Case(f"{cls.name} one record moves the best partition", cls(), data, neighbour, EPSILON,
                        mutant=True))
    return out
