"""A release charged to the budget ledger: reserve before reading, record the read, write, commit.

This is the only way releases reach users outside test mode: the CLI's ``release`` and the Python API's
:func:`dphist.release` both go through :func:`charged_run`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .accountant import format_fraction
from .ledger import ROW_UNIT, Existing, Ledger, Reservation

__all__ = ["Charged", "charged_run", "default_dataset_id", "sha256_file"]


@dataclass
class Charged:
    """What a charged run produced: ``value`` (what ``work`` returned), or ``existing`` when the run key had
    already been committed (then nothing ran and nothing was spent)."""

    dataset: str
    value: object = None
    existing: Existing | None = None
    commit_entry: str | None = None
    info: dict = field(default_factory=dict)


def default_dataset_id(source) -> str:
    """The ledger's name for a data set: the absolute path it was read from (globs kept as patterns); every
    in-memory DataFrame shares one id, which is conservative (their budgets add up)."""
    if getattr(source, "format", None) == "dataframe":
        return "python:DataFrame"
    return str(Path(os.path.expanduser(str(source.name))).absolute())


def charged_run(plan, work: Callable[[dict], tuple[object, dict]], ledger: Ledger, dataset_id: str | None = None,
                run_key: str | None = None, detail: dict | None = None,
                before_reserve: Callable[[], None] | None = None) -> Charged:
    """Run ``work`` with the plan's ε reserved, then committed.  ``work(ledger_info)`` reads the data and
    returns (value, commit detail); ``ledger_info`` is the block to put in the report.  ``before_reserve`` runs
    last-minute checks that need no data (e.g. the output directory), after the run-key lookup."""
    dataset = dataset_id or default_dataset_id(plan.source)
    unit = getattr(plan, "ledger_unit", ROW_UNIT)  # budgets per row and per person are separate accounts
    existing = ledger.committed(dataset, unit, run_key)
    if existing is None and before_reserve is not None:
        before_reserve()
    reserved = existing or ledger.reserve(dataset, unit, plan.epsilon, getattr(plan, "delta", 0), run_key,
                                               detail=detail)
    if isinstance(reserved, Existing):
        return Charged(dataset, existing=reserved)
    info = {"dataset": dataset, "privacy_unit": unit, "reservation_entry": reserved.entry_hash,
            "epsilon_spent_before": format_fraction(reserved.spent_before),
            "epsilon_cap": None if reserved.cap is None else format_fraction(reserved.cap),
            **({"run_key": run_key} if run_key else {})}
    with _reading(ledger, reserved):
        value, commit_detail = work(info)
    entry = ledger.commit(reserved, commit_detail, run_key)
    return Charged(dataset, value=value, commit_entry=entry, info=info)


@contextmanager
def _reading(ledger: Ledger, reserved: Reservation):
    """Record the read before any row is read; give the reservation back only if that never happened."""
    read = False
    try:
        ledger.mark_read(reserved)  # from here the budget stays spent, whatever happens
        read = True
        yield
    except BaseException:
        if not read:
            ledger.abort(reserved, "failed before reading any data")
        raise


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
