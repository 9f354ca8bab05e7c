"""Private domain discovery for columns the schema does not declare (algorithms.md §9).

Paid for from the budget and reported as its own steps.  For each discovered column, with ε_c its share of the
discovery budget and m the rows one protected unit may add (1, or K·c with privacy units and groups):

* **numeric and date columns** (bounds, then bins):
  1. a log-scale histogram (bins [0, s), [s, 2s), [2s, 4s), ... mirrored for negatives; s = 1 for integers and
     days, 2⁻¹⁰ for floats) with discrete Laplace noise of scale 2m/ε_c; a bin counts as occupied if its noisy
     count exceeds the threshold that an empty bin passes with probability at most β/2 over all bins;
  2. inside those bounds, a histogram of 64 equal cells with the same noise; the bounds move inward past the
     cells at each end whose noisy running total is still within 2 standard deviations of noise alone;
  3. equal-width bins over the bounds (integer-aligned for integer columns; days, months or years for dates by
     the span), values outside clamped into the edge bins and missing values in their own cell.
  If no bin of the first histogram is occupied the column cannot be released (too few records for this ε).
* **categorical columns** (partition selection, (ε, δ)-DP): every label's count gets discrete Laplace noise of
  scale m/ε_c; a label is kept if its noisy count exceeds m + t, with t the smallest integer for which
  P(noise > t) ≤ δ′ = 1 − (1 − δ_c)^{1/m}.  A label held by the protected unit alone (count ≤ m, at most m such
  labels) then appears with probability at most δ_c; labels are sorted, and at most ``max_categories`` (the
  largest noisy counts) are kept.  Rare categories are suppressed by design: the released marginal of such a
  column is biased low by the held-out labels, which are not published as "other".

* **column types**: from the input's stored schema (Parquet, DataFrame).  A CSV file stores none, so each
  undeclared CSV column is read as text and its type is chosen by the exponential mechanism (permute-and-flip,
  a quarter of the column's ε, score sensitivity 1) among integer, float, date and text, each scored by how many
  values look like it; the domain steps get the other three quarters.

Every decision reads only noisy counts or exponential-mechanism draws; all the true counts stay inside this
module.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .accountant import format_fraction
from .algorithms.base import Measurement
from .contribution import UnitBound, UnitIds, bounded_rows
from .counting import as_text, days_since_epoch
from .errors import DataError, UsageError
from .noise import BitSource, discrete_laplace, discrete_laplace_variance, permute_and_flip
from .schema import Column, normalise_label, parse_schema

__all__ = ["KINDS", "AUTO", "TextAs", "typed_text", "BINNINGS", "DiscoveryPlan", "kind_of", "discover", "DEFAULT_SHARE", "DEFAULT_BINS", "DEFAULT_MAX_CATEGORIES"]

DEFAULT_SHARE = Fraction(1, 10)
DEFAULT_BINS = 16
DEFAULT_MAX_CATEGORIES = 100
#: Probability that some empty bin of a bounds histogram is taken as occupied (per histogram, over all bins).
BETA = Fraction(1, 1000)
LOG_BINS = {"integer": (1.0, 64), "date": (1.0, 32), "float": (2.0 ** -10, 74)}  # (s, B): 2B + 1 bins
FINE_CELLS = 64
#: How discovered numeric bounds are cut into bins: equal widths, or cut points at DP quantiles.
BINNINGS = ("equal-width", "quantiles")
#: Candidate cut points for DP quantiles: this many equally spaced points inside the bounds.
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
    """The discovery kind of a stored type, or None if it cannot be released (nested, binary)."""
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_integer(arrow_type):
        return "integer"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "float"
    if pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type):
        return "date"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_boolean(arrow_type) \
            or pa.types.is_null(arrow_type):
        return "categorical"
    return None


@dataclass(frozen=True)
class _Reader:
    """How the reader should load a discovered column: numbers as float64, dates, anything else as labels."""

    name: str
    kind: str


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
            raise UsageError(f"binning must be one of {', '.join(BINNINGS)}, not '{self.binning}'")
        categorical = [n for n, k in self.kinds.items() if k in ("categorical", AUTO)]
        if categorical and self.delta <= 0:
            text = "finding its categories privately" if self.kinds[categorical[0]] == "categorical" else \
                "it is in a CSV file, so it may turn out to be text, and finding its categories privately"
            raise UsageError(f"column '{categorical[0]}' has no declared values: {text} needs delta > 0 (e.g. "
                             "--delta 1e-6), or declare it in the schema")

    @property
    def column_epsilon(self) -> Fraction:
        return self.epsilon / len(self.kinds)

    @property
    def column_delta(self) -> Fraction:
        """δ for each column that may need partition selection (text, or a CSV column of unknown type)."""
        categorical = sum(k in ("categorical", AUTO) for k in self.kinds.values())
        return self.delta / categorical if categorical else Fraction(0)

    def placeholders(self) -> dict[str, Column]:
        """Columns of the largest size discovery can give each column (numeric and date: ``bins`` + the null
        cell, dates by year up to 200; categorical: ``max_categories`` + the null cell), to check table shapes
        before any data is read."""
        out = {}
        for name, kind in self.kinds.items():
            if kind in ("categorical", AUTO):
                size = max(self.max_categories, 200 if kind == AUTO else 0)
                decl = {"type": "categorical", "values": [f"#{i}" for i in range(size)]}
            else:
                decl = {"type": "numeric", "lower": 0, "upper": 1, "bins": 200 if kind == "date" else self.bins}
            out[name] = parse_schema({"columns": {name: {**decl, "nulls": "category"}}}, "placeholder")[name]
        return out

    def readers(self) -> dict[str, _Reader]:
        kinds = {"integer": "numeric", "float": "numeric", AUTO: "categorical"}  # AUTO: read as text
        return {n: _Reader(n, kinds.get(k, k)) for n, k in self.kinds.items()}


def discover(plan: DiscoveryPlan, batches, bits: BitSource, rows_per_group: int = 1,
             unit: UnitBound | None = None) -> tuple[dict[str, Column], list[Measurement], list[dict]]:
    """Read the discovered columns once and choose each one's domain from noisy counts.

    ``batches`` hold the plan's columns (and the unit column with ``unit``).  Returns the columns (schema
    declarations built from the noisy results; a column whose noisy counts show no range or no category is
    missing, and its report entry says why), the measurements (their ε add up to ``plan.epsilon`` divided by
    ``rows_per_group``, per row) and one report entry per column.
    """
    values: dict[str, list] = {n: [] for n in plan.kinds}
    labels: dict[str, UnitIds] = {n: UnitIds() for n, k in plan.kinds.items() if k in ("categorical", AUTO)}
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
    keep = bounded_rows(np.concatenate(units), unit.max_rows, bits) if unit is not None else np.ones(n, bool)
    m = rows_per_group
    eps_row = plan.column_epsilon / m
    columns, measurements, reports = {}, [], []
    for name, kind in plan.kinds.items():
        eps, typed = eps_row, None
        if kind == AUTO:
            text = pa.chunked_array(values[name], type=pa.string()).combine_chunks().filter(pa.array(keep))
            kind, typed = _choose_kind(name, text, eps_row * TYPE_SHARE, bits)
            eps = eps_row - typed[0].epsilon
            if kind == "categorical":
                data = labels[name].encode(_as_labels(text))
            else:
                data = _as_numbers(typed_text(text, kind), kind, name)
        else:
            data = np.concatenate(values[name]) if values[name] else np.zeros(0)
            data = data[keep]
        if kind == "categorical":
            # Candidates only from the rows kept by contribution bounding: a label seen only in dropped rows
            # would be a candidate that one unit added without being counted, breaking the bound δ rests on.
            data, candidates = present_labels(data, labels[name].labels())
            column, steps, report = _categories(name, data, candidates, plan, eps, m, bits)
        else:
            column, steps, report = _numeric(name, kind, data, plan, eps, m, bits)
        if typed is not None:
            steps = [typed[0]] + steps
            report = {**report, "type": typed[1], "epsilon": format_fraction(eps_row * m)}
        if column is not None:
            columns[name] = column
        measurements += steps
        reports.append(report)
    return columns, measurements, reports


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
    """Plain text, exactly as the counting pass reads labels (:func:`~dphist.counting.as_text`)."""
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


def _choose_kind(name: str, text: pa.Array, epsilon: Fraction, bits: BitSource):
    """Integer, float, date or text, by permute-and-flip on how many values look like each (a value is in
    exactly one class, so each score has sensitivity 1).  Returns the kind and (its Measurement, report)."""
    present = pc.fill_null(pc.not_equal(pc.utf8_trim_whitespace(text), ""), False)
    counts = {}
    for kind, pattern in _LOOKS_LIKE.items():
        counts[kind] = int(pc.sum(pc.and_(present, pc.fill_null(pc.match_substring_regex(text, pattern), False)))
                           .as_py() or 0)
    counts["categorical"] = int(pc.sum(present).as_py() or 0) - sum(counts.values())
    kinds = list(counts)
    chosen = kinds[permute_and_flip([counts[k] for k in kinds], epsilon, 1, bits)]
    record = Measurement(what=f"{name}: its type (integer, float, date or text), by permute-and-flip",
                         mechanism="exponential mechanism (permute-and-flip)", sensitivity=1, scale=1 / epsilon,
                         epsilon=epsilon, queries=len(kinds), noise_sd=None, composition="one draw")
    return chosen, (record, {"chosen": chosen, "epsilon": format_fraction(epsilon),
                             "from": "the values of a CSV column, privately"})


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
        raise DataError(f"column '{name}': a value is not a {'date' if kind == 'date' else 'number'}") from None
    out = values.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    out[~np.isfinite(out)] = np.nan
    return out


# --------------------------------------------------------------------------------------------------------------
# Numeric and date columns


def _threshold(scale: Fraction, tail: float) -> int:
    """The smallest integer t with P(Z > t) ≤ tail for Z ~ discrete Laplace(scale): a^(t+1)/(1+a) ≤ tail."""
    a = math.exp(-1 / float(scale))
    t = math.ceil(math.log(tail * (1 + a)) / math.log(a)) - 1
    while a ** (t + 1) / (1 + a) > tail:  # guard the float log against an off-by-one
        t += 1
    return max(t, 0)


def _log_bin(v: np.ndarray, s: float, big: int) -> np.ndarray:
    """Index in [0, 2B] of each finite value's log-scale bin: B for |v| < s, B ± k for s·2^(k−1) ≤ |v| < s·2^k."""
    _, e = np.frexp(np.abs(v) / s)  # |v|/s = f·2^e with f in [0.5, 1), so k = e for |v| ≥ s
    k = np.where(np.abs(v) < s, 0, np.minimum(e, big))
    return big + np.sign(v).astype(np.int64) * k


