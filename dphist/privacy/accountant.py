"""The accountant: what the releases of one data set add up to, in the definition its cap is set in, and whether
one more release fits.  Pure functions over exact fractions; the ledger (:mod:`dphist.publishing.ledger`) keeps the
entries and asks these.

A release is charged in one of three definitions (:class:`Charge`):

    pure         ε, with a δ only for partition selection
    zcdp         ρ alone
    approximate  (ε, δ), run as ρ-zCDP with ρ <= rho_for(ε, δ): both guarantees hold

A data set is capped (:class:`Cap`) in ε with δ ("pure" if δ = 0, else "approximate") or in ρ ("zcdp"), and each
release is counted in the cap's definition:

    against a ρ cap    zcdp and approximate releases count their ρ; a pure release with δ = 0 counts ρ = ε²/2
                       (ε-DP implies ε²/2-zCDP: Bun and Steinke 2016, Prop. 1.4); a pure release with δ > 0 has
                       no ρ (no (ε, δ) guarantee with δ > 0 implies any zCDP bound)
    against an ε cap   pure and approximate releases count (ε, δ); a zcdp release has no (ε, δ) until a δ is
                       chosen for it

Sequential composition adds them up (:class:`Spend`): Σε and Σδ over the releases (basic composition), Σρ (zCDP
composes additively).  A sum that some release cannot be counted in has no value (None), and then no further
release fits a cap in that definition (:func:`cap_note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from fractions import Fraction

from ..errors import UsageError
from .amounts import format_fraction

__all__ = ["Charge", "Cap", "Spend", "REFERENCE_DELTA", "charge_for", "refusal", "cap_note", "remaining",
           "reference_delta", "epsilon_at"]

#: The δ at which a spend counted in ρ is shown as (ε, δ) when its ρ cap names none.
REFERENCE_DELTA = Fraction(1, 10**6)


@dataclass(frozen=True)
class Charge:
    """What one release costs, in its definition: pure (ε, δ), zcdp (ρ alone) or approximate ((ε, δ) and ρ)."""

    definition: str
    epsilon: Fraction | None
    delta: Fraction
    rho: Fraction | None

    def in_epsilon(self) -> tuple[Fraction, Fraction] | None:
        """(ε, δ) as counted against an ε cap; None for a zcdp release (no δ was chosen for it)."""
        return None if self.epsilon is None else (self.epsilon, self.delta)

    def in_rho(self) -> Fraction | None:
        """ρ as counted against a ρ cap: its own ρ, or ε²/2 for a pure release with δ = 0 (ε-DP implies
        ε²/2-zCDP, Bun and Steinke 2016 Prop. 1.4); None for a pure release with δ > 0, which has no ρ."""
        if self.rho is not None:
            return self.rho
        return self.epsilon * self.epsilon / 2 if self.delta == 0 else None


@dataclass(frozen=True)
class Cap:
    """A data set's cap: in ε with δ ("pure" if δ = 0, else "approximate"), or in ρ ("zcdp"; ``delta`` is then
    only the reference δ at which the spend is shown as (ε, δ), 0 if none was given)."""

    definition: str
    epsilon: Fraction | None
    delta: Fraction
    rho: Fraction | None


@dataclass(frozen=True)
class Spend:
    """A data set's spend in each account, exact: (Σε, Σδ) over its releases (both None if some release has no
    ε) and Σρ with pure δ = 0 releases counted as ε²/2 (None if some release has no ρ)."""

    epsilon: Fraction | None
    delta: Fraction | None
    rho: Fraction | None

    @classmethod
    def of(cls, charges: list[Charge]) -> Spend:
        """The spend of ``charges`` (the releases still charged to the data set); all zero for none."""
        eps, delta, rho = Fraction(0), Fraction(0), Fraction(0)
        for c in charges:
            pair, r = c.in_epsilon(), c.in_rho()
            if eps is not None:
                eps, delta = (None, None) if pair is None else (eps + pair[0], delta + pair[1])
            if rho is not None:
                rho = None if r is None else rho + r
        return cls(eps, delta, rho)

    def as_text(self) -> dict:
        """The three sums as exact text (None where there is no sum)."""
        return {"epsilon": _text(self.epsilon), "delta": _text(self.delta), "rho": _text(self.rho)}


def charge_for(epsilon, delta, rho) -> Charge:
    """The charge of a release asking for these amounts, its definition read from which are given: ``epsilon``
    (δ for partition selection) alone is pure; ``rho`` alone (ε None, δ 0) is zcdp; ε > 0, δ > 0 and ρ is
    approximate, and ρ must be at most rho_for(ε, δ) (else the release would not be (ε, δ)-DP).  UsageError for
    amounts that name no definition or are out of range."""
    delta = Fraction(delta)
    if not 0 <= delta < 1:
        raise UsageError(f"delta must be at least 0 and less than 1, got {format_fraction(delta)}")
    if rho is not None:
        rho = Fraction(rho)
        if rho <= 0:
            raise UsageError(f"rho must be greater than 0, got {format_fraction(rho)}")
    if epsilon is None:
        if rho is None:
            raise UsageError("a reservation needs an epsilon or a rho")
        if delta != 0:
            raise UsageError("a zCDP (rho) release has no delta; give its (epsilon, delta) as well to reserve it "
                             "as approximate DP")
        return Charge("zcdp", None, delta, rho)
    epsilon = Fraction(epsilon)
    if epsilon < 0:
        raise UsageError(f"epsilon must be at least 0, got {format_fraction(epsilon)}")
    if rho is None:
        return Charge("pure", epsilon, delta, None)
    if delta == 0 or epsilon == 0:
        raise UsageError("an approximate (epsilon, delta) release run as rho-zCDP needs epsilon > 0 and delta > 0")
    from .conversions import rho_for  # scipy: only when a release is approximate

    if rho > rho_for(epsilon, delta):  # then the release would not be (ε, δ)-DP: a planning bug
        raise UsageError(f"rho {format_fraction(rho)} is more than the (epsilon {format_fraction(epsilon)}, delta "
                         f"{format_fraction(delta)}) guarantee allows ({format_fraction(rho_for(epsilon, delta))})")
    return Charge("approximate", epsilon, delta, rho)


def refusal(dataset: str, cap: Cap, spend: Spend, charge: Charge) -> str | None:
    """Why ``charge`` does not fit ``cap`` after ``spend`` (one line, for the data set named ``dataset``), else
    None.  Under a ρ cap it fits when Σρ + ρ(charge) <= ρ_cap; under an ε cap when Σε + ε <= ε_cap and
    Σδ + δ <= δ_cap; a charge or spend with no figure in the cap's definition never fits."""
    where = f"data set '{dataset}'"
    if cap.rho is not None:
        need = charge.in_rho()
        if need is None:
            return (f"{where} is capped in rho (zCDP), and this release's epsilon {format_fraction(charge.epsilon)} "
                    f"with delta {format_fraction(charge.delta)} > 0 (partition selection) has no rho; nothing was "
                    f"charged (release without a delta, or cap the data set in epsilon: 'dphist budget set "
                    f"{dataset} --epsilon E --delta D')")
        if spend.rho is None:
            return f"{where} is capped in rho (zCDP), but {cap_note(cap, spend)}; nothing was charged"
        if spend.rho + need > cap.rho:
            counted = "" if charge.rho is not None else \
                f" (epsilon {format_fraction(charge.epsilon)} counted as epsilon^2/2)"
            return (f"{where}: this release needs rho {format_fraction(need)}{counted} but only rho "
                    f"{format_fraction(remaining(cap.rho, spend.rho))} of the cap {format_fraction(cap.rho)} "
                    "is left (see 'dphist budget show')")
        return None
    if charge.epsilon is None:
        return (f"{where} is capped in epsilon, and a --rho release has no (epsilon, delta) until a delta is chosen; "
                f"nothing was charged (release with --epsilon E --delta D --noise gaussian, or cap the data set in "
                f"rho: 'dphist budget set {dataset} --rho R')")
    if spend.epsilon is None:
        return f"{where} is capped in epsilon, but {cap_note(cap, spend)}; nothing was charged"
    epsilon, delta = charge.epsilon, charge.delta
    if spend.epsilon + epsilon > cap.epsilon or spend.delta + delta > cap.delta:
        left = (remaining(cap.epsilon, spend.epsilon), remaining(cap.delta, spend.delta))
        return (f"{where}: this release needs epsilon {format_fraction(epsilon)}"
                + (f", delta {format_fraction(delta)}" if delta else "")
                + f" but only epsilon {format_fraction(left[0])}"
                + (f", delta {format_fraction(left[1])}" if cap.delta or delta else "")
                + f" of the cap {format_fraction(cap.epsilon)} is left (see 'dphist budget show')")
    return None


