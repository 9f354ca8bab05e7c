"""Synthetic microdata from a published release (post-processing: reads the release, never the private data).

A table's released counts, normalised, are a distribution over its cells.  ``synthesize`` draws cells from it
(a multinomial sample of the requested number of rows), then a value inside each drawn cell: uniform over a
numeric bin [lower, upper), a uniform day of a date bin, the label of a categorical cell, and a missing value
for a null cell.  Rows re-binned with the release's bins therefore follow the released counts up to multinomial
sampling error, and every association the release does not contain (inside a bin, or between columns of
different tables) is absent.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import DataError, UsageError

__all__ = ["load_release", "synthesize"]

_SUFFIXES = (".csv", ".parquet", ".json")


def load_release(directory: str | Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The report and every table of a release directory written by ``dphist release``."""
    directory = Path(directory)
    report_path = directory / "report.json"
    if not report_path.is_file():
        raise UsageError(f"{directory}: not a dphist release (no report.json)")
    try:
        report = json.loads(report_path.read_text())
        names = [t["name"] for t in report["tables"]]
    except (ValueError, KeyError, TypeError):
        raise DataError(f"{report_path}: not a dphist release report") from None
    tables = {}
    for name in names:
        path = next((directory / f"{name}{s}" for s in _SUFFIXES if (directory / f"{name}{s}").is_file()), None)
        if path is None:
            raise DataError(f"{directory}: table '{name}' is listed in report.json but its file is missing")
        try:
            if path.suffix == ".csv":
                tables[name] = pd.read_csv(path, keep_default_na=False, na_values=[""])
            elif path.suffix == ".parquet":
                tables[name] = pd.read_parquet(path)
            else:
                tables[name] = pd.read_json(path, orient="records")
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot read the released table ({type(exc).__name__})") from None
    return report, tables


def synthesize(directory: str | Path, rows: int, table: str | None = None,
               rng: np.random.Generator | None = None) -> pd.DataFrame:
    """``rows`` synthetic records drawn from one released table (``table``; optional if there is only one).

    Columns are the table's columns, in order.  Randomness: ``rng`` (default: fresh OS entropy); it needs no
    cryptographic strength, since the release is already private and this is post-processing.
    """
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 0:
        raise UsageError("rows must be a non-negative integer")
    report, tables = load_release(directory)
    if table is None:
        if len(tables) != 1:
            raise UsageError(f"the release has {len(tables)} tables: choose one with --table "
                             f"({', '.join(tables)})")
        table = next(iter(tables))
    if table not in tables:
        raise UsageError(f"the release has no table '{table}' (it has: {', '.join(tables)})")
    meta = next(t for t in report["tables"] if t["name"] == table)
    frame = tables[table]
    counts = pd.to_numeric(frame["count"], errors="coerce").fillna(0).clip(lower=0).to_numpy(np.float64)
    if counts.sum() <= 0:
        raise DataError(f"table '{table}': every released count is 0, so there is nothing to sample from")
    rng = rng or np.random.default_rng()
    cells = np.repeat(np.arange(counts.size), rng.multinomial(rows, counts / counts.sum()))
    rng.shuffle(cells)
    out = {}
    for column in meta["columns"]:
        kind = meta["domain"][column]["type"]
        if kind == "categorical":
            out[column] = frame[column].to_numpy(object)[cells]
        elif kind == "numeric":
            out[column] = _uniform(frame, column, cells, rng, float)
        elif kind == "date":
            out[column] = _dates(frame, column, cells, rng)
        else:
            raise DataError(f"table '{table}': column '{column}' has an unknown type '{kind}'")
    return pd.DataFrame(out)


def _bounds(frame: pd.DataFrame, column: str, cells: np.ndarray, parse) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lower = frame[f"{column}_lower"].to_numpy(object)[cells]
    upper = frame[f"{column}_upper"].to_numpy(object)[cells]
    null = pd.isna(lower)
    lo = np.array([parse(v) if not n else 0 for v, n in zip(lower, null)], dtype=np.float64)
    hi = np.array([parse(v) if not n else 0 for v, n in zip(upper, null)], dtype=np.float64)
    return lo, hi, null


def _uniform(frame, column, cells, rng, parse) -> np.ndarray:
    lo, hi, null = _bounds(frame, column, cells, parse)
    values = lo + (hi - lo) * rng.random(cells.size)  # uniform on [lower, upper)
    values[null] = np.nan
    return values


def _dates(frame, column, cells, rng) -> np.ndarray:
    epoch = _dt.date(1970, 1, 1)

    def day(text) -> int:
        return (_dt.date.fromisoformat(str(text)) - epoch).days
    lo, hi, null = _bounds(frame, column, cells, day)
    days = lo + np.floor((hi - lo) * rng.random(cells.size))  # a uniform day of the bin
    out = np.array([None] * cells.size, dtype=object)
    for i in np.flatnonzero(~null):
        out[i] = epoch + _dt.timedelta(days=int(days[i]))
    return out
