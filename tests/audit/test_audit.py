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
from dphist_audit import QUICK, WIDE, AuditSize, default_cases, plan, quick_cases
from dphist_audit.bounds import cp_lower, cp_upper, epsilon_lower_bound, runs_for_power, zcdp_lower_bound
from dphist_audit.mutants import MUTANTS, ZCDP_MUTANTS
from dphist_audit.runner import ALPHA, LARGE_EFFECT, AuditResult, PlannedCase

from cli_harness import invoke

#: The mutant cases the quick audit leaves out (mutants of small effect, and the second table of a large one),
#: with the event the wide audit (seed 0) chose for each: how often it happened on the first table and on the
#: second, of how many runs per table.  Their test runs in ``make test`` are what :func:`runs_for_power` needs to
#: catch that event with probability 0.99 at this audit's per-case α (the seed and the selection sample stay the
#: wide audit's, so the event is the same); the mutant's privacy loss on the event, ln(p/q), is beside each.
MEASURED = {
    "mutant-identity-scale-0.8 add to first cell": (233_074, 66_909, 300_000),  # 1.25 against ε = 1
    "mutant-tree-overspent-10pct add to first cell": (61_712, 20_846, 300_000),  # 1.09
    "mutant-privelet-total-forgotten add to first cell": (34_387, 9_080, 300_000),  # 1.33
    "mutant-privelet-nominal-unweighted add to first cell": (2_995, 288, 300_000),  # 2.34 on a rare event
    "mutant-dawa-half-sensitivity (8,) ratio 9/10, add to the first cell of an empty table": (3_991, 775, 15_000),
    "mutant-dawa-true-costs (32,) partitions on the true costs": (15_000, 0, 15_000),  # the structure: p = 1
    "mutant-mwem-argmax one record moves the worst query": (2_393, 0, 15_000),  # p = 0.16, never on the second
    "mutant-unit-bound-forgotten one whole unit of 5 rows": (2_203, 192, 15_000),  # 2.44 on p = 0.15
    "mutant-discovery-candidates-before-bounding one unit with 500 new labels of its own": (553, 0, 5_000),
    "mutant-partition-selection-no-threshold one row of a new label": (1_375, 0, 5_000),  # p = 0.28
    # ρ-zCDP: the claim is (ε, δ_ρ(ε)) at every ε; the wide audit contradicted it at ε = 2.96 (σ × 0.8) and 1.58.
    "mutant-gaussian-identity-sigma-0.8 (2,) add to first cell, zCDP rho=1/2": (89_048, 1_802, 4_000_000),
    "mutant-gaussian-tree-l2-unsquared (16,) add to first cell, zCDP rho=1/2": (89_148, 7_697, 300_000),
    # The residual marginal set's basis (1, 2) with a quarter of its charged noise variance: ε = 2.36.
    "mutant-residual-basis-shrunk-sigma (2, 3, 4) add to first cell, zCDP rho=1/2": (34_308, 1_416, 400_000),
}
#: A mutant the wide audit never saw on the second table is sized as if it had been seen once.
POWER = 0.99


def _time_limit(item: PlannedCase) -> float | None:
    """The seconds a case of make test's audit may take, where that is more than the 5 s of any other test: a
    data-adaptive algorithm or a discovery step runs once per repetition (1 to 30 ms a run), 500 runs per table
    in the quick audit, up to 6,000 for a mutant the power calculation sizes; a residual marginal set draws 36
    discrete Gaussians a run (about 4 s per 10⁵ runs of both tables on one free core), and its mutant needs
    1.3e5 test runs beside the wide audit's 5e4 selection runs."""
    algorithm = item.case.algorithm
    if item.case.reduce is not None:
        return 30
    if not (algorithm.data_adaptive or hasattr(algorithm, "outcome")):
        return None
    return 30 if item.n_select + item.n_test <= 2_000 else 90


def check(result: AuditResult) -> None:
    """The one criterion: a real algorithm's lower bound does not exceed its claim; a mutant's does."""
    assert result.flagged == result.mutant, (
        f"{result.case}: ε lower bound {result.lower_bound:.3f} against the claimed {float(result.epsilon):.3g}"
        f"{f' at δ {result.delta:.3g}' if result.rho is not None else ''} ({result.hits[0]:,} / {result.hits[1]:,}"
        f" of {result.runs:,} runs): {result.verdict}")


