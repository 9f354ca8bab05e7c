"""Public domain declarations: what cells a table has, validated before any data is read.

A schema maps column names to one of three kinds of dimension:

* ``numeric``: half-open bins over ``[lower, upper)`` given by ``bins`` (equal width), ``width`` or ``edges``;
  values outside are clamped into the edge bins (``out_of_domain: clamp``, the default) or dropped.
* ``categorical``: the declared ``values``; anything else is dropped.  Labels are compared as strings after
  Unicode NFC normalisation.
* ``date``: calendar bins of ``width`` (default 1) ``unit`` s from ``lower`` up to ``upper`` (exclusive; at the
  latest 9999-12-31).  Values are dates or timestamps (counted on their calendar day, however far from 1970),
  or ISO 8601 text: ``YYYY-MM-DD``, optionally with a time and a zone (``2024-03-01T23:30:00-05:00`` counts as
  2024-03-01, the date as written; see :func:`dphist.read.counting.days_since_epoch`).

Every kind takes ``nulls: drop`` (default) or ``nulls: category``, which adds one cell for missing values.
A numeric or date column discovered privately (:mod:`dphist.discovery.domains`) leaves a small share of the rows beyond
its bounds by design; its first and last bins (they hold those rows) have an empty outer label (``open_ends``),
so a release says "below 183" where a declared domain says "[64, 183)".
Everything here is public: it must be chosen from general knowledge, never read off the private data.
"""

from __future__ import annotations

import datetime as _dt
import math
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from .yamlfile import load_document
from ..text import quoted, quoted_list

__all__ = [
    "NumericColumn",
    "CategoricalColumn",
    "DateColumn",
    "Schema",
    "load_schema",
    "parse_schema",
    "declaration",
    "MAX_CELLS",
    "COLUMN_FIELDS",
    "MAX_DIMENSIONS",
]

#: Largest number of cells a single table may have: a dense mechanism adds noise to every declared cell.
MAX_CELLS = 100_000_000
#: Largest number of columns in one table in this version.
MAX_DIMENSIONS = 4

_UNITS = ("day", "week", "month", "quarter", "year")
_EPOCH = _dt.date(1970, 1, 1)


def normalise_label(value: Any) -> str:
    """The string form under which a category label is matched: NFC-normalised text; booleans lower-case."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    return unicodedata.normalize("NFC", str(value))


@dataclass(frozen=True)
class _Column:
    name: str
    nulls: str

    @property
    def null_cell(self) -> bool:
        return self.nulls == "category"

    @property
    def label_names(self) -> tuple[str, ...]:
        """The release columns that label this dimension: the column's name, or ``<name>_lower/_upper`` for bins."""
        if self.kind == "categorical":
            return (self.name,)
        return (f"{self.name}_lower", f"{self.name}_upper")


@dataclass(frozen=True)
class NumericColumn(_Column):
    """Bins [edges[i], edges[i+1]) over [lower, upper); ``equal_width`` when the bins are all the same width."""

    edges: tuple[float, ...]
    equal_width: bool
    out_of_domain: str = "clamp"
    #: The end bins' outer labels are empty: they hold the values clamped from beyond the edges (discovered
    #: bounds, which leave out a small share of the rows by design).  Only with clamping and two bins or more.
    open_ends: bool = False
    kind: str = field(default="numeric", init=False)

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    @property
    def n_cells(self) -> int:
        return self.bins + self.null_cell

    def labels(self) -> dict[str, list]:
        lows = [_tidy_number(e) for e in self.edges[:-1]]
        highs = [_tidy_number(e) for e in self.edges[1:]]
        _open_ends(self, lows, highs)
        if self.null_cell:
            lows.append(None)
            highs.append(None)
        return {f"{self.name}_lower": lows, f"{self.name}_upper": highs}

    def describe(self) -> dict:
        out = {"type": "numeric", "lower": _tidy_number(self.edges[0]), "upper": _tidy_number(self.edges[-1]),
               "bins": self.bins, "out_of_domain": self.out_of_domain, "nulls": self.nulls}
        if not self.equal_width:
            out["edges"] = [_tidy_number(e) for e in self.edges]
        return {**out, **_open_ends_described(self)}


