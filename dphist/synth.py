"""Synthetic microdata from a published release (post-processing: reads the release, never the private data).

A table's released counts, normalised, are a distribution over its cells.  ``synthesize`` draws cells from it
(a multinomial sample of the requested number of rows), then a value inside each drawn cell: uniform over a
numeric bin [lower, upper), a uniform day of a date bin, the label of a categorical cell, and a missing value
for a null cell.  Rows re-binned with the release's bins therefore follow the released counts up to multinomial
sampling error, and every association the release does not contain (inside a bin, or between columns of
different tables) is absent.

Joint mode (``joint=True``) draws records over the columns of all the tables together, from the maximum-entropy
table fitted to all of them by iterative proportional fitting (:mod:`dphist.ipf`).  Its limits:

- The fit reproduces the given tables but invents no association they do not contain: from {age×sex,
  sex×income} the synthetic age and income are independent given sex.
- The tables must agree (the same grand total, the same counts on shared columns, the same bins), as the tables
  of ``dphist release --marginals`` do; otherwise no table has all of them as marginals and synthesis refuses.
- With cycles among the tables (e.g. ab, bc, ca) the fit can converge slowly, and after 1000 sweeps it may still
  miss some marginals; the records are drawn anyway, with a warning.
- The fitted table over the union of the columns may have at most 2**24 cells, and each sweep costs
  O(cells × tables).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import DataError, UsageError
from .ipf import fit_max_entropy
from .marginals import derive_marginal

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
               rng: np.random.Generator | None = None, joint: bool = False) -> pd.DataFrame:
    """``rows`` synthetic records drawn from one released table (``table``; optional if there is only one), or
    with ``joint`` from all of them together.

    Columns are the table's columns, in order; with ``joint``, the union of all tables' columns in order of first
    appearance, drawn from the maximum-entropy table fitted to every table (see the module docstring for its
    limits; a release of one table gives the same records as without ``joint``).  Joint mode raises DataError if
    the tables disagree (grand totals, counts on shared columns, or bins), and warns (RuntimeWarning) if the fit
    did not converge.  Randomness: ``rng`` (default: fresh OS entropy); it needs no cryptographic strength, since
    the release is already private and this is post-processing.
    """
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 0:
        raise UsageError("rows must be a non-negative integer")
    if joint and table is not None:
        raise UsageError("--table and --joint exclude each other: --joint draws over all the tables")
    report, tables = load_release(directory)
    rng = rng or np.random.default_rng()
    if joint and len(tables) > 1:
        return _synthesize_joint(report, tables, rows, rng)
    if table is None:
        if len(tables) != 1:
            raise UsageError(f"the release has {len(tables)} tables: choose one with --table "
                             f"({', '.join(tables)}), or draw over all of them together with --joint")
        table = next(iter(tables))
    if table not in tables:
        raise UsageError(f"the release has no table '{table}' (it has: {', '.join(tables)})")
    meta = next(t for t in report["tables"] if t["name"] == table)
    frame = tables[table]
    cells = _sample(_counts(table, frame), rows, rng, f"table '{table}'")
    out = {}
    for column in meta["columns"]:  # one label per row of the table, indexed by the drawn rows
        kind = meta["domain"][column]["type"]
        labels = {key: _column(table, frame, key) for key in _label_columns(table, column, kind)}
        out[column] = _draw(column, kind, labels, cells, rng)
    return pd.DataFrame(out)


def _synthesize_joint(report: dict, tables: dict[str, pd.DataFrame], rows: int,
                      rng: np.random.Generator) -> pd.DataFrame:
    axes: dict[str, tuple[str, str, dict]] = {}  # column -> (first table with it, type, its bins' labels)
    grids = []
    for meta in report["tables"]:
        name = meta["name"]
        counts, labels = _grid(name, meta, tables[name])
        for column, (kind, bins) in labels.items():
            first = axes.setdefault(column, (name, kind, bins))
            if first[1] != kind or any(not _same(first[2][k], bins[k]) for k in bins):
                raise DataError(f"column '{column}' has different bins in tables '{first[0]}' and '{name}', "
                                "so they cannot be fitted together")
        grids.append((name, tuple(meta["columns"]), counts))
    for (a, columns_a, counts_a), (b, columns_b, counts_b) in itertools.combinations(grids, 2):
        shared = tuple(c for c in columns_a if c in columns_b)
        # Exact comparison: released counts are integers, exact in float64.
        if counts_a.sum() != counts_b.sum():
            why = "their grand totals differ"
        elif shared and not np.array_equal(derive_marginal(counts_a, columns_a, shared),
                                              derive_marginal(counts_b, columns_b, shared)):
            why = f"their counts over {', '.join(shared)} differ"
        else:
            continue
        raise DataError(f"tables '{a}' and '{b}' do not agree ({why}), so IPF has no exact fit: release them "
                        "together, e.g. with `dphist release --marginals`")
    sizes = {column: len(next(iter(bins.values()))) for column, (_, _, bins) in axes.items()}
    names, fit, info = fit_max_entropy([(columns, counts) for _, columns, counts in grids], sizes)
    if not info.converged:
        warnings.warn(f"the joint fit did not converge in {info.iterations} sweeps: a fitted marginal cell is off "
                      f"its released count by up to {info.max_deviation:.3g}", RuntimeWarning, stacklevel=3)
    index = np.unravel_index(_sample(fit.ravel(), rows, rng, "the released tables"), fit.shape)
    return pd.DataFrame({column: _draw(column, axes[column][1], axes[column][2], position, rng)
                         for column, position in zip(names, index)})


def _grid(name: str, meta: dict, frame: pd.DataFrame) -> tuple[np.ndarray, dict[str, tuple[str, dict]]]:
    """A released table as an array of counts of its report shape, and per column its type and the labels of
    its bins (one per index along its axis).  Checks that the rows are in C order over the columns, since the
    counts are reshaped on that promise."""
    try:
        columns, shape = list(meta["columns"]), tuple(int(s) for s in meta["shape"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"table '{name}': report.json gives no valid columns and shape") from None
    n = math.prod(shape)
    if len(columns) != len(shape) or len(frame) != n:
        raise DataError(f"table '{name}': {len(frame)} rows, but report.json gives it shape {list(shape)}")
    labels = {}
    stride = n
    for column, size in zip(columns, shape):
        stride //= size
        kind = meta["domain"][column]["type"]
        position = (np.arange(n) // stride) % size  # each row's index along this column's axis
        bins = {}
        for key in _label_columns(name, column, kind):
            values = _column(name, frame, key)
            bins[key] = values[np.arange(size) * stride]
            if not _same(bins[key][position], values):
                raise DataError(f"table '{name}': its rows are not in the order report.json describes "
                                f"(C order over {', '.join(columns)})")
        labels[column] = (kind, bins)
    return _counts(name, frame).reshape(shape), labels


def _counts(name: str, frame: pd.DataFrame) -> np.ndarray:
    if "count" not in frame:
        raise DataError(f"table '{name}': no 'count' column")
    return pd.to_numeric(frame["count"], errors="coerce").fillna(0).clip(lower=0).to_numpy(np.float64)


def _sample(weights: np.ndarray, rows: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """Flat cell indices of ``rows`` records, a multinomial sample with probabilities ∝ ``weights``, shuffled."""
    if weights.sum() <= 0:
        raise DataError(f"{what}: every released count is 0, so there is nothing to sample from")
    cells = np.repeat(np.arange(weights.size), rng.multinomial(rows, weights / weights.sum()))
    rng.shuffle(cells)
    return cells


def _label_columns(name: str, column: str, kind: str) -> list[str]:
    """The columns of a released table that label ``column``'s bins."""
    if kind == "categorical":
        return [column]
    if kind in ("numeric", "date"):
        return [f"{column}_lower", f"{column}_upper"]
    raise DataError(f"table '{name}': column '{column}' has an unknown type '{kind}'")


