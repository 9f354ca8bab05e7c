"""The interface every publishing algorithm implements, and the record of what it measured.

An algorithm is a plan: choose integer queries over the cells, measure them with exact integer noise, and infer
an estimate of the cells from the noisy answers.  It returns the estimate together with the list of
measurements, each stating its sensitivity, noise distribution, scale and budget, so that the accountant can
check the parts add up and the report can say exactly what was spent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ..noise import BitSource

__all__ = ["Algorithm", "Estimate", "Measurement"]


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a set of integer queries.

    ``sensitivity`` is the L1 sensitivity of the whole query set under add/remove of one record;
    ``scale`` is the discrete Laplace scale (sensitivity / epsilon); ``queries`` is how many noisy values.
    """

    what: str
    mechanism: str
    sensitivity: int
    scale: Fraction
    epsilon: Fraction
    delta: Fraction = Fraction(0)
    queries: int = 1
    cell_sd: float | None = None


@dataclass
class Estimate:
    """What an algorithm returns.

    ``values``: float array of the table's shape, an unbiased estimate of the true counts (before
    non-negativity and rounding).  ``variance``: per-cell variance of ``values`` if known.  ``halfwidth``:
    per-cell half-width of an exact 95 % interval around ``values`` if known (else a normal interval from
    ``variance`` is used).  ``measurements``: everything that was measured with noise.
    """

    values: np.ndarray
    measurements: list[Measurement]
    variance: np.ndarray | None = None
    halfwidth: np.ndarray | None = None
    total: float | None = field(default=None)


class Algorithm(ABC):
    """Base class.  Subclasses set ``name`` and ``summary`` and implement :meth:`run`."""

    name: ClassVar[str]
    summary: ClassVar[str]

    @abstractmethod
    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource) -> Estimate:
        """Publish ``counts`` (int64, any shape) with pure ``epsilon``-DP under add/remove of one record.

        The measurements' epsilons must add up to at most ``epsilon``.  Structure (queries, scales) may depend
        only on ``counts.shape`` and ``epsilon``, never on the values of ``counts``.
        """
