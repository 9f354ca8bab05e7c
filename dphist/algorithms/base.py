"""The interface every publishing algorithm implements, and the record of what it measured.

An algorithm is a plan: choose integer queries over the cells, measure them with exact integer noise, and infer
an estimate of the cells from the noisy answers.  It returns the estimate together with the list of
measurements, each stating its sensitivity, noise distribution, scale and budget, so that the accountant can
check the parts add up and the report can say exactly what was spent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ..errors import UsageError
from ..noise import BitSource, Replicated, discrete_laplace, discrete_laplace_variance

__all__ = ["Algorithm", "Estimate", "Measurement", "measure", "measure_weighted"]


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a set of integer queries.

    ``sensitivity`` is the L1 sensitivity of the whole query set under add/remove of one record;
    ``scale`` is the discrete Laplace scale (sensitivity / epsilon); ``queries`` is how many noisy values (None
    where that number depends on the data and is not published, as in partition selection); ``noise_sd`` the
    standard deviation of the noise on each of them.
    """

    what: str
    mechanism: str
    sensitivity: int
    scale: Fraction
    epsilon: Fraction
    delta: Fraction = Fraction(0)
    queries: int | None = 1
    noise_sd: float | None = None
    composition: str = "parallel over disjoint cells"


def measure(answers: np.ndarray, sensitivity: int, epsilon: Fraction, bits: BitSource, what: str,
            composition: str = "parallel over disjoint cells") -> tuple[np.ndarray, Measurement]:
    """Add exact discrete Laplace noise of scale sensitivity/epsilon to integer ``answers``.

    Returns the noisy integer answers and the Measurement record.  This is epsilon-DP for a query set whose
    L1 sensitivity under add/remove of one record is ``sensitivity``.  With a :class:`Replicated` bit source the
    answers carry a leading axis of ``bits.reps`` independent repetitions (audits only).
    """
    scale = Fraction(sensitivity) / Fraction(epsilon)
    shape = np.shape(answers)
    if isinstance(bits, Replicated):
        shape = (bits.reps, *shape)
    noisy = np.asarray(answers) + discrete_laplace(scale, shape, bits)
    record = Measurement(what=what, mechanism="discrete Laplace", sensitivity=sensitivity, scale=scale,
                         epsilon=Fraction(epsilon), queries=int(np.size(answers)),
                         noise_sd=discrete_laplace_variance(scale) ** 0.5, composition=composition)
    return noisy, record


def measure_weighted(answers: np.ndarray, relative: np.ndarray, sensitivity: int, epsilon: Fraction,
                     bits: BitSource, what: str, composition: str) -> tuple[np.ndarray, Measurement]:
    """Like :func:`measure`, but answer i gets noise of scale b·relative[i], b = sensitivity/epsilon.

    ε-DP when Σ_i |Δanswer_i| / relative[i] <= sensitivity for every neighbouring pair (a weighted, or
    "generalised", sensitivity).  ``relative`` holds positive integers (or integer-valued floats).
    """
    base = Fraction(sensitivity) / Fraction(epsilon)
    shape = np.shape(answers)
    if isinstance(bits, Replicated):
        shape = (bits.reps, *shape)
    noise = np.zeros(shape, dtype=np.int64)
    relative = np.broadcast_to(relative, np.shape(answers))
    for factor in np.unique(relative):
        where = np.broadcast_to(relative == factor, shape)
        noise[where] = discrete_laplace(base * Fraction(int(factor)), int(where.sum()), bits)
    record = Measurement(what=what, mechanism="discrete Laplace", sensitivity=sensitivity, scale=base,
                         epsilon=Fraction(epsilon), queries=int(np.size(answers)),
                         noise_sd=discrete_laplace_variance(base) ** 0.5, composition=composition)
    return np.asarray(answers) + noise, record


@dataclass
class Estimate:
    """What an algorithm returns.

    ``values``: float array of the table's shape, an unbiased estimate of the true counts (before
    non-negativity and rounding).  ``variance``: per-cell variance of ``values`` if known.  ``halfwidth``:
    per-cell half-width of an exact 95 % interval around ``values`` if known (else a normal interval from
    ``variance`` is used).  ``measurements``: everything that was measured with noise.  ``integers``: the
    algorithm's own non-negative, total-preserving integer post-processing (e.g. top-down on its tree), if it
    has one; otherwise the table-wide projection is used.  ``structure``: public facts about the strategy for
    the report (tree shape, branching): these depend on the shape and the options only.  ``choices``: what a
    data-adaptive algorithm chose from noisy values (bucket or partition counts; free post-processing, also
    reported).  ``noisy``: the noisy answers of each measurement, in order (for audits; never published as such).
    """

    values: np.ndarray
    measurements: list[Measurement]
    variance: np.ndarray | None = None
    halfwidth: np.ndarray | None = None
    total: float | None = None
    integers: Callable[[], np.ndarray] | None = None
    structure: dict = field(default_factory=dict)
    noisy: list[np.ndarray] = field(default_factory=list)
    choices: dict = field(default_factory=dict)


class Algorithm(ABC):
    """Base class.  Subclasses set ``name``, ``summary`` and ``options`` and implement :meth:`run`.

    ``options`` maps each option name to ``(default, validator)``; the validator turns a user value into the
    option's value or raises ValueError with a message.  Options are public parameters, never data.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    options: ClassVar[dict[str, tuple[Any, Callable[[Any], Any]]]] = {}
    #: True when later measurements depend on earlier noisy answers (their number of noisy values may vary).
    data_adaptive: ClassVar[bool] = False
    #: Values for options that have no default (a public policy number the user must give), used where the
    #: algorithm runs without a user: the audit, layer-0 tests and the benchmark's timing table.
    example_options: ClassVar[dict[str, Any]] = {}
    #: One line per option for ``dphist algorithms``: what it sets, in the user's terms.
    option_help: ClassVar[dict[str, str]] = {}

    def __init__(self, **options: Any):
        self.params: dict[str, Any] = {}
        for key, value in options.items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise UsageError(f"algorithm '{self.name}' has no option '{key}' (its options: {known})")
            try:
                self.params[key] = self.options[key][1](value)
            except (ValueError, TypeError, ArithmeticError) as exc:  # ArithmeticError: OverflowError of int(inf)
                raise UsageError(f"algorithm '{self.name}': option '{key}': {exc}") from None
        for key, (default, _) in self.options.items():
            self.params.setdefault(key, default)

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """Raise UsageError if the algorithm cannot release a table of this shape (checked before reading data)."""

    @abstractmethod
    def run(self, counts: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        """Publish ``counts`` (int64, any shape) with pure ``epsilon``-DP under add/remove of one record.

        ``columns``, when given, are the table's public column declarations (one per axis), e.g. for a
        declared category hierarchy.

        The measurements' epsilons must add up to at most ``epsilon``.  Structure (queries, scales) may depend
        only on ``counts.shape``, ``epsilon`` and the options, never on the values of ``counts``.
        """