@dataclass(frozen=True)
class CategoricalColumn(_Column):
    """One cell per declared value, in the declared order.

    ``hierarchy``, if declared, groups the cells: ``hierarchy[l][i]`` is the group of cell i on level l, from
    the coarsest level down (the root, every cell in group 0, is not stored; cells are the implicit last
    level; the null cell, if any, is its own group on every level).  ``group_names[l]`` names those groups.
    """

    values: tuple[str, ...]
    hierarchy: tuple[tuple[int, ...], ...] = ()
    group_names: tuple[tuple[str, ...], ...] = ()
    kind: str = field(default="categorical", init=False)

    @property
    def n_cells(self) -> int:
        return len(self.values) + self.null_cell

    def labels(self) -> dict[str, list]:
        return {self.name: list(self.values) + ([None] if self.null_cell else [])}

    def describe(self) -> dict:
        out = {"type": "categorical", "values": list(self.values), "nulls": self.nulls}
        if self.hierarchy:
            out["hierarchy_levels"] = [list(names) for names in self.group_names]
        return out


@dataclass(frozen=True)
class DateColumn(_Column):
    """Calendar bins; ``edges`` are the bin boundaries in days since 1970-01-01."""

    lower: _dt.date
    upper: _dt.date
    unit: str
    width: int
    edges: tuple[int, ...]
    out_of_domain: str = "clamp"
    #: As for :class:`NumericColumn`: the end bins' outer labels are empty.
    open_ends: bool = False
    kind: str = field(default="date", init=False)

    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    @property
    def n_cells(self) -> int:
        return self.bins + self.null_cell

    def labels(self) -> dict[str, list]:
        days = [(_EPOCH + _dt.timedelta(days=int(e))).isoformat() for e in self.edges]
        lows, highs = days[:-1], days[1:]
        _open_ends(self, lows, highs)
        if self.null_cell:
            lows, highs = lows + [None], highs + [None]
        return {f"{self.name}_lower": lows, f"{self.name}_upper": highs}

    def describe(self) -> dict:
        return {"type": "date", "lower": self.lower.isoformat(), "upper": self.upper.isoformat(),
                "unit": self.unit, "width": self.width, "bins": self.bins,
                "out_of_domain": self.out_of_domain, "nulls": self.nulls, **_open_ends_described(self)}


def _opens(column: NumericColumn | DateColumn) -> bool:
    return column.open_ends and column.out_of_domain == "clamp" and column.bins > 1


def _open_ends(column: NumericColumn | DateColumn, lows: list, highs: list) -> None:
    """Empty the outer labels of the end bins where they hold clamped values (so "[64, 183)" reads "below 183"):
    the first bin's lower and the last bin's upper.  A single bin keeps both (two empty labels mark the null cell)."""
    if _opens(column):
        lows[0] = highs[-1] = None


def _open_ends_described(column: NumericColumn | DateColumn) -> dict:
    if not _opens(column):
        return {}
    return {"open_ends": True, "end_bins": "the first bin also holds every value below 'lower', the last every "
                                          "value at or above 'upper'; their outer labels are empty"}


Column = NumericColumn | CategoricalColumn | DateColumn


@dataclass(frozen=True)
class Schema:
    """The validated public domain of every declared column, in declaration order."""

    columns: dict[str, Column]

    def __getitem__(self, name: str) -> Column:
        try:
            return self.columns[name]
        except KeyError:
            raise UsageError(f"column {quoted(name)} is not declared in the schema (declared: "
                             f"{quoted_list(self.columns)})") from None

    def shape(self, names: list[str]) -> tuple[int, ...]:
        return tuple(self[n].n_cells for n in names)

    def describe(self) -> dict:
        return {name: col.describe() for name, col in self.columns.items()}


# --------------------------------------------------------------------------------------------------------------
# Loading and validation


