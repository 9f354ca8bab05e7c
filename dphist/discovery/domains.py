"""Private domain discovery for columns the schema does not declare (docs/algorithms.md §9), on the privacy kernel.

:func:`discover` is given the discovery's :class:`~dphist.privacy.PrivacyBudget` (its ``factor`` is m, the rows
one protected unit may add: 1, or K·c with privacy units and groups) and splits it: an equal ε to each column,
δ only to the columns that may need partition selection (text, or CSV columns of unknown type).  Every noisy
number and every draw goes through that budget, which scales each sensitivity below (stated for one record) by
m and records the measurement.  For a column with budget ε_c:

* **column types** (CSV columns only; Parquet and DataFrames store them): integer, float, date or text, by one
  permute-and-flip draw at TYPE_SHARE · ε_c on how many values look like each (a value is in exactly one class:
  score sensitivity 1); the domain steps get the rest of ε_c.
* **numeric and date columns** (bounds, then bins), with ε_b the column's domain budget, split 1 : 1 : 2 : 4
  among steps 1–4 (with ``binning="quantiles"`` those take half of ε_b and the cut points of step 5 the other
  half).  Log-scale bins are [0, s), [s, 2s), [2s, 4s), ... mirrored for negatives (s = 1 for integers and
  days, 2⁻¹⁰ for floats; step 3 splits each doubling in SPREAD_FINE); each record is in exactly one bin, so
  such a histogram has sensitivity Δ = 1 (noise of scale m/ε).  A bin is *occupied* if its noisy count exceeds
  τ, the count an empty bin passes with probability at most β/2 over all the histogram's bins.  A *real share*
  of the rows is a noisy count above max(τ_ext, TAIL · N̂): τ_ext is what an empty bin exceeds with
  probability EXTEND_TAIL, N̂ the noisy count of the bins step 1 finds (within step 1, of its largest bin).
  1. *place* (ε_b/8): a log-scale histogram of the values.  Its largest bin must be occupied (else the column
     cannot be released: too few records); it and the neighbours holding a real share, added bin by bin
     outward, are where the values are.
  2. *median* (ε_b/8): one permute-and-flip draw among QUANTILE_POINTS + 1 equally spaced points over those
     bins (whole numbers for integers and days).  Candidate c's score for a quantile q is
     −|(1 − q)·#{x < c} − q·#{x ≥ c}| = −|#{x < c} − q·N|: adding or removing one record changes it by at
     most max(q, 1 − q) ≤ 1 (sensitivity 1).  For q = 1/2 the right point beats far ones by about N/2.
  3. *spread* (ε_b/4): a log-scale histogram of the signed distances x − median.  Each side reaches from its
     largest bin, if occupied, outward over the bins holding a real share; a side with no occupied bin
     reaches as far as the other, and with none on either side the range is that of step 1.  Distances from
     the median, not from 0, make the range fit the data's own spread (a year of dates, or prices near 1000,
     lie in one log-scale bin of the raw values but span several bins of the distances).
  4. *bounds* (ε_b/2): the lower and upper bounds are DP quantiles at TAIL and 1 − TAIL, two
     permute-and-flip draws at ε_b/4 each (scores as in step 2, sensitivity 1), over QUANTILE_POINTS + 1
     points spanning the range of step 3 widened on each side by PAD rank resolutions of a draw (2m/ε rows,
     as a share of N̂) of its span, at most a quarter.
     *What is cut*: every value below the lower or at or above the upper bound is counted in the first or last
     bin, whose outer label is empty ("below 183", "1849 and above"), and the report says so.  The target is
     TAIL = 1/400 of the rows at each end.  A draw misses its quantile by about 2m/ε rows of rank either way;
     past the data's end every candidate scores alike, so where the budget is small (2m/ε near TAIL · N) the
     draws fall outward (wider bins, nothing cut) far more often than inward, which the padding keeps so where
     the data reach the end of the range.  Rows beyond the range of step 3 are cut as well; its bins there
     held no real share.  Measured on 73,421 uniform ids 1–2160 from a CSV file at ε = 1 with no schema
     (discovery ε 0.1; tests/unit/discovery/test_domains.py), 200 seeds: alone, 0.02 % of the rows cut on
     average (at most 0.96 %), bounds spanning 1.23 times the ids' range; with 6 other columns sharing the
     discovery budget, 0.003 % (at most 0.21 %), spanning 1.54 times.
  5. *bins*: equal widths over [lower, upper) (integer-aligned for integers; days, months or years for dates
     by the span), or cut points at the j/bins quantiles of the values clamped to the bounds, one
     permute-and-flip draw each (scores as in step 2) over public points.  Missing values have their own cell.
  The steps compose sequentially to ε_b (pure ε-DP); each step's points and ranges are post-processing of the
  earlier steps' noisy outputs, and a column that fails at step 1 is charged the later steps all the same.
* **categorical columns** (partition selection, (ε, δ)-DP): the candidates are the labels of the rows kept by
  contribution bounding (a label seen only in dropped rows would be a candidate one unit added without being
  counted); every candidate's count gets noise of scale m/ε_c (Δ = 1), and a label is kept if its noisy count
  exceeds m + t, with t the smallest integer for which P(noise > t) ≤ δ′ = 1 − (1 − δ_c)^{1/m}.  A label held by
  the protected unit alone (count ≤ m, at most m such labels) then appears with probability at most δ_c; labels
  are sorted, and at most ``max_categories`` (the largest noisy counts) are kept.  Rare categories are
  suppressed by design: the released marginal of such a column is biased low by the held-out labels, which are
  not published as "other".  How many candidates there were is private and is not reported.

Every decision reads only noisy counts or permute-and-flip draws; the true counts stay inside this module.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..read.contribution import UnitBound, UnitIds, bounded_rows
from ..read.counting import as_text, days_since_epoch
from ..errors import DataError, UsageError
from ..read.sources import kinds_of
from ..privacy import PrivacyBudget, equal_part, format_fraction
from ..privacy import discrete_laplace_tail, discrete_laplace_tail_threshold as tail_threshold
from ..declare.schema import Column, normalise_label, parse_schema
from ..text import quoted

__all__ = ["KINDS", "AUTO", "needs_delta", "TextAs", "typed_text", "BINNINGS", "DiscoveryPlan", "kind_of", "discover",
           "present_labels", "choose_kind", "numeric_domain", "categorical_domain", "rank_scores", "tail_threshold",
           "DEFAULT_SHARE", "DEFAULT_BINS", "DEFAULT_MAX_CATEGORIES", "TAIL"]

DEFAULT_SHARE = Fraction(1, 4)
DEFAULT_BINS = 16
DEFAULT_MAX_CATEGORIES = 100
#: Probability that some empty bin of the first log-scale histogram is taken as occupied (over all its bins):
#: a column is then placed where it has no values.
BETA = Fraction(1, 1000)
#: The same for the later steps, where an empty bin taken as occupied only widens a range.
BETA_WIDEN = Fraction(1, 20)
LOG_BINS = {"integer": (1.0, 64), "date": (1.0, 32), "float": (2.0 ** -10, 74)}  # (s, B): 2B + 1 bins
#: The share of the rows the discovered bounds aim to leave out at each end (clamped into the end bins).
TAIL = Fraction(1, 400)
#: A bin next to the range joins it when its noisy count is above what an empty bin exceeds this often.
EXTEND_TAIL = 1 / 5
#: The bounds' candidates reach past the range by this many rank resolutions (as a share of the rows).
PAD = 32
#: A range grows across at most this many bins holding no real share, to the next that holds one, when that
#: one's noisy count is above what an empty bin passes with probability ACROSS_TAIL.
GAP, ACROSS_TAIL = 1, 1 / 50
#: Float columns: the share of the budget (beside SHARES) that tests whether the values are whole numbers; they
#: are taken as whole when at most WHOLE_MOST of the rows are not, by a noisy count whose noise is small beside
#: the rows (the noisy total over the count's noise scale at least WHOLE_EVIDENCE).
WHOLE_SHARE, WHOLE_MOST, WHOLE_EVIDENCE = 1, Fraction(1, 20), 20
#: Whole-number columns whose range holds at most this many values get their bounds from a noisy count of each.
FEW_VALUES = 64
#: Whole-number bounds at most this many values apart give one bin per value (more when ``bins`` is larger).
ONE_PER_VALUE = 32
#: Bins to a doubling in the histogram of distances from the median (the range overshoots the data by < 42 %).
SPREAD_FINE = 2
#: The shares of a numeric column's budget: placing the values, their median, the distances, the bounds.
SHARES = (1, 1, 2, 4)
#: Candidate points for the bounds (equally spaced over the padded range; fewer for narrow integer ranges), and
#: beyond each end of it, at 1, 2, 4, ... times its span (each doubling further less likely).
QUANTILE_POINTS, BEYOND = 1024, 64
#: How discovered numeric bounds are cut into bins: equal widths, or cut points at DP quantiles.
BINNINGS = ("equal-width", "quantiles")
#: Candidate cut points for quantile bins: this many equally spaced points inside the bounds.
QUANTILE_CANDIDATES = 256
KINDS = ("integer", "float", "date", "categorical")
#: A column whose type the data must tell (CSV): chosen privately among KINDS.
AUTO = "auto"
_LOOKS_LIKE = {  # disjoint classes of non-empty text values, one per kind (the rest is text)
    "integer": r"^\s*[-+]?\d+\s*$",
    "float": r"^\s*[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)\s*$",
    "date": r"^\s*\d{4}-\d{2}-\d{2}([Tt ][0-9:.]+\s*([Zz]|[+-]\d{2}(:?\d{2})?)?)?\s*$",
}
TYPE_SHARE = Fraction(1, 4)
_EPOCH = _dt.date(1970, 1, 1)
_FIRST_DAY, _LAST_DAY = (_dt.date.min - _EPOCH).days, (_dt.date.max - _EPOCH).days  # the calendar dates can name


def kind_of(arrow_type: pa.DataType) -> str | None:
    """The discovery kind of a stored type (by :func:`~dphist.read.sources.kinds_of`: numbers as integers or floats,
    dates and timestamps as dates, everything else countable as categories), or None if no table can count it."""
    kinds = kinds_of(arrow_type)
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_null(arrow_type) or not kinds:
        return "categorical" if kinds else None
    if "numeric" in kinds:
        return "integer" if pa.types.is_integer(arrow_type) else "float"
    if pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type):
        return "date"
    return "categorical"


@dataclass(frozen=True)
class _Reader:
    """How the reader should load a discovered column: numbers as float64, dates, anything else as labels."""

    name: str
    kind: str


def _may_need_delta(kind: str) -> bool:
    return kind in ("categorical", AUTO)


def needs_delta(kinds: dict[str, str]) -> bool:
    """Whether discovering columns of ``kinds`` may need partition selection (a text column, or a CSV column of
    unknown type): only then can it use a δ."""
    return any(_may_need_delta(k) for k in kinds.values())


@dataclass
class DiscoveryPlan:
    """The columns to discover, their kinds, and the budget: ``epsilon`` (and ``delta``, for categorical
    columns) in all, shared equally among the columns (and the categorical columns)."""

    kinds: dict[str, str]
    epsilon: Fraction
    delta: Fraction
    bins: int = DEFAULT_BINS
    max_categories: int = DEFAULT_MAX_CATEGORIES
    binning: str = "equal-width"

    def __post_init__(self) -> None:
        if self.binning not in BINNINGS:
            raise UsageError(f"binning must be one of {', '.join(BINNINGS)}, not {quoted(self.binning)}")
        categorical = [n for n, k in self.kinds.items() if _may_need_delta(k)]
        if categorical and self.delta <= 0:
            text = "finding its categories privately" if self.kinds[categorical[0]] == "categorical" else \
                "it is in a CSV file, so it may turn out to be text, and finding its categories privately"
            raise UsageError(f"column {quoted(categorical[0])} has no declared values: {text} needs delta > 0 (e.g. "
                             "--delta 1e-6), or declare it in the schema")

    @property
    def column_epsilon(self) -> Fraction:
        """The ε each column gets (for checks before reading; :func:`discover` splits the budget it is given)."""
        return equal_part(self.epsilon, len(self.kinds))

    @property
    def needs_delta(self) -> bool:
        """Whether some column may need partition selection (:func:`needs_delta`)."""
        return needs_delta(self.kinds)

    @property
    def column_delta(self) -> Fraction:
        """δ for each column that may need partition selection (text, or a CSV column of unknown type)."""
        categorical = sum(_may_need_delta(k) for k in self.kinds.values())
        return equal_part(self.delta, categorical) if categorical else Fraction(0)

    def placeholders(self) -> dict[str, Column]:
        """Columns of the largest size discovery can give each column (numeric and date: ``bins`` + the null
        cell, dates by year up to 200; categorical: ``max_categories`` + the null cell), to check table shapes
        before any data is read."""
        out = {}
        for name, kind in self.kinds.items():
            if _may_need_delta(kind):
                size = max(self.max_categories, 200 if kind == AUTO else 0)
                decl = {"type": "categorical", "values": [f"#{i}" for i in range(size)]}
            else:
                decl = {"type": "numeric", "lower": 0, "upper": 1, "bins": 200 if kind == "date" else self.bins}
            out[name] = parse_schema({"columns": {name: {**decl, "nulls": "category"}}}, "placeholder")[name]
        return out

    def readers(self) -> dict[str, _Reader]:
        kinds = {"integer": "numeric", "float": "numeric", AUTO: "categorical"}  # AUTO: read as text
        return {n: _Reader(n, kinds.get(k, k)) for n, k in self.kinds.items()}


def discover(plan: DiscoveryPlan, batches, budget: PrivacyBudget,
             unit: UnitBound | None = None) -> tuple[dict[str, Column], list[dict]]:
    """Read the discovered columns once and choose each one's domain from noisy counts paid from ``budget``.

    ``batches`` hold the plan's columns (and the unit column with ``unit``).  ``budget`` (made by the caller with
    ``plan.epsilon``, ``plan.delta`` and the protected unit's row factor) is split equally among the columns, δ
    among those that may need partition selection; its ``measurements`` then list every step.  Returns the
    columns (schema declarations built from the noisy results; a column whose noisy counts show no range or no
    category is missing, and its report entry says why) and one report entry per column.
    """
    values: dict[str, list] = {n: [] for n in plan.kinds}
    labels: dict[str, UnitIds] = {n: UnitIds() for n, k in plan.kinds.items() if _may_need_delta(k)}
    units, unit_ids = [], UnitIds()
    for batch in batches:
        if unit is not None:
            units.append(unit_ids.encode(batch.column(unit.column)))
        for name, kind in plan.kinds.items():
            column = batch.column(name)
            if kind == AUTO:
                values[name].append(_as_text(column))  # kept as text until the type is chosen
            elif kind == "categorical":
                values[name].append(labels[name].encode(_as_labels(column)))
            else:
                values[name].append(_as_numbers(column, kind, name))
    n = sum(len(v) for v in values[next(iter(plan.kinds))]) if plan.kinds else 0
    # Contribution bounding's row choice is randomness, not noise: it reads the budget's bit source.
    keep = bounded_rows(np.concatenate(units) if units else np.zeros(0, np.int64), unit.max_rows, budget.bits) \
        if unit is not None else np.ones(n, bool)
    parts = budget.split([1] * len(plan.kinds), delta_shares=[int(_may_need_delta(k)) for k in plan.kinds.values()])
    columns, reports = {}, []
    for (name, kind), part in zip(plan.kinds.items(), parts):
        domain, typed = part, None
        if kind == AUTO:
            text = pa.chunked_array(values[name], type=pa.string()).combine_chunks().filter(pa.array(keep))
            choosing, domain = part.split([TYPE_SHARE, 1 - TYPE_SHARE], delta_shares=[0, 1])
            kind, typed = choose_kind(name, text, choosing)
            data = labels[name].encode(_as_labels(text)) if kind == "categorical" else \
                _as_numbers(typed_text(text, kind), kind, name)
        else:
            data = np.concatenate(values[name]) if values[name] else np.zeros(0)
            data = data[keep]
        if kind == "categorical":
            # Candidates only from the rows kept by contribution bounding: a label seen only in dropped rows
            # would be a candidate that one unit added without being counted, breaking the bound δ rests on.
            data, candidates = present_labels(data, labels[name].labels())
            column, report = categorical_domain(name, data, candidates, plan.max_categories, domain)
        else:
            column, report = numeric_domain(name, kind, data, plan, domain)
        if typed is not None:
            report = {**report, "type": typed, "epsilon": format_fraction(part.epsilon)}
        if column is not None:
            columns[name] = column
        reports.append(report)
    return columns, reports


def present_labels(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """The labels that occur in ``codes`` (ids into ``labels``; -1 for missing), and ``codes`` renumbered to
    them.  Partition selection's candidates must be exactly the labels of the counted rows."""
    present = np.unique(codes[codes >= 0])
    renumber = np.full(len(labels) + 1, -1, dtype=np.int64)  # the last slot maps -1 to -1
    renumber[present] = np.arange(present.size)
    return renumber[codes.astype(np.int64)], [labels[i] for i in present]