def cap_note(cap: Cap, spend: Spend) -> str | None:
    """Why no release fits the cap any more because of what was spent before it (the spend has no figure in the
    cap's definition), else None."""
    if cap.rho is not None and spend.rho is None:
        return ("an earlier release spent (epsilon, delta) with delta > 0, which has no rho, so the data set's "
                "spend has no rho bound and no release is accepted under this cap (cap it in epsilon with "
                "--epsilon E --delta D instead)")
    if cap.epsilon is not None and spend.epsilon is None:
        return ("an earlier release spent rho alone, which has no (epsilon, delta) without a chosen delta, so no "
                "release is accepted under this cap (cap it in rho with --rho R instead)")
    return None


def remaining(cap: Fraction | None, spent: Fraction | None) -> Fraction | None:
    """What is left of ``cap`` after ``spent``, never below 0 (a cap may be set below the spend); None if either
    is None."""
    return None if cap is None or spent is None else max(cap - spent, Fraction(0))


def reference_delta(cap: Cap | None, spend: Spend) -> Fraction | None:
    """The δ at which the spend is shown converted to ε, or None when it is not: under a ρ cap, the δ given with
    it (else :data:`REFERENCE_DELTA`); without a cap, :data:`REFERENCE_DELTA` when some release has no ε but
    every one has a ρ; under an ε cap, never."""
    if cap is not None and cap.rho is not None:
        return cap.delta if cap.delta > 0 else REFERENCE_DELTA
    if cap is None and spend.epsilon is None and spend.rho is not None:
        return REFERENCE_DELTA
    return None


def epsilon_at(rho: Fraction | None, delta: Fraction) -> Fraction | None:
    """The ε that ρ-zCDP implies at δ by the tight CKS20 conversion (:func:`~dphist.privacy.conversions.epsilon_for`),
    as a decimal of 6 significant digits rounded up (so it never understates the loss); 0 for ρ = 0, None for
    None."""
    if rho is None:
        return None
    if rho == 0:
        return Fraction(0)
    from .conversions import epsilon_for  # scipy: only when a spend is shown converted

    return Fraction(Context(prec=6, rounding=ROUND_CEILING).plus(Decimal(epsilon_for(rho, delta))))


def _text(value: Fraction | None) -> str | None:
    return None if value is None else format_fraction(value)