def declaration(column: Column) -> dict:
    """The schema-file declaration of ``column``: parsing it gives back an equal column (categorical
    hierarchies are not written; ValueError for such a column)."""
    if isinstance(column, NumericColumn):
        bounds = ({"lower": _tidy_number(column.edges[0]), "upper": _tidy_number(column.edges[-1]),
                   "bins": column.bins} if column.equal_width else
                  {"edges": [_tidy_number(e) for e in column.edges]})
        return {"type": "numeric", **bounds, "out_of_domain": column.out_of_domain, "nulls": column.nulls}
    if isinstance(column, CategoricalColumn):
        if column.hierarchy:
            raise ValueError(f"column {quoted(column.name)}: a hierarchy cannot be written back")
        return {"type": "categorical", "values": list(column.values), "nulls": column.nulls}
    return {"type": "date", "lower": column.lower.isoformat(), "upper": column.upper.isoformat(),
            "unit": column.unit, "width": column.width, "out_of_domain": column.out_of_domain,
            "nulls": column.nulls}


def load_schema(path: str | Path) -> Schema:
    """Read and validate a YAML or JSON schema file.  Raises UsageError naming the file, column and field."""
    return parse_schema(load_document(path, "schema file"), source=str(path))


def parse_schema(document: Any, source: str = "schema") -> Schema:
    """Validate a schema document (the parsed YAML/JSON: a mapping with a ``columns`` mapping)."""
    if isinstance(document, Schema):
        return document
    if not isinstance(document, dict):
        raise UsageError(f"{quoted(source, '')}: a schema must be a mapping with a 'columns' entry")
    unknown = set(document) - {"columns"}
    if unknown:
        raise UsageError(f"{quoted(source, '')}: unknown top-level field {quoted(sorted(map(str, unknown))[0])} "
                         "(expected 'columns')")
    columns = document.get("columns")
    if not isinstance(columns, dict) or not columns:
        raise UsageError(f"{quoted(source, '')}: 'columns' must be a non-empty mapping of column name to declaration")
    parsed: dict[str, Column] = {}
    for name, decl in columns.items():
        name = str(name)
        parsed[name] = _parse_column(name, decl, source)
    return Schema(parsed)


class _Fields:
    """Reads the fields of one column declaration, with errors naming the column and field."""

    def __init__(self, name: str, decl: dict, source: str):
        self.name, self.decl, self.source = name, decl, source

    def error(self, field_name: str, message: str) -> UsageError:
        return UsageError(f"{quoted(self.source, '')}: column {quoted(self.name)}: field {quoted(field_name)} "
                          f"{message}")

    def get(self, key: str, default: Any = None) -> Any:
        return self.decl.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.decl

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        value = self.get(key, default)
        if value not in options:
            raise self.error(key, f"must be one of {', '.join(options)}")
        return value

    def number(self, key: str) -> float:
        value = self.get(key)
        if isinstance(value, str):
            # YAML 1.1 reads 1e3 (no dot) as text; accept any plain number written as text.
            try:
                value = float(value.strip())
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, "must be a finite number")
        return float(value)

    def positive_int(self, key: str, default: int | None = None) -> int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(key, "must be a positive integer")
        return value


#: The fields a column declaration may have, by type (docs/reference/schema.md lists them; a test checks).
COLUMN_FIELDS = {
    "numeric": {"type", "lower", "upper", "bins", "width", "edges", "out_of_domain", "nulls"},
    "categorical": {"type", "values", "out_of_domain", "nulls", "hierarchy"},
    "date": {"type", "lower", "upper", "unit", "width", "out_of_domain", "nulls"},
}


def _parse_column(name: str, decl: Any, source: str) -> Column:
    if not isinstance(decl, dict):
        raise UsageError(f"{quoted(source, '')}: column {quoted(name)}: declaration must be a mapping with a 'type' "
                         "field")
    kind = decl.get("type")
    kind = kind if isinstance(kind, str) else None  # (a list or mapping there is not a type, nor hashable)
    fields = _Fields(name, decl, source)
    if kind in COLUMN_FIELDS:
        # Unknown fields first: a typo such as 'bin' must be named, not reported as a missing 'bins'.
        for key in decl:
            if key not in COLUMN_FIELDS[kind]:
                raise fields.error(str(key), f"is not a known field for a {kind} column "
                                             f"(known: {', '.join(sorted(COLUMN_FIELDS[kind] - {'type'}))})")
    if kind == "numeric":
        column = _parse_numeric(fields)
    elif kind == "categorical":
        column = _parse_categorical(fields)
    elif kind == "date":
        column = _parse_date(fields)
    else:
        raise fields.error("type", "must be one of numeric, categorical, date")
    if column.n_cells > MAX_CELLS:
        raise fields.error("bins", f"gives {column.n_cells} cells, more than the limit of {MAX_CELLS}")
    return column


