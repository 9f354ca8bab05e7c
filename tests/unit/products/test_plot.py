"""Pictures of a release (dphist/products/plot.py, ``dphist plot``): a valid PNG for 1-D, 2-D and 3-D releases; a clear
message for more columns and without matplotlib."""

from __future__ import annotations

import struct
import sys

import pytest

from dphist.errors import UsageError
from dphist.products.plot import plot_release

from cli_harness import invoke
from conftest import SAMPLE

ARGS = [str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml")]


def release(tmp_path, columns: str):
    out = tmp_path / columns.replace(",", "_")
    result = invoke(["release", *ARGS, "-c", columns, "-e", "1", "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("columns", ["age", "age,sex", "sex,education,marital_status"])
def test_plot_writes_a_sane_png(tmp_path, columns):
    rel = release(tmp_path, columns)
    out = tmp_path / "chart.png"
    result = invoke(["plot", str(rel), "-o", str(out)])
    assert result.exit_code == 0, result.output
    width, height = png_size(out)
    assert 300 <= width <= 4000 and 200 <= height <= 4000
    assert 5_000 < out.stat().st_size < 5_000_000
    again = invoke(["plot", str(rel), "-o", str(out)])
    assert again.exit_code == 2 and "exists" in again.stderr


def test_four_columns_and_missing_matplotlib_are_clear_errors(tmp_path, monkeypatch):
    rel = release(tmp_path, "sex,education,marital_status,age")
    with pytest.raises(UsageError, match="plots show at most 3"):
        plot_release(rel, tmp_path / "x.png")
    rel1 = release(tmp_path, "sex")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now fails, as if not installed
    result = invoke(["plot", str(rel1), "-o", str(tmp_path / "y.png")])
    assert result.exit_code == 2 and "pip install 'dphist[plot]'" in result.stderr
    assert not (tmp_path / "y.png").exists()
