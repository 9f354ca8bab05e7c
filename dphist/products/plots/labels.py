"""The text of a picture: bin labels, counts and ε amounts as a reader expects them (no matplotlib here).

Numeric bins are labelled by their range, ``[0.1, 0.17)``, each edge the shortest decimal that is the edge up to
float noise (``0.16999999999999998`` reads ``0.17``).  An edge with no short decimal (a third) is rounded to a
hundredth of the narrowest bin, so neighbouring edges stay distinct.  A bin of width 1 between whole numbers is its
value (``3``).  The end bins of a column with open ends (its domain's ``open_ends``, or a declared domain that
clamps values outside it: they also hold every value beyond the bounds) read ``< 0.17`` and ``≥ 9``.  Date bins read as their first day in the domain's unit
(``2023-01`` for months, ``2023`` for years, ``2023 Q1`` for quarters, a day where the bins do not start on the
first of a month).  Categories longer than ``MAX_LABEL``
characters end in an ellipsis, and the null cell reads ``missing``.
"""

from __future__ import annotations

import datetime as _dt
import math

import numpy as np

__all__ = ["MAX_LABEL", "axis_labels", "edge_texts", "count_text"]

MAX_LABEL = 20  # characters of a category shown on an axis; longer ones end in "…"
_EPOCH = _dt.date(1970, 1, 1)
_NOISE = 1e-9  # relative size of the float error an edge may carry and still read as its short decimal


def axis_labels(axis, domain: dict | None = None) -> list[str]:
    """One label per cell along a released axis (a ``ReleasedBins``), ``domain`` its entry in the report (for
    open ends and a date column's unit)."""
    domain = domain or {}
    null = np.asarray(axis.null, dtype=bool)
    if axis.kind == "categorical":
        return ["missing" if n else _truncated(str(v)) for v, n in zip(axis.text, null)]
    real = np.flatnonzero(~null)
    # The end bins are open where they also hold the values beyond the bounds: a discovered domain's open ends,
    # or a declared one that clamps values outside it into its end bins.
    opened = bool(domain.get("open_ends") or domain.get("out_of_domain") == "clamp") and real.size >= 2
    first, last = (int(real[0]), int(real[-1])) if real.size else (-1, -1)
    if axis.kind == "date":
        show = _date_text(domain)
        lower = [show(v) for v in axis.lower]
        upper = [show(v) for v in axis.upper]
    else:
        edges = np.concatenate((axis.lower[real], axis.upper[real]))
        narrowest = float(np.min(axis.upper[real] - axis.lower[real])) if real.size else 1.0
        texts = dict(zip(edges.tolist(), edge_texts(edges, narrowest)))
        lower = [texts.get(float(v), "") for v in axis.lower]
        upper = [texts.get(float(v), "") for v in axis.upper]
    labels = []
    for i in range(axis.size):
        if null[i]:
            labels.append("missing")
        elif opened and i == first:
            labels.append(f"< {upper[i]}")
        elif opened and i == last:
            labels.append(f"≥ {lower[i]}")
        elif axis.kind == "date":
            labels.append(lower[i])
        elif _unit_bin(axis.lower[i], axis.upper[i]):
            labels.append(lower[i])
        else:
            labels.append(f"[{lower[i]}, {upper[i]})")
    return labels


def edge_texts(edges, narrowest: float) -> list[str]:
    """Each edge as the shortest decimal it equals up to float noise, or rounded to a hundredth of the
    ``narrowest`` bin width where that is shorter (an edge with no short decimal); thousands separated by commas
    from 10,000 up."""
    edges = np.asarray(edges, dtype=float)
    if not edges.size:
        return []
    scale = max(float(np.max(np.abs(edges))), abs(narrowest), 1e-300)
    # places enough to tell bins apart: each edge then moves by at most a hundredth of the narrowest bin
    coarse = max(0, -math.floor(math.log10(narrowest / 100))) if narrowest > 0 else 17
    out = []
    for e in edges.tolist():
        places = next((d for d in range(min(coarse, 17) + 1) if abs(round(e, d) - e) <= _NOISE * scale),
                      min(coarse, 17))
        out.append(_decimal(round(e, places), places))
    return out


def count_text(value: float) -> str:
    """A count (or a colour-bar or axis tick) for a reader: whole numbers with thousands separators, others to
    three significant digits."""
    if not math.isfinite(value):
        return str(value)
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1e4 else f"{value:,.0f}"


def _decimal(value: float, places: int) -> str:
    text = f"{value:,.{places}f}" if abs(value) >= 1e4 else f"{value:.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _unit_bin(lower: float, upper: float) -> bool:
    """A bin holding one whole number: [3, 4) is 3."""
    return float(lower).is_integer() and upper - lower == 1


def _truncated(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1].rstrip() + "…"


def _date_text(domain: dict):
    """A day number (days since 1970-01-01) as text in the domain's unit."""
    unit = domain.get("unit")

    def show(days: float) -> str:
        day = _EPOCH + _dt.timedelta(days=int(days))
        if day.day != 1:  # bins that start inside a month read as days
            return day.isoformat()
        if unit == "year" and day.month == 1:
            return f"{day.year}"
        if unit == "quarter" and day.month % 3 == 1:
            return f"{day.year} Q{(day.month - 1) // 3 + 1}"
        if unit in ("month", "quarter", "year"):
            return f"{day.year}-{day.month:02d}"
        return day.isoformat()
    return show
