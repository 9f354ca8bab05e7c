"""One output file (dphist/products/output_file.py): checked before any work, written whole or not at all (no temporary
file left by a failed write), and the same table whatever the chunks it is written in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dphist.errors import DataError
from dphist.products.output_file import atomic_output, check_output_file, write_frames


def entries(folder) -> list[str]:
    """Every name in ``folder``, hidden ones included."""
    return sorted(p.name for p in folder.iterdir())


def test_check_output_file_accepts_a_new_file_and_creates_nothing(tmp_path):
    assert check_output_file(tmp_path / "x.CSV", False, {".csv"}) == tmp_path / "x.CSV"  # suffix case-blind
    assert entries(tmp_path) == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_a_failed_write_leaves_neither_the_file_nor_a_temp_file(tmp_path, error):
    target = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt if error is KeyboardInterrupt else DataError):
        with atomic_output(target) as fh:
            fh.write(b"half")
            raise error(28, "No space left on device")
    assert entries(tmp_path) == []


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_write_frames_is_the_whole_table_whatever_the_chunks(tmp_path, fmt):
    rng = np.random.default_rng(0)
    whole = pd.DataFrame({"x": rng.random(30), "label": np.array(["a", None, "b"] * 10, dtype=object),
                          "day": np.array([pd.Timestamp("2024-01-02").date(), None, None] * 10, dtype=object)})
    whole.loc[5, "x"] = np.nan
    # An empty chunk first, and a chunk whose 'label' and 'day' are all missing.
    pieces = [whole.iloc[:0], whole.iloc[:1], whole.iloc[1:2], whole.iloc[2:17], whole.iloc[17:]]
    with atomic_output(tmp_path / f"w.{fmt}") as fh:
        assert write_frames(fh, iter(pieces), fmt, prototype=whole.iloc[:1]) == 30
    path = tmp_path / f"w.{fmt}"
    if fmt == "csv":
        assert path.read_text() == whole.to_csv(index=False, lineterminator="\n")
        one = whole[["label"]]  # alone on its line, an empty field is written "" (pandas' own path)
        with atomic_output(tmp_path / "one.csv") as fh:
            write_frames(fh, iter([one.iloc[:2], one.iloc[2:]]), fmt)
        assert (tmp_path / "one.csv").read_text() == one.to_csv(index=False, lineterminator="\n")
    elif fmt == "json":
        assert path.read_text() == whole.to_json(orient="records", force_ascii=False) + "\n"
    else:
        back = pd.read_parquet(path)
        assert pq.ParquetFile(path).schema_arrow.field("day").type == pa.date32()
        for column in whole:  # the same values and the same missing ones, in order
            assert back[column].isna().tolist() == whole[column].isna().tolist()
            assert back[column].dropna().tolist() == whole[column].dropna().tolist()
