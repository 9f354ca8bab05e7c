"""zCDP ↔ (ε, δ) conversions (dphist/privacy/conversions.py).

The tight δ is checked against two things computed independently of the module's root finding: a bounded scalar
minimisation of the CKS20 bracket written in its plain (not log) form, and a dense grid over α; against the classic
bound it improves on; and against OpenDP's own zCDP → approximate-DP cast where OpenDP is installed.  The inverse
functions are checked by round trips, by the direction of their rounding (always the safe side) and by monotonicity.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from dphist.errors import UsageError
from dphist.privacy.conversions import (RHO_MARGIN, ConversionError, delta_for, epsilon_for, loose_epsilon, loose_rho,
                                        rho_for, _log_delta)

RHOS = [float(r) for r in np.geomspace(1e-6, 10, 9)]
DELTAS = [float(d) for d in np.geomspace(1e-12, 1e-2, 6)]
EPSILONS = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
REPORTED = [(1, "1e-6"), (0.5, "1e-6"), (1, "1e-9"), (2, "1e-6"), (0.1, "1e-6")]


def plain_bracket(alpha: float, rho: float, eps: float) -> float:
    """The CKS20 Corollary 13 bracket exactly as printed: exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α."""
    return math.exp((alpha - 1) * (alpha * rho - eps)) / (alpha - 1) * (1 - 1 / alpha) ** alpha


def independent_delta(rho: float, eps: float) -> float:
    """inf over α of the bracket by a bounded minimisation over ln(α−1) plus a grid, with no knowledge of f'."""
    grid = np.linspace(-12.0, 12.0, 2401)
    with np.errstate(over="ignore"):
        values = [plain_bracket(1 + math.exp(t), rho, eps) for t in grid if (1 + math.exp(t)) ** 2 * rho < 700]
    if min(values) < 1e-300:
        return 0.0  # the plain formula underflows: nothing to compare with
    best_t = grid[int(np.argmin(values))]
    res = minimize_scalar(lambda t: math.log(plain_bracket(1 + math.exp(t), rho, eps)),
                          bounds=(best_t - 0.02, best_t + 0.02), method="bounded", options={"xatol": 1e-12})
    return min(1.0, min(values), math.exp(res.fun))


# --- δ(ρ, ε) ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rho", [1e-4, 0.0175, 0.05, 0.5, 2.0])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0])
def test_delta_is_the_infimum_of_the_bracket(rho, eps):
    ours = delta_for(rho, eps)
    other = independent_delta(rho, eps)
    if other < 1e-300:
        pytest.skip("below the float range of the plain formula")
    # Every α gives a valid δ, so ours must not be above the independent minimum (it would be wasting δ), nor
    # below it (it would claim a δ no α achieves).
    assert ours == pytest.approx(other, rel=1e-9)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_no_alpha_beats_the_reported_delta(rho, eps):
    log_ours = _log_delta(rho, eps)
    for alpha in 1 + np.geomspace(1e-6, 1e8, 600):
        # ln of the bracket in a form that cannot overflow, to compare at every α of the grid.
        log_b = (alpha - 1) * (alpha * rho - eps) - math.log(alpha - 1) + alpha * math.log1p(-1 / alpha)
        assert log_ours <= min(0.0, log_b) + 1e-12


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_tight_delta_never_above_the_classic_bound(rho, eps):
    if eps <= rho:
        assert 0 < delta_for(rho, eps) <= 1
        return
    # In log space, so that δs far below the float range are compared too.
    log_classic = -(eps - rho) ** 2 / (4 * rho)
    log_ours = _log_delta(rho, eps)
    assert log_ours < log_classic  # strictly: the factor (1−1/α)^α/(α−1) is below 1
    assert delta_for(rho, eps) <= max(math.exp(log_classic), 5e-324)


def test_delta_is_decreasing_in_epsilon_and_increasing_in_rho():
    for rho in RHOS:
        deltas = [delta_for(rho, e) for e in np.geomspace(1e-3, 30, 80)]
        assert all(b <= a for a, b in zip(deltas, deltas[1:]))
        assert any(b < a for a, b in zip(deltas, deltas[1:]))
    for eps in EPSILONS:
        deltas = [delta_for(r, eps) for r in np.geomspace(1e-6, 100, 80)]
        assert all(b >= a for a, b in zip(deltas, deltas[1:]))
        assert deltas[-1] > 0.9  # a huge ρ buys nothing at a fixed ε


