"""Fast checks of the audit's ρ-zCDP machinery (issue 21 item 5): the criterion on Gaussian pairs with known
probabilities, its false-alarm rate, the grid it checks, and the zCDP budgets the audit injects.

Every random check uses a fixed seed and states its false-alarm probability; each has a counterpart that must
fail (the claim 0.64ρ, or σ × 0.8).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dphist_audit.bounds import zcdp_grid, zcdp_lower_bound
from dphist_audit.mutants import _ShrunkGaussian, _with_bug
from dphist_audit.replication import NoisePool, PooledZCDPBudget, ReplicatedZCDPBudget, TracedDraw
from dphist_audit.runner import audit, zcdp_cases
from dphist_audit.units import BoundedUnits, unit_pairs
from dphist_audit.cases import Case
from dphist.privacy import SeededBits
from dphist.privacy.conversions import delta_for
from dphist.privacy.samplers import discrete_gaussian_pmf, discrete_gaussian_variance

ALPHA = 1e-6 / 100  # about the per-case share an audit of ~100 cases gives each case
RHO = Fraction(1, 2)


def threshold_events(rho_true, n_cells: int = 1):
    """(t, p, p′) for the events {Y ≥ t} of a discrete Gaussian of σ² = n_cells/(2ρ_true) per cell on a pair of
    answers that differ by 1 in each of ``n_cells`` cells (the sum's pmf), exact: p on D (centre n_cells), p′ on
    D′ (centre 0).  Its privacy loss is that of an n_cells-level tree at ρ_true."""
    sigma2 = Fraction(n_cells) / (2 * Fraction(rho_true))
    k = np.arange(-60, 61)
    pmf = discrete_gaussian_pmf(k, sigma2)
    total = np.array([1.0])
    for _ in range(n_cells):
        total = np.convolve(total, pmf)
    support = np.arange(total.size) - 60 * n_cells
    return [(t, total[support >= t - n_cells].sum(), total[support >= t].sum()) for t in range(-10, 12 + n_cells)]


def test_gauss_grid_is_the_tight_conversion():
    eps, delta = zcdp_grid(RHO)
    assert eps[0] == 0.01 and np.allclose(np.diff(eps), 0.01)
    assert np.all(np.diff(delta) < 0) and delta[-1] < 1e-12 < delta[-3]  # reaches δ = 1e-12, not far past
    for j in (0, 99, 299):
        assert delta[j] == delta_for(RHO, Fraction(j + 1, 100))


@pytest.mark.parametrize("n_cells", [1, 4])
def test_gauss_criterion_passes_at_the_true_rho_and_fails_at_0_64_rho(n_cells):
    """Expected counts at n = 4e6 of every threshold event with probability >= 1e-3 on D: none contradicts the
    true ρ; the best one contradicts a claim of 0.64ρ (the σ × 0.8 bug seen from the other side)."""
    n, worst_true, best_false = 4_000_000, -np.inf, -np.inf
    for t, p, q in threshold_events(RHO, n_cells):
        if p < 1e-3:
            continue
        k1, k2 = round(p * n), round(q * n)
        lower, eps, delta = zcdp_lower_bound(k1, k2, n, RHO, ALPHA)
        assert delta == pytest.approx(delta_for(RHO, eps), rel=1e-12)
        worst_true = max(worst_true, lower - eps)
        lower, eps, _ = zcdp_lower_bound(k1, k2, n, RHO * Fraction(16, 25), ALPHA)
        best_false = max(best_false, lower - eps)
    assert worst_true < -0.3
    assert best_false > 0.1


def test_gauss_criterion_false_alarm_rate():
    """At α = 0.05 per check, 2000 seeded binomial replicates of the most revealing event of a correct ρ
    mechanism flag at most 5 % (+3 sd: 0.065; the Clopper–Pearson bounds are conservative, so far fewer), and
    the same replicates flag a claim of 0.64ρ almost always."""
    n, alpha, reps = 1_000_000, 0.05, 2000
    rng = np.random.default_rng(7)
    t, p, q = max(threshold_events(RHO), key=lambda e: e[1] - np.exp(1.0) * e[2])
    k1, k2 = rng.binomial(n, p, reps), rng.binomial(n, q, reps)
    true = [zcdp_lower_bound(a, b, n, RHO, alpha) for a, b in zip(k1, k2)]
    flagged = np.mean([lower > eps for lower, eps, _ in true])
    assert flagged <= 0.065
    false = [zcdp_lower_bound(a, b, n, RHO * Fraction(16, 25), alpha) for a, b in zip(k1[:200], k2[:200])]
    assert np.mean([lower > eps for lower, eps, _ in false]) > 0.9


def test_gauss_criterion_needs_the_event_to_be_frequent():
    # An event never seen on the first table says nothing: no finite bound, never flagged.
    lower, eps, delta = zcdp_lower_bound(0, 0, 1000, RHO, ALPHA)
    assert lower == -np.inf and 0 < delta <= 1


def _variance_ok(x: np.ndarray, sigma2) -> bool:
    """Sample variance within 6 sd of the exact discrete Gaussian variance (sd ≈ v·√(2/n): false alarm ~2e-9)."""
    v = discrete_gaussian_variance(sigma2)
    return abs(float(x.var()) - v) < 6 * v * np.sqrt(2 / x.size)


def test_gauss_replicated_budget_draws_gaussian_runs_and_names_them():
    trace: list = []
    budget = ReplicatedZCDPBudget(Fraction(1, 4), SeededBits(1), 50_000, trace)
    first, second = budget.split([1, 1])
    noisy, record = first.measure(np.array([3, 0, 5], dtype=np.int64), 1, 1, first.amount, "cells")
    assert noisy.shape == (50_000, 3) and record.sigma2 == 4 and record.rho == Fraction(1, 8)
    assert _variance_ok(noisy - [3, 0, 5], 4)
    second.laplace(np.array([1, 2], dtype=np.int64), 1, second.amount, "laplace step")
    assert [type(d) for d in trace] == [TracedDraw, TracedDraw] and [d.gaussian for d in trace] == [True, False]
    assert np.allclose(trace[0].scales, 2.0) and trace[0].values.shape == (50_000, 3)
    assert budget.spent == Fraction(1, 4)
    with pytest.raises(TypeError):
        budget.selection(1, Fraction(1, 100), 1, "a choice")


def test_gauss_pooled_budget_and_the_shrunk_sigma_mutant():
    """8,000 one-run budgets: 6 sd of the sample variance is 9.5 % of σ², so a σ² off by 10 % or more fails (the
    mutant's is off by 36 %); false alarm about 2e-9."""
    pool = NoisePool(SeededBits(2))
    draws = []
    for _ in range(8_000):  # one-run budgets share the pool's bulk draws
        trace: list = []
        noisy, _ = PooledZCDPBudget(Fraction(1, 2), pool=pool, trace=trace).measure(
            np.array([7], dtype=np.int64), 1, 1, Fraction(1, 2), "cell")
        draws.append(int(noisy[0]) - 7)
        assert trace[0].gaussian and np.all(trace[0].scales == 1.0)
    assert _variance_ok(np.array(draws), 1)
    # σ × 0.8: the trace still states σ = 1, the noise has σ² = 0.64; the variance test must see it.
    trace = []
    bad = _with_bug(ReplicatedZCDPBudget(Fraction(1, 2), SeededBits(3), 100_000, trace), _ShrunkGaussian,
                    variance_factor=Fraction(16, 25))
    noisy, record = bad.measure(np.zeros(1, dtype=np.int64), 1, 1, Fraction(1, 2), "cell")
    assert record.sigma2 == 1 and np.all(trace[0].scales == 1.0)
    assert _variance_ok(noisy, Fraction(16, 25)) and not _variance_ok(noisy, 1)


def _small_cases():
    cases = [c for c in zcdp_cases() if c.name.startswith(("identity (8,)", "h (8,)", "mutant-gaussian-tree"))]
    label, data, neighbour = unit_pairs()[0]
    return cases, Case(f"units K=2 {label}, zCDP", BoundedUnits(), data, neighbour, None, rho=RHO)


def _check_small(results):
    assert [r.verdict for r in results] == ["pass", "pass", "caught", "pass"], [
        (r.case, r.lower_bound, float(r.epsilon)) for r in results]
    for r in results:
        assert r.rho == RHO and r.delta == pytest.approx(delta_for(RHO, r.epsilon), rel=1e-12)


@pytest.mark.time_limit(30)  # the units case runs a run at a time, as the audit's data-adaptive cases do
def test_gauss_audit_small_cases():
    """The zCDP audit end to end: identity and h pass, the tree mutant (ρ√h spent) is caught, and a data-adaptive
    case (contribution bounding, pooled zCDP budgets, a run at a time) passes.  At 60,000 test runs per table
    (units: 1,000) the mutant's event (p ≈ 0.11, q ≈ 0.004 on this seed) is caught with probability above 0.99
    (:func:`~dphist_audit.bounds.runs_for_power` asks for 35,000); the full tier repeats this at 300,000."""
    cases, units = _small_cases()
    _check_small(audit(cases, n_test=60_000, seed=1) + audit([units], n_test=20_000, seed=1))


@pytest.mark.slow
def test_gauss_audit_small_cases_wide():
    """As above at the wide audit's 300,000 test runs per table (units: 15,000)."""
    cases, units = _small_cases()
    _check_small(audit(cases + [units], n_test=300_000, seed=1))
