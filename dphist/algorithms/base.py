"""The interface every publishing algorithm implements.

An algorithm is a plan: select integer queries over the cells, measure them through the privacy budget it is
given (which draws the exact noise and records what each measurement cost), and infer an estimate of the cells
from the noisy answers.  It never draws noise or adds up budgets itself.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ..errors import UsageError
from ..inference.measurements import Measurement
from ..privacy import PrivacyBudget
from ..text import quoted

__all__ = ["Algorithm", "Estimate", "Ceiling", "Step"]


@dataclass(frozen=True)
class Ceiling:
    """A limit on what an algorithm's cost-driving ``options`` may ask for on a table (time or memory), checked
    before any row is read (:meth:`Algorithm.check`): at most ``limit`` ``unit``, counted by ``formula`` (in the
    user's terms); ``why`` says what the limit stands for."""

    options: tuple[str, ...]
    unit: str
    formula: str
    limit: int
    why: str

    def describe(self) -> str:
        """One line for ``dphist algorithms``."""
        return f"{self.formula}: at most {self.limit:,} {self.unit} ({self.why})"


@dataclass(frozen=True)
class Step:
    """One noisy step a run may take, as planning tries it on the table's budget before any row is read
    (:meth:`Algorithm.check_budget`): ``kind`` names the budget call ("measure": linear queries with the budget's
    own noise, "laplace": discrete Laplace in any definition, "selection": ``count`` permute-and-flip draws),
    ``share`` the part of the algorithm's budget that pays for it (all ``count`` draws of a selection), ``l1`` and
    ``l2_squared`` its one-record sensitivities and ``relative`` its largest relative noise scale (weighted
    measurements).  Where the data decide how many steps there are, the step is the smallest they can make."""

    what: str
    kind: str
    share: Fraction
    l1: Fraction = Fraction(1)
    l2_squared: Fraction = Fraction(1)
    relative: Fraction = Fraction(1)
    count: int = 1

    def tried(self, budget: PrivacyBudget) -> None:
        """Take this step on a probe of ``budget`` (:meth:`PrivacyBudget.probe`): it raises as the real step
        would (ValueError, BudgetExceeded), drawing one throw-away value from no data."""
        part = budget.probe(self.share)
        one = np.zeros(1, dtype=np.int64)
        relative = Fraction(self.relative)
        relative = int(relative) if relative.denominator == 1 else float(relative)  # as the algorithms pass it
        if self.kind == "selection":
            part.selection(self.count, part.amount, self.l1, self.what)
        elif self.kind == "laplace" and part.noise == "gaussian":  # a Laplace step under zCDP: ε = √(2ρ)
            part.laplace(one, self.l1 * Fraction(self.relative), part.amount, self.what)
        else:
            part.measure_weighted(one, [relative], self.l1, self.l2_squared, part.amount, self.what, "probe")


@dataclass(frozen=True, eq=False)
class Estimate:
    """What an algorithm returns (a frozen record: a refit is a new Estimate).

    ``values``: float array of the table's shape, an unbiased estimate of the true counts (before
    non-negativity and rounding).  ``variance``: per-cell variance of ``values`` if known.  ``halfwidth``:
    per-cell half-width of an exact 95 % interval around ``values`` if known (else a normal interval from
    ``variance`` is used).  ``integers``: the algorithm's own non-negative, total-preserving integer
    post-processing (e.g. top-down on its tree), a function of its public structure and fitted values bound when
    the Estimate is made, if it has one; otherwise the table-wide projection is used.  ``structure``: public
    facts about the strategy for the report (tree shape, branching): these depend on the shape and the options
    only.  ``choices``: what a data-adaptive algorithm chose from noisy values (bucket or partition counts; free
    post-processing, also reported).  ``plan`` and ``measurements``: the public plan the run selected and its
    noisy measurements, which the algorithm's :meth:`Algorithm.infer` turns into this estimate; ``plan`` is
    None where the algorithm has no inference step that takes more measurements.  What was measured, and at
    what cost, is recorded by the budget the algorithm ran on.

    What the interval (from ``halfwidth`` or ``variance``) covers: with ``groups`` None, each cell's true count;
    else ``groups`` is an int64 array of the table's shape naming each cell's bucket (public: chosen from noisy
    values or from the shape) where the estimate spreads one measured bucket total evenly over the bucket's cells,
    and a cell's interval covers its bucket's true total ÷ the bucket's number of cells (the bucket's share), not
    the cell's own count (a bucket of one cell covers that cell's count).  Where the algorithm can give no honest
    interval, ``variance`` and ``halfwidth`` are None and ``no_interval`` says why, in one sentence for the report
    and the plot.
    """

    values: np.ndarray
    variance: np.ndarray | None = None
    halfwidth: np.ndarray | None = None
    total: float | None = None
    integers: Callable[[], np.ndarray] | None = None
    structure: dict = field(default_factory=dict)
    choices: dict = field(default_factory=dict)
    plan: Any = None
    measurements: tuple[Measurement, ...] = ()
    groups: np.ndarray | None = None
    no_interval: str | None = None


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
    #: Where :meth:`refit` puts a total measured elsewhere, for the report.
    total_refit: ClassVar[str] = "one more measurement of the table's total (least squares)"
    #: The ceilings on what the options that drive its cost may ask for; :meth:`work` gives the amounts.
    ceilings: ClassVar[tuple[Ceiling, ...]] = ()

    def __init__(self, **options: Any):
        self.params: dict[str, Any] = {}
        for key, value in options.items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise UsageError(f"algorithm {quoted(self.name)} has no option {quoted(key)} (its options: {known})")
            try:
                self.params[key] = self.options[key][1](value)
            except (ValueError, TypeError, ArithmeticError) as exc:  # ArithmeticError: OverflowError of int(inf)
                raise UsageError(f"algorithm {quoted(self.name)}: option {quoted(key)}: {exc}") from None
        for key, (default, _) in self.options.items():
            self.params.setdefault(key, default)

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """Raise UsageError if the algorithm cannot release a table of this shape (checked before reading data)."""

    def work(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """What a run on a table of ``shape`` asks for, one amount per entry of :attr:`ceilings` (the most it
        can be, whatever the data: from the shape and the options only)."""
        return ()

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """The noisy steps a run on a table of ``shape`` may take under ``noise`` ("laplace": a pure budget,
        "gaussian": a zCDP one), each at the smallest share and largest sensitivity the data can give it:
        from the shape, the column declarations and the options only.  Default: one measurement of every cell
        with the whole budget."""
        return [Step("every cell", "measure", Fraction(1))]

    def budget_steps(self, shape: tuple[int, ...], budget: PrivacyBudget, columns=None) -> list[Step]:
        """The steps a run on ``budget`` (public: its amount, noise and protected unit) takes: :meth:`steps` for its
        noise, unless an algorithm's plan depends on the amount as well."""
        return self.steps(shape, columns, budget.noise)

    def check_budget(self, shape: tuple[int, ...], budget: PrivacyBudget, columns=None) -> None:
        """Before any row is read: UsageError unless every step of :meth:`steps` can be taken on ``budget`` (the
        table's: its amount, definition and protected unit), which would otherwise refuse it after the data
        were read (a noise scale or variance beyond the samplers' range)."""
        from ..privacy import BudgetExceeded  # noqa: PLC0415

        shape = tuple(int(n) for n in shape)
        for step in self.budget_steps(shape, budget, columns):
            try:
                step.tried(budget)
            except (ValueError, BudgetExceeded):
                raise UsageError(f"algorithm '{self.name}': its step '{step.what}' would get "
                                 f"{budget._unit} {format_share(budget.part(step.share))} of the table's "
                                 f"{format_share(budget.amount)}, too little for exact noise (its scale would be "
                                 f"past the samplers' range); raise the budget or the table's share"
                                 f"{_option_hint(self)}") from None

    def check(self, shape: tuple[int, ...]) -> None:
        """Every check of this algorithm that needs no data, run before the budget is reserved: the shape
        (:meth:`check_shape`) and the work its options ask for (:attr:`ceilings`).  UsageError naming the
        options, the ceiling and why."""
        shape = tuple(int(n) for n in shape)
        self.check_shape(shape)
        for ceiling, amount in zip(self.ceilings, self.work(shape)):
            if amount > ceiling.limit:
                given = ", ".join(f"{k}={self.params[k]}" for k in ceiling.options)
                raise UsageError(f"algorithm '{self.name}': {given} on a table of {math.prod(shape):,} cells ask for "
                                 f"{amount:,} {ceiling.unit} ({ceiling.formula}), more than the ceiling of "
                                 f"{ceiling.limit:,} ({ceiling.why}); lower {' or '.join(ceiling.options)}")

    def infer(self, plan: Any, measurements: tuple[Measurement, ...]) -> Estimate:
        """The estimate from the public ``plan`` a run of this algorithm selected and ``measurements``: the run's
        own, in its order, then any taken elsewhere and independently of them (a measurement of the table's total,
        :data:`~dphist.inference.measurements.TOTAL`).  Post-processing: it draws no noise.  Implemented by the
        algorithms whose estimate is a least-squares fit that can take more measurements (their Estimates carry a
        ``plan``)."""
        raise NotImplementedError(f"algorithm {quoted(self.name)} has no inference step that takes more measurements")

    def refit(self, estimate: Estimate, *more: Measurement) -> Estimate | None:
        """``estimate`` (from a run of this algorithm) inferred again with the measurements ``more``, independent of
        its own: a new Estimate, or None where the estimate carries no plan.  Post-processing, no new noise."""
        if estimate.plan is None:
            return None
        return self.infer(estimate.plan, estimate.measurements + tuple(more))

    @abstractmethod
    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        """Publish ``counts`` (int64, any shape) measuring only through ``budget``: ε-DP for ε = budget.amount on
        a pure budget, ρ-zCDP for ρ = budget.amount on a zCDP one.

        ``columns``, when given, are the table's public column declarations (one per axis), e.g. for a
        declared category hierarchy.

        Sensitivities are stated for one record; the budget scales them to the protected unit.  A data-adaptive
        algorithm may choose later queries from earlier noisy answers; any other plan (queries, scales) depends
        only on ``counts.shape``, the budget and the options, never on the values of ``counts``, and carries
        any leading axes of the noisy answers through (a replicated budget draws many runs at once).
        """


def format_share(amount: Fraction) -> str:
    """An exact amount for a message, shortened: the fraction when it is short, else a decimal of 3 digits."""
    from ..privacy import format_fraction  # noqa: PLC0415

    text = format_fraction(amount)
    return text if len(text) <= 24 else f"{float(amount):.3g}"


def _option_hint(algorithm: Algorithm) -> str:
    """"", or the share options the algorithm was given (their extremes are what starve a step)."""
    given = [f"{k}={algorithm.params[k]}" for k, (default, _) in algorithm.options.items()
             if isinstance(default, Fraction) and algorithm.params[k] != default]
    return f", or move {', '.join(given)} away from its extreme" if given else ""