def test_delta_below_the_float_range_is_not_zero():
    assert delta_for(1e-6, 1) == 5e-324  # true δ is about e^-250000; 0 would claim pure DP


def test_amount_types_agree():
    assert delta_for(Fraction(1, 20), Fraction(1)) == delta_for(0.05, 1.0) == delta_for("0.05", "1")


# --- ε(ρ, δ) ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_epsilon_is_the_smallest_valid_epsilon(rho, delta):
    eps = epsilon_for(rho, delta)
    assert eps >= 0
    assert eps <= loose_epsilon(rho, delta)
    if eps == 0:
        assert delta_for(rho, 1e-30) <= delta  # ρ tiny beside δ²: already (0, δ)-DP
        return
    assert delta_for(rho, eps) <= delta
    # Smallest: a hair less and δ is exceeded (the margin kept is 1e-11; 1e-8 less must fail).
    assert delta_for(rho, eps * (1 - 1e-8)) > delta
    assert delta_for(rho, eps) >= delta * (1 - 1e-6)


def test_epsilon_is_increasing_in_rho_and_decreasing_in_delta():
    for delta in DELTAS:
        eps = [epsilon_for(r, delta) for r in np.geomspace(1e-6, 10, 40)]
        assert all(b > a for a, b in zip(eps, eps[1:]) if a > 0)
    for rho in RHOS:
        eps = [epsilon_for(rho, d) for d in np.geomspace(1e-12, 0.5, 40)]
        assert all(b <= a for a, b in zip(eps, eps[1:]))


def test_epsilon_can_be_zero_for_a_tiny_rho():
    assert epsilon_for(1e-8, 0.01) == 0.0
    assert epsilon_for(1e-2, 0.01) > 0


# --- ρ(ε, δ) ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_rho_is_safe_rounded_down_and_nearly_the_largest(eps, delta):
    rho = rho_for(eps, delta)
    assert isinstance(rho, Fraction) and rho > 0
    # A readable rational: a terminating decimal (denominator divides a power of 10) with ≤ 12 significant digits.
    assert 10**60 % rho.denominator == 0
    mantissa = rho * 10**60
    assert mantissa.denominator == 1
    assert len(str(mantissa.numerator).rstrip("0")) <= 12
    # Safe, with the documented margin.
    assert delta_for(rho, eps) <= delta
    assert delta_for(float(rho) * (1 + RHO_MARGIN), eps) <= delta
    # Nearly the largest: a relative 1e-7 more and δ is exceeded.
    assert delta_for(float(rho) * (1 + 1e-7), eps) > delta
    # Never worse than the classic conversion.
    assert float(rho) >= loose_rho(eps, delta)


@pytest.mark.parametrize("eps, delta", REPORTED)
def test_reported_rhos_beat_the_loose_ones(eps, delta):
    rho = rho_for(eps, delta)
    loose = loose_rho(eps, delta)
    assert float(rho) > 1.2 * loose  # the tight conversion buys at least 20 % more ρ at these budgets
    assert loose_epsilon(loose, delta) == pytest.approx(eps, rel=1e-12)


def test_loose_rho_matches_the_brief():
    assert loose_rho(1, 1e-6) == pytest.approx(0.0175, abs=5e-5)


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_round_trip_rho_then_epsilon(eps, delta):
    rho = rho_for(eps, delta)
    back = epsilon_for(rho, delta)
    assert back <= eps
    assert back >= eps * (1 - 1e-6)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_round_trip_epsilon_then_rho(rho, delta):
    eps = epsilon_for(rho, delta)
    if eps == 0:
        pytest.skip("(0, δ): no ε to convert back")
    back = rho_for(eps, delta)
    assert float(back) == pytest.approx(rho, rel=1e-6)
    assert delta_for(back, eps) <= delta


