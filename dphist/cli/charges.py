"""What a command that charges the ledger (release, schema --private) says after the charge, besides its own
result: that the data set has no cap."""

from __future__ import annotations

from .messages import notice


def uncapped(ledger_block: dict) -> bool:
    """Whether a charged run's ledger block (its report's ``ledger``) shows no cap in either definition."""
    return ledger_block.get("epsilon_cap") is None and ledger_block.get("rho_cap") is None


def warn_uncapped(dataset: str, unit: str) -> None:
    """After a charged release of a data set without a cap: nothing limits what its releases spend.  Not under
    --quiet, which promises silence on success (cron mails any output); --require-cap is how an unattended run
    makes this a refusal instead."""
    import shlex

    from ..publishing.ledger import ROW_UNIT

    per = "" if unit == ROW_UNIT else f" --privacy-unit {shlex.quote(unit.removeprefix('unit:'))}"
    notice(f"data set '{dataset}' has no cap: this release was recorded, but nothing limits what its releases "
           f"spend in all; cap it with 'dphist budget set {shlex.quote(dataset)} --epsilon E{per}' (or --rho R), or "
           "add --require-cap to refuse uncapped data sets", dataset=dataset)
