"""Pictures of a release (dphist/products/plots/, ``dphist plot``): a valid PNG for 1-D, 2-D and 3-D releases; a clear
message for more columns and without matplotlib; and, read off the figure objects (no pixels): clean bin labels
and open ends, intervals drawn visibly (error bars with caps above the bars, bands for bucket shares, hatching on
heat maps), a note where a table has none (for every algorithm that gives none) or where they cover bucket
shares, a perceptual colour map with a log option, square cells for numeric grids, the release's budget and the
table's share in the title, and the test-mode banner."""

from __future__ import annotations

import re
import struct
import sys

import numpy as np
import pandas as pd
import pytest

from dphist.errors import UsageError
from dphist.products.plot import auto_log_scale, plot_release, table_figure
from dphist.products.synth import choose_table, load_report, read_table

from cli_harness import invoke
from conftest import SAMPLE

ARGS = [str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml")]
# Bin edges as float steps leave them (0.16999999999999998 for 0.17): what a schema written by a program may hold.
NOISY_EDGES = [0.0, 0.1, 0.16999999999999998, *np.cumsum([0.1] + [0.07] * 12).tolist()[2:]]


def release(tmp_path, columns: str, *extra, data=ARGS, name=None):
    out = tmp_path / (name or columns.replace(",", "_"))
    result = invoke(["release", *data, "-c", columns, "-e", "1", "-o", str(out), "-q", "--seed", "7", *extra])
    assert result.exit_code == 0, result.output
    return out


def figure(directory, log_scale: bool = False):
    """The figure of a release's only table, with its report entry and table as plot reads them."""
    report = load_report(directory)
    meta = choose_table(report, None)
    released = read_table(directory, meta)
    return table_figure(report, meta, released, log_scale=log_scale), meta, released


def texts(fig, gid: str) -> list[str]:
    return [t.get_text() for t in fig.texts if t.get_gid() == gid]


def ticks(labels) -> list[str]:
    return [t.get_text() for t in labels]


@pytest.fixture(scope="module")
def floats(tmp_path_factory):
    """A small hand-made table of float columns: a ratio around 0.5, and a latitude × longitude cloud."""
    d = tmp_path_factory.mktemp("floats")
    rng = np.random.default_rng(1)
    n = 3000
    frame = pd.DataFrame({"ratio": np.round(rng.normal(0.5, 0.2, n), 3),
                          "lat": np.round(rng.normal(40.7, 0.05, n), 4),
                          "lon": np.round(rng.normal(-74.0, 0.06, n), 4),
                          "group": rng.choice(["alpha", "a very long category label number one", "b"], n)})
    frame.to_csv(d / "floats.csv", index=False)
    frame.to_parquet(d / "floats.parquet")
    edges = ", ".join(repr(e) for e in NOISY_EDGES)
    (d / "schema.yaml").write_text(
        f"columns:\n  ratio: {{type: numeric, edges: [{edges}]}}\n"
        "  lat: {type: numeric, lower: 40.5, upper: 40.9, width: 0.02}\n"
        "  lon: {type: numeric, lower: -74.2, upper: -73.8, width: 0.025}\n"
        "  group: {type: categorical, values: [alpha, a very long category label number one, b]}\n",
        encoding="utf-8")
    return d


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


# ---- files -------------------------------------------------------------------------------------------------------


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
    with pytest.raises(UsageError, match="needs matplotlib"):
        figure(rel1)


# ---- labels ------------------------------------------------------------------------------------------------------


def test_bin_edges_print_as_clean_decimals(tmp_path, floats):
    rel = release(tmp_path, "ratio", data=[str(floats / "floats.csv"), "-s", str(floats / "schema.yaml")])
    assert "0.16999999999999998" in (rel / "ratio.csv").read_text()  # the release holds the noisy edges
    fig, _, _ = figure(rel)
    labels = ticks(fig.axes[0].get_xticklabels())
    # (the schema clamps values outside [0, 1) into the end bins, so the first one is open: "< 0.1")
    assert labels[:3] == ["< 0.1", "[0.1, 0.17)", "[0.17, 0.24)"]
    inner = labels[1:-1]
    assert all(re.fullmatch(r"\[\d(\.\d{1,2})?, \d(\.\d{1,2})?\)", label) for label in inner), labels
    assert re.fullmatch(r"≥ \d(\.\d{1,2})?", labels[-1]), labels


def test_open_end_bins_read_below_and_at_or_above(tmp_path, floats):
    """The ratio's domain is found privately (no schema): values beyond its bounds are counted in the end bins,
    whose outer labels are open."""
    rel = release(tmp_path, "ratio", "--discovery-bins", "20", data=[str(floats / "floats.parquet")])
    fig, meta, _ = figure(rel)
    assert meta["domain"]["ratio"]["open_ends"] is True
    labels = ticks(fig.axes[0].get_xticklabels())
    bound = meta["domain"]["ratio"]
    assert labels[-1] == "missing"
    assert re.fullmatch(r"< \d(\.\d+)?", labels[0]) and labels[0] != f"< {bound['lower']}", labels
    assert re.fullmatch(r"≥ \d(\.\d+)?", labels[-2]) and labels[-2] != f"≥ {bound['upper']}", labels
    assert all(label.startswith("[") for label in labels[1:-2])


def test_long_categories_are_cut_and_x_labels_slanted(tmp_path, floats):
    rel = release(tmp_path, "group", data=[str(floats / "floats.csv"), "-s", str(floats / "schema.yaml")])
    fig, _, _ = figure(rel)
    labels = fig.axes[0].get_xticklabels()
    assert ticks(labels)[0] == "alpha" and ticks(labels)[1].endswith("…") and len(ticks(labels)[1]) <= 20
    assert labels[1].get_rotation() == 45


# ---- intervals ---------------------------------------------------------------------------------------------------


def test_count_intervals_are_error_bars_with_caps_above_the_bars(tmp_path):
    fig, _, released = figure(release(tmp_path, "age", "-a", "identity"))
    ax = fig.axes[0]
    bars = ax.containers[0]
    errorbars = [c for c in ax.containers if c.__class__.__name__ == "ErrorbarContainer"]
    assert len(errorbars) == 1
    _, caps, (lines,) = errorbars[0].lines
    assert len(caps) == 2 and caps[0].get_markersize() >= 3  # caps, wide enough to see
    assert lines.get_zorder() > bars.patches[0].get_zorder()  # drawn above the bars
    assert lines.get_linewidth() >= 1.2
    bar_colour, line_colour = bars.patches[0].get_facecolor(), lines.get_colors()[0]
    assert abs(np.mean(bar_colour[:3]) - np.mean(line_colour[:3])) > 0.4  # dark on a light bar
    # ± 3 on counts of ~5000 is thinner than a line: the legend says how wide they are, and that they cannot be seen
    label = errorbars[0].get_label()
    half = (released.ci[1] - released.ci[0]) / 2
    assert f"± {int(half.min())}" in label and "too narrow to see" in label
    assert texts(fig, "note") == []


def test_bucket_shares_are_drawn_as_bands_and_noted(tmp_path):
    """AHP on age (seed 7) puts some ages in shared clusters: those cells get one band per run of neighbouring
    cells of a cluster, the others error bars, and the figure says what the bands cover."""
    fig, meta, released = figure(release(tmp_path, "age", "-a", "ahp"))
    assert meta["interval"]["covers"] == "bucket share"
    assert (released.covers == "bucket share").any() and (released.covers == "count").any()
    assert np.isfinite(released.bucket[released.covers == "bucket share"]).all()
    labels = [c.get_label() for c in fig.axes[0].containers]
    assert any("bucket's share" in label for label in labels) and any("each count" in label for label in labels)
    assert len(texts(fig, "note")) == 1 and texts(fig, "note")[0].startswith("Intervals cover bucket shares")


@pytest.mark.parametrize("algorithm, columns", [("mwem", "age"), ("efpa", "age"), ("noisefirst", "age"),
                                                ("dpcube", "age,income"), ("kdtree", "age,income")])
def test_every_algorithm_without_intervals_gets_the_note_with_its_reason(tmp_path, algorithm, columns):
    fig, meta, released = figure(release(tmp_path, columns, "-a", algorithm))
    assert meta["interval"]["covers"] == "none" and not np.isfinite(released.ci[0]).any()
    reason = meta["interval"]["reason"]
    (note,) = texts(fig, "note")
    assert note.startswith("No 95 % intervals:") and " ".join(note.split()).endswith(" ".join(reason.split()))
    assert not [c for c in fig.axes[0].containers if "interval" in str(c.get_label())]
    assert not [p for p in fig.axes[0].patches if p.get_hatch()]  # nor hatching on a heat map


def test_heat_maps_hatch_counts_whose_interval_includes_zero(tmp_path):
    fig, _, released = figure(release(tmp_path, "age,income", "-a", "identity"))
    ax = fig.axes[0]
    low = released.ci[0].reshape(released.counts.shape)
    expected = int(((low <= 0) & (released.counts != 0)).sum())
    assert expected > 0
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert sum(len(p.get_path().vertices) for p in hatched) == 5 * expected  # one square per such cell
    (note,) = texts(fig, "note")
    assert note.startswith("Hatched cells") and "includes 0" in note
    assert ax.get_aspect() == 1.0  # two numeric columns: square cells


def test_count_intervals_on_a_categorical_heat_map_need_no_note(tmp_path):
    fig, _, released = figure(release(tmp_path, "age,sex", "-a", "identity"))
    assert (released.covers == "count").all() and (released.ci[0] > 0).all()
    assert texts(fig, "note") == [] and not fig.axes[0].patches


def test_a_heat_map_of_bucket_shares_is_noted(tmp_path):
    fig, meta, _ = figure(release(tmp_path, "age,sex", "-a", "ahp"))
    assert meta["interval"]["covers"] == "bucket share"
    assert texts(fig, "note")[0].startswith("Intervals cover bucket shares")


# ---- colours, cells, title ---------------------------------------------------------------------------------------


def test_heat_maps_are_viridis_with_a_log_option_and_clean_colour_bar_labels(tmp_path):
    from matplotlib.colors import Normalize, SymLogNorm

    rel = release(tmp_path, "age,income", "-a", "identity")
    linear, _, released = figure(rel)
    image = linear.axes[0].images[0]
    assert image.get_cmap().name == "viridis"
    assert type(image.norm) is Normalize and image.norm.vmin == 0 and image.norm.vmax == released.counts.max()
    log, _, _ = figure(rel, log_scale=True)
    image = log.axes[0].images[0]
    assert isinstance(image.norm, SymLogNorm) and image.norm(0) == 0  # released zeros have a colour
    bar = log.axes[-1]
    labels = [label for label in (bar.get_yticklabels()) if label.get_text()]
    shown = [label.get_text() for label in labels]
    assert shown == ["0", "1", "10", "100", "1,000"], shown
    assert "log" in bar.get_ylabel()


def test_log_is_chosen_for_heat_maps_whose_counts_span_two_decades(tmp_path):
    assert auto_log_scale([0, 0, 1, 2, 3, 5, 1000])  # 1000 > 100 × 2 (lower quartile of the counts ≥ 1)
    assert not auto_log_scale([0, 0, 40, 50, 60, 900])
    assert not auto_log_scale([0, 0, 0, 7])
    rel = release(tmp_path, "age,income", "-a", "identity")
    assert auto_log_scale(read_table(rel, choose_table(load_report(rel), None)).counts)
    drawn = []
    import dphist.products.plots.output as output

    def spy(*args, log_scale):
        from matplotlib.figure import Figure

        drawn.append(log_scale)
        return Figure(figsize=(1, 1))

    with pytest.MonkeyPatch.context() as patch:  # what plot asks table_figure for (the drawing is tested above)
        patch.setattr(output, "table_figure", spy)
        for flag in ([], ["--linear"], ["--log"]):
            assert invoke(["plot", str(rel), "-o", str(tmp_path / f"p{len(drawn)}.png"), *flag]).exit_code == 0
    assert drawn == [True, False, True]


def test_bars_take_log_on_request_only(tmp_path):
    rel = release(tmp_path, "age", "-a", "identity")
    assert figure(rel)[0].axes[0].get_yscale() == "linear"
    assert figure(rel, log_scale=True)[0].axes[0].get_yscale() == "symlog"
    linear, log = tmp_path / "a.png", tmp_path / "b.png"
    assert invoke(["plot", str(rel), "-o", str(linear)]).exit_code == 0
    assert invoke(["plot", str(rel), "-o", str(log), "--log"]).exit_code == 0
    assert linear.read_bytes() != log.read_bytes()


def test_numeric_grids_have_square_cells(tmp_path, floats):
    rel = release(tmp_path, "lat,lon", data=[str(floats / "floats.csv"), "-s", str(floats / "schema.yaml")])
    assert figure(rel)[0].axes[0].get_aspect() == 1.0  # (age × income too: see the hatching test)


def test_heat_maps_of_categories_fill_the_panel(tmp_path):
    assert figure(release(tmp_path, "age,sex"))[0].axes[0].get_aspect() == "auto"
    three, _, _ = figure(release(tmp_path, "sex,education,marital_status"))
    assert {ax.get_aspect() for ax in three.axes if ax.images} == {"auto"}


def test_the_title_gives_the_release_budget_and_the_table_share(tmp_path, floats):
    """A release with an undeclared column spends part of ε finding its domain: the table has less than the
    release's ε, and the title says both."""
    fig, meta, _ = figure(release(tmp_path, "ratio", data=[str(floats / "floats.parquet")]))
    assert meta["epsilon"] == "0.75"
    assert texts(fig, "title") == ["ratio — release ε = 1 (this table 0.75), identity"]
    assert texts(fig, "banner") == ["TEST MODE — seeded noise, NOT differentially private"]
    out = tmp_path / "zcdp"
    result = invoke(["release", *ARGS, "-c", "age,sex", "--rho", "0.5", "-o", str(out), "-q", "--seed", "1",
                     "-a", "identity"])
    assert result.exit_code == 0, result.output
    (title,) = texts(figure(out)[0], "title")
    assert title == "age × sex — release ρ = 0.5 (this table 0.5), identity"


def test_a_private_release_has_no_banner(tmp_path):
    rel = release(tmp_path, "sex")
    report = load_report(rel)
    report["test_mode"] = False
    meta = choose_table(report, None)
    fig = table_figure(report, meta, read_table(rel, meta))
    assert texts(fig, "banner") == [] and len(texts(fig, "title")) == 1
