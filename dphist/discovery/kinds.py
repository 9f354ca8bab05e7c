"""Reading a column for discovery, and the type of a CSV column chosen privately (docs/algorithms.md §9.1).

A stored type (Parquet, DataFrame) gives the kind directly (:func:`kind_of`).  A CSV column stores none: its kind
(integer, float, date or text) is one permute-and-flip draw on how many values look like each, a value being in
exactly one class, so each score has sensitivity 1 (:func:`choose_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataError
from ..privacy import PrivacyBudget, format_fraction
from ..read.counting import as_text, days_since_epoch
from ..read.sources import kinds_of
from ..text import quoted

__all__ = ["KINDS", "AUTO", "TYPE_SHARE", "kind_of", "typed_text", "TextAs", "choose_kind", "text_of", "labels_of",
           "numbers_of"]

KINDS = ("integer", "float", "date", "categorical")
#: A column whose type the data must tell (CSV): chosen privately among KINDS.
AUTO = "auto"
_LOOKS_LIKE = {  # disjoint classes of non-empty text values, one per kind (the rest is text)
    "integer": r"^\s*[-+]?\d+\s*$",
    "float": r"^\s*[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)\s*$",
    "date": r"^\s*\d{4}-\d{2}-\d{2}([Tt ][0-9:.]+\s*([Zz]|[+-]\d{2}(:?\d{2})?)?)?\s*$",
}
TYPE_SHARE = Fraction(1, 4)


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


def text_of(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Plain text, exactly as the counting pass reads labels (:func:`~dphist.read.counting.as_text`)."""
    values = as_text(values)
    return pc.cast(values.dictionary_decode() if pa.types.is_dictionary(values.type) else values, pa.string())


def labels_of(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.utf8_normalize(text_of(values), "NFC")


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


def numbers_of(values: pa.Array | pa.ChunkedArray, kind: str, name: str) -> np.ndarray:
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
