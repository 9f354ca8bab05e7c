"""What the unit cap dropped: a small paid measurement, made only when ``--max-rows-per-unit K`` is in force
(docs/privacy.md §6).

Contribution bounding keeps at most K rows of each unit, and the tables count only those: their counts, and the
intervals around them, are for the capped rows, biased low wherever units own more.  How many rows the cap
dropped, D = Σ_u (rows_u − K)⁺, cannot be measured as it is: one unit may own any number of rows, so D has no
bounded sensitivity.  The release measures instead, together and with noise, two sums whose sensitivity is
bounded, with each unit's dropped rows counted up to C = :data:`EXCESS_CLIP` × K (public):

    kept     N = Σ_u min(rows_u, K)              one unit moves it by at most K
    dropped  E = Σ_u min((rows_u − K)⁺, C)       one unit moves it by at most C

A unit with more than K rows adds exactly K to N, so one unit moves the pair by at most K + C in L1 and
√(K² + C²) in L2; stated to the budget per row of the protected unit (whose ``factor`` K·c multiplies it, for
groups of c units too), that is Δ₁ = 1 + M and Δ₂² = 1 + M², M = :data:`EXCESS_CLIP`.  The pair is measured once
with the definition's noise (discrete Laplace under pure ε, discrete Gaussian under ρ-zCDP), paid with
:data:`UNIT_CAP_SHARE` of the budget.

Everything after the noise is post-processing.  The share dropped is estimated as Ê / (N̂ + Ê) (each clamped at
0): the share of the rows dropped when every unit counts at most K + C rows, never more than the share the cap
really dropped (a unit with more than K + C rows has only C of its dropped rows counted).  Its interval is the
share's range while each noisy sum stays within its exact 97.5 % interval, which holds for both at once with
probability at least 95 %; its lower end is then a lower bound on the true share as well.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..privacy import BudgetExceeded, Measurement, PrivacyBudget, format_fraction
from ..read.contribution import UnitBound, UnitRows

__all__ = ["UNIT_CAP_SHARE", "EXCESS_CLIP", "DROPPED_NOTICE", "measure_dropped", "noisy_sums",
           "check_dropped_measurement", "dropped_notice", "dropped_note"]

#: The share of the release's budget (ε, or ρ) that measures what the cap dropped, taken only when a unit cap is in
#: force (after discovery's share, when columns are discovered).  The tables share the rest.
UNIT_CAP_SHARE = Fraction(1, 50)
#: M: a unit's dropped rows are counted up to M·K (so units of up to (M + 1)·K rows are counted in full).  The
#: noise grows with 1 + M; 3 counts in full the units of up to four times the cap.
EXCESS_CLIP = 3
#: The summary says what the cap dropped when the estimated share is above this.
DROPPED_NOTICE = 0.05
#: Each noisy sum's interval level: the two hold together with probability at least 1 − 2 × (1 − level) = 95 %.
_SUM_LEVEL = 0.975


def measure_dropped(unit_rows: UnitRows, budget: PrivacyBudget, unit: UnitBound) -> dict:
    """The report's ``unit_cap`` entry: the rows the cap kept and the rows it dropped (each unit's counted up to
    :data:`EXCESS_CLIP` × K), measured together on all of ``budget``, and the share dropped estimated from them
    (module docstring).  Everything but the noisy sums and their noise is public."""
    kept, excess = unit_rows.kept_and_excess(unit.max_rows, EXCESS_CLIP * unit.max_rows)
    return _entry(*noisy_sums(kept, excess, budget, unit), budget, unit)


def check_dropped_measurement(budget: PrivacyBudget, unit: UnitBound) -> None:
    """Before any row is read: UsageError unless the measurement can be drawn on ``budget`` (a probe of the
    planned part, never used for data): a noise scale or variance past the samplers' range would refuse it after
    the data were read.  (No smallest amount per row applies: the tables' minimum keeps their counts readable, and
    this measurement's noise is reported with it, whatever its size.)"""
    try:
        _entry(*noisy_sums(0, 0, budget, unit), budget, unit)
    except (ValueError, BudgetExceeded):
        raise UsageError(f"measuring what --max-rows-per-unit {unit.max_rows} drops would get {_amount_name(budget)} "
                         f"{format_fraction(budget.amount)}, too little for exact noise at {unit.max_rows} rows per "
                         "unit: raise the budget or lower --max-rows-per-unit") from None


def noisy_sums(kept: int, excess: int, budget: PrivacyBudget, unit: UnitBound) -> tuple[np.ndarray, Measurement]:
    """(kept, excess) + the budget's noise for their sensitivity (Δ₁ = 1 + M, Δ₂² = 1 + M² per row of the
    protected group, M = :data:`EXCESS_CLIP`), paid with all of ``budget``; and the budget's record."""
    k, column = unit.max_rows, unit.column
    clip = EXCESS_CLIP * k
    return budget.measure(
        np.array([kept, excess], dtype=np.int64), 1 + EXCESS_CLIP, 1 + EXCESS_CLIP**2, budget.amount,
        f"rows the unit cap kept and rows it dropped (each {column}'s counted up to {clip})",
        composition=f"one measurement of two sums: a {column} adds at most {k} rows to the kept, {clip} to the "
                    f"dropped and {k + clip} to both together (L1; L2 at most sqrt({k}^2 + {clip}^2))")


def _entry(noisy: np.ndarray, record: Measurement, budget: PrivacyBudget, unit: UnitBound) -> dict:
    """The report's entry from the noisy sums (post-processing)."""
    k, column = unit.max_rows, unit.column
    clip = EXCESS_CLIP * k
    n, e = max(int(noisy[0]), 0), max(int(noisy[1]), 0)
    half = record.halfwidth(_SUM_LEVEL)
    share = _share(e, n)
    low, high = _share(max(e - half, 0), n + half), _share(e + half, max(n - half, 0))
    return {
        "measured": f"N = the rows the cap kept, sum over {column}s of min(rows, {k}), and E = the rows it dropped "
                    f"with each {column}'s counted up to {clip}, sum of min(max(rows - {k}, 0), {clip}); both with "
                    f"noise, together; rows with no {column} are in neither",
        "unit_column": column,
        "max_rows_per_unit": k,
        "dropped_rows_counted_up_to": clip,
        _amount_name(budget): format_fraction(budget.amount),
        "rows_kept": int(noisy[0]),
        "rows_dropped": int(noisy[1]),
        "noise_sd": round(record.noise_sd, 4),
        "dropped_share": round(share, 4),
        "dropped_share_interval": [round(low, 4), round(high, 4)],
        "estimate": f"dropped_share = E / (N + E) from the noisy sums clamped at 0: the share of the rows dropped "
                    f"when each {column} counts at most {k + clip} rows.  It never exceeds the share the cap "
                    f"dropped, and is below it when some {column} has more than {k + clip} rows (only {clip} of "
                    f"its dropped rows are counted).  dropped_share_interval: the share's range while each noisy "
                    f"sum is within its exact 97.5 % interval (+/- {half}), both at once with probability at least "
                    "95 %; its lower end is then a lower bound on the share the cap dropped, its upper end is not an "
                    "upper bound on it",
        "step": record.report(),
    }


def _amount_name(budget: PrivacyBudget) -> str:
    return "epsilon" if budget.definition == "pure" else "rho"


def _share(dropped: int, kept: int) -> float:
    """dropped / (kept + dropped), 0 when both are 0."""
    whole = dropped + kept
    return dropped / whole if whole > 0 else 0.0


def dropped_notice(entry: dict) -> str | None:
    """The summary's line about the unit cap when its estimated dropped share is above :data:`DROPPED_NOTICE`,
    else None.  When the share's interval reaches 0 the line says the estimate cannot rule out that nothing was
    dropped (noise alone may have put it above the threshold)."""
    share = entry["dropped_share"]
    if not share > DROPPED_NOTICE:
        return None
    low, high = entry["dropped_share_interval"]
    column, k = entry["unit_column"], entry["max_rows_per_unit"]
    counting = f"counting at most {k + entry['dropped_rows_counted_up_to']} rows per {column}"
    capped = "the counts and their intervals are for the capped rows"
    if low > 0:
        give = max(1, math.ceil(100 * max(share - low, high - share) - 1e-9))
        return (f"the unit cap ({k} rows per {column}) dropped about {_percent(share)} of the rows (± {give} %, "
                f"{counting}); {capped}")
    return (f"the unit cap ({k} rows per {column}) may have dropped rows: about {_percent(share)} by an estimate too "
            f"noisy to rule out none (95 % interval 0 to {_percent(high)}, {counting}); {capped}")


def dropped_note(entry: dict) -> str:
    """What the report's note on intervals adds under a unit cap."""
    column, k = entry["unit_column"], entry["max_rows_per_unit"]
    return (f" Under the unit cap the counts and their intervals are for the rows it kept (at most {k} per "
            f"{column}), not for all rows: the cap dropped about {_percent(entry['dropped_share'])} of them "
            "(unit_cap: an estimate with noise, and a lower bound when some "
            f"{column} has more than {k + entry['dropped_rows_counted_up_to']} rows).")


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %"
