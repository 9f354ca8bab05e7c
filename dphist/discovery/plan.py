"""What discovery is asked to do: the columns, their kinds and the budget, checked before any row is read."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..declare.schema import Column, parse_schema
from ..errors import UsageError
from ..privacy import equal_part
from ..text import quoted
from .kinds import AUTO

__all__ = ["DEFAULT_SHARE", "DEFAULT_BINS", "DEFAULT_MAX_CATEGORIES", "BINNINGS", "DiscoveryPlan", "may_need_delta",
           "needs_delta"]

#: The share of a release's ε that finds the domains of the undeclared columns, split equally among them.
DEFAULT_SHARE = Fraction(1, 4)
DEFAULT_BINS = 16
DEFAULT_MAX_CATEGORIES = 100
#: How discovered numeric bounds are cut into bins: equal widths, or cut points at DP quantiles.
BINNINGS = ("equal-width", "quantiles")


@dataclass(frozen=True)
class _Reader:
    """How the reader should load a discovered column: numbers as float64, dates, anything else as labels."""

    name: str
    kind: str


def may_need_delta(kind: str) -> bool:
    return kind in ("categorical", AUTO)


def needs_delta(kinds: dict[str, str]) -> bool:
    """Whether discovering columns of ``kinds`` may need partition selection (a text column, or a CSV column of
    unknown type): only then can it use a δ."""
    return any(may_need_delta(k) for k in kinds.values())


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
        categorical = [n for n, k in self.kinds.items() if may_need_delta(k)]
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
        categorical = sum(may_need_delta(k) for k in self.kinds.values())
        return equal_part(self.delta, categorical) if categorical else Fraction(0)

    def placeholders(self) -> dict[str, Column]:
        """Columns of the largest size discovery can give each column (numeric and date: ``bins`` + the null
        cell, dates by year up to 200; categorical: ``max_categories`` + the null cell), to check table shapes
        before any data is read."""
        out = {}
        for name, kind in self.kinds.items():
            if may_need_delta(kind):
                size = max(self.max_categories, 200 if kind == AUTO else 0)
                decl = {"type": "categorical", "values": [f"#{i}" for i in range(size)]}
            else:
                decl = {"type": "numeric", "lower": 0, "upper": 1, "bins": 200 if kind == "date" else self.bins}
            out[name] = parse_schema({"columns": {name: {**decl, "nulls": "category"}}}, "placeholder")[name]
        return out

    def readers(self) -> dict[str, _Reader]:
        kinds = {"integer": "numeric", "float": "numeric", AUTO: "categorical"}  # AUTO: read as text
        return {n: _Reader(n, kinds.get(k, k)) for n, k in self.kinds.items()}
