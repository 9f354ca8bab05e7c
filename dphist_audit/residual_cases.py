"""Audit cases for the residual bases of a marginal set (dphist/algorithms/residual_planner.py, docs/privacy.md §1.6):
the plan measured through ``ZCDPBudget.gaussian_residual`` on a 2x3x4 table with all its 2-way marginals, under
ρ-zCDP, and a mutant whose one basis gets less noise than it is charged for.

**The statistic.**  Basis A releases r_A = P_A(N_A·m_A + z)/N_A, z iid discrete Gaussian of variance parameter
s² = N_A²·σ_A², so r_A has mean P_A m_A and (for continuous noise) covariance Σ_A = σ_A²·P_A: its values are
correlated, and the per-value statistic of the other Gaussian cases (independent values) does not fit it.  For a
pair D, D′ that differ in one record, the means differ by Δ_A = P_A(m_A(D′) − m_A(D)) = ±P_A e_j, which lies in
the range of P_A; the optimal (likelihood-ratio) direction is Σ_A⁺Δ_A = Δ_A/σ_A², so the 1-D statistic

    t_A = ⟨r_A, u_A⟩,   u_A = Δ_A/‖Δ_A‖,

carries everything r_A says about D against D′: it has standard deviation σ_A on both tables and its means differ
by ‖Δ_A‖ = √p_A, a shift of √(2ρ_A) standard deviations.  The bases are measured with independent noise, so each
run of the whole set reduces to one t_A per basis (:func:`projection_statistic`, the case's ``reduce``), and the
runner's Gaussian log-likelihood ratio of those, Σ_A ((t_A − a_A)² − (t_A − a′_A)²)/(2s_A²), is the privacy-loss
statistic of the whole release, with a_A, a′_A the medians and s_A the standard deviation of t_A measured on the
selection sample (for an honest basis s_A = σ_A; for a basis with less noise than stated, s_A is the smaller true
one, which weighs it as much as it reveals).  The runner then chooses a threshold event on that statistic on the
selection sample and bounds it against the ρ-zCDP claim on fresh samples (:func:`~.bounds.zcdp_lower_bound`), as
for every other ρ-zCDP case.

It stays black-box: it reads only the released residuals (from the budget's trace), the public facts of the plan
(which bases, their shapes, the σ_A the kernel states) and the audit's own two input tables, never the noise.
Any fixed statistic gives a sound test (the event is chosen before the test sample is drawn); this one is the most
powerful against a basis with less noise than stated.

**Power.**  ρ-zCDP's (ε, δ) curve (the tight conversion) lies close to the exact curve of the Gaussian mechanism
with μ² = 2ρ, so a mechanism that spends a little more than ρ contradicts the claim only on events whose gap is
tiny.  At :data:`RESIDUAL_RUNS` (5e4 selection, 4e5 test runs per table, α = 7e-9 per case), measured on two
seeds each: the largest basis, (1, 2) with 24 % of ρ, measured with variance factor f ≤ 1/4 is caught
(lower − ε = +0.19, +0.24; the release then spends 1.73ρ), f = 3/10 just (+0.09, +0.02; 1.57ρ), f = 1/3 not
(−0.03, −0.19; 1.49ρ), nor f = 1/2, 0.64 or 0.8.  With exact probabilities, f = 0.8 (1.06ρ for the release, 1.25ρ_A
for the basis) and even f = 0.6 contradict the claim on no threshold event of probability 10⁻³ or more (the exact
curve of a Gaussian of 1.06ρ stays under the tight curve of ρ-zCDP there), so no number of runs would catch them
with this audit's events; f = 1/2 shows a gap under 2·10⁻⁴ in probability (about 10⁹ runs per table).  The honest
cases sit at lower − ε ≈ −0.56.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dphist.algorithms.base import Algorithm, Estimate
from dphist.algorithms.marginal_sets import derive_marginal
from dphist.algorithms.residual_planner import ResidualPlan, measure_from_marginals, plan_residuals
from dphist.privacy import PrivacyBudget

from .cases import Case
from .mutants import shrunk_residual

__all__ = ["ResidualMarginals", "ShrunkBasisResidualMarginals", "projection_statistic", "cases", "SIZES",
           "MARGINALS", "RESIDUAL_RUNS", "MUTANT_VARIANCE_FACTOR"]

#: The audited table: three attributes of 2, 3 and 4 values, and every 2-way marginal of them (7 bases: ∅, the
#: three 1-way and the three 2-way residuals).
SIZES = (2, 3, 4)
MARGINALS = ((0, 1), (0, 2), (1, 2))
#: (selection, test) runs per table: enough for the mutant below to be caught with a wide margin (measured in
#: tests/audit/test_residual.py) and under ~10 s a case on one core.
RESIDUAL_RUNS = (50_000, 400_000)
#: The mutant's basis gets this times the noise variance it is charged for (σ halved).
MUTANT_VARIANCE_FACTOR = Fraction(1, 4)


def _plan() -> ResidualPlan:
    return plan_residuals(MARGINALS, SIZES)


def _project(table: np.ndarray) -> np.ndarray:
    """P_A applied to a table over A's axes: its mean removed along every axis (float64)."""
    out = np.asarray(table, dtype=np.float64).copy()
    for axis in range(out.ndim):
        out -= out.mean(axis=axis, keepdims=True)
    return out