# --------------------------------------------------------------------------------------------------------------
# Reading


def _as_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Plain text, exactly as the counting pass reads labels (:func:`~dphist.read.counting.as_text`)."""
    values = as_text(values)
    return pc.cast(values.dictionary_decode() if pa.types.is_dictionary(values.type) else values, pa.string())


def _as_labels(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.utf8_normalize(_as_text(values), "NFC")


def _matching(text: pa.Array, kind: str) -> pa.Array:
    """The values that look like ``kind`` (integers also count as floats); the others become missing."""
    looks = pc.match_substring_regex(text, _LOOKS_LIKE[kind])
    if kind == "float":
        looks = pc.or_(looks, pc.match_substring_regex(text, _LOOKS_LIKE["integer"]))
    return pc.if_else(looks, pc.utf8_trim_whitespace(text), pa.scalar(None, pa.string()))


def typed_text(values: pa.Array | pa.ChunkedArray, kind: str) -> pa.Array:
    """Text values of a column whose type was chosen as ``kind`` (integer, float or date), converted where a
    value looks like that kind (float64, or date32 from its ``YYYY-MM-DD``) and missing elsewhere, as
    discovery saw them; the counting pass reads such a column the same way, so no value can fail it."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        return typed_text(values.dictionary, kind).take(values.indices)
    text = _matching(pc.cast(values, pa.string()), kind)
    if kind == "date":  # an impossible date such as 2024-13-45 is missing too
        day = pc.strptime(pc.utf8_slice_codeunits(text, 0, 10), format="%Y-%m-%d", unit="s", error_is_null=True)
        return pc.cast(day, pa.date32())  # text holds four-digit years: always in date32's range
    return pc.cast(text, pa.float64())


