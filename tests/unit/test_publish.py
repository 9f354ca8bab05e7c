"""The release transaction (dphist/publish.py): a charged run reserves in the definition its plan names (ε, ρ or
both), reports the cap it was charged against, and reads nothing after a refusal.  (The transaction under kills,
signals and concurrent processes: faults/test_transaction.py.)"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import pytest

from dphist.ledger import BudgetExhausted, Ledger
from dphist.privacy.conversions import rho_for
from dphist.publish import charged_run

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
