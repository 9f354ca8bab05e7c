"""A zCDP budget that draws every measurement many times at once, for Monte-Carlo checks of an algorithm's noise."""

from __future__ import annotations

from dphist.privacy import ZCDPBudget


class Replicated(ZCDPBudget):
    """A zCDP budget drawing every measurement ``reps`` times (a leading axis), like the audit's."""

    def __init__(self, rho, bits, reps):
        super().__init__(rho, bits=bits)
        self.repetitions = (int(reps),)
