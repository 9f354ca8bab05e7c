"""CSV text byte for byte as pandas' ``to_csv`` writes it, column by column, made by Arrow instead of Python.

pandas formats every cell in Python (about 6 s per million rows of a release table).  Here label columns, which
repeat a few values, have each distinct value formatted once, by pandas, and repeated; integers (nullable ones too,
a null written as an empty field) are cast by Arrow;
floats are cast by Arrow and written with repr's rules, as pandas writes them.  The release writer
(:mod:`dphist.publishing.writers`) and the single output files (:mod:`dphist.products.output_file`) both write
their CSV with it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["csv_column"]


def csv_column(series: pd.Series):
    """A function (start, stop) -> the CSV text of those rows of ``series``, as a string array without nulls."""
    values = series.to_numpy() if isinstance(series.dtype, np.dtype) else None
    if values is not None and values.dtype.kind in "iu":
        return lambda start, stop: pc.cast(pa.array(values[start:stop]), pa.string())
    if values is not None and values.dtype == np.float64:
        return lambda start, stop: _float_text(values[start:stop])
    if isinstance(series.dtype, pd.Int64Dtype):  # nullable integers (a table's bucket numbers): null as empty
        numbers = pa.array(series.array, type=pa.int64())
        return lambda start, stop: pc.fill_null(pc.cast(numbers.slice(start, stop - start), pa.string()), "")
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    text = pa.array(_pandas_fields(pd.Series(uniques, dtype=series.dtype)) + [""], type=pa.string())
    codes = np.where(codes < 0, len(uniques), codes)
    return lambda start, stop: text.take(codes[start:stop])


def _float_text(values: np.ndarray) -> pa.Array:
    """Floats as pandas writes them: repr, and NaN as an empty field.

    Arrow's cast writes the same shortest round-trip digits as repr; for 1e-4 <= |x| < 1e16 (and zeros)
    repr writes them plainly too, adding ".0" to whole numbers.  The rest (NaN, infinities, tiny and huge
    values, and any Arrow writes with an exponent) are written by repr itself.
    """
    text = pc.cast(pa.array(values), pa.string())
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(values)
        plain = ((magnitude >= 1e-4) & (magnitude < 1e16)) | (values == 0)
        plain &= ~pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
        whole = plain & (values == np.floor(values))  # written without a point when not in exponent form
    if whole.any():
        text = pc.if_else(pa.array(whole), pc.binary_join_element_wise(text, ".0", ""), text)
    other = np.flatnonzero(~plain)
    if len(other):
        written = ["" if v != v else repr(v) for v in values[other].tolist()]
        mask = np.zeros(len(values), dtype=bool)
        mask[other] = True
        text = pc.replace_with_mask(text, pa.array(mask), pa.array(written, type=pa.string()))
    return text


def _pandas_fields(values: pd.Series) -> list[str]:
    """Each value as pandas writes it as one field of a CSV row (quoted where it must be)."""
    written = pd.DataFrame({"v": values, "w": 0}).to_csv(index=False, header=False, lineterminator="\n")
    fields, pos = [], 0
    while pos < len(written):
        if written[pos] == '"':  # quoted: up to the quote not doubled
            end = pos + 1
            while True:
                end = written.index('"', end)
                if written.startswith('""', end):
                    end += 2
                    continue
                break
            end += 1
        else:
            end = written.index(",", pos)
        fields.append(written[pos:end])
        if not written.startswith(",0\n", end):  # a pandas change; fail loudly rather than misalign
            raise RuntimeError("unexpected CSV layout")
        pos = end + 3
    if len(fields) != len(values):  # pragma: no cover - a pandas change; fail loudly rather than misalign
        raise AssertionError("unexpected CSV layout")
    return fields
