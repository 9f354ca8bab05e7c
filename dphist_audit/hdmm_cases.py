"""Audit cases for hdmm (dphist/algorithms/hdmm.py): the honest algorithm on 1-D and 2-D pairs under pure ε, and a mutant that measures the integer strategy with half its true L1 sensitivity (a column norm taken from
the float strategy, or a forgotten quantum factor, would understate it so).

They come after every other case of the audit (the other cases keep their seeds).  No ρ-zCDP case: the strategy's
discrete Gaussian has σ² near 2³² (its integer columns have squared norms near q² = 2³²), which the sampler draws
too slowly for the audit's runs in make test's time; its stated Δ₂² is checked in the unit tests instead."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from .cases import Case

__all__ = ["cases"]

_BASE = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int64)


def _pairs(shape: tuple[int, ...]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Add a record to the first cell, and remove one from the largest (different columns of the strategy)."""
    base = np.resize(_BASE, int(np.prod(shape))).reshape(shape)
    first, largest = base.copy(), base.copy()
    first.flat[0] += 1
    largest.flat[int(np.argmax(base))] -= 1
    return [("add to first cell", base, first), ("remove from largest cell", base, largest)]


def _mutant_class():
    from dphist.algorithms.hdmm import HDMM  # noqa: PLC0415  (the audit imports the algorithms lazily)

    class HalfSensitivityHDMM(HDMM):
        """hdmm whose integer strategy states half its largest column L1 norm (a quarter of the squared L2 one):
        the kernel sizes the noise to the stated sensitivity, so it adds half the noise it must."""

        name = "mutant-hdmm-half-sensitivity"

        def plan(self, shape, columns=None, noise="laplace", budget=None):
            plan = super().plan(shape, columns, noise, budget)
            strategy = dataclasses.replace(plan.strategy, l1=plan.strategy.l1 // 2,
                                           l2_squared=plan.strategy.l2_squared // 4)
            return dataclasses.replace(plan, strategy=strategy)

    return HalfSensitivityHDMM


def cases(mutants: bool = True, epsilon: Fraction = Fraction(1)) -> list:
    """The honest hdmm on (8,) and (4, 4) at ``epsilon``, and with ``mutants`` the half-sensitivity mutant on (8,)."""
    from dphist.algorithms.hdmm import HDMM  # noqa: PLC0415

    out = [Case(f"hdmm {shape} {label}", HDMM(), data, neighbour, epsilon)
           for shape in ((8,), (4, 4)) for label, data, neighbour in _pairs(shape)]
    if mutants:
        label, data, neighbour = _pairs((8,))[0]
        out.append(Case(f"mutant-hdmm-half-sensitivity (8,) {label}", _mutant_class()(), data, neighbour, epsilon,
                        mutant=True))
    return out

