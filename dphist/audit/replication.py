"""Many runs of a mechanism at once, for the audit: a budget that draws every noise array ``reps`` times.

The audit injects a :class:`ReplicatedBudget` into an algorithm that is not data-adaptive; every noisy answer then
carries a leading axis of ``reps`` independent runs, which such an algorithm carries through its inference.
Data-adaptive algorithms (their plan reads noisy answers) run once per repetition on a plain budget instead.
Either way the budget's trace holds each run's noisy answers and their scales: the audit reads those, and the
algorithm under audit has no code for it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..privacy import BitSource, PrivacyBudget
from ..privacy.samplers import discrete_laplace

__all__ = ["ReplicatedBudget", "PooledBudget", "NoisePool"]


class ReplicatedBudget(PrivacyBudget):
    """A budget whose every Laplace measurement is drawn ``reps`` times independently (a leading axis)."""

    def __init__(self, epsilon, bits: BitSource, reps: int, trace: list, factor: int = 1):
        super().__init__(epsilon, bits=bits, trace=trace, factor=factor)
        self.repetitions = (int(reps),)

    def selection(self, count, epsilon, sensitivity, what, composition=None):
        raise TypeError("a replicated budget cannot make selections: data-adaptive algorithms run once per repetition")


class NoisePool:
    """Exact discrete Laplace draws made in bulk per scale and handed out in order: many small runs then cost
    one vectorised draw instead of one each.  The values handed out are independent draws of the exact
    distribution, so a run on a pooled budget is distributed exactly as a run on a plain one."""

    BATCH = 1 << 16

    def __init__(self, bits: BitSource):
        self.bits = bits
        self._pools: dict[Fraction, tuple[np.ndarray, int]] = {}

    def take(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        pool, used = self._pools.get(scale, (np.zeros(0, dtype=np.int64), 0))
        if used + n > pool.size:
            pool, used = np.concatenate([pool[used:], discrete_laplace(scale, max(self.BATCH, n), self.bits)]), 0
        self._pools[scale] = (pool, used + n)
        return pool[used:used + n].reshape(shape)


class PooledBudget(PrivacyBudget):
    """A plain (one-run) budget whose Laplace noise comes from a :class:`NoisePool` shared across runs."""

    def __init__(self, epsilon, delta=0, *, pool: NoisePool, factor: int = 1, trace: list | None = None):
        super().__init__(epsilon, delta, bits=pool.bits, factor=factor, trace=trace)
        self._pool = pool

    def _noise(self, scale: Fraction, shape: tuple[int, ...]) -> np.ndarray:
        return self._pool.take(scale, tuple(shape))