def _parse_numeric(f: _Fields) -> NumericColumn:
    nulls = f.choice("nulls", ("drop", "category"), "drop")
    out_of_domain = f.choice("out_of_domain", ("clamp", "drop"), "clamp")
    given = [k for k in ("bins", "width", "edges") if f.has(k)]
    if len(given) != 1:
        raise f.error("bins", "or 'width' or 'edges': exactly one of them must be given")
    if given[0] == "edges":
        raw = f.get("edges")
        if not isinstance(raw, list) or len(raw) < 2:
            raise f.error("edges", "must be a list of at least two numbers")
        edges = []
        for e in raw:
            if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e):
                raise f.error("edges", "must contain only finite numbers")
            edges.append(float(e))
        if any(b <= a for a, b in zip(edges, edges[1:])):
            raise f.error("edges", "must be strictly increasing")
        for key, expected in (("lower", edges[0]), ("upper", edges[-1])):
            if f.has(key) and f.number(key) != expected:
                raise f.error(key, f"must equal the {'first' if key == 'lower' else 'last'} edge when edges are given")
        widths = np.diff(edges)
        return NumericColumn(f.name, nulls, tuple(edges), bool(np.all(widths == widths[0])), out_of_domain)
    for key in ("lower", "upper"):
        if not f.has(key):
            raise f.error(key, "is required with 'bins' or 'width'")
    lower, upper = f.number("lower"), f.number("upper")
    if not lower < upper:
        raise f.error("upper", "must be greater than 'lower'")
    if given[0] == "bins":
        bins = f.positive_int("bins")
        if bins > MAX_CELLS:
            raise f.error("bins", f"must be at most {MAX_CELLS}")
        edges = _decimal_edges(lower, upper, bins=bins)
        _check_distinct(f, "bins", edges)
        return NumericColumn(f.name, nulls, tuple(edges), True, out_of_domain)
    width = f.get("width")
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not (math.isfinite(width) and width > 0):
        raise f.error("width", "must be a positive number")
    # the count from the numbers as written (exact decimals): float division of a span far from 0 may land just
    # above a whole number and add a bin of no width
    count = math.ceil((Decimal(repr(float(upper))) - Decimal(repr(float(lower)))) / Decimal(repr(float(width))))
    if count > MAX_CELLS:
        raise f.error("width", f"gives more than {MAX_CELLS} bins")
    edges = _decimal_edges(lower, upper, width=width, count=count)
    _check_distinct(f, "width", edges)
    # A last bin cut short by 'upper' makes the bins unequal; counting then uses the edges.
    equal = math.isclose(edges[-1] - edges[-2], width, rel_tol=1e-12)
    return NumericColumn(f.name, nulls, tuple(edges), equal, out_of_domain)


def round_bins(lower: float, upper: float, bins: int, whole: bool = False) -> tuple[float, int, int] | None:
    """Readable bins over [lower, upper): ``(width, start, end)`` with the narrowest width among 1, 2, 2.5 and 5
    times a power of ten (the float nearest that decimal; for ``whole`` bins a whole number, so 2.5 only from 25
    up) whose multiples start·width <= lower and end·width >= upper make at most ``bins`` bins; None when no width
    up to ten times the span does (a span across 0 with one bin asked for).  Edges at multiples of a round width
    print as short decimals, and whole-numbered columns keep whole bins."""
    span = upper - lower
    exponent = max(math.floor(math.log10(span / bins)), 0 if whole else -400)
    while True:
        for mantissa in ("1", "2", "2.5", "5"):
            if whole and exponent == 0 and mantissa == "2.5":
                continue
            width = float(Decimal(mantissa).scaleb(exponent))
            if width > 10 * span:
                return None
            start, end = math.floor(lower / width), max(math.ceil(upper / width), math.floor(lower / width) + 1)
            if end - start <= bins:
                return width, start, end
        exponent += 1


