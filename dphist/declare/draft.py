"""Drafting a schema from the data, for the steward to edit.

A draft is a convenience, not a privacy step: the bounds and category lists it writes are copied from the data
and are NOT private.  The file says so at the top and beside every copied value; the steward must replace them
with public choices (round bounds, official code lists) before using the schema for a release.
"""

from __future__ import annotations

import datetime as _dt
import math

import pyarrow as pa
import pyarrow.compute as pc
import yaml

from ..read.counting import days_since_epoch
from ..read.sources import kinds_of, open_source, type_name
from ..text import as_text, quoted

__all__ = ["draft_schema", "MAX_LABEL"]

#: Text values longer than this are no category labels (a note, a document): the column is not listed.
MAX_LABEL = 200
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
        lower, upper = math.floor(st.lo), math.floor(st.hi) + 1
        return (f"  {key}: {{type: numeric, lower: {lower}, upper: {upper}, bins: {bins}{nulls}}}"
                f"  # from data (min/max): REVIEW and round\n")
    if st.too_many:
        return (f"  # {quoted(name)}: more than {max_categories} distinct values, or values longer than {MAX_LABEL} "
                f"characters; declare a public list of categories or coarsen the column\n")
    values = sorted(st.values)
    flow = yaml.safe_dump(values, default_flow_style=True, width=10**9, allow_unicode=True).strip()
    return f"  {key}: {{type: categorical, values: {flow}{nulls}}}  # from data: REVIEW (rare values identify people)\n"


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
