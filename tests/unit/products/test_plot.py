"""Pictures of a release (dphist/products/plot.py, ``dphist plot``): a valid PNG for 1-D, 2-D and 3-D releases; a clear
message for more columns and without matplotlib; intervals as error bars (counts) or bands (bucket shares), and a
note where a table has none or they cover bucket shares."""

from __future__ import annotations

import struct
import sys

import numpy as np
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


def drawn(tmp_path, algorithm: str, columns: str = "age"):
    """The figure of a seeded release of ``columns`` by ``algorithm``, and its table as plot reads it."""
    from dphist.products import plot
    from dphist.products.synth import choose_table, load_report, read_table

    out = tmp_path / algorithm
    result = invoke(["release", *ARGS, "-c", columns, "-e", "1", "-a", algorithm, "--seed", "7", "-o", str(out),
                     "-q"])
    assert result.exit_code == 0, result.output
    report = load_report(out)
    meta = choose_table(report, None)
    released = read_table(out, meta)
    plt = plot._pyplot()
    fig = plot._figure(plt, report, meta, released)
    texts = [t.get_text() for t in fig.texts if t is not fig._suptitle]  # the notes
    labels = [c.get_label() for c in fig.axes[0].containers]
    plt.close(fig)
    return meta, released, texts, labels


def test_bucket_shares_are_drawn_as_bands_and_noted(tmp_path):
    """AHP on age (seed 7) puts some ages in shared clusters: those cells get one band per run of neighbouring
    cells of a cluster, the others error bars, and the figure says what the bands cover."""
    meta, released, texts, labels = drawn(tmp_path, "ahp")
    assert meta["interval"]["covers"] == "bucket share"
    assert (released.covers == "bucket share").any() and (released.covers == "count").any()
    assert np.isfinite(released.bucket[released.covers == "bucket share"]).all()
    assert any("bucket's share" in label for label in labels) and any("(count)" in label for label in labels)
    assert any(t.startswith("intervals cover bucket shares") for t in texts)


def test_no_intervals_are_noted_with_the_reason(tmp_path):
    meta, released, texts, labels = drawn(tmp_path, "mwem")
    assert not np.isfinite(released.ci[0]).any() and (released.covers == "").all()
    assert texts == [f"no intervals: {meta['interval']['reason']}"]
    assert not any("interval" in label for label in labels)


@pytest.mark.parametrize("columns", ["age", "age,sex"])
def test_count_intervals_need_no_note(tmp_path, columns):
    _, released, texts, labels = drawn(tmp_path, "identity", columns)
    assert (released.covers == "count").all() and texts == []
    assert (len(columns.split(",")) > 1) or labels[-1] == "95 % interval (count)"


def test_a_heat_map_of_bucket_shares_is_noted(tmp_path):
    meta, _, texts, _ = drawn(tmp_path, "ahp", "age,sex")
    assert meta["interval"]["covers"] == "bucket share"
    assert len(texts) == 1 and texts[0].startswith("intervals cover bucket shares")