def _decimal_edges(lower: float, upper: float, *, bins: int | None = None, width: float | None = None,
                   count: int | None = None) -> list[float]:
    """The edges of ``bins`` equal bins over [lower, upper), or of ``count`` bins of ``width`` from ``lower`` (the
    last ends at ``upper``), each the float nearest its exact decimal value.

    Float steps accumulate binary error (0.1 + 7 × 0.01 is 0.16999999999999998).  Here the numbers as written are
    scaled to integers (a = lower·10^p, s = width·10^p), and edge i is the one correctly rounded division
    (a + s·i) / 10^p (with bins: (a·bins + (b − a)·i) / (bins·10^p)) of two integers that floats hold exactly, so
    labels print as the decimal (0.17).  Vectorised; a decimal loop only where those integers exceed 2^53."""
    numbers = [Decimal(repr(float(v))) for v in (lower, upper, *([width] if width is not None else []))]
    places = max(0, *(-d.as_tuple().exponent for d in numbers))
    a, b, *step = (int(d.scaleb(places)) for d in numbers)
    n = bins if bins is not None else count
    if bins is not None:
        first, stride, denominator = a * bins, b - a, bins * 10 ** places
    else:
        first, stride, denominator = a, step[0], 10 ** places
    if max(abs(first), abs(first + stride * n)) < 2 ** 53 and denominator < 2 ** 53:
        numerators = first + stride * np.arange(n, dtype=np.int64)
        return (numerators.astype(np.float64) / float(denominator)).tolist() + [float(upper)]
    with localcontext() as context:
        context.prec = 60
        return [float(Decimal(first + stride * i) / denominator) for i in range(n)] + [float(upper)]


def _check_distinct(f: _Fields, key: str, edges: list[float]) -> None:
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise f.error(key, "gives bins narrower than the precision of 'lower' and 'upper' (two edges are the same "
                           "number); use fewer bins or a domain nearer 0")


def _parse_categorical(f: _Fields) -> CategoricalColumn:
    nulls = f.choice("nulls", ("drop", "category"), "drop")
    f.choice("out_of_domain", ("drop",), "drop")
    raw = f.get("values")
    if not isinstance(raw, list) or not raw:
        raise f.error("values", "must be a non-empty list of category labels")
    values = []
    for v in raw:
        if v is None or isinstance(v, (list, dict)):
            raise f.error("values", "must contain only text or number labels (use 'nulls: category' for missing)")
        if isinstance(v, bool):
            # YAML 1.1 reads unquoted NO, YES, ON, OFF, Y, N as booleans; a label like 'NO' would silently vanish.
            raise f.error("values", "holds true/false: YAML reads unquoted NO/YES/ON/OFF as booleans; quote labels "
                                    "such as \"NO\"")
        values.append(normalise_label(v))
    seen = set()
    for v in values:
        if v in seen:
            raise f.error("values", f"lists the label {quoted(v)} twice")
        seen.add(v)
    hierarchy, names = _parse_hierarchy(f, values, nulls == "category") if f.has("hierarchy") else ((), ())
    return CategoricalColumn(f.name, nulls, tuple(values), hierarchy, names)


