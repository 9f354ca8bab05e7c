"""The audit's unit of work: one case, an algorithm run on a pair of neighbouring tables against its claimed budget.

The runner (runner.py) builds and runs cases; the per-algorithm modules (``*_cases.py``) build their own.  Both
import this module, so the runner can import the case modules without their importing it back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dphist.algorithms import Algorithm

__all__ = ["Case"]


@dataclass(frozen=True)
class Case:
    """``algorithm`` run on ``data`` and on ``neighbour`` (one record added or removed), claimed ``epsilon``-DP (or
    ``rho``-zCDP); a ``mutant`` is a deliberately broken algorithm that the audit must flag."""

    name: str
    algorithm: Algorithm
    data: np.ndarray
    neighbour: np.ndarray
    epsilon: Fraction
    mutant: bool = False
    columns: tuple | None = None  # public column declarations, for algorithms that use them (hierarchies)
    rho: Fraction | None = None  # a ρ-zCDP case: its budgets are zCDP with this ρ (``epsilon`` is then None)
    runs: tuple[int, int] | None = None  # at least this many (selection, test) runs per table
    # A ρ-zCDP case whose traced values are correlated (a projection): ``reduce(drawn, reps)`` turns a replicated
    # run's traced draws into the (values, scales, gaussian) arrays, each (reps, M), that the runner's statistic
    # reads, in place of one value per traced answer (residual_cases.projection_statistic).
    reduce: Callable | None = None