def _column(name: str, frame: pd.DataFrame, key: str) -> np.ndarray:
    if key not in frame:
        raise DataError(f"table '{name}': no '{key}' column")
    return frame[key].to_numpy(object)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal labels, element by element, a missing label (null bin) matching a missing one."""
    return len(a) == len(b) and bool(np.all((a == b) | (pd.isna(a) & pd.isna(b))))


def _draw(column: str, kind: str, labels: dict[str, np.ndarray], index: np.ndarray,
          rng: np.random.Generator) -> np.ndarray:
    """One value per record inside its bin, ``index`` giving each record's position in the label arrays."""
    if kind == "categorical":
        return labels[column][index]
    parse = float if kind == "numeric" else _day
    lower, upper = labels[f"{column}_lower"], labels[f"{column}_upper"]
    null = pd.isna(lower)
    # Parse each label once, then index: there are far fewer bins than records.
    lo = np.array([0 if n else parse(v) for v, n in zip(lower, null)], dtype=np.float64)[index]
    hi = np.array([0 if n else parse(v) for v, n in zip(upper, null)], dtype=np.float64)[index]
    null = null[index]
    if kind == "numeric":
        values = lo + (hi - lo) * rng.random(index.size)  # uniform on [lower, upper)
        values[null] = np.nan
        return values
    days = lo + np.floor((hi - lo) * rng.random(index.size))  # a uniform day of the bin
    out = np.array([None] * index.size, dtype=object)
    for i in np.flatnonzero(~null):
        out[i] = _EPOCH + _dt.timedelta(days=int(days[i]))
    return out


_EPOCH = _dt.date(1970, 1, 1)


def _day(text) -> int:
    return (_dt.date.fromisoformat(str(text)) - _EPOCH).days