def _parse_hierarchy(f: _Fields, values: list[str], null_cell: bool):
    """A nested mapping {group: [labels] or {subgroup: ...}} covering every declared label exactly once.

    Returns per level (coarsest first) the group index of every cell, and the group names.  Groups on a
    branch that is shallower than the deepest one simply continue unchanged to the next level.
    """
    raw = f.get("hierarchy")
    if not isinstance(raw, dict) or not raw:
        raise f.error("hierarchy", "must be a mapping of group names to lists of labels (or to nested groups)")
    paths: dict[str, list[str]] = {}
    declared = set(values)  # membership in O(1): a hierarchy may group 100,000 labels

    def walk(node, path):
        if isinstance(node, dict):
            if not node:
                raise f.error("hierarchy", f"group {quoted('/'.join(path))} is empty")
            for key, child in node.items():
                walk(child, path + [normalise_label(key)])
        elif isinstance(node, list):
            if not node:
                raise f.error("hierarchy", f"group {quoted('/'.join(path))} is empty")
            for label in node:
                if isinstance(label, (dict, list)) or label is None:
                    raise f.error("hierarchy", f"group {quoted('/'.join(path))} must list labels")
                label = normalise_label(label)
                if label not in declared:
                    raise f.error("hierarchy", f"names {quoted(label)}, which is not in 'values'")
                if label in paths:
                    raise f.error("hierarchy", f"places {quoted(label)} in two groups")
                paths[label] = path
        else:
            raise f.error("hierarchy", f"group {quoted('/'.join(path))} must be a list of labels or a mapping")

    walk(raw, [])
    missing = [v for v in values if v not in paths]
    if missing:
        raise f.error("hierarchy", f"does not place {quoted(missing[0])} in any group")
    depth = max(len(p) for p in paths.values())
    levels, names = [], []
    for level in range(depth):
        keys = []
        for v in values:
            p = paths[v]
            # A branch that ends above this level continues as the group (or cell) it ended with.
            keys.append(tuple(p[: level + 1]) if len(p) > level else tuple(p) + ("", v))
        if null_cell:
            keys.append(("", "null"))
        position = {k: i for i, k in enumerate(dict.fromkeys(keys))}  # each group's index, first seen first
        levels.append(tuple(position[k] for k in keys))
        names.append(tuple("/".join(x for x in k if x) for k in position))
    return tuple(levels), tuple(names)


def _parse_date(f: _Fields) -> DateColumn:
    nulls = f.choice("nulls", ("drop", "category"), "drop")
    out_of_domain = f.choice("out_of_domain", ("clamp", "drop"), "clamp")
    unit = f.choice("unit", _UNITS, "day")
    width = f.positive_int("width", 1)
    lower, upper = _date_field(f, "lower"), _date_field(f, "upper")
    if not lower < upper:
        raise f.error("upper", "must be a later date than 'lower'")
    if unit in ("month", "quarter", "year") and lower.day != 1:
        raise f.error("lower", f"must be the first day of a {unit} when unit is {unit}")
    if unit == "quarter" and lower.month not in (1, 4, 7, 10):
        raise f.error("lower", "must start a calendar quarter (January, April, July or October 1st)")
    if unit == "year" and lower.month != 1:
        raise f.error("lower", "must be January 1st when unit is year")
    edges = [lower]
    step = 0
    while edges[-1] < upper:
        step += width
        nxt = _advance(lower, unit, step)
        edges.append(min(nxt, upper))
        if len(edges) > MAX_CELLS + 1:
            raise f.error("unit", f"gives more than {MAX_CELLS} bins")
    days = tuple((d - _EPOCH).days for d in edges)
    return DateColumn(f.name, nulls, lower, upper, unit, width, days, out_of_domain)


def _date_field(f: _Fields, key: str) -> _dt.date:
    value = f.get(key)
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, str):
        try:
            value = _dt.date.fromisoformat(value)
        except ValueError:
            raise f.error(key, "must be a date written YYYY-MM-DD") from None
    if not isinstance(value, _dt.date):
        raise f.error(key, "is required and must be a date written YYYY-MM-DD")
    return value


def _advance(start: _dt.date, unit: str, n: int) -> _dt.date:
    """The start of the n-th bin after ``start``; the calendar's last day (9999-12-31) where that is past it."""
    days = {"day": 1, "week": 7}.get(unit)
    if days is not None:
        return start + _dt.timedelta(days=min(n * days, (_dt.date.max - start).days))
    months = n * {"month": 1, "quarter": 3, "year": 12}[unit]
    total = start.year * 12 + (start.month - 1) + months
    return _dt.date(total // 12, total % 12 + 1, 1) if total // 12 <= _dt.MAXYEAR else _dt.date.max


def _tidy_number(x: float) -> int | float:
    """Whole numbers print as integers in labels (0, not 0.0)."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)
