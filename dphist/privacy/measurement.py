"""The record of one noisy measurement: what was measured, how, and what it cost.

Records are made only by :class:`~dphist.privacy.budget.PrivacyBudget`, at the moment it draws the noise, so the
report and the ledger read exactly what was drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from .amounts import format_fraction
from .samplers import discrete_laplace_variance

__all__ = ["Measurement"]

LAPLACE = "discrete Laplace"
SELECTION = "permute-and-flip (exponential mechanism)"


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a set of queries (or a set of selections).

    ``sensitivity``: the L1 sensitivity of the whole query set (or the score sensitivity of a selection) under
    the release's neighbouring relation, that is counted in rows of the protected unit (one record, or all the
    rows a privacy unit or group may contribute); ``scale``: the discrete Laplace scale sensitivity / ε (for a
    selection, 2·sensitivity / ε of each draw, the scale of its exponential weights); ``epsilon``, ``delta``: the cost;
    ``queries``: how many noisy values or draws (None where that number depends on the data and is not published,
    as in partition selection); ``composition``: why the cost is what it is.
    """

    what: str
    mechanism: str
    sensitivity: Fraction
    scale: Fraction
    epsilon: Fraction
    delta: Fraction = Fraction(0)
    queries: int | None = 1
    composition: str = "parallel over disjoint cells"

    @property
    def noise_variance(self) -> float | None:
        """The variance of the noise on each value (at the base scale, for weighted noise); None for selections."""
        return discrete_laplace_variance(self.scale) if self.mechanism == LAPLACE else None

    @property
    def noise_sd(self) -> float | None:
        variance = self.noise_variance
        return None if variance is None else variance ** 0.5

    def report(self) -> dict:
        """The record as the release report shows it (exact amounts as decimal or p/q strings)."""
        sensitivity = Fraction(self.sensitivity)
        return {
            "what": self.what,
            "mechanism": self.mechanism,
            "sensitivity": int(sensitivity) if sensitivity.denominator == 1 else format_fraction(sensitivity),
            "scale": format_fraction(self.scale),
            "epsilon": format_fraction(self.epsilon),
            "delta": format_fraction(self.delta),
            "noisy_values": self.queries,
            "noise_sd": None if self.noise_sd is None else round(self.noise_sd, 4),
            "composition": self.composition,
        }
