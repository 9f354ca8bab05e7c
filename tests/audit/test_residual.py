"""The residual marginal set's audit (dphist_audit/residual_cases.py): the statistic it reduces each basis to, the
mutant's bug, and the runner's centres.  The cases themselves run in test_audit.py (the honest one in the quick
audit, the mutant at the size the power calculation gives, all three at full size in the wide tier).

Random checks use fixed seeds; each tolerance is at least 6 standard errors (false alarm below 1e-8 a check).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dphist.privacy import SeededBits
from dphist_audit.replication import ReplicatedZCDPBudget
from dphist.algorithms.residual_planner import plan_residuals
from dphist_audit.residual_cases import (MARGINALS, MUTANT_VARIANCE_FACTOR, SIZES, ResidualMarginals,
                                         ShrunkBasisResidualMarginals, cases, projection_statistic)
from dphist_audit.runner import _centre, default_cases

RHO = Fraction(1, 2)
REPS = 12_000


def _statistic(algorithm, table, reduce, seed):
    """(t, stated σ per basis, the budget) of REPS replicated runs of ``algorithm`` on ``table``."""
    trace: list = []
    budget = ReplicatedZCDPBudget(RHO, SeededBits(seed), REPS, trace)
    algorithm.run(table, budget)
    drawn = [d for d in trace if d.values is not None]
    values, scales, gaussian = reduce(drawn, REPS)
    assert gaussian.all() and values.shape == (REPS, 7)
    return values, scales[0], budget


def _kept():
    plan = plan_residuals(MARGINALS, SIZES)
    return plan, np.array([np.prod([(SIZES[i] - 1) / SIZES[i] for i in basis]) for basis in plan.bases])


@pytest.mark.parametrize("pair", [0, 1], ids=["add to first cell", "remove from largest cell"])
def test_each_basis_reduces_to_a_gaussian_shifted_by_root_p(pair):
    """t_A has the stated σ_A on both tables and its means differ by √p_A (the basis's L2 sensitivity), the
    facts the module docstring derives: a shift of √(2ρ_A) standard deviations."""
    case = cases(mutants=False, rho=RHO)[pair]
    plan, kept = _kept()
    t_d, sigma, _ = _statistic(case.algorithm, case.data, case.reduce, seed=1)
    t_n, _, _ = _statistic(case.algorithm, case.neighbour, case.reduce, seed=2)
    assert np.allclose(sigma ** 2, plan.sigma2(RHO), rtol=1e-9)  # the kernel's stated σ_A², the plan's
    shift = t_n.mean(axis=0) - t_d.mean(axis=0)
    assert np.all(np.abs(shift - np.sqrt(kept)) < 6 * sigma * np.sqrt(2 / REPS)), (shift, np.sqrt(kept))
    for t in (t_d, t_n):
        assert np.all(np.abs(t.std(axis=0) / sigma - 1) < 6 / np.sqrt(2 * REPS))


def test_the_mutant_draws_a_quarter_of_the_variance_on_one_basis_and_is_charged_in_full():
    honest, mutant = cases(rho=RHO)[0], cases(rho=RHO)[2]
    assert isinstance(mutant.algorithm, ShrunkBasisResidualMarginals) and mutant.mutant
    plan, _ = _kept()
    target = int(np.argmax(plan.shares))
    t_h, sigma_h, budget_h = _statistic(honest.algorithm, honest.data, honest.reduce, seed=3)
    t_m, sigma_m, budget_m = _statistic(mutant.algorithm, mutant.data, mutant.reduce, seed=3)
    # It states and spends what the honest set does ...
    assert np.array_equal(sigma_h, sigma_m)
    assert budget_m.spent == budget_h.spent == RHO
    # ... but one basis (the largest share) has half the standard deviation, the others theirs.
    ratio = t_m.std(axis=0) / sigma_m
    expected = np.ones(len(ratio))
    expected[target] = float(MUTANT_VARIANCE_FACTOR) ** 0.5
    assert np.all(np.abs(ratio - expected) < 6 * expected / np.sqrt(2 * REPS)), ratio


def test_the_cases_are_in_the_audit_with_their_statistic():
    names = {c.name: c for c in default_cases(["marginals"])}
    residual = [c for c in names.values() if c.algorithm.name in (ResidualMarginals.name,
                                                                   ShrunkBasisResidualMarginals.name)]
    assert len(residual) == 3 and sum(c.mutant for c in residual) == 1
    assert all(c.rho == RHO and c.reduce is not None and c.data.shape == SIZES for c in residual)
    assert len([c for c in default_cases(["zcdp"]) if c.reduce is not None]) == 3


def test_centres_round_integer_answers_only():
    """Integer answers keep the lattice centres they always had; real-valued ones (projections) are not rounded."""
    integers = np.array([[1.0, 0.25], [2.0, 0.5], [2.0, 0.75], [3.0, 1.0]])
    centre = _centre(integers)
    assert centre[0] == 2.0 and centre[1] == pytest.approx(0.625)
    assert _centre(np.array([[1.0], [2.0]]))[0] == 2.0  # a half-integer median goes to the even neighbour (rint)


def test_the_statistic_refuses_a_trace_of_another_plan():
    case = cases(mutants=False)[0]
    reduce = projection_statistic(case.data, case.neighbour)
    with pytest.raises(ValueError, match="expected 7 residual measurements"):
        reduce([], 10)