@dataclass(frozen=True)
class TextAs:
    """How the counting pass reads a CSV column whose type discovery chose (``chosen``: integer, float or
    date): as text, converted by :func:`typed_text`.  ``kind`` is the declared kind it is counted as."""

    name: str
    chosen: str

    @property
    def kind(self) -> str:
        return "date" if self.chosen == "date" else "numeric"

    def from_text(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        return typed_text(values, self.chosen)


def choose_kind(name: str, text: pa.Array, budget: PrivacyBudget) -> tuple[str, dict]:
    """Integer, float, date or text, by one permute-and-flip draw on how many values look like each (a value is
    in exactly one class, so each score has sensitivity 1), spending all of ``budget``.  Returns the kind and its
    report entry."""
    present = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(text), ""), False)
    counts = {}
    for kind, pattern in _LOOKS_LIKE.items():
        counts[kind] = int(pc.sum(pc.and_(present, pc.fill_null(pc.match_substring_regex(text, pattern), False)))
                           .as_py() or 0)
    counts["categorical"] = int(pc.sum(present).as_py() or 0) - sum(counts.values())
    kinds = list(counts)
    chosen = kinds[budget.choose([counts[k] for k in kinds], budget.epsilon, 1,
                                 f"{name}: its type (integer, float, date or text), by permute-and-flip")]
    return chosen, {"chosen": chosen, "epsilon": format_fraction(budget.epsilon),
                    "from": "the values of a CSV column, privately"}