def _ci_plan() -> list[PlannedCase]:
    """The audit ``make test`` runs: the quick audit's cases at QUICK, then the small-effect mutants, all sharing
    one false-alarm budget.  A small-effect mutant keeps the seed and the selection sample it has in the wide
    audit, so the event it is tested on is the one whose counts MEASURED gives; only its test sample
    is resized."""
    quick = quick_cases()
    wide = {p.case.name: p for p in WIDE_PLAN}
    extra = [c for c in default_cases() if c.mutant and c.name not in {q.name for q in quick}]
    alpha = ALPHA / (len(quick) + len(extra))
    planned = [PlannedCase(p.case, p.n_select, p.n_test, alpha, p.seed) for p in plan(quick, QUICK, seed=0)]
    for case in extra:
        k1, k2, n = MEASURED[case.name]
        p, q = k1 / n, max(k2, 1) / n
        test = runs_for_power(p, q, alpha, epsilon=None if case.rho else float(case.epsilon), rho=case.rho,
                              power=POWER)
        planned.append(PlannedCase(case, wide[case.name].n_select, test, alpha, wide[case.name].seed))
    return planned


WIDE_PLAN = plan(default_cases(), WIDE, seed=0)
CI_PLAN = _ci_plan()


def _params(planned: list[PlannedCase]) -> list:
    return [pytest.param(p, id=p.case.name, marks=[] if _time_limit(p) is None else
                         [pytest.mark.time_limit(_time_limit(p))]) for p in planned]


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
        assert {"identity", "h", "hb", "quadtree", "privelet", "marginals-separate", "marginals-residual"} <= zcdp
        assert {m.name for m in ZCDP_MUTANTS} <= zcdp
    # Auto at a boundary of its rule table, where a choice read off the true total would flip, in the wide tier.
    assert any("the choice flips" in p.case.name for p in WIDE_PLAN if p.case.algorithm.name == "auto")
    # Every mutant case of the wide audit is in make test's audit too: the quick audit's or sized by power.
    wide_mutants = [p.case.name for p in WIDE_PLAN if p.case.mutant]
    assert sorted(wide_mutants) == sorted(p.case.name for p in CI_PLAN if p.case.mutant)
    # The quick audit's mutants are the large ones, once each; the others are sized from their measured events.
    quick = {c.name for c in quick_cases() if c.mutant}
    assert {c.algorithm.name for c in quick_cases() if c.mutant} == LARGE_EFFECT
    assert set(wide_mutants) - quick == set(MEASURED)


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


@pytest.mark.time_limit(15)  # two fresh interpreters import dphist (spawn)
def test_parallel_audit_gives_the_serial_results():
    from functools import partial

    from dphist_audit import audit

    recipe = partial(quick_cases, ["identity", "h"], mutants=False)
    size = AuditSize("tiny", 500, 2_000, case_runs=False)
    serial = audit(recipe(), size=size, seed=3)
    parallel = audit(recipe, size=size, seed=3, jobs=2)
    assert [(r.case, r.hits, r.lower_bound) for r in serial] == [(r.case, r.hits, r.lower_bound) for r in parallel]


def test_sampler_check_passes_the_sampler_and_rejects_a_misscaled_one():
    from dphist_audit.sampler import check_sampler, chi2_pvalue
    from dphist.privacy import SeededBits
    from dphist.privacy.samplers import discrete_laplace

    assert check_sampler("10", 300_000, SeededBits(1)).ok
    # Draws that are 10 % too narrow fail the exact-pmf test for the claimed scale.
    assert chi2_pvalue(discrete_laplace(9, 300_000, SeededBits(2)), 10.0) < 1e-6


def test_gaussian_sampler_check_passes_the_sampler_and_rejects_a_misscaled_one():
    from dphist_audit.sampler import check_gaussian_sampler, gaussian_chi2_pvalue
    from dphist.privacy import SeededBits
    from dphist.privacy.samplers import discrete_gaussian

    for sigma2 in ("1", "100", "12345/7"):
        result = check_gaussian_sampler(sigma2, 300_000, SeededBits(3))
        assert result.ok, result
    # Draws with σ 10 % too small fail the exact-pmf test for the claimed σ² (false alarm of the pass above at
    # threshold 1e-6: 1e-6 per check).
    assert gaussian_chi2_pvalue(discrete_gaussian(81, 300_000, SeededBits(4)), 100.0) < 1e-6
