"""Driving a :class:`~dphist.publishing.ledger.Ledger` directly: a whole release's entries, a data set's status row and the
kinds of its history (for the ledger's unit tests and the budget commands' tests)."""

from __future__ import annotations

from dphist.publishing.ledger import Ledger

D = "d"  # the data set id the tests charge
ROW = "row"  # the privacy unit


def release(book: Ledger, epsilon=None, delta=0, rho=None, dataset=D):
    """A whole release (RESERVE, READ, COMMIT, PUBLISH) charged in the definition the amounts name."""
    r = book.reserve(dataset, ROW, epsilon, delta, rho=rho)
    book.mark_read(r)
    book.commit(r, {})
    book.published(r, {"published": True})
    return r


def row(book: Ledger, dataset=D) -> dict:
    (r,) = book.status(dataset)
    return r


def kinds(book: Ledger, dataset=D) -> list[str]:
    return [e["kind"] for e in book.history(dataset)]
