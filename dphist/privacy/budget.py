"""The privacy budget of a release: the only way to draw noise, and the record of everything drawn.

A :class:`PrivacyBudget` is made once per release from the exact total (ε, δ), the bit source and the number of
rows the protected unit may change (``factor``: 1 for one record, K for a privacy unit bounded to K rows, K·c for
a group of c such units).  Algorithms receive a budget and call it:

    split(shares)                        child budgets; their ε (and δ) add up exactly to what this one had left
    laplace(answers, Δ, ε, what)         answers + discrete Laplace noise of scale factor·Δ/ε      (ε-DP)
    laplace_weighted(answers, g, Δ, ε)   answer i + noise of scale g_i·factor·Δ/ε                  (ε-DP when
                                         Σ_i |Δanswer_i| / g_i <= Δ)
    selection(k, ε, Δ, what).choose(q)   k permute-and-flip draws at ε/k each on scores of sensitivity
                                         factor·Δ                                                  (ε-DP)

``Δ`` is always the sensitivity under one record; the budget multiplies it by ``factor`` (group privacy), so no
algorithm handles privacy units.  Every call checks, before drawing, that its ε and δ fit in what is left, and
records a :class:`~dphist.privacy.measurement.Measurement`; ``measurements`` lists them in the order drawn,
children's where they were split off, and ``spent`` adds them up.  Nothing else in dphist adds up budgets.

Definitions: today every budget is pure ε (δ only for partition selection, which is (ε, δ)-DP).  A zCDP or
approximate-DP budget is another subclass with the same calls, converting each step's cost into its own unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Union

import numpy as np

from .bits import BitSource
from .measurement import LAPLACE, SELECTION, Measurement
from .samplers import checked_scale, discrete_laplace, permute_and_flip

__all__ = ["PrivacyBudget", "Selection", "BudgetExceeded", "Draw", "split_shares"]


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


Entry = Union[Measurement, "PrivacyBudget"]


class PrivacyBudget:
    """An exact (ε, δ) budget with its bit source and protected-unit factor (see the module docstring)."""

    def __init__(self, epsilon, delta=0, *, bits: BitSource, factor: int = 1, trace: list | None = None):
        self.epsilon, self.delta = Fraction(epsilon), Fraction(delta)
        if self.epsilon <= 0 or self.delta < 0:
            raise ValueError(f"a budget needs epsilon > 0 and delta >= 0, got {self.epsilon}, {self.delta}")
        if isinstance(factor, bool) or int(factor) != factor or factor < 1:
            raise ValueError(f"the protected unit's factor must be a whole number >= 1, got {factor!r}")
        self.factor = int(factor)
        self._bits = bits
        self._trace = trace
        self._entries: list[Entry] = []
        self._used = (Fraction(0), Fraction(0))

    # -- what is left, what was spent ----------------------------------------------------------------------------

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
        """The ε not yet measured with or split off."""
        return self.epsilon - self._used[0]

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

    @property
    def spent(self) -> Fraction:
        """The ε of every measurement made (a child's unspent ε is not spent)."""
        return sum((m.epsilon for m in self.measurements), Fraction(0))

    @property
    def spent_delta(self) -> Fraction:
        return sum((m.delta for m in self.measurements), Fraction(0))

    def scale(self, sensitivity, epsilon) -> Fraction:
        """The discrete Laplace scale factor·Δ/ε a measurement of one-record sensitivity Δ at ε gets."""
        return self.factor * Fraction(sensitivity) / Fraction(epsilon)

    # -- dividing the budget -------------------------------------------------------------------------------------

    def split(self, shares: Sequence, delta_shares: Sequence | None = None) -> list[PrivacyBudget]:
        """Child budgets in proportion to positive ``shares`` (δ in proportion to ``delta_shares``, which may hold
        zeros, else to ``shares``); together they take everything this budget has left, exactly."""
        eps_parts = split_shares(self.remaining, shares)
        if delta_shares is not None and len(delta_shares) != len(eps_parts):
            raise ValueError("delta_shares must have one share per part")
        delta_left = self.remaining_delta
        if delta_left == 0:
            delta_parts = [Fraction(0)] * len(eps_parts)
        else:
            delta_parts = split_shares(delta_left, delta_shares if delta_shares is not None else shares, allow_zero=True)
        self._claim(sum(eps_parts, Fraction(0)), sum(delta_parts, Fraction(0)), "split")
        children = [self._child(e, d) for e, d in zip(eps_parts, delta_parts)]
        self._entries.extend(children)
        return children

    def _child(self, epsilon: Fraction, delta: Fraction) -> PrivacyBudget:
        child = object.__new__(type(self))
        child.__dict__.update(self.__dict__)
        child.epsilon, child.delta = epsilon, delta
        child._entries, child._used = [], (Fraction(0), Fraction(0))
        return child

    def _claim(self, epsilon: Fraction, delta: Fraction, what: str) -> None:
        if not epsilon > 0:
            raise BudgetExceeded(f"{what}: epsilon must be positive, got {epsilon}")
        if epsilon > self.remaining or delta > self.remaining_delta or delta < 0:
            raise BudgetExceeded(f"{what}: asks for epsilon {epsilon}, delta {delta} with only epsilon "
                                 f"{self.remaining}, delta {self.remaining_delta} left")
        self._used = (self._used[0] + epsilon, self._used[1] + delta)

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

    def _select(self, scores, epsilon: Fraction, sensitivity: Fraction) -> int:
        return permute_and_flip(scores, epsilon, sensitivity, self._bits)

    def laplace(self, answers, sensitivity, epsilon, what: str, composition: str = "parallel over disjoint cells",
                delta=0, publish_count: bool = True) -> tuple[np.ndarray, Measurement]:
        """``answers`` (integers) + exact discrete Laplace noise of scale factor·Δ/ε, with Δ = ``sensitivity`` the
        L1 sensitivity of the answers under one record.  ε-DP for the protected unit.  ``delta`` is charged as
        well where a later step (partition selection's threshold) makes the whole (ε, δ)-DP;
        ``publish_count=False`` leaves the number of answers out of the report (it depends on the data)."""
        answers = _integers(answers, what)
        epsilon, delta = _epsilon(epsilon, what), Fraction(delta)
        scale = checked_scale(self.scale(_positive(sensitivity, what), epsilon))  # refused before paying
        self._claim(epsilon, delta, what)
        noisy = answers + self._noise(scale, answers.shape)
        self._traced(Draw(what, noisy.astype(np.float64), np.float64(scale)))
        record = Measurement(what=what, mechanism=LAPLACE, sensitivity=self.factor * Fraction(sensitivity),
                             scale=scale, epsilon=epsilon, delta=delta,
                             queries=int(answers.size) if publish_count else None, composition=composition)
        return noisy, self._record(record)

    def laplace_weighted(self, answers, relative, sensitivity, epsilon, what: str,
                         composition: str) -> tuple[np.ndarray, Measurement]:
        """Answer i + noise of scale b·relative[i], b = factor·Δ/ε.  ε-DP when Σ_i |Δanswer_i| / relative[i] <= Δ
        for one record (a weighted sensitivity).  ``relative`` holds positive whole numbers."""
        answers = _integers(answers, what)
        epsilon = _epsilon(epsilon, what)
        base = self.scale(_positive(sensitivity, what), epsilon)
        relative = np.broadcast_to(np.asarray(relative), answers.shape)
        if np.any(relative < 1) or np.any(relative != np.round(relative)):
            raise ValueError(f"{what}: relative scales must be whole numbers >= 1")
        checked_scale(base * int(relative.max(initial=1)))  # the largest scale, refused before paying
        self._claim(epsilon, Fraction(0), what)
        noise = np.zeros(self.repetitions + answers.shape, dtype=np.int64)
        for factor in np.unique(relative):
            where = relative == factor
            noise[..., where] = self._noise(base * int(factor), (int(where.sum()),))
        noisy = answers + noise
        self._traced(Draw(what, noisy.astype(np.float64), float(base) * relative.astype(np.float64)))
        record = Measurement(what=what, mechanism=LAPLACE, sensitivity=self.factor * Fraction(sensitivity),
                             scale=base, epsilon=epsilon, queries=int(answers.size), composition=composition)
        return noisy, self._record(record)

    def selection(self, count: int, epsilon, sensitivity, what: str,
                  composition: str | None = None) -> Selection:
        """``count`` exponential-mechanism draws (permute-and-flip) at ε/count each, for scores whose sensitivity
        under one record is Δ (times ``factor`` for the protected unit).  The whole ε is charged now."""
        if isinstance(count, bool) or int(count) != count or count < 1:
            raise ValueError(f"{what}: a selection needs at least one draw")
        epsilon = _epsilon(epsilon, what)
        sensitivity = self.factor * _positive(sensitivity, what)
        self._claim(epsilon, Fraction(0), what)
        record = self._record(Measurement(
            what=what, mechanism=SELECTION, sensitivity=sensitivity, scale=2 * sensitivity * count / epsilon,
            epsilon=epsilon, queries=int(count),
            composition=composition or ("one draw" if count == 1 else f"sequential over the {count} draws")))
        return Selection(self, record, int(count))

    def choose(self, scores, epsilon, sensitivity, what: str) -> int:
        """One permute-and-flip draw at ε: the index of a candidate, higher scores likelier."""
        return self.selection(1, epsilon, sensitivity, what).choose(scores)


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


def _epsilon(epsilon, what: str) -> Fraction:
    value = Fraction(epsilon)
    if value <= 0:
        raise BudgetExceeded(f"{what}: epsilon must be positive, got {value}")
    return value


def _positive(sensitivity, what: str) -> Fraction:
    value = Fraction(sensitivity)
    if value <= 0:
        raise ValueError(f"{what}: sensitivity must be positive, got {value}")
    return value
