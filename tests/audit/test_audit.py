"""The privacy audit in the suite, one case per test so that parallel workers share them out.

One criterion, stated once (:func:`check`): the audit's lower confidence bound on the ε a case's outputs show
must not exceed the claimed ε for a real algorithm (its verdict is "pass"), and must exceed it for a mutant
("caught").  For a ρ-zCDP case the bound and the claim are read at the δ_ρ(ε) where the claim is contradicted
most.  The audit's power shows in the mutants: every algorithm family has at least one that must be caught.

Two tiers:

* ``make test`` runs the quick audit (``dphist audit --quick``: :func:`quick_cases` at :data:`QUICK`) and every
  mutant the quick audit leaves out, each at the number of runs the power calculation below asks for.  One audit:
  its false-alarm probability for correct algorithms is 1e-6, split over its cases (Bonferroni).
* ``make test-full`` (``slow``) also runs every case of :func:`default_cases` at :data:`WIDE` (3e5 test runs per
  table; data-adaptive algorithms 1.5e4): the audit this suite ran before it had tiers.

Seeds are fixed, so every verdict is deterministic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dphist.algorithms import REGISTRY
from dphist.audit import QUICK, WIDE, default_cases, plan, quick_cases
from dphist.audit.bounds import cp_lower, cp_upper, epsilon_lower_bound, runs_for_power, zcdp_lower_bound
from dphist.audit.mutants import MUTANTS, ZCDP_MUTANTS
from dphist.audit.runner import ALPHA, LARGE_EFFECT, AuditResult, PlannedCase

from cli_harness import invoke

#: The mutants of small effect, with the event the wide audit (seed 0) chose for each: its probability on the
#: first table and on the second, as (hits on the first, hits on the second, runs per table).  Their test runs in
#: ``make test`` are what :func:`runs_for_power` needs to catch that event with probability 0.99 at this
#: audit's per-case α (the selection sample stays at the quick audit's); the mutant's privacy loss on the event
#: is ln(p/q), beside each.
SMALL_EFFECT = {
    "mutant-identity-scale-0.8": (233_074, 66_909, 300_000),  # ln(p/q) = 1.25 against ε = 1
    "mutant-tree-overspent-10pct": (61_712, 20_846, 300_000),  # 1.09
    "mutant-privelet-total-forgotten": (34_387, 9_080, 300_000),  # 1.33
    "mutant-privelet-nominal-unweighted": (2_995, 288, 300_000),  # 2.34 on a rare event (p = 0.01)
    "mutant-dawa-half-sensitivity": (3_991, 775, 15_000),  # 1.64
    "mutant-unit-bound-forgotten": (2_203, 192, 15_000),  # 2.44 on p = 0.15
    "mutant-discovery-candidates-before-bounding": (553, 0, 5_000),  # p = 0.11, never on the second table
    "mutant-partition-selection-no-threshold": (1_375, 0, 5_000),  # p = 0.28, never on the second table
    # ρ-zCDP: the claim is (ε, δ_ρ(ε)) at every ε; the wide audit contradicted it at ε = 2.96 (σ × 0.8) and 1.58.
    "mutant-gaussian-identity-sigma-0.8": (89_048, 1_802, 4_000_000),
    "mutant-gaussian-tree-l2-unsquared": (89_148, 7_697, 300_000),
}
#: A mutant the wide audit never saw on the second table is sized as if it had been seen once.
POWER = 0.99
#: Cases of make test's audit that the power calculation makes longer than the 5 s an unmarked test may take,
#: with the seconds they may take (data-adaptive algorithms run once per repetition, about a millisecond each).
TIME_LIMITS = {"mutant-dawa-half-sensitivity": 60}


def check(result: AuditResult) -> None:
    """The one criterion: a real algorithm's lower bound does not exceed its claim; a mutant's does."""
    assert result.flagged == result.mutant, (
        f"{result.case}: ε lower bound {result.lower_bound:.3f} against the claimed {float(result.epsilon):.3g}"
        f"{f' at δ {result.delta:.3g}' if result.rho is not None else ''} ({result.hits[0]:,} / {result.hits[1]:,}"
        f" of {result.runs:,} runs): {result.verdict}")


def _ci_plan() -> list[PlannedCase]:
    """The audit ``make test`` runs: the quick audit's cases at QUICK, then the small-effect mutants, all sharing
    one false-alarm budget.  A small-effect mutant keeps the seed and the selection sample it has in the wide
    audit, so the event it is tested on is the one whose probabilities SMALL_EFFECT gives; only its test sample
    is resized."""
    quick = quick_cases()
    wide = {p.case.name: p for p in WIDE_PLAN}
    extra = [c for c in default_cases() if c.mutant and c.algorithm.name not in LARGE_EFFECT]
    alpha = ALPHA / (len(quick) + len(extra))
    planned = [PlannedCase(p.case, p.n_select, p.n_test, alpha, p.seed) for p in plan(quick, QUICK, seed=0)]
    for case in extra:
        k1, k2, n = SMALL_EFFECT[case.algorithm.name]
        p, q = k1 / n, max(k2, 1) / n
        test = runs_for_power(p, q, alpha, epsilon=None if case.rho else float(case.epsilon), rho=case.rho,
                              power=POWER)
        planned.append(PlannedCase(case, wide[case.name].n_select, test, alpha, wide[case.name].seed))
    return planned


WIDE_PLAN = plan(default_cases(), WIDE, seed=0)
CI_PLAN = _ci_plan()


def _params(planned: list[PlannedCase]) -> list:
    return [pytest.param(p, id=p.case.name, marks=[pytest.mark.time_limit(TIME_LIMITS[p.case.algorithm.name])]
                         if p.case.algorithm.name in TIME_LIMITS else []) for p in planned]


@pytest.mark.parametrize("item", _params(CI_PLAN))
def test_audit_case(item):
    check(item.run())


@pytest.mark.slow
@pytest.mark.parametrize("item", _params(WIDE_PLAN))
def test_wide_audit_case(item):
    check(item.run())


def test_every_algorithm_and_mutant_is_audited_in_both_tiers():
    for planned in (CI_PLAN, WIDE_PLAN):
        audited = {p.case.algorithm.name for p in planned}
        assert set(REGISTRY) <= audited
        assert {m.name for m in MUTANTS} <= audited
        assert {"marginals-separate", "mutant-marginals-no-composition"} <= audited  # the marginal-set strategy
        assert {"unit-bounded-identity", "mutant-unit-bound-forgotten"} <= audited  # contribution bounding
        assert {"discovery-bounds", "discovery-partition-selection", "mutant-partition-selection-true-counts",
                "mutant-partition-selection-no-threshold"} <= audited  # private domain discovery
        # Discovery behind a privacy unit, and candidates collected before contribution bounding.
        assert {"discovery-unit-partition-selection", "mutant-discovery-candidates-before-bounding"} <= audited
        assert {"discovery-lower-bound", "mutant-discovery-bounds-true-quantiles"} <= audited  # DP-quantile bounds
        zcdp = {p.case.algorithm.name for p in planned if p.case.rho is not None}
        assert {"identity", "h", "hb", "quadtree", "privelet", "marginals-separate"} <= zcdp
        assert {m.name for m in ZCDP_MUTANTS} <= zcdp
    # Auto at a boundary of its rule table, where a choice read off the true total would flip, in the wide tier.
    assert any("the choice flips" in p.case.name for p in WIDE_PLAN if p.case.algorithm.name == "auto")
    # Every mutant case of the wide audit is in make test's audit too: the quick audit's or sized by power.
    wide_mutants = [p.case.name for p in WIDE_PLAN if p.case.mutant]
    assert sorted(wide_mutants) == sorted(p.case.name for p in CI_PLAN if p.case.mutant)
    assert {p.case.algorithm.name for p in WIDE_PLAN if p.case.mutant} - LARGE_EFFECT == set(SMALL_EFFECT)


def test_one_audit_false_alarm_budget_in_make_test():
    assert sum(p.alpha for p in CI_PLAN) == pytest.approx(ALPHA)


def test_power_calculation_is_what_it_says():
    """runs_for_power: at the size it returns, the counts at the stated quantiles flag; at a tenth of it they
    do not (so the size is not padded), for pure ε and for ρ-zCDP claims."""
    from scipy import stats

    for p, q in ((0.4, 0.02), (0.2, 0.07), (1.0, 1e-6)):
        n = runs_for_power(p, q, 1e-8, epsilon=1.0)
        k1, k2 = int(stats.binom.ppf(0.005, n, p)), int(stats.binom.ppf(0.995, n, q))
        assert epsilon_lower_bound(k1, k2, n, 1e-8) > 1.0
        small = max(1, n // 10)
        k1, k2 = int(stats.binom.ppf(0.005, small, p)), int(stats.binom.ppf(0.995, small, q))
        assert epsilon_lower_bound(k1, k2, small, 1e-8) <= 1.0
    assert runs_for_power(0.2, 0.0695, 1e-8, epsilon=1.0) > runs_for_power(0.2, 0.02, 1e-8, epsilon=1.0)
    rho = Fraction(1, 2)
    for n, flagged in ((runs_for_power(0.3, 0.026, 1e-8, rho=rho), True), (2_000, False)):
        k1, k2 = int(stats.binom.ppf(0.005, n, 0.3)), int(stats.binom.ppf(0.995, n, 0.026))
        lower, eps, _ = zcdp_lower_bound(k1, k2, n, rho, 1e-8)
        assert (lower > eps) == flagged, n


def test_clopper_pearson_bounds():
    # Exact binomial tail checks of the one-sided bounds.
    from scipy import stats
    n, k, a = 1000, 37, 0.01
    lo, hi = float(cp_lower(k, n, a)), float(cp_upper(k, n, a))
    assert stats.binom.sf(k - 1, n, lo) == pytest.approx(a, rel=1e-6)
    assert stats.binom.cdf(k, n, hi) == pytest.approx(a, rel=1e-6)
    assert float(cp_lower(0, n, a)) == 0 and float(cp_upper(n, n, a)) == 1
    assert epsilon_lower_bound(0, 10, n, a) == -math.inf
    assert epsilon_lower_bound(500, 100, n, a) < math.log(5)


def test_cli_single_algorithm_quick():
    result = invoke(["audit", "--algorithm", "identity", "--quick", "--no-mutants", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert "all real algorithms pass" in result.output and result.output.count(" pass") >= 6
    assert "discrete Laplace, scale 10" in result.output and "FAILED" not in result.output
    assert "discrete Gaussian, sigma2 100" in result.output and "zCDP" in result.output
    assert "[1/2] identity (8,) add to first cell" in result.output  # a progress line per case
    bad = invoke(["audit", "--algorithm", "nosuch"])
    assert bad.exit_code == 2


def test_parallel_audit_gives_the_serial_results():
    from functools import partial

    from dphist.audit import audit

    recipe = partial(quick_cases, ["identity", "h"], mutants=False)
    serial = audit(recipe(), size=QUICK, seed=3)
    parallel = audit(recipe, size=QUICK, seed=3, jobs=2)
    assert [(r.case, r.hits, r.lower_bound) for r in serial] == [(r.case, r.hits, r.lower_bound) for r in parallel]


def test_sampler_check_passes_the_sampler_and_rejects_a_misscaled_one():
    from dphist.audit.sampler import check_sampler, chi2_pvalue
    from dphist.privacy import SeededBits
    from dphist.privacy.samplers import discrete_laplace

    assert check_sampler("10", 300_000, SeededBits(1)).ok
    # Draws that are 10 % too narrow fail the exact-pmf test for the claimed scale.
    assert chi2_pvalue(discrete_laplace(9, 300_000, SeededBits(2)), 10.0) < 1e-6


def test_gaussian_sampler_check_passes_the_sampler_and_rejects_a_misscaled_one():
    from dphist.audit.sampler import check_gaussian_sampler, gaussian_chi2_pvalue
    from dphist.privacy import SeededBits
    from dphist.privacy.samplers import discrete_gaussian

    for sigma2 in ("1", "100", "12345/7"):
        result = check_gaussian_sampler(sigma2, 300_000, SeededBits(3))
        assert result.ok, result
    # Draws with σ 10 % too small fail the exact-pmf test for the claimed σ² (false alarm of the pass above at
    # threshold 1e-6: 1e-6 per check).
    assert gaussian_chi2_pvalue(discrete_gaussian(81, 300_000, SeededBits(4)), 100.0) < 1e-6
