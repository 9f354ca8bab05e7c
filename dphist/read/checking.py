"""Checking a schema against the data, for the data holder: what a release would do to the rows of each declared
column (count them, clamp them, drop them, or stop at them), before anything is spent.

NOT differentially private.  The figures are exact counts over the private rows, and the report quotes data
values (undeclared labels, unreadable values, the smallest and largest value seen): it is for the person who holds
the data, to fix the schema or the data before a release.  Nothing here draws noise, spends budget, opens the
ledger or writes a file.

The rows are read as the release's counting pass reads them: the same source (:func:`~dphist.read.sources.open_source`
and its batches, the declared columns only) and the same :class:`~dphist.read.counting.Axis` per column, whose
codes say which rows a release counts and which it leaves out.  One difference is needed to count what a release
stops at rather than stop at it too: a CSV column declared numeric or date is read as its text (the reader's
``from_text`` hook, which discovery's typed columns use as well) and converted here value by value exactly as the
release's reader converts it (:func:`csv_numbers`, :func:`text_dates`), so that every value it cannot read is
counted, and the others reach the Axis as the numbers and dates a release would count.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..declare.schema import CategoricalColumn, Column, DateColumn, Schema, load_schema, normalise_label
from ..errors import DataError, UsageError
from ..text import as_text, quoted, quoted_list
from .contribution import UnitColumn, UnitIds
from .counting import Axis, days_since_epoch
from .sources import kinds_of, open_source, type_name

__all__ = ["BANNER", "CheckReport", "ColumnCheck", "check_data", "csv_numbers", "text_dates", "suggestion"]

#: The first line of every report (and the first key of its JSON).
BANNER = "NOT differentially private: for the data holder only; do not publish this output. Nothing was spent."
#: Undeclared labels listed per column (the most frequent), and unreadable values quoted per column.
TOP_LABELS = 10
EXAMPLES = 3
#: Distinct undeclared labels counted one by one per column (a column of IDs declared categorical would otherwise
#: hold every ID in memory); rows with labels first seen after that are counted together.
TRACKED_LABELS = 100_000
#: Characters of a label or value kept for the report (the report quotes at most 200 of them).
_KEPT_CHARS = 1_000

_EPOCH = _dt.date(1970, 1, 1)
# A plain decimal number: Arrow reads every text of this form as a float64 (the fast path of csv_numbers).
_PLAIN_NUMBER = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
# A character no number Arrow reads has (digits, signs, the point, exponents, inf, infinity, nan).
_NUMBERLESS = r"[^0-9+\-.eEiInNfFtTyYaA]"
_WHITESPACE = re.compile(r"\s+")


# ---- values as the release's reader reads them ---------------------------------------------------------------


def csv_numbers(text: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The float64 values a release reads from the text of a CSV column declared numeric, and a mask of the values
    it cannot read (where a release stops, after charging the budget).

    Arrow's CSV reader trims spaces and tabs around a number (no other white space) and parses the rest as
    ``pyarrow.compute.cast`` does; an empty quoted value, or one of spaces only, is no number.  A missing value
    (an empty field) stays null.  Unreadable values are null in the result."""
    return _by_entry(text, lambda values: pc.cast(_trimmed(values), pa.float64()), _sure_numbers)


def _trimmed(values: pa.Array) -> pa.Array:
    return pc.utf8_trim(values, characters=" \t")