def _as_numbers(values: pa.Array | pa.ChunkedArray, kind: str, name: str) -> np.ndarray:
    """float64 values (days since 1970-01-01 for dates); NaN for missing."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    try:
        if kind == "date":
            values = days_since_epoch(values)  # exact for any range of dates and timestamps
            values = values.cast(pa.int32()) if pa.types.is_date32(values.type) else values
        values = pc.cast(values, pa.float64(), safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        raise DataError(f"column {quoted(name)}: a value is not a {'date' if kind == 'date' else 'number'}") from None
    out = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    out[~np.isfinite(out)] = np.nan
    return out


# --------------------------------------------------------------------------------------------------------------
# Numeric and date columns


def _log_bin(v: np.ndarray, s: float, big: int, fine: int = 1) -> np.ndarray:
    """Index in [0, 2·B·fine] of each finite value's log-scale bin, ``fine`` bins to a doubling: B·fine for
    |v| < s, B·fine ± k for s·2^((k−1)/fine) ≤ |v| < s·2^(k/fine) (the last bin on each side also holds
    everything beyond, infinities too).  Each value is in exactly one bin."""
    # |v| is capped at s·2**big, already in the last bin: |v|/s of float64's largest values (1.7e308) would
    # overflow to inf, and inf has no bin index.
    size = np.minimum(np.abs(v), s * 2.0 ** big) / s
    if fine == 1:
        _, k = np.frexp(size)  # |v|/s = f·2^e with f in [0.5, 1), so k = e for |v| ≥ s (exact)
    else:
        with np.errstate(divide="ignore"):
            k = np.floor(np.log2(np.maximum(size, 1.0)) * fine).astype(np.int64) + 1
    k = np.where(size < 1, 0, np.minimum(k, big * fine))
    return big * fine + np.sign(v).astype(np.int64) * k


def _log_edges(j: int, s: float, big: int, integer: bool, fine: int = 1) -> tuple[float, float]:
    """An interval [low, high) holding every value of bin ``j`` of :func:`_log_bin` (for integer columns every
    whole value in it)."""
    k = j - big * fine
    if k == 0:
        return (0.0, 1.0) if integer else (-s, s)
    lo, hi = s * 2.0 ** ((abs(k) - 1) / fine), s * 2.0 ** (abs(k) / fine)
    if k > 0:
        return lo, hi
    # −|v| in (−hi, −lo]: the upper end must lie above −lo
    return -hi, (math.floor(-lo) + 1.0) if integer else float(np.nextafter(-lo, math.inf))


def _extended(noisy: np.ndarray, first: int, last: int, low: int, high: int,
              thresholds: tuple[float, float, float]) -> tuple[int, int]:
    """Bins ``first..last`` extended outward, down to ``low`` and up to ``high`` at most, bin by bin while the
    next one's noisy count exceeds ``step``, across GAP bins to one exceeding ``across``, and further out to the
    nearest exceeding ``far`` (``thresholds`` = (step, across, far), each at least the one before, so that empty
    bins pass each the more rarely the further it reaches).  The gap lets a range cross a bin no value can fall
    in (distances 1.41 to 2 for whole numbers, between the multiples of 5 of rounded data); ``far`` reaches a
    share of the rows set apart (the non-zero values of a column that is mostly 0, a top code).
    Post-processing of the noisy counts."""
    step, across, far = thresholds

    def outward(edge: int, direction: int, limit: int) -> int:
        while edge != limit:
            near = edge + direction
            if noisy[near] > step:
                edge = near
                continue
            gap = [j for j in range(near + direction, _clip(near + direction * GAP, low, high) + direction,
                                    direction) if noisy[j] > across][:1]
            ahead = gap or [j for j in range(near, limit + direction, direction) if noisy[j] > far][:1]
            if not ahead:
                break
            edge = ahead[0]
        return edge
    return outward(first, -1, low), outward(last, 1, high)


def _thresholds(step: float, scale, bins: int, gaps: bool = True) -> tuple[float, float, float]:
    """(step, across, far) for :func:`_extended` over a histogram of ``bins`` bins with noise of ``scale``:
    ``across`` is what an empty bin passes with probability ACROSS_TAIL (no crossing without ``gaps``: a
    histogram of doublings of the values has no bins that values skip), ``far`` what some one of the bins passes
    with probability at most BETA/2."""
    far = max(step, tail_threshold(scale, float(BETA) / 2 / bins))
    return step, max(step, tail_threshold(scale, ACROSS_TAIL)) if gaps else far, far


def _clip(j: int, low: int, high: int) -> int:
    return min(max(j, low), high)


def _reach(side: np.ndarray, occupied: float, thresholds: tuple[float, float, float]) -> int | None:
    """How many bins out from the centre one side of a histogram of distances reaches (``side`` is ordered
    nearest first): from its largest bin, if that is above ``occupied``, outward over the bins that pass
    ``thresholds`` (:func:`_extended`); None if no bin is occupied.  Post-processing of the noisy counts."""
    largest = int(np.argmax(side))
    if side[largest] <= occupied:
        return None
    return _extended(side, largest, largest, largest, side.size - 1, thresholds)[1] + 1


def _extension_step(total: int, scale: Fraction) -> float:
    """The noisy count above which a bin holds a real share of the rows: what an empty bin exceeds with
    probability EXTEND_TAIL, and TAIL of ``total`` (a noisy count of the rows).  A bin holding less stays out of
    a range: the bound there cuts about as much as the quantile would, without widening the range."""
    return max(tail_threshold(scale, EXTEND_TAIL), float(TAIL) * int(total))


def _points(lower: float, upper: float, count: int, integer: bool) -> np.ndarray:
    """``count`` equally spaced points from ``lower`` to ``upper`` (whole and distinct for integer columns)."""
    points = np.linspace(lower, upper, count)
    return np.unique(np.round(points) + 0.0) if integer else np.unique(points)  # + 0.0: no −0


def _below(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """#{x < c} for each of the sorted, distinct ``points`` c, in O(n log k)."""
    at_or_below = np.searchsorted(points, values, side="right")  # #{c ≤ x}: x < c_k iff it is ≤ k
    return np.cumsum(np.bincount(at_or_below, minlength=points.size + 1))[: points.size]


