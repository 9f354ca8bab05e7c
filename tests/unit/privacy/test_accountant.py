"""The accountant: the sums across a data set's releases, the conversions between definitions and the checks
against a cap, on exact fractions (the ledger's storage is tested in tests/unit/publishing/test_ledger.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dphist.errors import UsageError
from dphist.privacy.accountant import (REFERENCE_DELTA, Cap, Charge, Spend, cap_note, charge_for, epsilon_at,
                                       reference_delta, refusal, remaining)
from dphist.privacy import format_fraction
from dphist.privacy.conversions import delta_for, epsilon_for, rho_for

APPROX_EPS, APPROX_DELTA = Fraction(1), Fraction(1, 10**6)
APPROX_RHO = rho_for(APPROX_EPS, APPROX_DELTA)

PURE = charge_for("0.5", 0, None)
PURE_DELTA = charge_for("0.5", "0.000001", None)
ZCDP = charge_for(None, 0, "0.1")
APPROX = charge_for(APPROX_EPS, APPROX_DELTA, APPROX_RHO)


def rho_cap(rho, delta=0) -> Cap:
    return Cap("zcdp", None, Fraction(delta), Fraction(rho))


def epsilon_cap(epsilon, delta=0) -> Cap:
    return Cap("pure" if Fraction(delta) == 0 else "approximate", Fraction(epsilon), Fraction(delta), None)


def test_each_request_gets_its_definition():
    assert PURE == Charge("pure", Fraction(1, 2), Fraction(0), None)
    assert PURE_DELTA == Charge("pure", Fraction(1, 2), Fraction(1, 10**6), None)
    assert ZCDP == Charge("zcdp", None, Fraction(0), Fraction(1, 10))
    assert APPROX == Charge("approximate", APPROX_EPS, APPROX_DELTA, APPROX_RHO)


@pytest.mark.parametrize("args, match", [
    ((None, 0, None), "needs an epsilon or a rho"),
    ((None, "1e-6", "0.1"), "has no delta"),
    ((None, 0, "0"), "rho must be greater than 0"),
    (("1", "0", "0.01"), "needs epsilon > 0 and delta > 0"),
    (("-1", 0, None), "epsilon must be at least 0"),
    (("1", "1", None), "delta must be at least 0 and less than 1"),
    # ρ above what (ε, δ) allows would make the (ε, δ) claim false.
    ((APPROX_EPS, APPROX_DELTA, APPROX_RHO * 2), "more than the .* guarantee allows"),
])
def test_requests_that_name_no_definition_are_refused(args, match):
    with pytest.raises(UsageError, match=match):
        charge_for(*args)


def test_each_charge_counts_in_each_account():
    assert PURE.in_epsilon() == (Fraction(1, 2), 0) and PURE.in_rho() == Fraction(1, 8)  # ε²/2
    assert PURE_DELTA.in_epsilon() == (Fraction(1, 2), Fraction(1, 10**6)) and PURE_DELTA.in_rho() is None
    assert ZCDP.in_epsilon() is None and ZCDP.in_rho() == Fraction(1, 10)
    assert APPROX.in_epsilon() == (APPROX_EPS, APPROX_DELTA) and APPROX.in_rho() == APPROX_RHO
    # the (ε, δ) an approximate release claims does hold for its ρ
    assert delta_for(APPROX_RHO, APPROX_EPS) <= APPROX_DELTA


def test_spends_add_up_exactly_and_have_no_sum_where_a_release_cannot_be_counted():
    assert Spend.of([]) == Spend(0, 0, 0)
    sixty = Spend.of([charge_for(None, 0, Fraction(1, 60))] * 60)
    assert sixty.rho == 1 and sixty.epsilon is None  # 60 × 1/60 is exactly 1 (in floats: 1.0000000000000013)
    fifty = Spend.of([charge_for("0.02", 0, None)] * 50)
    assert (fifty.epsilon, fifty.delta, fifty.rho) == (1, 0, Fraction(50 * 4, 2 * 10**4))
    mixed = Spend.of([PURE, APPROX, PURE_DELTA])
    assert (mixed.epsilon, mixed.delta, mixed.rho) == (Fraction(2), Fraction(2, 10**6), None)
    assert Spend.of([PURE, ZCDP, APPROX]) == Spend(None, None, Fraction(1, 8) + Fraction(1, 10) + APPROX_RHO)
    assert Spend.of([ZCDP, PURE_DELTA]) == Spend(None, None, None)
    assert Spend.of([PURE, ZCDP]).as_text() == {"epsilon": None, "delta": None, "rho": "0.225"}


def test_a_rho_cap_takes_a_charge_that_reaches_it_exactly_and_refuses_one_past_it():
    spend = Spend.of([ZCDP, ZCDP])
    assert refusal("d", rho_cap("0.3"), spend, ZCDP) is None  # 0.1 + 0.1 + 0.1 = 0.3 exactly
    why = refusal("d", rho_cap("0.3"), spend, charge_for(None, 0, "0.100001"))
    assert why == "data set 'd': this release needs rho 0.100001 but only rho 0.1 of the cap 0.3 is left (see " \
                  "'dphist budget show')"
    why = refusal("d", rho_cap("0.32"), Spend.of([ZCDP] * 3), charge_for("0.25", 0, None))
    assert "needs rho 0.03125 (epsilon 0.25 counted as epsilon^2/2) but only rho 0.02 of the cap 0.32" in why
    assert refusal("d", rho_cap("0.32"), Spend.of([ZCDP] * 3), charge_for("0.2", 0, None)) is None  # 1/50 fits


def test_a_rho_cap_refuses_what_has_no_rho():
    why = refusal("d", rho_cap(1), Spend.of([]), PURE_DELTA)
    assert "capped in rho (zCDP), and this release's epsilon 0.5 with delta 0.000001 > 0" in why
    assert "nothing was charged" in why and "--epsilon E --delta D" in why
    why = refusal("d", rho_cap(1), Spend.of([PURE_DELTA]), ZCDP)
    assert why.startswith("data set 'd' is capped in rho (zCDP), but an earlier release spent (epsilon, delta)")


def test_an_epsilon_cap_counts_epsilon_and_delta_and_refuses_what_has_no_epsilon():
    cap = epsilon_cap("2.5", "0.000003")
    assert refusal("d", cap, Spend.of([PURE_DELTA, APPROX]), APPROX) is None  # ε and δ reach the cap exactly
    why = refusal("d", cap, Spend.of([PURE_DELTA, APPROX, APPROX]), PURE_DELTA)
    assert "needs epsilon 0.5, delta 0.000001 but only epsilon 0, delta 0 of the cap 2.5" in why
    why = refusal("d", epsilon_cap(1), Spend.of([]), ZCDP)
    assert "capped in epsilon, and a --rho release" in why and "--rho R" in why
    why = refusal("d", epsilon_cap(5), Spend.of([ZCDP]), PURE)
    assert "capped in epsilon, but an earlier release spent rho alone" in why


def test_a_cap_below_the_spend_leaves_nothing_never_less():
    assert remaining(Fraction(1), Fraction(3, 2)) == 0 and remaining(Fraction(1), Fraction(1, 4)) == Fraction(3, 4)
    assert remaining(None, Fraction(1)) is None and remaining(Fraction(1), None) is None
    why = refusal("d", epsilon_cap(1), Spend.of([charge_for("1.5", 0, None)]), PURE)
    assert "only epsilon 0 of the cap 1" in why


def test_the_cap_note_says_why_nothing_fits_any_more():
    assert "no rho bound" in cap_note(rho_cap(1), Spend.of([PURE_DELTA]))
    assert "spent rho alone" in cap_note(epsilon_cap(1), Spend.of([ZCDP]))
    assert cap_note(rho_cap(1), Spend.of([PURE, ZCDP])) is None
    assert cap_note(epsilon_cap(1, "1e-6"), Spend.of([PURE, APPROX])) is None


def test_the_spend_is_shown_in_epsilon_at_the_cap_delta_or_the_reference_delta():
    assert reference_delta(rho_cap(1, "1e-9"), Spend.of([ZCDP])) == Fraction(1, 10**9)
    assert reference_delta(rho_cap(1), Spend.of([ZCDP])) == REFERENCE_DELTA == Fraction(1, 10**6)
    assert reference_delta(None, Spend.of([ZCDP])) == REFERENCE_DELTA  # uncapped, some release has no ε
    assert reference_delta(None, Spend.of([PURE])) is None
    assert reference_delta(None, Spend.of([ZCDP, PURE_DELTA])) is None  # no ρ to convert
    assert reference_delta(epsilon_cap(1), Spend.of([PURE])) is None


def test_epsilon_at_rounds_up_to_six_digits_and_zero_is_zero():
    shown = epsilon_at(Fraction(1, 10), REFERENCE_DELTA)
    assert len(format_fraction(shown).replace(".", "").lstrip("0")) <= 6
    exact = epsilon_for(Fraction(1, 10), REFERENCE_DELTA)
    assert exact <= shown <= exact * (1 + 1e-5)
    assert delta_for(Fraction(1, 10), float(shown)) <= float(REFERENCE_DELTA) * (1 + 1e-9)
    assert epsilon_at(Fraction(0), REFERENCE_DELTA) == 0 and epsilon_at(None, REFERENCE_DELTA) is None