def _log_edges(j: int, s: float, big: int, integer: bool) -> tuple[float, float]:
    k = j - big
    if k == 0:
        return (0.0, 1.0) if integer else (-s, s)
    lo, hi = s * 2.0 ** (abs(k) - 1), s * 2.0 ** abs(k)
    return (lo, hi) if k > 0 else (-hi + (1 if integer else 0), -lo + (1 if integer else 0))


def _noisy(counts: np.ndarray, scale: Fraction, bits: BitSource, what: str, epsilon: Fraction, name: str):
    """Noisy counts, the single-bin threshold (an empty bin passes it with probability ≤ β/2 over all bins) and
    the measurement."""
    noisy = counts + discrete_laplace(scale, counts.size, bits)
    threshold = _threshold(scale, float(BETA) / 2 / counts.size)
    record = Measurement(what=f"{name}: {what}", mechanism="discrete Laplace", sensitivity=1, scale=scale,
                         epsilon=epsilon, queries=int(counts.size), noise_sd=discrete_laplace_variance(scale) ** 0.5,
                         composition="parallel over disjoint bins")
    return noisy, threshold, record


def _occupied(counts: np.ndarray, scale: Fraction, bits: BitSource, what: str, epsilon: Fraction, name: str):
    noisy, threshold, record = _noisy(counts, scale, bits, what, epsilon, name)
    return np.flatnonzero(noisy > threshold), threshold, record