def _bound_candidates(lower: float, upper: float, integer: bool, step: Fraction) -> tuple[np.ndarray, list[Fraction]]:
    """The bounds' candidates: QUANTILE_POINTS + 1 equally spaced points over [lower, upper], and beyond each end
    BEYOND points at 1, 2, 4, ... times the span past it, the k-th less likely by a penalty of k·``step`` rows
    of score (a public function of the candidate and of earlier noisy outputs, so the scores keep sensitivity 1).
    A share of the rows the range missed (the non-zero values of a column that is mostly 0, a thin tail spread
    over many doublings) outweighs the penalty of the points that reach it; past the data, where every point
    scores alike, the penalty keeps the draw near the range.  Returns the sorted points and their penalties."""
    inner = _points(lower, upper, QUANTILE_POINTS + 1, integer)
    span = max(upper - lower, 1.0 if integer else float(np.finfo(float).tiny))
    reach = span * 2.0 ** np.arange(BEYOND)
    with np.errstate(over="ignore"):
        outer = [p for p in np.concatenate([lower - reach, upper + reach]) if np.isfinite(p) and abs(p) < 2 ** 1000]
    points = np.array([*inner, *outer])
    points = np.round(points) + 0.0 if integer else points
    order = np.unique(points)
    distance = np.maximum(np.maximum(lower - order, order - upper), 0.0)
    rank = np.where(distance > 0, np.floor(np.log2(np.maximum(distance, span) / span)) + 1, 0)
    return order, [int(k) * step for k in rank]


def rank_scores(below: np.ndarray, n: int, q: Fraction) -> list[Fraction]:
    """Each candidate's score for the q-quantile: −|(1 − q)·#{x < c} − q·#{x ≥ c}| = −|#{x < c} − q·n|, zero at
    the quantile; one record more or less changes it by at most max(q, 1 − q) ≤ 1 (sensitivity 1)."""
    # −|(1 − q)·B − q·(n − B)| = −|B − q·n|, computed exactly as −|den·B − num·n| / den: whole numbers, in
    # int64 where den·n leaves room, else as Python integers.
    den, n = q.denominator, int(n)
    counts = below.astype(np.int64) if den * n < 2 ** 62 else below.astype(object)
    return [Fraction(int(v), den) for v in -np.abs(den * counts - q.numerator * n)]


