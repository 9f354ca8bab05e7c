"""Many runs of a mechanism at once, for the audit: a budget that draws every noise array ``reps`` times.

The audit injects a :class:`ReplicatedBudget` into an algorithm that is not data-adaptive; every noisy answer then
carries a leading axis of ``reps`` independent runs, which such an algorithm carries through its inference.
Data-adaptive algorithms (their plan reads noisy answers) run once per repetition on a plain budget instead.
Either way the budget's trace holds each run's noisy answers and their scales: the audit reads those, and the
algorithm under audit has no code for it.

zCDP releases get the same two budgets in their definition (:class:`ReplicatedZCDPBudget`,
:class:`PooledZCDPBudget`): linear queries get exact discrete Gaussian noise of variance parameter
factor²·Δ₂²/(2ρ) (the kernel's :class:`~dphist.privacy.ZCDPBudget` decides that), Laplace steps and selections
keep ε = √(2ρ).  Their traces hold :class:`TracedDraw` entries, which say which noise each draw had: the audit's
statistic differs for the two (|y − a| / b for Laplace, (y − a)² / (2σ²) for Gaussian).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dphist.privacy import BitSource, Draw, PrivacyBudget, ZCDPBudget
from dphist.privacy.samplers import discrete_gaussian, discrete_laplace

__all__ = ["ReplicatedBudget", "PooledBudget", "NoisePool", "ReplicatedZCDPBudget", "PooledZCDPBudget",
           "TracedDraw"]


class ReplicatedBudget(PrivacyBudget):
    """A budget whose every Laplace measurement is drawn ``reps`` times independently (a leading axis)."""

    def __init__(self, epsilon, bits: BitSource, reps: int, trace: list, factor: int = 1):
        super().__init__(epsilon, bits=bits, trace=trace, factor=factor)
        self.repetitions = (int(reps),)

    def selection(self, count, epsilon, sensitivity, what, composition=None):
        raise TypeError("a replicated budget cannot make selections: data-adaptive algorithms run once per repetition")


class NoisePool:
    """Exact discrete Laplace (or discrete Gaussian) draws made in bulk per scale (per σ²) and handed out in
    order: many small runs then cost one vectorised draw instead of one each.  The values handed out are
    independent draws of the exact distribution, so a run on a pooled budget is distributed exactly as a run on
    a plain one."""

    BATCH = 1 << 16

    def __init__(self, bits: BitSource):
        self.bits = bits
        self._pools: dict[object, tuple[np.ndarray, int]] = {}

    def _take(self, key, draw, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        pool, used = self._pools.get(key, (np.zeros(0, dtype=np.int64), 0))
        if used + n > pool.size:
            pool, used = np.concatenate([pool[used:], draw(max(self.BATCH, n))]), 0
        self._pools[key] = (pool, used + n)
        return pool[used:used + n].reshape(shape)

    def take(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Discrete Laplace noise of ``scale`` (exact), shaped ``shape``."""
        return self._take(scale, lambda n: discrete_laplace(scale, n, self.bits), shape)

    def take_gaussian(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        """Discrete Gaussian noise of variance parameter ``sigma2`` (exact), shaped ``shape``."""
        return self._take(("gaussian", Fraction(sigma2)), lambda n: discrete_gaussian(sigma2, n, self.bits), shape)


class PooledBudget(PrivacyBudget):
    """A plain (one-run) budget whose Laplace noise comes from a :class:`NoisePool` shared across runs."""

    def __init__(self, epsilon, delta=0, *, pool: NoisePool, factor: int = 1, trace: list | None = None):
        super().__init__(epsilon, delta, bits=pool.bits, factor=factor, trace=trace)
        self._pool = pool

    def _noise(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return self._pool.take(scale, tuple(shape))


@dataclass(frozen=True)
class TracedDraw(Draw):
    """A :class:`~dphist.privacy.Draw` that says whether its noise was discrete Gaussian (``scales`` then hold
    σ per value) or discrete Laplace (``scales`` hold b)."""

    gaussian: bool = False


class _MechanismTrace:
    """Mixed into a zCDP budget: every traced draw becomes a :class:`TracedDraw` that names its noise.

    The kernel draws a measurement's noise (``_noise`` or ``_gaussian_noise``) and then traces it, so the last
    noise drawn is the one a trace entry holds."""

    _last_gaussian = False

    def _noise(self, scale, shape):
        self._last_gaussian = False
        return super()._noise(scale, shape)

    def _gaussian_noise(self, sigma2, shape):
        self._last_gaussian = True
        return super()._gaussian_noise(sigma2, shape)

    def _traced(self, draw: Draw) -> None:
        if draw.values is not None:
            draw = TracedDraw(draw.what, draw.values, draw.scales, draw.choice, gaussian=self._last_gaussian)
        super()._traced(draw)


class ReplicatedZCDPBudget(_MechanismTrace, ZCDPBudget):
    """A ρ-zCDP budget whose every measurement is drawn ``reps`` times independently (a leading axis): discrete
    Gaussian for ``measure`` (the base class's hook draws the repetitions), discrete Laplace for Laplace steps."""

    def __init__(self, rho, bits: BitSource, reps: int, trace: list, factor: int = 1):
        super().__init__(rho, bits=bits, trace=trace, factor=factor)
        self.repetitions = (int(reps),)

    def selection(self, count, amount, sensitivity, what, composition=None):
        raise TypeError("a replicated budget cannot make selections: data-adaptive algorithms run once per repetition")


class PooledZCDPBudget(_MechanismTrace, ZCDPBudget):
    """A plain (one-run) ρ-zCDP budget whose Gaussian and Laplace noise come from a shared :class:`NoisePool`."""

    def __init__(self, rho, *, pool: NoisePool, factor: int = 1, trace: list | None = None):
        super().__init__(rho, bits=pool.bits, factor=factor, trace=trace)
        self._pool = pool

    def _noise(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self._last_gaussian = False
        return self._pool.take(scale, tuple(shape))

    def _gaussian_noise(self, sigma2: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        self._last_gaussian = True
        return self._pool.take_gaussian(sigma2, tuple(shape))
