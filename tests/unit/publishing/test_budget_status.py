"""A data set's budget in words (dphist/publishing/budget_status.py): the cap line 'budget set' prints and the
summary 'budget show' prints, from the ledger's status, in the cap's definition and as converted."""

from __future__ import annotations

from fractions import Fraction

from dphist.publishing.budget_status import budget_status
from dphist.publishing.ledger import ROW_UNIT, Ledger


def test_an_epsilon_cap_in_words(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("census", ROW_UNIT, Fraction(2), Fraction(1, 10**6))
    ledger.set_cap("census", "unit:person", Fraction(1))
    (row, person) = budget_status(ledger, "census")
    assert row.cap_line() == "cap epsilon 2, delta 0.000001; spent epsilon 0, remaining 2"
    assert row.summary().startswith("census (row): epsilon spent 0, cap 2 delta 0.000001, remaining 2; 0 release(s)")
    assert person.summary().startswith("census (unit:person): epsilon spent 0, cap 1, remaining 1; 0 release(s)")
    assert row.note is None and row.fields["definition"] == "approximate"
    assert [s.fields["unit"] for s in budget_status(ledger, "census", "unit:person")] == ["unit:person"]


def test_a_rho_cap_in_words_with_its_epsilon_at_the_reference_delta(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("census", ROW_UNIT, rho=Fraction(1, 2))
    (status,) = budget_status(ledger, "census", ROW_UNIT)
    assert status.cap_line() == "cap rho 0.5 (epsilon 5.22154 at delta 0.000001); spent rho 0, remaining 0.5"
    assert "rho spent 0, cap 0.5, remaining 0.5; as (epsilon, delta): epsilon 0 of 5.22154 at delta 0.000001" in (
        status.summary())


def test_no_accounts(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("census", ROW_UNIT, Fraction(1))
    assert budget_status(ledger, "other") == []
    assert budget_status(ledger, "census", "unit:person") == []