def numeric_domain(name: str, kind: str, data: np.ndarray, plan: DiscoveryPlan, budget: PrivacyBudget):
    """Bounds and bins of a numeric or date column (``data``: float64 values, days for dates, NaN missing), spending
    all of ``budget`` (module docstring, steps 1–5).  Returns the column (open end bins; None if there are too
    few records) and its report entry."""
    s, big = LOG_BINS[kind]
    integer = kind in ("integer", "date")
    finite = data[np.isfinite(data)]
    quantiles = plan.binning == "quantiles" and kind != "date" and plan.bins > 1
    # 1/8 to place the values, 1/8 to the median, 1/4 to the distances, 1/2 to the bounds (float columns: a
    # ninth share more, to test for whole numbers); with quantile bins these take half of the column's budget
    # and the cut points the other half.
    shares = SHARES + ((WHOLE_SHARE,) if kind == "float" else ())
    shares += (sum(shares),) if quantiles else ()
    place, rest = budget.split([shares[0], sum(shares) - shares[0]])
    bounds_what = f"{name}: lower and upper bounds at the {TAIL} and {1 - TAIL} quantiles, by permute-and-flip"
    cuts_what = f"{name}: {plan.bins - 1} bin cuts at quantiles, by permute-and-flip"
    # 1. Where the values are: the log-scale bin with the largest noisy count and its neighbours that hold a
    #    real share of the rows.
    noisy, _ = place.laplace(np.bincount(_log_bin(finite, s, big), minlength=2 * big + 1), 1, place.epsilon,
                             f"{name}: log-scale histogram, to place the values",
                             composition="parallel over disjoint bins")
    scale = place.scale(1, place.epsilon)
    anchor = int(np.argmax(noisy))
    placing = tail_threshold(scale, float(BETA) / 2 / noisy.size)
    report = {"column": name, "kind": kind, "epsilon": format_fraction(budget.epsilon), "delta": "0"}
    if noisy[anchor] <= placing:  # too few values to place with this share: all the rest on one coarse look
        return _coarse_domain(name, kind, finite, plan, rest, report)
    step = _extension_step(noisy[anchor], scale)
    first, last = _extended(noisy, anchor, anchor, 0, noisy.size - 1, _thresholds(step, scale, noisy.size, gaps=False))
    total = max(int(noisy[first:last + 1].sum()), 1)  # the noisy number of rows, for the steps below
    placed_range = (_log_edges(first, s, big, integer)[0], _log_edges(last, s, big, integer)[1])
    parts = rest.split(shares[1:])
    middle, spread, bounds = parts[:3]
    # 1b. Float columns: whether the values are whole numbers (a float column of counts or codes with missing
    #     values), from one noisy count of those that are not (sensitivity 1).  Whole columns get whole bounds
    #     and bins, one bin per value where there are few; a float column is taken as whole only when the count
    #     is small beside a total the budget resolves.
    if kind == "float":
        fractional = np.count_nonzero(finite != np.floor(finite))
        whole = parts[3]
        noisy_fractional, _ = whole.laplace(np.array([fractional]), 1, whole.epsilon,
                                            f"{name}: how many values are not whole numbers", composition="one count")
        evidence = total * whole.inverse_scale(1, whole.epsilon)  # the total in units of the count's noise scale
        integer = bool(evidence >= WHOLE_EVIDENCE and noisy_fractional[0] < float(WHOLE_MOST) * total)
        report["whole numbers"] = "yes (a noisy count of the values that are not)" if integer else "no"
        if integer:
            s, big = LOG_BINS["integer"]
            placed_range = (float(np.floor(placed_range[0])), float(np.ceil(placed_range[1])))
    # 2. The median, among public points over those bins (its score has a margin of half the rows: rarely off).
    candidates = _points(*placed_range, QUANTILE_POINTS + 1, integer)
    median = float(candidates[middle.choose(rank_scores(_below(finite, candidates), finite.size, Fraction(1, 2)),
                                            middle.epsilon, 1,
                                            f"{name}: the median, by permute-and-flip over {candidates.size} points")])
    # 3. How far the values reach on each side of it: a log-scale histogram of the signed distances.
    noisy, _ = spread.laplace(np.bincount(_log_bin(finite - median, s, big, SPREAD_FINE),
                                          minlength=2 * big * SPREAD_FINE + 1), 1, spread.epsilon,
                              f"{name}: log-scale histogram of the distances from that median, {SPREAD_FINE} bins "
                              "to a doubling", composition="parallel over disjoint bins")
    scale = spread.scale(1, spread.epsilon)
    occupied = tail_threshold(scale, float(BETA_WIDEN) / 2 / noisy.size)
    binning = "bins cut at DP quantiles" if quantiles else "equal-width bins"
    report.update({"method": f"DP bounds (a median, a log-scale histogram of the distances from it, then the {TAIL} "
                             f"and {1 - TAIL} quantiles, or with few whole values a noisy count of each), {binning}",
                   "thresholds": [placing, occupied]})
    centre = big * SPREAD_FINE
    sides = noisy[:centre][::-1], noisy[centre + 1:]  # distances below and above the median, nearest first
    # Each side reaches from its largest bin, if occupied, outward while the bins hold a real share of the
    # rows; a side with no occupied bin reaches as far as the other (its rows are too spread to place), and
    # with none on either side the range is that of step 1 (most rows at the median, the rest spread thin).
    reach = [_reach(side, occupied, _thresholds(_extension_step(total, scale), scale, noisy.size)) for side in sides]
    if reach == [None, None]:
        lower, upper = placed_range
    else:
        reach = [r if r is not None else max(x for x in reach if x is not None) for r in reach]
        lower = median + _log_edges(centre - reach[0], s, big, integer, SPREAD_FINE)[0]
        upper = median + _log_edges(centre + reach[1], s, big, integer, SPREAD_FINE)[1]
    # 4. The bounds.  Room past the range, so that a draw that misses its quantile falls outward (wider bins)
    #    rather than inward (cut rows): PAD rank resolutions of the draws (2·Δ·m/ε rows) as a share of the rows.
    # (the scale is linear in Δ: the scale at Δ = 2·PAD/total is PAD resolutions of a draw over the rows)
    pad = float(min(Fraction(1, 4), bounds.scale(Fraction(2 * PAD, total), bounds.part(Fraction(1, 2))))) * \
        (upper - lower)
    if integer and math.ceil(upper + pad) - math.floor(lower - pad) <= FEW_VALUES:
        lower, upper = _whole_bounds(name, finite, math.floor(lower - pad), math.ceil(upper + pad), total, bounds)
    else:
        # each doubling beyond costs TAIL of the rows, and at least two rank resolutions of a draw (so that past
        # the data, where every point scores alike, they are unlikely however small the budget)
        doubling = max(Fraction(int(total)) * TAIL, bounds.scale(2, bounds.part(Fraction(1, 2))))
        candidates, penalty = _bound_candidates(lower - pad, upper + pad, integer, doubling)
        below = _below(finite, candidates)
        draws = bounds.selection(2, bounds.epsilon, 1, f"{bounds_what} over {candidates.size} points (those "
                                 "beyond the range less likely by a public penalty)")
        chosen = sorted([draws.choose([r - p for r, p in zip(rank_scores(below, finite.size, q), penalty)])
                         for q in (TAIL, 1 - TAIL)])
        if chosen[0] == chosen[1]:  # both draws on one point: the bounds are it and its neighbour
            chosen = [chosen[0], chosen[0] + 1] if chosen[0] + 1 < candidates.size else [chosen[0] - 1, chosen[0]]
        lower, upper = float(candidates[chosen[0]]), float(candidates[chosen[1]])
    # 5. The bins.
    shape = "integer" if integer and kind == "float" else kind
    if quantiles:
        declaration = _quantile_bins(name, shape, finite, lower, upper, plan.bins, parts[-1], cuts_what)
    else:
        declaration = _bins(shape, lower, upper, plan.bins)
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    if column.bins > 1:  # values beyond the bounds are clamped into the end bins: their labels are open
        column = dataclasses.replace(column, open_ends=True)
    shown = (_EPOCH + _dt.timedelta(days=min(max(int(median), _FIRST_DAY), _LAST_DAY))).isoformat() \
        if kind == "date" else _tidy(median)
    return column, {**report, "median": shown, "domain": column.describe(),
                    "tails": f"about {TAIL} of the values at each end are below or above the bounds, counted in the "
                             "first or last bin (its outer label is empty)"}