def test_rho_is_increasing_in_epsilon_and_delta():
    for delta in DELTAS:
        rhos = [rho_for(e, delta) for e in np.geomspace(1e-3, 20, 30)]
        assert all(b > a for a, b in zip(rhos, rhos[1:]))
    for eps in EPSILONS:
        rhos = [rho_for(eps, d) for d in np.geomspace(1e-12, 0.5, 30)]
        assert all(b > a for a, b in zip(rhos, rhos[1:]))


def test_extreme_deltas_are_handled_exactly():
    tiny = Fraction(1, 10**400)  # not a float at all
    rho = rho_for(1, tiny)
    assert 0 < rho < Fraction(1, 2000)
    near_one = 1 - Fraction(1, 10**20)  # rounds to 1.0 as a float
    assert epsilon_for(1, near_one) == 0.0 or epsilon_for(1, near_one) < epsilon_for(1, 0.5)


@settings(max_examples=60, deadline=None)
@given(log_rho=st.floats(math.log(1e-6), math.log(10)), log_delta=st.floats(math.log(1e-12), math.log(1e-2)))
def test_property_over_the_grid(log_rho, log_delta):
    rho, delta = math.exp(log_rho), math.exp(log_delta)
    eps = epsilon_for(rho, delta)
    assert eps <= loose_epsilon(rho, delta)
    if eps > 0:
        assert delta_for(rho, eps) <= delta
        back = rho_for(eps, delta)
        assert float(back) <= rho * (1 + 1e-9)
        assert float(back) >= rho * (1 - 1e-6)
        assert epsilon_for(back, delta) <= eps


# --- OpenDP ----------------------------------------------------------------------------------------------------------

def _opendp_profile(rho: float):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    # A Gaussian of scale σ on sensitivity 1 is ρ = 1/(2σ²)-zCDP; OpenDP's cast turns it into an (ε, δ) profile.
    meas = dp.c.make_zCDP_to_approxDP(space >> dp.m.then_gaussian(math.sqrt(1 / (2 * rho))))
    return meas.map(1.0)


@pytest.mark.parametrize("rho", [1e-4, 0.0175, 0.05, 0.5, 5.0])
def test_epsilon_agrees_with_opendp(rho):
    profile = _opendp_profile(rho)
    for delta in (1e-3, 1e-6, 1e-9):
        theirs = profile.epsilon(delta)
        assert epsilon_for(rho, delta) == pytest.approx(theirs, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("rho", [1e-4, 0.0175, 0.05, 0.5, 5.0])
def test_delta_agrees_with_opendp(rho):
    profile = _opendp_profile(rho)
    for eps in (0.1, 1.0, 3.0):
        theirs, ours = profile.delta(eps), delta_for(rho, eps)
        if theirs < 1e-300:
            continue
        # OpenDP searches α over a bounded range, so it may be a little above the infimum (ρ = 5, ε = 0.1, whose
        # optimum is at α ≈ 1.007), never below it.
        assert ours <= theirs * (1 + 1e-9)
        assert ours == pytest.approx(theirs, rel=1e-3)


# --- bad input -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: delta_for(0, 1), lambda: delta_for(-1, 1), lambda: delta_for(1, 0), lambda: delta_for(1, -0.5),
    lambda: delta_for(float("nan"), 1), lambda: delta_for(1, float("inf")), lambda: delta_for("abc", 1),
    lambda: delta_for(True, 1), lambda: delta_for(1e-40, 1), lambda: delta_for(1, 1e40),
    lambda: epsilon_for(1, 0), lambda: epsilon_for(1, 1), lambda: epsilon_for(1, 1.5), lambda: epsilon_for(0, 1e-6),
    lambda: epsilon_for(1, -1e-6), lambda: rho_for(0, 1e-6), lambda: rho_for(-2, 1e-6), lambda: rho_for(1, 0),
    lambda: rho_for(1, 1), lambda: rho_for(1, "x"), lambda: loose_epsilon(0, 0.5), lambda: loose_epsilon(1, 2),
    lambda: loose_rho(1, 0),
])
def test_bad_input_is_one_clear_line(call):
    with pytest.raises(ValueError) as info:
        call()
    assert isinstance(info.value, ConversionError) and isinstance(info.value, UsageError)
    message = str(info.value)
    assert message and "\n" not in message
    assert any(word in message for word in ("rho", "epsilon", "delta"))