class ResidualMarginals(Algorithm):
    """The residual plan of :data:`MARGINALS` over a table of shape :data:`SIZES`, every basis measured through the
    kernel (``measure_from_marginals``, as a release does) with the plan's shares of the budget.  Its output
    for the audit is what the budget's trace holds: one released residual per basis."""

    name = "marginals-residual"
    summary = "a marginal set at the optimum: residual bases measured with discrete Gaussian noise"

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        plan = _plan()
        axes = tuple(range(counts.ndim))
        tables = [derive_marginal(counts, axes, m) for m in plan.marginals]
        measure_from_marginals(plan, tables, self.budget_for(budget))
        return Estimate(values=np.zeros(counts.shape))

    def budget_for(self, budget: PrivacyBudget) -> PrivacyBudget:
        """The budget the bases are measured with (the mutant's hook)."""
        return budget


class ShrunkBasisResidualMarginals(ResidualMarginals):
    """Mutant: the basis with the largest share of ρ ((1, 2), the 3x4 residual) is measured with ``factor`` times
    the noise variance it is charged for (``variance_factor``, default :data:`MUTANT_VARIANCE_FACTOR`): a slip in one basis's s² (e.g.
    σ computed where σ² belongs).  That basis spends ρ_A/f, the release ρ + ρ_A(1/f − 1), f the factor."""

    name = "mutant-residual-basis-shrunk-sigma"

    def __init__(self, variance_factor=MUTANT_VARIANCE_FACTOR, **options):
        super().__init__(**options)
        self.variance_factor = Fraction(variance_factor)  # (not ``factor``: that name is the protected unit's)

    def budget_for(self, budget: PrivacyBudget) -> PrivacyBudget:
        plan = _plan()
        target = plan.bases[int(np.argmax(plan.shares))]
        return shrunk_residual(budget, f"residual basis {target}", self.variance_factor)


def projection_statistic(data: np.ndarray, neighbour: np.ndarray):
    """The reduction of a run's traced residuals to one statistic per basis, t_A = ⟨r_A, u_A⟩ (module docstring),
    with u_A the unit direction of P_A(m_A(neighbour) − m_A(data)) and the stated scale σ_A = (the per-value σ the
    trace states)/√p_A (the runner weighs the values by the spread it measures instead, :func:`~.runner._spread_of`).

    Returns ``reduce(drawn, reps) -> (values, scales, gaussian)`` (each (reps, bases)) for the runner: ``drawn``
    is a run's traced draws, in the order the plan measures its bases (one per basis, values of shape
    (reps, *basis shape)).  A basis whose residual the pair does not move (Δ_A = 0) gives t_A = 0 (no information
    in either direction)."""
    plan = _plan()
    axes = tuple(range(len(SIZES)))
    directions, kept = [], []
    for basis in plan.bases:
        delta = _project(derive_marginal(neighbour, axes, basis)) - _project(derive_marginal(data, axes, basis))
        norm = float(np.sqrt((delta ** 2).sum()))
        directions.append(delta / norm if norm > 0 else np.zeros_like(delta))
        kept.append(float(np.prod([(SIZES[i] - 1) / SIZES[i] for i in basis])))

    def reduce(drawn, reps: int):
        if len(drawn) != len(directions):
            raise ValueError(f"expected {len(directions)} residual measurements, the trace holds {len(drawn)}")
        values = np.empty((reps, len(drawn)))
        scales = np.empty((reps, len(drawn)))
        for k, (draw, u, p) in enumerate(zip(drawn, directions, kept)):
            residual = np.asarray(draw.values, dtype=np.float64).reshape((reps,) + u.shape)
            values[:, k] = residual.reshape(reps, -1) @ u.ravel()
            scales[:, k] = float(np.max(draw.scales)) / np.sqrt(p)
        return values, scales, np.ones((reps, len(drawn)), dtype=bool)
    return reduce


def _pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """A 2x3x4 table with a record added to its first cell, and with one removed from its largest (every basis's
    residual moves, in different directions for the two)."""
    base = np.resize(np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int64), int(np.prod(SIZES))).reshape(SIZES)
    first, largest = base.copy(), base.copy()
    first.flat[0] += 1
    largest.flat[int(np.argmax(base))] -= 1
    return [("add to first cell", base, first), ("remove from largest cell", base, largest)]


def cases(mutants: bool = True, rho: Fraction = Fraction(1, 2)) -> list[Case]:
    """The honest residual marginal set on both pairs at ρ, and with ``mutants`` the shrunk-basis mutant on the
    first pair; each with :data:`RESIDUAL_RUNS` runs per table and the projection statistic."""
    out = []
    for label, data, neighbour in _pairs():
        out.append(Case(f"marginals residual {SIZES} 2-way {label}, zCDP rho={rho}", ResidualMarginals(), data,
                        neighbour, None, rho=Fraction(rho), runs=RESIDUAL_RUNS,
                        reduce=projection_statistic(data, neighbour)))
    if mutants:
        label, data, neighbour = _pairs()[0]
        out.append(Case(f"{ShrunkBasisResidualMarginals.name} {SIZES} {label}, zCDP rho={rho}",
                        ShrunkBasisResidualMarginals(), data, neighbour, None, mutant=True, rho=Fraction(rho),
                        runs=RESIDUAL_RUNS, reduce=projection_statistic(data, neighbour)))
    return out