def _coarse_domain(name: str, kind: str, finite: np.ndarray, plan: DiscoveryPlan, budget: PrivacyBudget,
                   report: dict):
    """The domain of a column whose first look placed nothing (too few values for the steps' shares), from one
    more log-scale histogram of the values (Δ = 1) spending all of ``budget``: the bins from the largest, if a
    noisy count an empty bin passes with probability at most BETA/2 over all of them, out over the neighbours
    holding a real share (:func:`_extended`), cut into equal bins (one per value for few whole numbers).
    Coarser than the quantile bounds: the range is whole doublings of the values (from 0 for most columns), and
    nothing past it is kept apart.  Returns (None, the reason) when that histogram places nothing either."""
    # Floats on the whole numbers' scale: a coarse range starts at a doubling of 1 or at 0, never inside (−1, 1).
    s, big = LOG_BINS["integer" if kind == "float" else kind]
    integer = kind in ("integer", "date")
    noisy, _ = budget.laplace(np.bincount(_log_bin(finite, s, big), minlength=2 * big + 1), 1, budget.epsilon,
                              f"{name}: log-scale histogram with the rest of its budget (too few values to place "
                              "with a share)", composition="parallel over disjoint bins")
    scale = budget.scale(1, budget.epsilon)
    anchor = int(np.argmax(noisy))
    placing = tail_threshold(scale, float(BETA) / 2 / noisy.size)
    report = {**report, "method": "coarse: the doublings of a log-scale histogram that hold a real share (too few "
                                  "values for DP quantiles), equal-width bins", "thresholds": [placing]}
    if noisy[anchor] <= placing:
        return None, {**report, "failed": f"too few records to find its range privately with epsilon "
                      f"{report['epsilon']}: its most common order of magnitude holds a noisy "
                      f"{int(noisy[anchor])} values, where noise alone reaches {placing}; declare its bounds in a "
                      "schema"}
    step = _extension_step(noisy[anchor], scale)
    first, last = _extended(noisy, anchor, anchor, 0, noisy.size - 1, _thresholds(step, scale, noisy.size, gaps=False))
    lower, upper = _log_edges(first, s, big, integer)[0], _log_edges(last, s, big, integer)[1]
    if first == big:  # the centre bin: values in (−1, 0) are few enough to go to the first bin
        lower = 0.0
    column = parse_schema({"columns": {name: _bins(kind, lower, upper, plan.bins)}}, "discovered domain")[name]
    if column.bins > 1:
        column = dataclasses.replace(column, open_ends=True)
    return column, {**report, "domain": column.describe(),
                    "tails": "values beyond the doublings that hold a real share of the rows are counted in the "
                             "first or last bin (its outer label is empty)"}


def _whole_bounds(name: str, values: np.ndarray, low: int, high: int, total: int,
                  budget: PrivacyBudget) -> tuple[int, int]:
    """Bounds [lower, upper) of a column of whole numbers that lie, by the steps before, among the few values
    ``low .. high − 1``: one noisy count of each (values counted by their whole part; each record is in at most
    one count, sensitivity 1), spending all of ``budget``.  The bounds hold the value with the largest count
    and reach out from it (:func:`_extended`) to the values holding a real share of the ``total`` (noisy) rows,
    across at most GAP values, or further where a count passes what absent values pass with probability at most
    BETA/2 over all of them; values beyond are cut (clamped into an end bin)."""
    size = high - low
    inside = values[(values >= low) & (values < high)]
    counts = np.bincount((np.floor(inside) - low).astype(np.int64), minlength=size)
    noisy, _ = budget.laplace(counts, 1, budget.epsilon, f"{name}: a count of each whole value from {low} to "
                              f"{high - 1}, for the bounds", composition="parallel over disjoint values")
    scale = budget.scale(1, budget.epsilon)
    anchor = int(np.argmax(noisy))
    step = _extension_step(total, scale)
    first, last = _extended(noisy, anchor, anchor, 0, size - 1, _thresholds(step, scale, size))
    return low + first, low + last + 1


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2 ** 53 else float(value)


def _quantile_bins(name: str, kind: str, values: np.ndarray, lower: float, upper: float, bins: int,
                   budget: PrivacyBudget, what: str) -> dict:
    """Bins over [lower, upper) cut at the j/bins quantiles (j = 1..bins−1), each cut one permute-and-flip draw
    (``budget`` shared equally) among QUANTILE_CANDIDATES public points inside the bounds (whole numbers for
    integer columns).  Values are clamped into the bounds first; cut j's score is :func:`rank_scores` at
    q = j/bins (sensitivity 1).  Cuts that coincide are merged, so there may be fewer bins."""
    if kind == "float":  # readable bounds, as for equal widths
        lower = 0.0 if -LOG_BINS["float"][0] <= lower < 0 else lower
        lower, upper = _rounded_outward(lower, upper)
    candidates = np.linspace(lower, upper, QUANTILE_CANDIDATES + 2)[1:-1]
    if kind == "integer":
        candidates = np.unique(np.round(candidates))
        candidates = candidates[(candidates > lower) & (candidates < upper)]
    else:
        candidates = np.unique(np.array([_round_to(c, (upper - lower) / 1000) for c in candidates]))
    draws = budget.selection(bins - 1, budget.epsilon, 1, f"{what} over {candidates.size} points",
                             composition="sequential over the cuts")
    cuts = set()
    if candidates.size:
        below = _below(np.clip(values, lower, upper), candidates)
        for j in range(1, bins):
            cuts.add(float(candidates[draws.choose(rank_scores(below, values.size, Fraction(j, bins)))]))
    edges = [lower, *sorted(cuts), upper]
    if kind == "integer":
        edges = [int(e) for e in edges]
    return {"type": "numeric", "edges": edges, "nulls": "category"}


def _round_to(value: float, step: float) -> float:
    """``value`` rounded to a power of ten at most ``step`` (readable cut points)."""
    unit = 10.0 ** math.floor(math.log10(step)) if step > 0 else 1.0
    return round(round(value / unit) * unit, 12)


