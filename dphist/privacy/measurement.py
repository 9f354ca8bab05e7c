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
GAUSSIAN = "discrete Gaussian"
SELECTION = "permute-and-flip (exponential mechanism)"


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a set of queries (or a set of selections).

    ``sensitivity``: the L1 sensitivity of the whole query set (or the score sensitivity of a selection) under
    the release's neighbouring relation, that is counted in rows of the protected unit (one record, or all the
    rows a privacy unit or group may contribute); None for Gaussian noise, whose ``l2_squared`` is the squared
    L2 sensitivity instead.  ``scale``: the discrete Laplace scale sensitivity / ε (for a selection, 2·sensitivity
    / ε of each draw, the scale of its exponential weights); ``sigma2``: the discrete Gaussian's variance
    parameter σ² = l2_squared / (2ρ).  ``epsilon``, ``delta``: the pure cost (ε is None for Gaussian noise);
    ``rho``: the zCDP cost, set when the measurement was paid from a zCDP budget.  ``queries``: how many noisy
    values or draws (None where that number depends on the data and is not published, as in partition
    selection); ``composition``: why the cost is what it is.  ``scaled_by``: 1, except for a residual basis
    (:meth:`~dphist.privacy.budget.ZCDPBudget.gaussian_residual`), whose integer queries were N times the values
    it states, the noise drawn on them with variance parameter N²·``sigma2`` and the result divided by N: its
    noise lives on the lattice of multiples of 1/N, with variance and half-width those of the discrete Gaussian
    of N²·``sigma2`` divided by N² and N.
    """

    what: str
    mechanism: str
    sensitivity: Fraction | None
    scale: Fraction | None
    epsilon: Fraction | None
    delta: Fraction = Fraction(0)
    queries: int | None = 1
    composition: str = "parallel over disjoint cells"
    l2_squared: Fraction | None = None
    sigma2: Fraction | None = None
    rho: Fraction | None = None
    scaled_by: int = 1

    @property
    def noise_variance(self) -> float | None:
        """The variance of the noise on each value (at the base scale, for weighted noise); None for selections.
        For a residual basis (``scaled_by`` N > 1): the variance of the un-projected noise per coordinate in the
        values' units, discrete_gaussian_variance(N²·sigma2)/N² (the projection then multiplies it by p_A per
        cell, docs/privacy.md §1.6)."""
        if self.mechanism == LAPLACE:
            return discrete_laplace_variance(self.scale)
        if self.mechanism == GAUSSIAN:
            from .samplers import discrete_gaussian_variance  # noqa: PLC0415
            if self.scaled_by != 1:
                return discrete_gaussian_variance(self.sigma2 * self.scaled_by ** 2) / self.scaled_by ** 2
            return discrete_gaussian_variance(self.sigma2)
        return None

    def halfwidth(self, level: float = 0.95) -> int | None:
        """The half-width of an exact ``level`` interval for one noisy value (base scale); None for selections, and
        for a residual basis (``scaled_by`` > 1), whose released values carry projected noise, not iid noise."""
        if self.scaled_by != 1:
            return None
        if self.mechanism == LAPLACE:
            from .samplers import discrete_laplace_halfwidth  # noqa: PLC0415
            return discrete_laplace_halfwidth(self.scale, level)
        if self.mechanism == GAUSSIAN:
            from .samplers import discrete_gaussian_halfwidth  # noqa: PLC0415
            return discrete_gaussian_halfwidth(self.sigma2, level)
        return None

    @property
    def noise_sd(self) -> float | None:
        variance = self.noise_variance
        return None if variance is None else variance ** 0.5

    def report(self) -> dict:
        """The record as the release report shows it (exact amounts as decimal or p/q strings)."""
        out = {"what": self.what, "mechanism": self.mechanism}
        if self.mechanism == GAUSSIAN:
            out.update({"l2_sensitivity": round(float(self.l2_squared) ** 0.5, 6),
                        "l2_sensitivity_squared": _number(self.l2_squared),
                        "sigma2": format_fraction(self.sigma2)})
            if self.scaled_by != 1:
                out["scaled_by"] = self.scaled_by
        else:
            out.update({"sensitivity": _number(self.sensitivity), "scale": format_fraction(self.scale),
                        "epsilon": format_fraction(self.epsilon)})
        if self.rho is not None:
            out["rho"] = format_fraction(self.rho)
        out.update({"delta": format_fraction(self.delta), "noisy_values": self.queries,
                    "noise_sd": None if self.noise_sd is None else round(self.noise_sd, 4),
                    "composition": self.composition})
        return out


def _number(value: Fraction):
    value = Fraction(value)
    return int(value) if value.denominator == 1 else format_fraction(value)