def _trimmed(noisy: np.ndarray, edges: np.ndarray, sd: float, lower: float, upper: float) -> tuple[float, float]:
    """Bounds moved inward past the cells at each end whose noisy running total still looks like noise alone
    (at most 4 standard deviations of a sum of that many noisy cells: a pure-noise end passes with probability
    about 2e-3, where 2 sd let a far noise cell stretch the range every few runs).  Post-processing: erring
    outward keeps real values in range; trimmed values are clamped into the edge bins, not lost."""
    def first_real(values: np.ndarray) -> int | None:
        running = np.cumsum(values)
        above = np.flatnonzero(running > 4 * sd * np.sqrt(np.arange(1, values.size + 1)))
        return int(above[0]) if above.size else None
    low, high = first_real(noisy), first_real(noisy[::-1])
    if low is None or high is None or low > noisy.size - 1 - high:
        return lower, upper
    return float(edges[low]), float(edges[noisy.size - high])


def _numeric(name: str, kind: str, data: np.ndarray, plan: DiscoveryPlan, eps_row: Fraction, m: int,
             bits: BitSource):
    s, big = LOG_BINS[kind]
    integer = kind in ("integer", "date")
    finite = data[np.isfinite(data)]
    quantiles = plan.binning == "quantiles" and kind != "date" and plan.bins > 1
    # With quantile bins, half of the column's budget goes to the cut points, a quarter to each bounds step.
    half = eps_row / 4 if quantiles else eps_row / 2
    scale = 1 / half  # Δ = 1 per row; m rows per unit is in eps_row already
    coarse = np.bincount(_log_bin(finite, s, big), minlength=2 * big + 1)
    hit, t1, step1 = _occupied(coarse, scale, bits, "log-scale histogram for the bounds", half, name)
    report = {"column": name, "kind": kind, "method": "DP bounds (log-scale, then 64 equal cells), equal-width bins",
              "epsilon": format_fraction(eps_row * m), "delta": "0", "thresholds": [t1]}
    if hit.size == 0:
        # The second half of the budget is still spent, so that the steps do not depend on this outcome.
        _, _, step2 = _occupied(np.zeros(FINE_CELLS, np.int64), scale, bits, "equal-cell histogram (unused)",
                                half, name)
        return None, [step1, step2], {**report, "failed": f"too few records to find its range privately with "
                                      f"epsilon {format_fraction(eps_row * m)}; declare its bounds in a schema"}
    lower, upper = _log_edges(int(hit[0]), s, big, integer)[0], _log_edges(int(hit[-1]), s, big, integer)[1]
    # Refine inside the coarse bounds: FINE_CELLS equal cells, the same rule.
    edges = np.linspace(lower, upper, FINE_CELLS + 1)
    if integer:
        edges = np.unique(np.floor(edges))
    inside = finite[(finite >= lower) & (finite < upper)]
    fine = np.bincount(np.clip(np.searchsorted(edges, inside, side="right") - 1, 0, edges.size - 2),
                       minlength=edges.size - 1)
    noisy, t2, step2 = _noisy(fine, scale, bits, "equal-cell histogram inside them", half, name)
    lower, upper = _trimmed(noisy, edges, discrete_laplace_variance(scale) ** 0.5, lower, upper)
    steps = [step1, step2]
    if quantiles:
        declaration, step3 = _quantile_bins(name, kind, finite, lower, upper, plan.bins, eps_row - 2 * half, bits)
        steps.append(step3)
        report["method"] = "DP bounds (log-scale, then 64 equal cells), bins cut at DP quantiles"
    else:
        declaration = _bins(kind, lower, upper, plan.bins)
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    return column, steps, {**report, "thresholds": [t1], "domain": column.describe()}


