"""Many runs of a mechanism at once, for the audit: a budget that draws every noise array ``reps`` times.

The audit injects a :class:`ReplicatedBudget` into an algorithm that is not data-adaptive; every noisy answer then
carries a leading axis of ``reps`` independent runs, which such an algorithm carries through its inference.
Data-adaptive algorithms (their plan reads noisy answers) run once per repetition on a plain budget instead.
Either way the budget's trace holds each run's noisy answers and their scales: the audit reads those, and the
algorithm under audit has no code for it.
"""

from __future__ import annotations

from fractions import Fraction

from ..privacy import BitSource, PrivacyBudget

__all__ = ["ReplicatedBudget"]


class ReplicatedBudget(PrivacyBudget):
    """A budget whose every Laplace measurement is drawn ``reps`` times independently (a leading axis)."""

    def __init__(self, epsilon, bits: BitSource, reps: int, trace: list, factor: int = 1):
        super().__init__(epsilon, bits=bits, trace=trace, factor=factor)
        self.repetitions = (int(reps),)

    def _select(self, scores, epsilon: Fraction, sensitivity: Fraction) -> int:
        raise TypeError("a replicated budget cannot make selections: data-adaptive algorithms run once per repetition")