def _bins(kind: str, lower: float, upper: float, bins: int) -> dict:
    if kind == "date":
        # Bounds past the calendar's range (years 1 to 9999: far-off sentinels, timestamps out of range) are
        # cut to it; the values beyond are clamped into the first or last bin like any value out of range.
        low = min(max(int(lower), _FIRST_DAY), _LAST_DAY - 1)
        first = _EPOCH + _dt.timedelta(days=low)
        last = _EPOCH + _dt.timedelta(days=min(max(int(upper), low + 1), _LAST_DAY))  # exclusive
        span = (last - first).days
        unit = "day" if span <= 92 else "month" if span <= 6 * 366 else "year"
        if unit == "month":
            first = first.replace(day=1)
            if last.day != 1:
                last = _next_start(last, 1)
        elif unit == "year":
            first = _dt.date(first.year, 1, 1)
            if (last.month, last.day) != (1, 1):
                last = _next_start(last, 12)
        return {"type": "date", "lower": first.isoformat(), "upper": last.isoformat(), "unit": unit,
                "nulls": "category"}
    if kind == "integer":
        if upper - lower <= max(bins, ONE_PER_VALUE):
            return {"type": "numeric", "lower": int(lower), "upper": int(upper), "width": 1, "nulls": "category"}
        width = int(_round_width((upper - lower) / bins))  # 1, 2 or 5 times a power of ten
        start, end = math.floor(lower / width), math.ceil(upper / width)
        return {"type": "numeric", "lower": start * width, "upper": end * width, "width": width, "nulls": "category"}
    if -LOG_BINS["float"][0] <= lower < 0:
        lower = 0.0  # the centre bin (−s, s) found: start at 0 rather than at −s (tiny negatives are clamped)
    width = _round_width((upper - lower) / bins)
    start, end = math.floor(lower / width), math.ceil(upper / width)
    # each edge the float nearest its decimal k·width, so that labels print as decimals
    return {"type": "numeric", "lower": float(Decimal(repr(width)) * start),
            "upper": float(Decimal(repr(width)) * max(end, start + 1)), "width": width, "nulls": "category"}


def _round_width(raw: float) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least ``raw`` (only 1, 2 and 5 from 1 up,
    so that bins of whole numbers have whole widths), as the float nearest that decimal: readable widths."""
    exponent = math.floor(math.log10(raw))
    mantissas = ("1", "2", "5", "10") if exponent >= 0 else ("1", "2", "2.5", "5", "10")
    for mantissa in mantissas:
        width = float(Decimal(mantissa).scaleb(exponent))
        if width >= raw:
            return width
    return float(Decimal(1).scaleb(exponent + 1))


def _next_start(day: _dt.date, months: int) -> _dt.date:
    """The first day of the month (``months`` = 1) or year (12) after ``day``'s, or the calendar's last day."""
    index = day.year * 12 + day.month - 1
    index = index + 1 if months == 1 else (day.year + 1) * 12
    return _dt.date(index // 12, index % 12 + 1, 1) if index // 12 <= _dt.MAXYEAR else _dt.date.max


def _rounded_outward(lower: float, upper: float) -> tuple[float, float]:
    """The bounds widened to multiples of a power of ten about 1/100 of their span (readable bin edges), each the
    float nearest its decimal value k·10^e, so it prints as that decimal (k·step in floats may not: 7 × 0.1 is
    0.7000000000000001)."""
    exponent = math.floor(math.log10(upper - lower) - 2)
    step = 10.0 ** exponent
    return float(f"{math.floor(lower / step)}e{exponent}"), float(f"{math.ceil(upper / step)}e{exponent}")


# --------------------------------------------------------------------------------------------------------------
# Categorical columns


def categorical_domain(name: str, codes: np.ndarray, labels: list[str], max_categories: int,
                       budget: PrivacyBudget):
    """Partition selection over ``labels`` (the candidates: exactly the labels of the counted rows), spending all
    of ``budget`` (ε and δ); the threshold is set for the budget's protected unit of m = ``budget.factor`` rows."""
    if budget.delta <= 0:
        raise ValueError(f"column {quoted(name)}: partition selection needs delta > 0")
    counts = np.bincount(codes[codes >= 0], minlength=len(labels))
    threshold = budget.partition_threshold()  # a unit of m rows may hold m labels alone: δ′ each, and m more
    # One noisy count per label present in the data: how many there are is itself private (not published).
    noisy, _ = budget.laplace(counts, 1, budget.epsilon,
                              f"{name}: partition selection (count per label, kept above {threshold})",
                              composition="parallel over disjoint labels", delta=budget.delta, publish_count=False)
    kept = np.flatnonzero(noisy > threshold)
    if kept.size > max_categories:  # the largest noisy counts; ties by label, never by data order
        kept = np.array(sorted(kept, key=lambda i: (-noisy[i], labels[i]))[:max_categories])
    values = sorted(normalise_label(labels[i]) for i in kept)
    # A category of ``sure`` rows or more is missed only if its noise is at most threshold − sure.
    sure = math.ceil(Fraction(3, 2) * threshold)
    missed = discrete_laplace_tail(budget.scale(1, budget.epsilon), sure - threshold - 1)
    report = {"column": name, "kind": "categorical", "method": "partition selection (Laplace threshold)",
              "epsilon": format_fraction(budget.epsilon), "delta": format_fraction(budget.delta),
              "threshold": threshold, "categories": len(values),
              "keeps": {"threshold_rows": threshold, "kept_from_rows": sure, "missed_at_most": float(f"{missed:.2g}"),
                        "note": f"a category is kept when its noisy count is above {threshold} rows: one of {sure} "
                                f"rows or more is missed with probability at most {missed:.2g}, one of fewer than "
                                f"{threshold} rows is kept rarely, and one held by a single protected unit alone "
                                "with probability at most delta"}}
    if not values:
        return None, {**report, "failed": "no category is held by enough records to be released with this "
                      "epsilon and delta; declare its values in a schema"}
    declaration = {"type": "categorical", "values": values, "nulls": "category"}
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    return column, {**report, "domain": column.describe(),
                    "capped": bool(np.count_nonzero(noisy > threshold) > max_categories)}