def _sure_numbers(dictionary: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The texts Arrow surely reads as numbers (plain decimals) and surely does not (a character no number has,
    outside ``nan(...)``, which Arrow reads as nan whatever the parentheses hold)."""
    trimmed = _trimmed(dictionary)

    def has(pattern: str) -> np.ndarray:
        return pc.fill_null(pc.match_substring_regex(trimmed, pattern), False).to_numpy(zero_copy_only=False)
    known = has(_PLAIN_NUMBER)
    return known, has(_NUMBERLESS) & ~has("(?i)nan\\(") & ~known


def text_dates(text: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The dates (date32) a release reads from text declared as dates (a CSV column, or a text column of a Parquet
    file), by :func:`~dphist.read.counting.days_since_epoch` as the release converts them, and a mask of the values
    it cannot read (where a release stops, after charging the budget).  Unreadable values are null in the
    result."""
    def convert(values: pa.Array) -> pa.Array:
        return days_since_epoch(values).cast(pa.int32()).cast(pa.date32())  # as the CSV reader converts dates
    return _by_entry(text, convert)


def _by_entry(text: pa.Array, convert: Callable[[pa.Array], pa.Array],
              sure: Callable[[pa.Array], tuple[np.ndarray, np.ndarray]] | None = None) -> tuple[pa.Array, np.ndarray]:
    """``convert`` applied to each distinct value of ``text`` (its dictionary): all at once where every one
    converts, else each on its own, so that the values it refuses are found.  ``sure`` gives the masks of the
    values known to convert and known to be refused, which are not tried one by one (a column of a million
    distinct '12,5' would take half a minute).  Returns the converted values (null where refused) and the mask of
    the rows holding a refused value."""
    if not pa.types.is_dictionary(text.type):
        text = pc.dictionary_encode(text)
    dictionary, indices = text.dictionary, text.indices
    try:
        converted, refused = convert(dictionary), np.zeros(len(dictionary), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        nothing = np.zeros(len(dictionary), dtype=bool)
        known, refused = (nothing, nothing.copy()) if sure is None else sure(dictionary)
        for i in np.flatnonzero(~known & ~refused):
            try:
                convert(dictionary.slice(i, 1))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
                refused[i] = True
        kept = convert(dictionary.filter(pa.array(~refused)))  # every one of them converts
        position = np.cumsum(~refused) - 1
        converted = kept.take(pa.array(np.maximum(position, 0), mask=refused))
    values = converted.take(indices)
    rows = np.zeros(len(indices), dtype=bool)
    if refused.any():
        at = indices.fill_null(0).to_numpy(zero_copy_only=False)
        rows = refused[at] & indices.is_valid().to_numpy(zero_copy_only=False)
    return values, rows


@dataclass(frozen=True)
class _AsText:
    """A CSV column declared numeric or date, read as its text: the source's ``from_text`` hook hands the text
    over unconverted, and the check converts it (:func:`csv_numbers`, :func:`text_dates`)."""

    name: str
    kind: str

    def from_text(self, values: pa.Array) -> pa.Array:
        return values


def _is_text(values: pa.Array) -> bool:
    typ = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
    return pa.types.is_string(typ) or pa.types.is_large_string(typ)


# ---- suggestions for undeclared labels -----------------------------------------------------------------------


def suggestion(label: str, declared: tuple[str, ...], loose: dict[str, str] | None = None
               ) -> tuple[str | None, str | None]:
    """The declared value ``label`` was most likely meant to be, and how they differ: ``"case"``,
    ``"whitespace"`` or ``"case and whitespace"`` when they are the same but for letter case and white space
    (around or inside), else ``None`` with the closest spelling by :func:`difflib.get_close_matches`, else
    ``(None, None)``.  ``loose`` is :func:`loose_index` of ``declared``, made once per column."""
    loose = loose_index(declared) if loose is None else loose
    match = loose.get(_loose(label))
    if match is not None and match != label:
        case = _WHITESPACE.sub("", match) != _WHITESPACE.sub("", label)
        space = match.casefold() != label.casefold()
        return match, " and ".join(what for what, differs in (("case", case), ("whitespace", space)) if differs)
    close = difflib.get_close_matches(label, declared, n=1)
    return (close[0], None) if close else (None, None)


def loose_index(declared: tuple[str, ...]) -> dict[str, str]:
    """Each declared value under its case- and space-free form (the first one, where two share it)."""
    index: dict[str, str] = {}
    for value in declared:
        index.setdefault(_loose(value), value)
    return index


def _loose(label: str) -> str:
    return _WHITESPACE.sub("", label).casefold()


# ---- one column --------------------------------------------------------------------------------------------


@dataclass
class ColumnCheck:
    """What a release would do to the rows of one declared column, counted over every row.

    ``status``: "read" (the figures below hold), "missing" (not in the data: a release over it refuses the input
    before reading) or "stored type" (the file stores a type the declared kind cannot be read from: refused
    before reading too; ``stored`` names it).  ``counted`` rows reach a cell of a one-column table; the others
    are dropped (nulls under ``nulls: drop``, out-of-domain values under ``out_of_domain: drop``, undeclared
    labels) or cannot be read (``type_errors``: a release stops at the first one, after charging the budget).
    ``below`` and ``above`` are values under the domain's lower end and at or over its upper end (clamped into
    the end bins or dropped, as declared); ``low`` and ``high`` the smallest and largest value seen."""

    name: str
    column: Column
    status: str = "read"
    stored: str | None = None
    rows: int = 0
    nulls: int = 0
    counted: int = 0
    type_errors: int = 0
    type_examples: list[str] = field(default_factory=list)
    first_type_error: int | None = None  # the row (1 = the first after the header)
    below: int = 0
    above: int = 0
    low: float | None = None
    high: float | None = None
    undeclared: Counter = field(default_factory=Counter)
    undeclared_untracked: int = 0  # rows whose label was first seen after TRACKED_LABELS others

    @property
    def kind(self) -> str:
        return self.column.kind

    @property
    def undeclared_rows(self) -> int:
        return sum(self.undeclared.values()) + self.undeclared_untracked

    @property
    def dropped(self) -> int:
        """Rows a release reads and leaves out of this column's table."""
        return self.rows - self.counted - self.type_errors

    @property
    def null_action(self) -> str:
        return "counted in their own cell" if self.column.null_cell else "dropped"

    @property
    def out_of_domain(self) -> str:
        return getattr(self.column, "out_of_domain", "drop")

    def top_labels(self) -> list[dict]:
        """The most frequent undeclared labels (at most TOP_LABELS), each with its rows and a suggestion."""
        column = self.column
        loose = loose_index(column.values)
        out = []
        for label, rows in sorted(self.undeclared.items(), key=lambda item: (-item[1], item[0]))[:TOP_LABELS]:
            meant, differs = suggestion(label, column.values, loose)
            out.append({"label": label, "rows": rows, "suggestion": meant, "differs": differs})
        return out

    def problems(self) -> list[str]:
        """One line per thing a release would do that loses rows or stops it (values quoted: holder only)."""
        name = quoted(self.name)
        if self.status == "missing":
            return [f"{name}: declared but not in the data (a release over it is refused before reading)"]
        if self.status == "stored type":
            return [f"{name}: declared {self.kind} but stored as {self.stored} (a release over it is refused before "
                    "reading)"]
        found = []
        if self.type_errors:
            found.append(f"{name}: {_many(self.type_errors, 'value')} a release cannot read as {self.kind} (it would "
                         "stop at the first, after charging the budget)")
        if self.undeclared_rows:
            found.append(f"{name}: {_many(self.undeclared_rows, 'row')} with labels the schema does not declare, "
                         "dropped")
        return found

    def notes(self) -> list[str]:
        """One line per thing the schema asks a release to do that leaves rows out (``out_of_domain: drop``,
        ``nulls: drop``): worth knowing, not a mismatch."""
        if self.status in ("missing", "stored type"):
            return []
        name, found = quoted(self.name), []
        outside = self.below + self.above
        if outside and self.out_of_domain == "drop":
            found.append(f"{name}: {_many(outside, 'row')} outside the domain, dropped as the schema says")
        if self.nulls and not self.column.null_cell:
            found.append(f"{name}: {_many(self.nulls, 'null')}, dropped as the schema says")
        return found

    # ---- reading -------------------------------------------------------------------------------------------

    def add(self, values: pa.Array | pa.ChunkedArray, axis: Axis, start: int) -> tuple[pa.Array, np.ndarray]:
        """Count one batch of the column (rows ``start + 1`` on); returns the values as a release's counting pass
        reads them and the mask of the rows it would not count (left out or unreadable)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        n = len(values)
        self.rows += n
        unreadable = np.zeros(n, dtype=bool)
        if self.kind == "categorical":
            values, unreadable = self._labels(values, start)
        elif _is_text(values):  # a CSV column declared numeric or date, or a text column declared date
            reading = csv_numbers if self.kind == "numeric" else text_dates
            text = values
            values, unreadable = reading(text)
            if unreadable.any():
                self._unreadable(text, unreadable, start)
        cells, lookup = axis.cells(values)
        codes = cells if lookup is None else lookup.take(cells, mode="clip")
        left_out = (codes == self.column.n_cells) | unreadable
        self.counted += int(n - np.count_nonzero(left_out))
        if self.kind == "categorical":
            self._undeclared(values, cells, lookup, unreadable)
        else:
            self._range(values, unreadable)
        return values, left_out

    def _unreadable(self, text: pa.Array, rows: np.ndarray, start: int) -> None:
        self.type_errors += int(np.count_nonzero(rows))
        if self.first_type_error is None:
            self.first_type_error = start + int(np.argmax(rows)) + 1
        if len(self.type_examples) < EXAMPLES:
            if pa.types.is_dictionary(text.type):
                text = text.dictionary_decode()
            for value in text.filter(pa.array(rows)).unique().to_pylist()[:EXAMPLES]:
                value = value[:_KEPT_CHARS]
                if value not in self.type_examples and len(self.type_examples) < EXAMPLES:
                    self.type_examples.append(value)

    def _labels(self, values: pa.Array, start: int) -> tuple[pa.Array, np.ndarray]:
        """The values as text labels (dictionary-encoded), with the labels a release cannot read (they span a
        line break: the CSV's quotes are unbalanced) made null, and the mask of their rows."""
        values = as_text(values)
        if not pa.types.is_dictionary(values.type):
            values = pc.dictionary_encode(values)
        dictionary = values.dictionary
        broken = pc.fill_null(pc.match_substring_regex(dictionary, "[\r\n]"), False)
        if not pc.any(broken).as_py():
            return values, np.zeros(len(values), dtype=bool)
        entries = broken.to_numpy(zero_copy_only=False)
        at = values.indices.fill_null(0).to_numpy(zero_copy_only=False)
        rows = entries[at] & values.indices.is_valid().to_numpy(zero_copy_only=False)
        self._unreadable(values, rows, start)
        cleared = pa.DictionaryArray.from_arrays(values.indices, pc.if_else(broken, None, dictionary))
        return cleared, rows

    def _undeclared(self, values: pa.Array, cells: np.ndarray, lookup: np.ndarray, unreadable: np.ndarray) -> None:
        """Tally nulls and undeclared labels from the Axis's cells (dictionary indices; nulls at the lookup's last
        entry) and lookup (each entry's code)."""
        per_entry = np.bincount(cells, minlength=len(lookup))
        dictionary = values.dictionary
        null_entry = dictionary.is_null().to_numpy(zero_copy_only=False)
        self.nulls += int(per_entry[-1] + per_entry[:-1][null_entry].sum()) - int(np.count_nonzero(unreadable))
        unknown = np.flatnonzero((lookup[:-1] == self.column.n_cells) & ~null_entry & (per_entry[:-1] > 0))
        if not len(unknown):
            return
        for label, rows in zip(dictionary.take(pa.array(unknown)).to_pylist(), per_entry[unknown].tolist()):
            label = normalise_label(label)[:_KEPT_CHARS]
            if label in self.undeclared or len(self.undeclared) < TRACKED_LABELS:
                self.undeclared[label] += rows
            else:
                self.undeclared_untracked += rows

    def _range(self, values: pa.Array, unreadable: np.ndarray) -> None:
        """Tally nulls (NaN is missing too), values beyond the domain, and the smallest and largest value."""
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if isinstance(self.column, DateColumn):
            values = days_since_epoch(values)
            if pa.types.is_date32(values.type):
                values = values.cast(pa.int32())
        v = pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        missing = np.isnan(v)
        self.nulls += int(np.count_nonzero(missing & ~unreadable))
        v = v[~missing]
        if not len(v):
            return
        edges = self.column.edges
        self.below += int(np.count_nonzero(v < edges[0]))
        self.above += int(np.count_nonzero(v >= edges[-1]))
        low, high = float(v.min()), float(v.max())
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    # ---- output --------------------------------------------------------------------------------------------

    def domain(self) -> str:
        """The declaration in a few words: "numeric [0, 100), 10 bins; out_of_domain clamp; nulls drop"."""
        c = self.column
        if isinstance(c, CategoricalColumn):
            return f"categorical, {len(c.values):,} value{'s' if len(c.values) != 1 else ''}; nulls {c.nulls}"
        d = c.describe()
        bins = f"{d['bins']:,} bins" if c.kind == "numeric" else f"{d['bins']:,} bins of {d['width']} {d['unit']}"
        return f"{c.kind} [{d['lower']}, {d['upper']}), {bins}; out_of_domain {c.out_of_domain}; nulls {c.nulls}"

    def value(self, x: float | None) -> Any:
        """A value seen, for the report: a number (whole numbers as int), a date as YYYY-MM-DD, infinities as
        text."""
        if x is None:
            return None
        if not math.isfinite(x):
            return "inf" if x > 0 else "-inf"
        if self.kind == "date":
            try:
                return (_EPOCH + _dt.timedelta(days=int(x))).isoformat()
            except OverflowError:
                return f"day {int(x):,} from 1970-01-01"
        return int(x) if x.is_integer() and abs(x) < 2**53 else x

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "type": self.kind, "declared": self.column.describe(),
                               "status": self.status}
        if self.status == "stored type":
            out["stored"] = self.stored
        if self.status != "read":
            return out
        out.update({"rows": self.rows, "counted": self.counted, "dropped": self.dropped,
                    "nulls": {"rows": self.nulls, "action": self.null_action},
                    "type_errors": {"rows": self.type_errors, "examples": self.type_examples,
                                    "first_row": self.first_type_error}})
        if self.kind == "categorical":
            out["not_declared"] = {"rows": self.undeclared_rows, "labels": len(self.undeclared),
                                   "top": self.top_labels(), "untracked_rows": self.undeclared_untracked}
        else:
            out["below_lower"] = {"rows": self.below, "action": self._outside_action("first")}
            out["at_or_above_upper"] = {"rows": self.above, "action": self._outside_action("last")}
            out["min"], out["max"] = self.value(self.low), self.value(self.high)
        return out

    def _outside_action(self, end: str) -> str:
        return f"clamped into the {end} bin" if self.out_of_domain == "clamp" else "dropped"

    def lines(self) -> list[str]:
        head = f"{quoted(self.name, '')}: {self.domain()}"  # a column's name may hold anything
        if self.status == "missing":
            return [head, "  not in the data: a release over this column is refused before reading"]
        if self.status == "stored type":
            return [head, f"  stored as {self.stored}, which cannot be read as {self.kind}: a release over this "
                          "column is refused before reading"]
        out = [head, _row("rows", self.rows)]
        if self.type_errors:
            what = "not numbers" if self.kind == "numeric" else "not dates YYYY-MM-DD" if self.kind == "date" else \
                "labels spanning a line break"
            examples = ", ".join(quoted(v) for v in self.type_examples)
            out.append(_row("type errors", self.type_errors, f"{what}, e.g. {examples}; a release would stop at the "
                            f"first (row {self.first_type_error:,}) after charging the budget"))
        out.append(_row("nulls", self.nulls, self.null_action if self.nulls else ""))
        if self.kind == "categorical":
            out.append(_row("not declared", self.undeclared_rows, "" if not self.undeclared_rows else
                            f"dropped ({_many(len(self.undeclared), 'label')}"
                            + (f", and {_many(self.undeclared_untracked, 'row')} of labels not counted one by one"
                               if self.undeclared_untracked else "") + ")"))
            for top in self.top_labels():
                line = f"      {_many(top['rows'], 'row')} {quoted(top['label'])}: not declared"
                if top["suggestion"] is not None:
                    line += f"; did you mean {quoted(top['suggestion'])}?"
                    if top["differs"]:
                        line += f" (differs in {top['differs']})"
                out.append(line)
        else:
            d = self.column.describe()
            out.append(_row(f"below {d['lower']}", self.below, self._outside_action("first") if self.below else ""))
            out.append(_row(f"at/above {d['upper']}", self.above, self._outside_action("last") if self.above else ""))
            if self.low is not None:
                out.append(f"  {'seen':<20}min {self.value(self.low)}, max {self.value(self.high)}")
        out.append(_row("counted", self.counted, _share(self.counted, self.rows)))
        return out


def _row(label: str, count: int, note: str = "") -> str:
    return f"  {label:<20}{count:>12,}" + (f"  {note}" if note else "")


def _many(n: int, noun: str) -> str:
    """"1 row", "2 rows", "12,082 rows"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}% of the rows" if whole else ""


# ---- the whole check ---------------------------------------------------------------------------------------


@dataclass
class CheckReport:
    """The result of :func:`check_data`: one :class:`ColumnCheck` per checked column, the data's columns the
    schema does not declare, and with ``--columns`` (two or more) or a privacy unit, what the table over those
    columns and the unit's cap would leave out.  ``problems`` lists what would lose rows or stop a release;
    the schema fits when it is empty."""

    data: str
    data_format: str
    schema: str
    rows: int | None
    columns: list[ColumnCheck]
    not_in_schema: list[str]
    table: list[str] | None = None  # the --columns table, when it has two columns or more
    table_counted: int | None = None
    unit: str | None = None
    max_rows_per_unit: int | None = None
    unit_counts: np.ndarray | None = None  # rows per unit
    unit_missing: int = 0  # rows whose unit is missing (never counted)

    @property
    def unit_dropped(self) -> int:
        """Rows the unit's cap leaves out: each unit's rows past the first K (chosen at random in a release), and
        every row whose unit is missing."""
        if self.unit_counts is None:
            return 0
        over = self.unit_counts - self.max_rows_per_unit
        return int(over[over > 0].sum()) + self.unit_missing

    @property
    def units_over(self) -> int:
        return 0 if self.unit_counts is None else int(np.count_nonzero(self.unit_counts > self.max_rows_per_unit))

    def problems(self) -> list[str]:
        """What does not fit: columns missing or stored otherwise, values a release cannot read, labels the
        schema does not declare (the check exits non-zero)."""
        return [line for c in self.columns for line in c.problems()]

    def notes(self) -> list[str]:
        """Rows a release leaves out because the schema or the unit cap says so (reported; the check passes)."""
        found = [line for c in self.columns for line in c.notes()]
        if self.unit is not None and self.unit_dropped:
            without = f", {_many(self.unit_missing, 'row')} without a unit" if self.unit_missing else ""
            found.append(f"unit cap: {_many(self.unit_dropped, 'row')} dropped ({_many(self.units_over, 'unit')} over "
                         f"{_many(self.max_rows_per_unit, 'row')}{without})")
        return found

    def failure(self) -> str:
        """The one line on stderr when the schema does not fit (no data value in it: it goes to logs)."""
        n = len(self.problems())
        return (f"{quoted(self.data, '')} does not fit {quoted(self.schema, '')}: {_many(n, 'problem')} "
                "(see the report on standard output); nothing was spent")

    def as_dict(self) -> dict:
        problems = self.problems()
        out: dict[str, Any] = {"banner": BANNER, "data": self.data, "format": self.data_format,
                               "schema": self.schema, "rows": self.rows,
                               "columns": [c.as_dict() for c in self.columns], "not_in_schema": self.not_in_schema}
        if self.table is not None:
            out["table"] = {"columns": self.table, "counted": self.table_counted,
                            "dropped": None if self.rows is None else self.rows - self.table_counted}
        if self.unit is not None:
            out["unit"] = {"column": self.unit, "max_rows_per_unit": self.max_rows_per_unit,
                           "units": 0 if self.unit_counts is None else int(np.count_nonzero(self.unit_counts)),
                           "units_over_cap": self.units_over, "rows_without_unit": self.unit_missing,
                           "rows_dropped": self.unit_dropped,
                           "share_dropped": self.unit_dropped / self.rows if self.rows else 0.0}
        out["problems"] = len(problems)
        out["problem_list"] = problems
        out["notes"] = self.notes()
        return out

    def json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False)

    def text(self) -> str:
        rows = "rows not read" if self.rows is None else _many(self.rows, "row")
        out = [BANNER, f"{quoted(self.data, '')} ({self.data_format}, {rows}) against {quoted(self.schema, '')}"]
        for column in self.columns:
            out += [""] + column.lines()
        out.append("")
        if self.not_in_schema:
            n = len(self.not_in_schema)
            out.append(f"not in the schema ({_many(n, 'column')}, not checked): "
                       f"{quoted_list(self.not_in_schema)}")
        if self.table is not None:
            out.append(f"a table over {quoted_list(self.table)} would count {self.table_counted:,} of {self.rows:,} "
                       f"rows ({_share(self.table_counted, self.rows)})")
        if self.unit is not None:
            units = 0 if self.unit_counts is None else int(np.count_nonzero(self.unit_counts))
            out.append(f"unit cap ({quoted(self.unit)}, at most {_many(self.max_rows_per_unit, 'row')} each): drops "
                       f"{self.unit_dropped:,} of {self.rows:,} rows ({_share(self.unit_dropped, self.rows)}); "
                       f"{self.units_over:,} of {units:,} units are over the cap"
                       + (f"; {_many(self.unit_missing, 'row')} without a unit" if self.unit_missing else ""))
        problems, notes = self.problems(), self.notes()
        if notes:
            out.append(f"{_many(len(notes), 'note')}: rows a release leaves out as asked")
            out += [f"  {line}" for line in notes]
        if problems:
            out.append(f"{_many(len(problems), 'problem')}: a release would lose these "
                       "rows or stop")
            out += [f"  {line}" for line in problems]
        else:
            out.append("the schema fits" + (" (see the notes)" if notes else ": a release would count every row of the "
                                                                      "checked columns"))
        return "\n".join(out)


def check_data(source: Any, schema: Any, columns: str | list[str] | None = None, privacy_unit: str | None = None,
               max_rows_per_unit: int | None = None) -> CheckReport:
    """Compare ``schema`` (a Schema, or the path of a YAML or JSON schema file) with the data at ``source`` (what
    a release reads: a file, directory or glob, or a DataFrame), column by column: see :class:`CheckReport`.
    ``columns`` names the declared columns to check (every declared column by default); with ``privacy_unit``
    and ``max_rows_per_unit``, the rows the unit's cap would leave out are counted too.

    Reads every row of the checked columns (and the unit's) once; spends nothing, writes nothing.  UsageError for
    an undeclared column in ``columns`` or a unit without a bound; DataError for data that cannot be opened or
    read (a malformed row: a release would stop there too), as a release raises them."""
    schema_name = str(schema) if not isinstance(schema, Schema) else "schema"
    schema = schema if isinstance(schema, Schema) else load_schema(schema)
    names = _checked_names(schema, columns)
    unit, bound = _unit(privacy_unit, max_rows_per_unit)
    src = open_source(source)
    header = src.column_names()
    if unit is not None and unit not in header:
        raise DataError(f"{quoted(src.name, '')}: privacy-unit column {quoted(unit)} not found in the input")
    stored = src.arrow_types() if src.format != "csv" else {}
    checks, readers = [], {}
    for name in names:
        column = schema[name]
        check = ColumnCheck(name, column)
        checks.append(check)
        if name not in header:
            check.status = "missing"
        elif name in stored and column.kind not in kinds_of(stored[name]):
            check.status, check.stored = "stored type", type_name(stored[name])
        else:
            text = src.format == "csv" and column.kind != "categorical"
            readers[name] = _AsText(name, column.kind) if text else column
    if unit is not None and unit not in readers:
        readers[unit] = UnitColumn(unit)  # as the release reads it: text labels
    declared = set(schema.columns) | ({unit} if unit else set())
    report = CheckReport(src.name, src.format, schema_name, None, checks,
                         [c for c in header if c not in declared], unit=unit, max_rows_per_unit=bound)
    if not readers:
        return report
    read = [c for c in checks if c.status == "read"]
    table = columns is not None and len(names) > 1 and len(read) == len(names)
    axes = {c.name: Axis(c.column) for c in read}
    ids = UnitIds() if unit else None
    per_unit = np.zeros(0, dtype=np.int64)
    rows = counted = 0
    for batch in src.batches(readers):
        n = batch.num_rows
        left_out = np.zeros(n, dtype=bool)
        seen = {}
        for check in read:
            seen[check.name], dropped = check.add(batch.column(check.name), axes[check.name], rows)
            left_out |= dropped
        if ids is not None:
            units = ids.encode(seen.get(unit, batch.column(unit)))
            report.unit_missing += int(np.count_nonzero(units < 0))
            add = np.bincount(units[units >= 0])
            if len(add) > len(per_unit):
                per_unit = np.concatenate([per_unit, np.zeros(len(add) - len(per_unit), dtype=np.int64)])
            per_unit[:len(add)] += add
        counted += int(n - np.count_nonzero(left_out))
        rows += n
    report.rows = rows
    if table:
        report.table, report.table_counted = list(names), counted
    if ids is not None:
        report.unit_counts = per_unit
    return report


def _checked_names(schema: Schema, columns: str | list[str] | None) -> list[str]:
    """The columns to check: those named (each declared; UsageError otherwise), else every declared column."""
    if columns is None:
        return list(schema.columns)
    names = [c.strip() for c in columns.split(",")] if isinstance(columns, str) else list(columns)
    if not names or not all(isinstance(c, str) and c for c in names):
        raise UsageError("--columns must be a non-empty, comma-separated list of column names")
    for name in names:
        schema[name]  # UsageError naming it when the schema does not declare it
        if names.count(name) > 1:
            raise UsageError(f"--columns names {quoted(name)} twice")
    return names


def _unit(column: str | None, max_rows: int | None) -> tuple[str | None, int | None]:
    """The privacy unit and its cap, both or neither (UsageError otherwise, as a release says)."""
    if column is None:
        if max_rows is not None:
            raise UsageError("--max-rows-per-unit needs --privacy-unit COLUMN")
        return None, None
    if not column.strip():
        raise UsageError("the privacy unit must be a column name")
    if max_rows is None:
        raise UsageError(f"--privacy-unit {quoted(column, '')} needs --max-rows-per-unit K: the most rows one unit may "
                         "add to the counts")
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise UsageError("--max-rows-per-unit must be a whole number, at least 1")
    return column.strip(), max_rows
