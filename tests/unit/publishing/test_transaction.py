"""The release transaction (dphist/publishing/transaction.py): a charged run reserves in the definition its plan names (ε, ρ or
both), reports the cap it was charged against, and reads nothing after a refusal.  (The transaction under kills,
signals and concurrent processes: faults/test_checkpoints.py.)"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from dphist.errors import BUDGET_STAYS_SPENT, DataError, UsageError, read_data
from dphist.publishing.ledger import BudgetExhausted, Ledger
from dphist.privacy.conversions import rho_for
from dphist.publishing.transaction import charged_run

D = "d"
ROW = "row"


def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "l.sqlite")


def row(book: Ledger, dataset=D) -> dict:
    (r,) = book.status(dataset)
    return r


def kinds(book: Ledger, dataset=D) -> list[str]:
    return [e["kind"] for e in book.history(dataset)]


APPROX_EPS, APPROX_DELTA = Fraction(1), Fraction(1, 10**6)
APPROX_RHO = rho_for(APPROX_EPS, APPROX_DELTA)


def _plan(**kw):
    return SimpleNamespace(source=SimpleNamespace(public_name="frame", name="frame", format="dataframe"), **kw)


def test_charged_run_reserves_in_the_plans_definition(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="0.5")
    seen = []
    done = charged_run(_plan(definition="zcdp", epsilon=None, rho=Fraction(1, 10), delta=0),
                       lambda info: seen.append(info) or "v", book, dataset_id=D)
    assert done.value == "v" and seen[0]["rho_cap"] == "0.5" and seen[0]["rho_spent_before"] == "0"
    assert seen[0]["epsilon_cap"] is None
    charged_run(_plan(definition="approximate", epsilon=APPROX_EPS, delta=APPROX_DELTA, rho=APPROX_RHO),
                lambda info: None, book, dataset_id=D)
    charged_run(_plan(epsilon=Fraction(1, 2), delta=0), lambda info: None, book, dataset_id=D)  # an older plan
    assert Fraction(row(book)["rho_spent"]) == Fraction(1, 10) + APPROX_RHO + Fraction(1, 8)
    assert kinds(book).count("PUBLISH") == 3
    with pytest.raises(BudgetExhausted):
        charged_run(_plan(definition="zcdp", epsilon=None, rho=Fraction(1, 2), delta=0),
                    lambda info: pytest.fail("read data after a refusal"), book, dataset_id=D)


@pytest.mark.parametrize("raised, kind, code", [
    (lambda: DataError("d.csv: line 3, column 'age': value is not a number"), DataError, 1),
    # Exit 2 promises that nothing was read: a usage error found after reading is a data error that says so.
    (lambda: UsageError("algorithm 'efpa': the table's total is too large"), DataError, 1),
    (lambda: ValueError("a bug"), ValueError, None),
    (lambda: KeyboardInterrupt(), KeyboardInterrupt, None),
])
def test_a_failure_after_reading_says_once_that_the_budget_stays_spent(tmp_path, raised, kind, code):
    """Whatever fails after READ, the error the transaction raises says so (a DphistError in its message, anything
    else marked for the CLI's line and noted for a traceback); the ledger keeps the charge."""
    book = ledger(tmp_path)

    def work(info):
        raise raised()

    with pytest.raises(kind) as caught:
        charged_run(_plan(epsilon=Fraction(1, 2), delta=0), work, book, dataset_id=D)
    exc = caught.value
    assert read_data(exc) or str(exc).endswith(BUDGET_STAYS_SPENT)
    if code is not None:
        assert exc.exit_code == code and str(exc).count(BUDGET_STAYS_SPENT) == 1
    else:
        assert exc.__notes__ == [BUDGET_STAYS_SPENT]
    assert kinds(book) == ["RESERVE", "READ", "FAIL"] and row(book)["epsilon_spent"] == "0.5"


def test_a_failure_before_reading_gives_the_budget_back_and_does_not_say_it_is_spent(tmp_path, monkeypatch):
    book = ledger(tmp_path)
    monkeypatch.setattr(Ledger, "mark_read", lambda self, reserved: (_ for _ in ()).throw(ValueError("a bug")))
    with pytest.raises(ValueError) as caught:
        charged_run(_plan(epsilon=Fraction(1, 2), delta=0), lambda info: pytest.fail("read"), book, dataset_id=D)
    assert not read_data(caught.value) and not getattr(caught.value, "__notes__", None)
    assert kinds(book) == ["RESERVE", "ABORT"] and row(book)["epsilon_spent"] == "0"