def _quantile_bins(name: str, kind: str, values: np.ndarray, lower: float, upper: float, bins: int,
                   epsilon: Fraction, bits: BitSource) -> tuple[dict, Measurement]:
    """Bins over [lower, upper) cut at the j/bins quantiles (j = 1..bins−1), each cut drawn by permute-and-flip
    at epsilon/(bins−1) among QUANTILE_CANDIDATES public points inside the bounds (whole numbers for integer
    columns).  Values are clamped into the bounds first.  Cut j's score at point c is
    −|(1 − q)·#{x < c} − q·#{x ≥ c}|, q = j/bins: zero at the true quantile, and one row more or less changes
    it by at most max(q, 1 − q) ≤ 1 (sensitivity 1).  Cuts that coincide are merged, so there may be fewer bins."""
    if kind == "float":  # readable bounds, as for equal widths
        lower = 0.0 if -LOG_BINS["float"][0] <= lower < 0 else lower
        lower, upper = _rounded_outward(lower, upper)
    candidates = np.linspace(lower, upper, QUANTILE_CANDIDATES + 2)[1:-1]
    if kind == "integer":
        candidates = np.unique(np.round(candidates))
        candidates = candidates[(candidates > lower) & (candidates < upper)]
    else:
        candidates = np.unique(np.array([_round_to(c, (upper - lower) / 1000) for c in candidates]))
    clamped = np.sort(np.clip(values, lower, upper))
    below = np.searchsorted(clamped, candidates, side="left")
    above = clamped.size - below
    each = epsilon / (bins - 1)
    cuts = set()
    for j in range(1, bins):
        q = Fraction(j, bins)
        if candidates.size == 0:
            break
        scores = [-abs((1 - q) * int(b) - q * int(a)) for b, a in zip(below, above)]
        cuts.add(float(candidates[permute_and_flip(scores, each, 1, bits)]))
    edges = [lower, *sorted(cuts), upper]
    if kind == "integer":
        edges = [int(e) for e in edges]
    record = Measurement(what=f"{name}: {bins - 1} bin cuts at quantiles, by permute-and-flip over "
                         f"{candidates.size} points", mechanism="exponential mechanism (permute-and-flip)",
                         sensitivity=1, scale=1 / each, epsilon=epsilon, queries=bins - 1, noise_sd=None,
                         composition="sequential over the cuts")
    return {"type": "numeric", "edges": edges, "nulls": "category"}, record


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
        width = max(1, math.ceil((upper - lower) / bins))
        return {"type": "numeric", "lower": int(lower), "upper": int(lower) + width * math.ceil((upper - lower) / width),
                "width": width, "nulls": "category"}
    if -LOG_BINS["float"][0] <= lower < 0:
        lower = 0.0  # the centre bin (−s, s) found: start at 0 rather than at −s (tiny negatives are clamped)
    lower, upper = _rounded_outward(lower, upper)
    return {"type": "numeric", "lower": lower, "upper": upper, "bins": bins, "nulls": "category"}


