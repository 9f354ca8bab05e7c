"""Drafting a schema from the data, for the steward to edit.

A draft is a convenience, not a privacy step: the bounds and category lists it writes are copied from the data
and are NOT private.  The file says so at the top and beside every copied value; the steward must replace them
with public choices (round bounds, official code lists) before using the schema for a release.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
from decimal import ROUND_FLOOR, Decimal, localcontext

import pyarrow as pa
import pyarrow.compute as pc
import yaml

from ..read.counting import days_since_epoch
from .schema import round_bins
from ..read.sources import kinds_of, open_source, type_name
from ..text import as_text, quoted

__all__ = ["draft_schema", "MAX_LABEL", "UNIT_BINS_UP_TO"]

#: Text values longer than this are no category labels (a note, a document): the column is not listed.
MAX_LABEL = 200
#: A column of whole numbers whose values lie within this many consecutive integers gets one bin per integer
#: (flags 0/1, codes 1-5, counts 0-6, days of a month, years 1990-2010); a wider one gets bins of a round whole
#: width.  A fixed number, not read from any data set.
UNIT_BINS_UP_TO = 32
#: Whole numbers up to this size are exact in a float, as the schema reads bounds: the largest a whole-numbered
#: draft writes (beyond it, the bounds are drafted like those of fractional numbers).
_EXACT = 2 ** 53
_EPOCH = _dt.date(1970, 1, 1)

_HEADER = """\
# DRAFT schema written by `dphist schema` from {name}.
#
# WARNING: the bounds, category lists and null policies below were COPIED FROM THE DATA. They are NOT private: publishing a
# release made with them can reveal, for example, the exact largest income or a category only one person has.
# Before any release, replace every value marked 'from data' with a public choice made without looking at the
# data: round bounds from general knowledge, category lists from an official code list, coarser bins.
#
# Column types: numeric {{lower, upper, bins | width | edges}}, categorical {{values}},
# date {{lower, upper, unit: day|week|month|quarter|year}}. Optional: out_of_domain: clamp|drop, nulls: drop|category.
columns:
"""


class _Stats:
    def __init__(self, typ: pa.DataType):
        self.typ = typ
        self.lo = self.hi = None
        self.values: set = set()
        self.too_many = False
        self.nulls = 0
        #: Every finite number seen so far is a whole number (of an integer type, or a float or decimal such as
        #: 3.0): one flag per batch, so memory does not grow with the data.
        self.whole = True

    def update(self, arr: pa.Array, max_categories: int) -> None:
        """Add a batch: the range of numbers and dates, the labels of anything else countable (text as it is,
        booleans, times and durations as :func:`~dphist.text.as_text` writes them); nothing of a column no table
        can count or that holds only nulls."""
        self.nulls += arr.null_count
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        kinds = kinds_of(arr.type)
        if not kinds or pa.types.is_null(arr.type):
            return
        if "numeric" not in kinds and not _is_date(arr.type):
            if not self.too_many:
                self.values.update(v for v in pc.unique(as_text(arr)).to_pylist() if v is not None)
                self.too_many = len(self.values) > max_categories or any(len(v) > MAX_LABEL for v in self.values)
            return
        if _is_date(arr.type):
            arr = days_since_epoch(arr)  # whole days, exact for any range (as_py() fails past year 9999)
            arr = arr.cast(pa.int32()) if pa.types.is_date32(arr.type) else arr
        elif pa.types.is_floating(arr.type):
            arr = arr.cast(pa.float64())  # half floats have no min_max of their own
            # NaN and ±inf bound nothing (they are clamped into the end bins or dropped when counted); left in,
            # an inf maximum would hide the largest finite value.
            arr = pc.filter(arr, pc.is_finite(arr))
        if self.whole and (pa.types.is_floating(arr.type) or pa.types.is_decimal(arr.type)):
            self.whole = pc.all(pc.equal(pc.floor(arr), arr)).as_py() is not False  # (None: no values)
        mm = pc.min_max(arr).as_py()
        for v in (mm["min"], mm["max"]):
            if v is None or (isinstance(v, float) and not math.isfinite(v)):
                continue
            self.lo = v if self.lo is None else min(self.lo, v)
            self.hi = v if self.hi is None else max(self.hi, v)


def draft_schema(source, bins: int = 10, max_categories: int = 100) -> str:
    """Read ``source`` (every column) and return a draft schema as YAML text with warnings as comments."""
    src = open_source(source)
    src.column_names()  # duplicate-name check
    stats: dict[str, _Stats] = {}
    for batch in src.inferred_batches():
        for name, column in zip(batch.schema.names, batch.columns):
            if name not in stats:
                stats[name] = _Stats(column.type)
            stats[name].update(column, max_categories)
    lines = [_HEADER.format(name=src.name)]
    for name, st in stats.items():
        lines.append(_draft_line(name, st, bins, max_categories))
    return "".join(lines)


def _draft_line(name: str, st: _Stats, bins: int, max_categories: int) -> str:
    key = _yaml_key(name)
    nulls = ", nulls: category" if st.nulls else ""
    typ = st.typ.value_type if pa.types.is_dictionary(st.typ) else st.typ
    if not kinds_of(typ):
        return (f"  # {quoted(name)}: holds {type_name(typ)}, which no table can count; leave it out of every "
                "table\n")
    if _is_date(typ):
        if st.lo is None:
            return f"  {key}: {{type: date, lower: 2000-01-01, upper: 2030-01-01, unit: month}}  # no dates seen\n"
        lo, hi = _as_date(st.lo), _as_date(st.hi)
        lower = _dt.date(lo.year, lo.month, 1)
        upper = _dt.date(hi.year + (hi.month == 12), hi.month % 12 + 1, 1) if hi < _dt.date(9999, 12, 1) \
            else _dt.date.max  # the calendar's last day: later dates are clamped into the last bin
        return (f"  {key}: {{type: date, lower: {lower}, upper: {upper}, unit: month{nulls}}}"
                f"  # from data: REVIEW\n")
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        if st.lo is None:
            return f"  {key}: {{type: numeric, lower: 0, upper: 100, bins: {bins}}}  # no values seen: set bounds\n"
        return (f"  {key}: {{type: numeric, {_numeric_bins(st.lo, st.hi, st.whole, bins)}{nulls}}}"
                f"  # from data (min/max): REVIEW and round\n")
    if st.too_many:
        return (f"  # {quoted(name)}: more than {max_categories} distinct values, or values longer than {MAX_LABEL} "
                f"characters; declare a public list of categories or coarsen the column\n")
    values = sorted(st.values)
    flow = yaml.safe_dump(values, default_flow_style=True, width=10**9, allow_unicode=True).strip()
    return f"  {key}: {{type: categorical, values: {flow}{nulls}}}  # from data: REVIEW (rare values identify people)\n"


def _numeric_bins(lo, hi, whole: bool, bins: int) -> str:
    """The YAML fields (``lower, upper, width`` or ``lower, upper, bins``) of bins over [lo, hi]: ``lower`` <= lo
    and ``upper`` > hi, so no value is outside [lower, upper).

    Whole numbers get whole bins: one per integer when the values lie within :data:`UNIT_BINS_UP_TO` integers,
    else a round width (1, 2, 2.5, 5 times a power of ten, whole) with ``lower`` a multiple of it, the narrowest
    that needs at most ``bins`` bins.  Other numbers get ``bins`` equal bins (one for a constant column, fewer where
    the floats are too sparse for that many) between bounds rounded outward to a power of ten about 1/100 of the
    range, written as the shortest decimal that reads back as the same float."""
    if whole:
        first, last = int(lo), int(hi)
        if last - first < UNIT_BINS_UP_TO:
            lower, upper, width = first, last + 1, 1
        else:  # a round whole width, or one bin when none fits (one bin asked for, and 0 inside the range)
            rounded = round_bins(first, last + 1, bins, whole=True)
            width = int(rounded[0]) if rounded else last + 1 - first
            lower, upper = (rounded[1] * width, rounded[2] * width) if rounded else (first, last + 1)
        if max(abs(lower), abs(upper)) <= _EXACT:
            return f"lower: {lower}, upper: {upper}, width: {width}"
    lower, upper = _rounded_bounds(lo, hi)
    # Edges nearer each other than the floats there (a narrow range far from 0) would coincide: fewer bins then.
    room = (Decimal(upper) - Decimal(lower)) / Decimal(2 * math.ulp(max(abs(lower), abs(upper))))
    bins = max(1, min(bins, int(room))) if lo < hi else 1
    return f"lower: {_yaml_float(lower)}, upper: {_yaml_float(upper)}, bins: {bins}"


def _rounded_bounds(lo, hi) -> tuple[float, float]:
    """``lo`` rounded down and ``hi`` rounded up (above it, strictly) to a multiple of a power of ten about 1/100
    of their range (of their size if they are equal), each the float nearest that decimal.  The decimals are those
    the numbers print as (0.3, not the float's exact 0.29999999999999998889...), so a maximum of 0.3 gets an upper
    bound of 0.301 rather than a float equal to it."""
    with localcontext() as context:
        context.prec = 80  # exact for every float and every decimal type's digits
        low, high = (Decimal(v) if isinstance(v, (int, Decimal)) else Decimal(repr(float(v))) for v in (lo, hi))
        exponent = ((high - low) or abs(low) or Decimal(1)).adjusted() - 2
        while True:
            step = Decimal(1).scaleb(exponent)
            lower = float((low / step).to_integral_value(rounding=ROUND_FLOOR) * step)
            upper = float(((high / step).to_integral_value(rounding=ROUND_FLOOR) + 1) * step)
            if math.isinf(upper):  # past the largest float: the largest values are clamped into the last bin
                return lower, sys.float_info.max
            if upper > float(hi):  # else the step is below the float's precision there: a coarser one
                return lower, upper
            exponent += 1


def _yaml_float(x: float) -> str:
    """``x`` as the shortest decimal that reads back as ``x``, in a form YAML 1.1 reads as a number (1.0e-05: a
    mantissa without a dot would be read as text); a whole number below 2^53 as an integer (0, not 0.0)."""
    if x.is_integer() and abs(x) <= _EXACT:
        return str(int(x))
    text = repr(x)
    return text.replace("e", ".0e") if "e" in text and "." not in text else text


def _as_date(days: int) -> _dt.date:
    """The calendar date ``days`` after 1970-01-01, cut to the calendar's range (years 1 to 9999)."""
    first, last = (_dt.date.min - _EPOCH).days, (_dt.date.max - _EPOCH).days
    return _EPOCH + _dt.timedelta(days=min(max(int(days), first), last))


def _is_date(typ: pa.DataType) -> bool:
    typ = typ.value_type if pa.types.is_dictionary(typ) else typ
    return pa.types.is_timestamp(typ) or pa.types.is_date(typ)


def _is_text(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or pa.types.is_large_string(typ)


def _yaml_key(name: str) -> str:
    return yaml.safe_dump(name, default_style=None).strip().removesuffix("...").strip()
