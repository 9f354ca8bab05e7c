"""The privacy budget of a release: the only way to draw noise, and the record of everything drawn.

A :class:`PrivacyBudget` is made once per release from the exact total (ε, δ), the bit source and the number of
rows the protected unit may change (``factor``: 1 for one record, K for a privacy unit bounded to K rows, K·c for
a group of c such units).  Algorithms receive a budget and call it:

    split(shares)                          child budgets; their amounts (and δ) add up exactly to what this
                                           one had left
    measure(answers, Δ₁, Δ₂², a, what)     answers + the definition's noise for linear queries: discrete Laplace
                                           of scale factor·Δ₁/ε (pure), discrete Gaussian of variance
                                           factor²·Δ₂²/(2ρ) (zCDP)
    measure_weighted(answers, g, ...)      the same with a relative scale g_i per answer
    laplace(answers, Δ₁, a, what)          discrete Laplace noise in any definition
    gaussian(answers, Δ₂², ρ, what)        discrete Gaussian noise (zCDP budgets only)
    gaussian_residual(m, ρ_A, what)        a marginal's residual (projection of the scaled table + discrete
                                           Gaussian noise; zCDP budgets only, docs/privacy.md §1.6)
    selection(k, a, Δ, what).choose(q)     k permute-and-flip draws on scores of sensitivity factor·Δ

An *amount* ``a`` is in the budget's own unit (``definition``): ε for a pure budget (:class:`PrivacyBudget`), ρ for
a zCDP one (:class:`ZCDPBudget`).  Algorithms only split by shares and measure with the amount of their part
(``part.amount``), so the same plan runs in either definition; an algorithm that has a better strategy under L2
noise reads ``budget.noise``.

Costs (the proofs are one line each; docs/privacy.md §1.3, CKS20):
* Laplace of scale Δ₁/ε on answers of L1 sensitivity Δ₁: ε-DP, hence ε²/2-zCDP (Bun and Steinke 2016, Prop. 1.4).
  In a zCDP budget an amount ρ buys ε = √(2ρ) rounded down to a rational, so the noise is never smaller than ρ
  pays for.
* Discrete Gaussian of variance parameter σ² on answers of L2 sensitivity Δ₂: Δ₂²/(2σ²)-zCDP (CKS20, Thm. 4).
* k permute-and-flip draws, each ε_d-DP: kε_d (pure) or k·ε_d²/2 (zCDP) sequentially.

``Δ`` is always the sensitivity under one record; the budget multiplies it by ``factor`` (group privacy: a unit
of K rows changes L1 and L2 norms by at most K times as much), so no algorithm handles privacy units.  Every call
checks, before drawing, that its amount (and δ) fit in what is left, and records a
:class:`~dphist.privacy.measurement.Measurement`; ``measurements`` lists them in the order drawn, children's where
they were split off, and ``spent`` adds up their cost in the budget's unit.  Nothing else in dphist adds up budgets within a release;
across releases, :mod:`~dphist.privacy.accountant` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
import math
from typing import Union

import numpy as np

from .bits import APPROXIMATE_GAUSSIAN_FROM, BitSource
from .measurement import GAUSSIAN, LAPLACE, SELECTION, Measurement
from .samplers import checked_scale, discrete_laplace, discrete_laplace_tail_threshold, permute_and_flip

__all__ = ["PrivacyBudget", "ZCDPBudget", "Selection", "BudgetExceeded", "Draw", "split_shares", "epsilon_within",
           "per_row_amount", "per_row_epsilon_like", "total_of", "equal_part", "set_aside", "protected_rows"]


class BudgetExceeded(RuntimeError):
    """A measurement asked for more than the budget has left.  Always a bug in dphist, never a user error: it is
    raised before any noise is drawn, so nothing was published."""


@dataclass(frozen=True)
class Draw:
    """What one call drew, kept only when the budget was made with a ``trace`` (the privacy audit reads it).

    ``values``: the noisy answers (float array; with a leading axis of repetitions under a replicated budget);
    ``scales``: each value's noise scale, broadcastable to ``values``; ``choice``: a selection's index.
    """

    what: str
    values: np.ndarray | None = None
    scales: np.ndarray | None = None
    choice: int | None = None


def split_shares(total: Fraction, shares: Sequence, allow_zero: bool = False) -> list[Fraction]:
    """``total`` split in proportion to positive ``shares`` (or non-negative ones with ``allow_zero``, not all
    zero); the parts add up to ``total`` exactly."""
    shares = [Fraction(s) for s in shares]
    if not shares or any(s < 0 or (s == 0 and not allow_zero) for s in shares) or not any(shares):
        raise ValueError(f"shares must be positive, got {[str(s) for s in shares]}")
    whole = sum(shares, Fraction(0))
    return [Fraction(total) * s / whole for s in shares]


def total_of(amounts) -> Fraction:
    """The exact sum of ``amounts`` (ε, δ or ρ of parts of one budget, e.g. parts charged but never measured with);
    0 for none."""
    return sum((Fraction(a) for a in amounts), Fraction(0))


def set_aside(total, share) -> tuple[Fraction, Fraction]:
    """``total`` cut in two exact parts: ``share`` of it (0 < share < 1) and the rest; they add up to ``total``."""
    first, rest = split_shares(total, [share, 1 - Fraction(share)])
    return first, rest


def protected_rows(max_rows_per_unit: int | None = None, group_size: int = 1) -> int:
    """The rows one protected group can change, by which every sensitivity is multiplied (the budget's
    ``factor``): K rows per privacy unit (1 when a row is the unit) times the C units protected together."""
    return (max_rows_per_unit or 1) * group_size


def equal_part(total, parts: int) -> Fraction:
    """One of ``parts`` equal parts of ``total``, exactly (``split_shares(total, [1] * parts)[0]``)."""
    return split_shares(total, [1] * parts)[0]


Entry = Union[Measurement, "PrivacyBudget"]


class PrivacyBudget:
    """An exact pure-ε budget (with a δ for partition selection), its bit source and the protected unit's factor
    (see the module docstring).  Amounts are ε."""

    #: The unit of every amount: "pure" (ε; δ only where partition selection needs it) or "zcdp" (ρ).
    definition = "pure"
    #: The noise this definition measures linear queries with (:meth:`measure`).
    noise = "laplace"

    def __init__(self, epsilon, delta=0, *, bits: BitSource, factor: int = 1, trace: list | None = None):
        self.amount, self.delta = Fraction(epsilon), Fraction(delta)
        if self.amount <= 0 or self.delta < 0:
            raise ValueError(f"a budget needs a positive amount and delta >= 0, got {self.amount}, {self.delta}")
        if isinstance(factor, bool) or int(factor) != factor or factor < 1:
            raise ValueError(f"the protected unit's factor must be a whole number >= 1, got {factor!r}")
        self.factor = int(factor)
        self._bits = bits
        self._trace = trace
        self._entries: list[Entry] = []
        self._used = (Fraction(0), Fraction(0))

    # -- what is left, what was spent ----------------------------------------------------------------------------

    @property
    def epsilon(self) -> Fraction:
        """The whole budget's ε (a pure budget's amount)."""
        return self.amount

    @property
    def bits(self) -> BitSource:
        """The bit source, for randomness that is not noise (choosing a unit's rows in contribution bounding)."""
        return self._bits

    @property
    def private(self) -> bool:
        """Whether the noise comes from a cryptographically secure source."""
        return self._bits.private

    @property
    def remaining(self) -> Fraction:
        """The amount not yet measured with or split off."""
        return self.amount - self._used[0]

    @property
    def remaining_delta(self) -> Fraction:
        return self.delta - self._used[1]

    @property
    def measurements(self) -> list[Measurement]:
        """Every measurement made on this budget or a child of it, in the order they were made or split off."""
        out: list[Measurement] = []
        for entry in self._entries:
            out.extend(entry.measurements if isinstance(entry, PrivacyBudget) else [entry])
        return out

    def cost(self, measurement: Measurement) -> Fraction:
        """What a measurement cost in this budget's unit."""
        return measurement.epsilon

    @property
    def spent(self) -> Fraction:
        """The amount of every measurement made, in the budget's unit (a child's unspent part is not spent)."""
        return sum((self.cost(m) for m in self.measurements), Fraction(0))

    def spent_counting(self, forfeited) -> Fraction:
        """:attr:`spent` plus ``forfeited``: an amount of this budget's unit that was charged for parts never
        measured with (a table skipped after its part was paid for), counted as spent."""
        return self.spent + Fraction(forfeited)

    @property
    def spent_delta(self) -> Fraction:
        return sum((m.delta for m in self.measurements), Fraction(0))

    def laplace_epsilon(self, amount) -> Fraction:
        """The ε a Laplace measurement or a selection gets for ``amount`` (a pure budget's amount is ε)."""
        return Fraction(amount)

    def scale(self, sensitivity, amount) -> Fraction:
        """The discrete Laplace scale factor·Δ/ε a measurement of one-record sensitivity Δ gets for ``amount``."""
        return self.factor * Fraction(sensitivity) / self.laplace_epsilon(amount)

    def inverse_scale(self, sensitivity, amount) -> float:
        """1/b as a float for the discrete Laplace scale b = :meth:`scale` (sensitivity, amount), b rounded to a
        float first (1 / float(b)): ε/(factor·Δ), the rate an error model that works in floats reads."""
        return 1 / float(self.scale(sensitivity, amount))

    def epsilon_per_record(self, amount) -> Fraction:
        """The ε per record that ``amount`` buys, exactly: ε/factor with ε = :meth:`laplace_epsilon` (amount), the
        reciprocal 1/scale(1, amount) of a one-record count's Laplace scale (ε of one row of the protected unit)."""
        return 1 / self.scale(1, amount)

    def part(self, share) -> Fraction:
        """The amount ``share`` (a fraction, exact) of this budget's whole amount is: share × amount, in the
        budget's unit (what :meth:`probe` gets, or a child of :meth:`split` in that proportion)."""
        return Fraction(share) * self.amount

    def delta_per_row(self) -> float:
        """δ′ = 1 − (1 − δ)^(1/m), m = ``factor``, as a float: m independent events of probability δ′ each (one per
        row of the protected unit) all miss with probability (1 − δ′)^m = 1 − δ, so one of them happens with
        probability at most δ."""
        return 1 - (1 - float(self.delta)) ** (1 / self.factor)

    def partition_threshold(self) -> int:
        """The count a label's noisy count must exceed to be kept in partition selection at this budget's (ε, δ):
        m + t, m = ``factor`` rows of the protected unit (each may hold a label no one else has) and t the
        smallest integer with P(Z > t) <= :meth:`delta_per_row` for Z the discrete Laplace noise of scale
        scale(1, ε).  Each of a unit's own labels is then kept with probability at most δ′, all of them together
        at most δ."""
        return self.factor + discrete_laplace_tail_threshold(self.scale(1, self.epsilon), self.delta_per_row())

    # -- dividing the budget -------------------------------------------------------------------------------------

    def split(self, shares: Sequence, delta_shares: Sequence | None = None) -> list[PrivacyBudget]:
        """Child budgets in proportion to positive ``shares`` (δ in proportion to ``delta_shares``, which may hold
        zeros, else to ``shares``); together they take everything this budget has left, exactly."""
        parts = split_shares(self.remaining, shares)
        if delta_shares is not None and len(delta_shares) != len(parts):
            raise ValueError("delta_shares must have one share per part")
        delta_left = self.remaining_delta
        if delta_left == 0:
            delta_parts = [Fraction(0)] * len(parts)
        else:
            delta_parts = split_shares(delta_left, delta_shares if delta_shares is not None else shares, allow_zero=True)
        self._claim(sum(parts, Fraction(0)), sum(delta_parts, Fraction(0)), "split")
        children = [self._child(a, d) for a, d in zip(parts, delta_parts)]
        self._entries.extend(children)
        return children

    def probe(self, share) -> PrivacyBudget:
        """A detached budget of ``share`` × this one's amount, with its definition and protected unit's factor and
        a throw-away seeded bit source: a plan tries one step's noise on it, before any row is read, to learn
        whether the real step would be refused (a noise scale or variance beyond the samplers' range, an ε below
        what a ρ can buy).  It is no part of this budget, spends nothing of it and is never used for data."""
        from .bits import SeededBits  # noqa: PLC0415  (the test-mode source: nothing it draws is published)

        probe = self._child(self.part(share), Fraction(0))
        probe._bits, probe._trace = SeededBits(0), None
        return probe

    def _child(self, amount: Fraction, delta: Fraction) -> PrivacyBudget:
        child = object.__new__(type(self))
        child.__dict__.update(self.__dict__)
        child.amount, child.delta = amount, delta
        child._entries, child._used = [], (Fraction(0), Fraction(0))
        return child

    def _claim(self, amount: Fraction, delta: Fraction, what: str) -> None:
        if not amount > 0:
            raise BudgetExceeded(f"{what}: the amount must be positive, got {amount}")
        if amount > self.remaining or delta > self.remaining_delta or delta < 0:
            raise BudgetExceeded(f"{what}: asks for {self._unit} {amount}, delta {delta} with only {self._unit} "
                                 f"{self.remaining}, delta {self.remaining_delta} left")
        self._used = (self._used[0] + amount, self._used[1] + delta)

    _unit = "epsilon"

    def _record(self, measurement: Measurement) -> Measurement:
        self._entries.append(measurement)
        return measurement

    def _traced(self, draw: Draw) -> None:
        if self._trace is not None:
            self._trace.append(draw)

    # -- drawing noise -------------------------------------------------------------------------------------------

    #: The leading axes every noisy answer carries: none here; a replicated budget (the audit's) draws many
    #: independent runs at once, and algorithms that are not data-adaptive carry leading axes through.
    repetitions: tuple[int, ...] = ()

    def _noise(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Exact discrete Laplace noise of ``scale`` for answers of ``shape``, with the leading ``repetitions``."""
        return discrete_laplace(scale, self.repetitions + tuple(shape), self._bits)

    def _gaussian_noise(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Exact discrete Gaussian noise of variance parameter ``sigma2``, with the leading ``repetitions``."""
        from .samplers import discrete_gaussian  # noqa: PLC0415  (added beside the Laplace sampler)
        shape = self.repetitions + tuple(shape)
        if getattr(self._bits, "approximate_gaussian", False) and sigma2 >= APPROXIMATE_GAUSSIAN_FROM:
            # a simulation of the error, never a release (SimulationBits): a rounded normal of the same σ²
            draws = self._bits.normal(math.prod(shape)) * math.sqrt(float(sigma2))
            return np.rint(draws).astype(np.int64).reshape(shape)
        return discrete_gaussian(sigma2, shape, self._bits)

    def _select(self, scores, epsilon: Fraction, sensitivity: Fraction) -> int:
        return permute_and_flip(scores, epsilon, sensitivity, self._bits)

    def _costs(self, epsilon: Fraction, amount: Fraction) -> dict:
        """The cost fields of a Laplace or selection record that paid ``amount`` for ``epsilon``."""
        return {"epsilon": epsilon}

    def measure(self, answers, l1, l2_squared, amount, what: str,
                composition: str = "parallel over disjoint cells") -> tuple[np.ndarray, Measurement]:
        """``answers`` (integers) + this definition's noise for linear queries of one-record L1 sensitivity ``l1``
        and squared L2 sensitivity ``l2_squared``: discrete Laplace of scale factor·Δ₁/ε here."""
        return self.laplace(answers, l1, amount, what, composition=composition)

    def measure_weighted(self, answers, relative, l1, l2_squared, amount, what: str,
                         composition: str) -> tuple[np.ndarray, Measurement]:
        """Answer i + this definition's noise with relative scale ``relative[i]``: Laplace of scale g_i·factor·Δ₁/ε
        here, ε-DP when Σ_i |Δanswer_i| / g_i <= Δ₁ for one record (g_i whole numbers >= 1)."""
        return self.laplace_weighted(answers, relative, l1, amount, what, composition=composition)

    def laplace(self, answers, sensitivity, amount, what: str, composition: str = "parallel over disjoint cells",
                delta=0, publish_count: bool = True) -> tuple[np.ndarray, Measurement]:
        """``answers`` (integers) + exact discrete Laplace noise of scale factor·Δ/ε, with Δ = ``sensitivity`` the
        L1 sensitivity of the answers under one record and ε what ``amount`` buys.  ε-DP for the protected unit.
        ``delta`` is charged as well where a later step (partition selection's threshold) makes the whole
        (ε, δ)-DP; ``publish_count=False`` leaves the number of answers out of the report (it depends on the
        data)."""
        answers = _integers(answers, what)
        amount, delta = _amount(amount, what), Fraction(delta)
        epsilon = self.laplace_epsilon(amount)
        scale = checked_scale(self.factor * _positive(sensitivity, what) / epsilon)  # refused before paying
        self._claim(amount, delta, what)
        noisy = answers + self._noise(scale, answers.shape)
        if self._trace is not None:  # (a full-size float copy: only for a trace)
            self._traced(Draw(what, noisy.astype(np.float64), np.float64(scale)))
        record = Measurement(what=what, mechanism=LAPLACE, sensitivity=self.factor * Fraction(sensitivity),
                             scale=scale, delta=delta, queries=int(answers.size) if publish_count else None,
                             composition=composition, **self._costs(epsilon, amount))
        return noisy, self._record(record)

    def laplace_weighted(self, answers, relative, sensitivity, amount, what: str,
                         composition: str) -> tuple[np.ndarray, Measurement]:
        """Answer i + noise of scale b·relative[i], b = factor·Δ/ε.  ε-DP when Σ_i |Δanswer_i| / relative[i] <= Δ
        for one record (a weighted sensitivity).  ``relative`` holds positive whole numbers."""
        answers = _integers(answers, what)
        amount = _amount(amount, what)
        epsilon = self.laplace_epsilon(amount)
        base = self.factor * _positive(sensitivity, what) / epsilon
        relative = np.broadcast_to(np.asarray(relative), answers.shape)
        if np.any(relative < 1) or np.any(relative != np.round(relative)):
            raise ValueError(f"{what}: relative scales must be whole numbers >= 1")
        checked_scale(base * int(relative.max(initial=1)))  # the largest scale, refused before paying
        self._claim(amount, Fraction(0), what)
        noise = np.zeros(self.repetitions + (answers.size,), dtype=np.int64)
        # One draw per distinct scale, over its answers in order (one sort, not one pass per scale).
        for factor, where in _classes(relative.ravel()):
            count = answers.size if isinstance(where, slice) else where.size
            noise[..., where] = self._noise(base * int(factor), (count,))
        noisy = answers + noise.reshape(self.repetitions + answers.shape)
        if self._trace is not None:  # (a full-size float copy: only for a trace)
            self._traced(Draw(what, noisy.astype(np.float64), float(base) * relative.astype(np.float64)))
        record = Measurement(what=what, mechanism=LAPLACE, sensitivity=self.factor * Fraction(sensitivity),
                             scale=base, queries=int(answers.size), composition=composition,
                             **self._costs(epsilon, amount))
        return noisy, self._record(record)

    def gaussian(self, answers, l2_squared, amount, what: str, composition: str = "parallel over disjoint cells"):
        """Discrete Gaussian noise: only a zCDP budget has it."""
        raise BudgetExceeded(f"{what}: Gaussian noise needs a zCDP budget (this one is pure epsilon)")

    def gaussian_weighted(self, answers, relative, l2_squared, amount, what: str, composition: str):
        raise BudgetExceeded(f"{what}: Gaussian noise needs a zCDP budget (this one is pure epsilon)")

    def gaussian_residual(self, marginal, amount, what: str):
        """A residual basis's discrete Gaussian measurement: only a zCDP budget has it."""
        raise BudgetExceeded(f"{what}: Gaussian noise needs a zCDP budget (this one is pure epsilon)")

    def selection(self, count: int, amount, sensitivity, what: str,
                  composition: str | None = None) -> Selection:
        """``count`` exponential-mechanism draws (permute-and-flip) for scores whose sensitivity under one record
        is Δ (times ``factor`` for the protected unit), each ε_d-DP with ε_d what amount/count buys.  The whole
        amount is charged now."""
        if isinstance(count, bool) or int(count) != count or count < 1:
            raise ValueError(f"{what}: a selection needs at least one draw")
        amount = _amount(amount, what)
        per_draw = self.laplace_epsilon(amount / count)
        sensitivity = self.factor * _positive(sensitivity, what)
        self._claim(amount, Fraction(0), what)
        record = self._record(Measurement(
            what=what, mechanism=SELECTION, sensitivity=sensitivity, scale=2 * sensitivity / per_draw,
            queries=int(count), **self._costs(per_draw * count, amount),
            composition=composition or ("one draw" if count == 1 else f"sequential over the {count} draws")))
        return Selection(self, record, int(count))

    def choose(self, scores, amount, sensitivity, what: str) -> int:
        """One permute-and-flip draw for ``amount``: the index of a candidate, higher scores likelier."""
        return self.selection(1, amount, sensitivity, what).choose(scores)


class ZCDPBudget(PrivacyBudget):
    """An exact ρ-zCDP budget (Bun and Steinke 2016): amounts are ρ, linear queries get discrete Gaussian noise.

    Laplace measurements and selections keep working (data-adaptive algorithms use them): an amount ρ buys
    ε = √(2ρ) rounded down.  There is no δ: a step that needs one (partition selection) is refused."""

    definition = "zcdp"
    noise = "gaussian"
    _unit = "rho"

    def __init__(self, rho, *, bits: BitSource, factor: int = 1, trace: list | None = None):
        super().__init__(rho, 0, bits=bits, factor=factor, trace=trace)

    @property
    def epsilon(self) -> Fraction:
        raise AttributeError("a zCDP budget has no epsilon: its amount is rho")

    @property
    def rho(self) -> Fraction:
        return self.amount

    def cost(self, measurement: Measurement) -> Fraction:
        return measurement.rho

    def gaussian_sigma(self, amount, l2_sensitivity=1) -> float:
        """σ (a float, in records) of the discrete Gaussian that a measurement of one-record L2 sensitivity Δ₂ gets
        for ``amount`` ρ: σ = factor·Δ₂/√(2ρ), the root of the variance parameter factor²·Δ₂²/(2ρ)."""
        return self.factor * l2_sensitivity / math.sqrt(2 * float(amount))

    def laplace_epsilon(self, amount) -> Fraction:
        """The largest ε with ε²/2 <= ρ among rationals of denominator 10⁹ (so ε-DP steps cost at most ρ)."""
        return epsilon_within(Fraction(amount))

    def _costs(self, epsilon: Fraction, amount: Fraction) -> dict:
        return {"epsilon": epsilon, "rho": amount}

    def laplace(self, answers, sensitivity, amount, what: str, composition: str = "parallel over disjoint cells",
                delta=0, publish_count: bool = True):
        if Fraction(delta) != 0:
            raise BudgetExceeded(f"{what}: a zCDP budget has no delta for an (epsilon, delta) step")
        return super().laplace(answers, sensitivity, amount, what, composition, 0, publish_count)

    def measure(self, answers, l1, l2_squared, amount, what: str, composition: str = "parallel over disjoint cells"):
        """``answers`` + discrete Gaussian noise of variance parameter σ² = factor²·Δ₂²/(2ρ): ρ-zCDP."""
        return self.gaussian(answers, l2_squared, amount, what, composition)

    def measure_weighted(self, answers, relative, l1, l2_squared, amount, what: str, composition: str):
        """Answer i + discrete Gaussian noise of variance parameter σ²·g_i², σ² = factor²·Δ₂²/(2ρ): ρ-zCDP when
        Σ_i (Δanswer_i / g_i)² <= Δ₂² for one record."""
        return self.gaussian_weighted(answers, relative, l2_squared, amount, what, composition)

    def gaussian(self, answers, l2_squared, amount, what: str, composition: str = "parallel over disjoint cells"):
        """``answers`` (integers) + exact discrete Gaussian noise of variance parameter σ² = factor²·Δ₂²/(2ρ), with
        Δ₂² = ``l2_squared`` the squared L2 sensitivity of the answers under one record: ρ-zCDP (CKS20, Thm. 4)."""
        return self.gaussian_weighted(answers, 1, l2_squared, amount, what, composition)

    def gaussian_weighted(self, answers, relative, l2_squared, amount, what: str, composition: str):
        answers = _integers(answers, what)
        amount = _amount(amount, what)
        l2_squared = _positive(l2_squared, what)
        sigma2 = Fraction(self.factor) ** 2 * l2_squared / (2 * amount)
        relative = np.broadcast_to(np.asarray(relative, dtype=np.float64), answers.shape)
        if not np.all(np.isfinite(relative)) or np.any(relative <= 0):
            raise ValueError(f"{what}: relative scales must be positive and finite")
        levels = np.unique(relative)
        largest = sigma2 * Fraction(float(levels.max(initial=1.0))) ** 2
        if largest > MAX_SIGMA2:  # refused before paying
            raise ValueError(f"{what}: noise variance {float(largest):.3g} is above the sampler's 2^60")
        self._claim(amount, Fraction(0), what)
        noise = np.zeros(self.repetitions + (answers.size,), dtype=np.int64)
        for g, where in _classes(relative.ravel()):
            count = answers.size if isinstance(where, slice) else where.size
            noise[..., where] = self._gaussian_noise(sigma2 * Fraction(float(g)) ** 2, (count,))
        noisy = answers + noise.reshape(self.repetitions + answers.shape)
        if self._trace is not None:  # (a full-size float copy: only for a trace)
            self._traced(Draw(what, noisy.astype(np.float64), np.sqrt(float(sigma2)) * relative))
        record = Measurement(what=what, mechanism=GAUSSIAN, sensitivity=None, scale=None, epsilon=None,
                             l2_squared=Fraction(self.factor) ** 2 * l2_squared, sigma2=sigma2, rho=amount,
                             queries=int(answers.size), composition=composition)
        return noisy, self._record(record)

    def gaussian_residual(self, marginal, amount, what: str) -> tuple[np.ndarray, Measurement]:
        """The residual of a marginal table over a set A of attributes, with exact discrete Gaussian noise: ρ-zCDP
        for ``amount`` = ρ_A (docs/privacy.md §1.6, docs/algorithms.md §11).

        ``marginal``: the integer marginal table m over A's axes, shape (n_i)_{i∈A} with every n_i >= 2 (a 0-d
        array for A = ∅, the grand total).  With N = ∏ n_i (1 for ∅), p = ∏ (n_i − 1)/n_i (1 for ∅) and
        P = ⊗ (I − J/n_i) the orthogonal projector onto A's residual subspace (the table minus its mean along
        every axis), it draws iid discrete Gaussian noise z of variance parameter s² = factor²·N²·p/(2ρ_A) on the
        scaled table N·m (integers) and returns P(N·m + z)/N as float64, of m's shape (with the budget's leading
        repetitions).  Only that projection is released; it costs p/(2σ²) with σ² = s²/N², so one record (factor
        of them) moves the residual by at most √p (factor·√p) in L2 norm, as for continuous Gaussian noise.

        Refused before paying: a table that is not integers, an axis of one value (its residual is 0), s² above
        the sampler's 2^60.  Nothing about the counts refuses a paid measurement (a scaled table beyond 2^62 is
        summed in Python integers).  The record: l2_squared = factor²·p, sigma2 = s²/N² (the variance parameter
        in the table's units), ``scaled_by`` = N, rho = ρ_A, one query per cell; its ``noise_variance`` is the variance of the un-projected noise per cell in the table's units,
        discrete_gaussian_variance(s²)/N², and the released residual's variance per cell is p times that."""
        table = _integers(marginal, what)
        amount = _amount(amount, what)
        if any(n < 2 for n in table.shape):
            raise ValueError(f"{what}: a residual needs at least two values on every axis, got shape {table.shape}")
        cells = math.prod(table.shape)
        kept = math.prod(Fraction(n - 1, n) for n in table.shape)
        s2 = Fraction(self.factor) ** 2 * cells ** 2 * kept / (2 * amount)
        if s2 > MAX_SIGMA2:  # refused before paying
            raise ValueError(f"{what}: noise variance {float(s2):.3g} is above the sampler's 2^60")
        self._claim(amount, Fraction(0), what)
        noise = self._gaussian_noise(s2, table.shape)
        if table.size and int(np.abs(table).max()) * cells > 2**62:
            # Exact in Python integers rather than refused: a refusal here would depend on the counts.  The float
            # below is still a function of the noisy scaled table alone.
            noisy = cells * table.astype(object) + noise.astype(object)
        else:
            noisy = cells * table + noise
        residual = noisy.astype(np.float64)
        for axis in range(residual.ndim - table.ndim, residual.ndim):
            residual -= residual.mean(axis=axis, keepdims=True)
        residual /= cells
        sigma2 = s2 / cells ** 2
        if self._trace is not None:
            self._traced(Draw(what, residual.copy(), np.float64(math.sqrt(float(sigma2 * kept)))))
        record = Measurement(what=what, mechanism=GAUSSIAN, sensitivity=None, scale=None, epsilon=None,
                             l2_squared=Fraction(self.factor) ** 2 * kept, sigma2=sigma2, rho=amount,
                             queries=int(cells), scaled_by=int(cells),
                             composition="one residual basis (a projection of the scaled marginal)")
        return residual, self._record(record)

#: The largest variance parameter a Gaussian measurement may ask for (keeps every draw far inside int64).
MAX_SIGMA2 = Fraction(2**60)
_DIGITS = 10**9


def per_row_amount(definition: str, amount, rows: int) -> Fraction:
    """The amount that protects one row alone when ``amount`` protects a unit of ``rows`` rows, exactly: ε/K under
    "pure" (a unit of K rows moves L1 answers K times as far), ρ/K² under "zcdp" or "approximate" (run as ρ-zCDP:
    the unit moves L2 answers K times as far, and ρ grows with the square)."""
    amount = Fraction(amount)
    return amount / rows if definition == "pure" else amount / rows ** 2


def per_row_epsilon_like(definition: str, amount, rows: int) -> float:
    """An ε-like float per row for a table's amount: ε/K under "pure", √(2ρ)/K otherwise (the ε at which a
    Laplace count's noise has the discrete Gaussian's scale, up to a constant), for a unit of K = ``rows`` rows."""
    return float(amount) / rows if definition == "pure" else math.sqrt(2 * float(amount)) / rows


def epsilon_within(rho: Fraction) -> Fraction:
    """The largest ε = k/10⁹ (k whole) with ε²/2 <= ρ: an ε-DP step is then ρ-zCDP."""
    rho = Fraction(rho)
    if rho <= 0:
        raise BudgetExceeded(f"rho must be positive, got {rho}")
    # k = floor(10⁹ √(2ρ)) = isqrt(floor(2ρ·10¹⁸)) exactly (isqrt of the floor is the floor of the root).
    k = math.isqrt(math.floor(2 * rho * _DIGITS**2))
    if k == 0:
        raise BudgetExceeded(f"rho {rho} is too small for an epsilon-DP step")
    return Fraction(k, _DIGITS)


class Selection:
    """The draws a :meth:`PrivacyBudget.selection` paid for; each :meth:`choose` spends one of them."""

    def __init__(self, budget: PrivacyBudget, record: Measurement, count: int):
        self._budget, self.record, self._left = budget, record, count

    def choose(self, scores) -> int:
        """The index of one candidate by permute-and-flip at the selection's ε/count (higher scores likelier)."""
        if self._left < 1:
            raise BudgetExceeded(f"{self.record.what}: more draws than the {self.record.queries} paid for")
        self._left -= 1
        index = self._budget._select(scores, self.record.epsilon / self.record.queries, self.record.sensitivity)
        self._budget._traced(Draw(self.record.what, choice=index))
        return index


def _integers(answers, what: str) -> np.ndarray:
    answers = np.asarray(answers)
    if not (np.issubdtype(answers.dtype, np.integer) or answers.dtype == bool):
        raise TypeError(f"{what}: exact integer noise needs integer answers, got {answers.dtype}")
    return answers.astype(np.int64, copy=False)


def _amount(amount, what: str) -> Fraction:
    value = Fraction(amount)
    if value <= 0:
        raise BudgetExceeded(f"{what}: the amount must be positive, got {value}")
    return value


def _positive(sensitivity, what: str) -> Fraction:
    value = Fraction(sensitivity)
    if value <= 0:
        raise ValueError(f"{what}: sensitivity must be positive, got {value}")
    return value


def _classes(values: np.ndarray):
    """(value, where) for each distinct value of the flat ``values``, in increasing value: ``where`` indexes its
    positions in increasing order (a slice for a single value).  At most about 3 passes whatever the number of
    distinct values (one stable sort of small class numbers when there are many)."""
    distinct = np.unique(values)
    if distinct.size == 1:
        return [(distinct[0].item(), slice(None))]
    if distinct.size <= 4:
        return [(value, np.flatnonzero(values == value)) for value in distinct.tolist()]
    klass = np.searchsorted(distinct, values)
    small = np.uint16 if distinct.size <= 1 << 16 else np.int64  # radix sort for small class numbers
    order = np.argsort(klass.astype(small, copy=False), kind="stable")
    counts = np.bincount(klass, minlength=distinct.size)
    ends = np.cumsum(counts)
    return [(value, order[end - count:end]) for value, end, count in zip(distinct.tolist(), ends.tolist(),
                                                                        counts.tolist())]
