"""What the ledger says of a data set's budget, in words: for each account (a data set, per row or per privacy
unit), its cap, what was spent and what remains, in the cap's definition (epsilon or rho) and as converted.
``dphist budget set`` and ``dphist budget show`` print from :func:`budget_status`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..declare import identifiers

if TYPE_CHECKING:
    from .ledger import Ledger

__all__ = ["AccountStatus", "budget_status"]

_NO_RHO = "n/a (a release with a delta has no rho)"
_NO_EPSILON = "n/a (a --rho release has no epsilon)"


@dataclass(frozen=True)
class AccountStatus:
    """One account of the ledger.  ``fields`` is its row of :meth:`Ledger.status` (amounts as exact text, None
    where the spend or cap has no figure in that definition), as ``budget show --format json`` prints it."""

    fields: dict

    @property
    def note(self) -> str | None:
        """Why no release fits the cap's definition any more, else None."""
        return self.fields["cap_note"]

    def _spent_rho(self) -> str:
        return _NO_RHO if self.fields["rho_spent"] is None else self.fields["rho_spent"]

    def _spent_epsilon(self) -> str:
        return _NO_EPSILON if self.fields["epsilon_spent"] is None else self.fields["epsilon_spent"]

    def cap_line(self) -> str:
        """The cap with what was spent and what remains, in the cap's definition (a rho cap also as epsilon at
        its reference delta): what ``budget set`` prints after the data set's name."""
        f = self.fields
        if f["definition"] == "zcdp":
            return (f"cap rho {f['rho_cap']} (epsilon {f['epsilon_cap_at_delta']} at delta {f['reference_delta']}); "
                    f"spent rho {self._spent_rho()}, remaining {f['rho_remaining'] or 'n/a'}")
        return (f"cap epsilon {f['epsilon_cap']}, delta {f['delta_cap']}; spent epsilon {self._spent_epsilon()}, "
                f"remaining {f['epsilon_remaining'] or 'n/a'}")

    def summary(self) -> str:
        """One line: the data set and unit, what was spent against which cap and what remains, the other
        definition as converted, the cap's note, the number of releases and the last entry's time."""
        f = self.fields
        parts = []
        if f["definition"] == "zcdp":
            remaining = "" if f["rho_remaining"] is None else f", remaining {f['rho_remaining']}"
            parts.append(f"rho spent {self._spent_rho()}, cap {f['rho_cap']}{remaining}")
        else:
            text = f"epsilon spent {self._spent_epsilon()}"
            if f["delta_spent"] not in (None, "0"):
                text += f", delta spent {f['delta_spent']}"
            if f["epsilon_cap"] is None:
                text += ", no cap"
            else:
                text += f", cap {f['epsilon_cap']}" + ("" if f["delta_cap"] == "0" else f" delta {f['delta_cap']}")
                text += "" if f["epsilon_remaining"] is None else f", remaining {f['epsilon_remaining']}"
            parts.append(text)
            if f["rho_spent"] is not None and f["rho_spent"] != "0":
                parts.append(f"as rho: spent {f['rho_spent']}")
        if f["epsilon_spent_at_delta"] is not None:
            cap = "" if f["epsilon_cap_at_delta"] is None else f" of {f['epsilon_cap_at_delta']}"
            parts.append(f"as (epsilon, delta): epsilon {f['epsilon_spent_at_delta']}{cap} at delta "
                         f"{f['reference_delta']}")
        if self.note:
            parts.append(f"note: {self.note}")
        return (f"{identifiers.shown(f['dataset'])} ({f['unit']}): {'; '.join(parts)}; {f['releases']} "
                f"release(s), last entry {f['last_entry']}")


def budget_status(ledger: Ledger, dataset: str | None = None, unit: str | None = None) -> list[AccountStatus]:
    """The accounts of ``dataset`` (of every data set if None) in ``ledger``, restricted to ``unit`` if given,
    ordered by data set and unit; empty if the ledger has none.  A writable ledger first gives back the
    reservations of runs that died before reading; a read-only one shows them as given back
    (:meth:`Ledger.status`)."""
    return [AccountStatus(row) for row in ledger.status(dataset) if unit is None or row["unit"] == unit]