def _next_start(day: _dt.date, months: int) -> _dt.date:
    """The first day of the month (``months`` = 1) or year (12) after ``day``'s, or the calendar's last day."""
    index = day.year * 12 + day.month - 1
    index = index + 1 if months == 1 else (day.year + 1) * 12
    return _dt.date(index // 12, index % 12 + 1, 1) if index // 12 <= _dt.MAXYEAR else _dt.date.max


def _rounded_outward(lower: float, upper: float) -> tuple[float, float]:
    """The bounds widened to multiples of a power of ten about 1/100 of their span (readable bin edges)."""
    step = 10.0 ** math.floor(math.log10(upper - lower) - 2)
    return math.floor(lower / step) * step, math.ceil(upper / step) * step


# --------------------------------------------------------------------------------------------------------------
# Categorical columns


def _categories(name: str, codes: np.ndarray, labels: list[str], plan: DiscoveryPlan, eps_row: Fraction, m: int,
                bits: BitSource):
    counts = np.bincount(codes[codes >= 0], minlength=len(labels))
    scale = 1 / eps_row
    delta_each = 1 - (1 - float(plan.column_delta)) ** (1 / m)
    threshold = m + _threshold(scale, delta_each)
    noisy = counts + discrete_laplace(scale, counts.size, bits)
    record = Measurement(what=f"{name}: partition selection (count per label, kept above {threshold})",
                         mechanism="discrete Laplace", sensitivity=1, scale=scale, epsilon=eps_row,
                         # one noisy count per label present in the data: how many is itself private
                         queries=None, noise_sd=discrete_laplace_variance(scale) ** 0.5,
                         composition="parallel over disjoint labels", delta=plan.column_delta)
    kept = np.flatnonzero(noisy > threshold)
    if kept.size > plan.max_categories:  # the largest noisy counts; ties by label, never by data order
        kept = np.array(sorted(kept, key=lambda i: (-noisy[i], labels[i]))[: plan.max_categories])
    values = sorted(normalise_label(labels[i]) for i in kept)
    report = {"column": name, "kind": "categorical", "method": "partition selection (Laplace threshold)",
              "epsilon": format_fraction(eps_row * m), "delta": format_fraction(plan.column_delta),
              "threshold": threshold, "categories": len(values)}
    if not values:
        return None, [record], {**report, "failed": "no category is held by enough records to be released with "
                                "this epsilon and delta; declare its values in a schema"}
    declaration = {"type": "categorical", "values": values, "nulls": "category"}
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    return column, [record], {**report, "domain": column.describe(),
                              "capped": bool(np.count_nonzero(noisy > threshold) > plan.max_categories)}


