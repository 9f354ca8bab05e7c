"""Pictures of a release (post-processing: reads the release directory only).

One column: a bar per cell with its 95 % interval where the release has one: an error bar where it covers the
cell's count, a band over a bucket's cells where it covers the bucket's share (ci_covers "bucket share": the
bucket's true total ÷ its cells).  Two columns: a heat map.  Three: small multiples, one heat map per value of the
first column (at most 16 panels).  A note in the figure says where the table has no intervals (and why, from the
report) or where they cover bucket shares.  The picture is written whole or not at all (a temp file renamed into
place).  Needs matplotlib, an optional extra: ``pip install 'dphist[plot]'``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UsageError
from .output_file import atomic_output
from .synth import choose_table, load_report, read_table
from ..text import quoted

__all__ = ["plot_release", "picture_suffixes", "table_figure", "MAX_PANELS"]

MAX_PANELS = 16
_MAX_INCHES = 30.0  # a bar chart's width: beyond ~100 bars the labels thin out anyway (at most ~25 are shown)
# Formats matplotlib lists but cannot write on its own: pgf runs LaTeX to measure the text.
_NEEDS_MORE = {".pgf"}


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("dphist plot needs matplotlib, which is not installed: pip install 'dphist[plot]'") from None
    return plt


def picture_suffixes() -> set[str]:
    """The file name endings a picture can have (``.png``, ``.pdf``, ``.svg``, ...: what matplotlib writes by
    itself).  UsageError if matplotlib is not installed."""
    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    return {f".{kind}" for kind in FigureCanvasBase.get_supported_filetypes()} - _NEEDS_MORE


def plot_release(directory: str | Path, out: str | Path, table: str | None = None) -> Path:
    """Draw one released table to ``out``, a picture of the type its suffix names (see ``picture_suffixes``),
    written whole or not at all.  UsageError for a wrong suffix or table (checked before the table is read),
    DataError for a damaged release."""
    out = Path(out)
    suffixes = picture_suffixes()
    if out.suffix.lower() not in suffixes:
        raise UsageError(f"--out {quoted(out, '')}: unknown picture type {quoted(out.suffix or '(none)')} (use "
                         f"{', '.join(sorted(suffixes))})")
    report = load_report(directory)
    meta = choose_table(report, table)
    if len(meta["shape"]) > 3:
        raise UsageError(f"table {quoted(meta['name'])} has {len(meta['shape'])} columns; plots show at most 3")
    released = read_table(directory, meta)
    plt = _pyplot()
    with np.errstate(over="ignore", invalid="ignore"):  # huge released counts are drawn, not warned about
        fig = _figure(plt, report, meta, released)
        try:
            with atomic_output(out) as fh:
                fig.savefig(fh, format=out.suffix[1:].lower(), dpi=100)
        finally:
            plt.close(fig)
    return out


def _figure(plt, report: dict, meta: dict, released):
    """The figure of a checked released table: bars, a heat map, or small multiples of heat maps."""
    counts, columns, shape = released.counts, list(released.columns), released.counts.shape
    labels = [_axis_labels(axis) for axis in released.axes]
    title = (f"{meta['name']}: ε = {meta.get('epsilon', '?')} ({meta.get('algorithm', '?')})"
             + (" — TEST MODE, NOT PRIVATE" if report.get("test_mode") else ""))
    if len(shape) == 1:
        fig, ax = plt.subplots(figsize=(min(_MAX_INCHES, max(6.0, 0.3 * shape[0])), 4.0))
        x = np.arange(shape[0])
        ax.bar(x, counts, color="#4878a8")
        if released.ci is not None and np.isfinite(released.ci[0]).any():
            _intervals(ax, x, counts, released)
        _ticks(ax.set_xticks, ax.set_xticklabels, labels[0], rotate=True)
        ax.set_xlabel(columns[0])
        ax.set_ylabel("count")
    elif len(shape) == 2:
        fig, ax = plt.subplots(figsize=(7.0, 6.0))
        _heat(fig, ax, counts, labels, columns)
    else:
        panels = min(shape[0], MAX_PANELS)
        cols = int(np.ceil(np.sqrt(panels)))
        rows = int(np.ceil(panels / cols))
        fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.6 * rows), squeeze=False)
        for i, ax in enumerate(axes.ravel()):
            if i >= panels:
                ax.axis("off")
                continue
            _heat(fig, ax, counts[i], labels[1:], columns[1:], vmax=counts.max())
            ax.set_title(f"{columns[0]} = {labels[0][i]}", fontsize=9)
        if shape[0] > MAX_PANELS:
            title += f" (first {MAX_PANELS} of {shape[0]} {columns[0]} values)"
    fig.suptitle(title)
    note = _interval_note(meta, released)
    if note:
        fig.text(0.01, 0.01, note, fontsize=8, ha="left", va="bottom", wrap=True, color="#803010")
        fig.tight_layout(rect=(0, 0.07, 1, 1))
    else:
        fig.tight_layout()
    return fig


def _intervals(ax, x: np.ndarray, counts: np.ndarray, released) -> None:
    """Draw a one-column table's intervals: error bars around the bars where they cover the cell's count, and one
    band per run of neighbouring cells of one bucket where they cover the bucket's share."""
    low, high = released.ci
    share = (released.covers == "bucket share") if released.covers is not None else np.zeros(x.size, dtype=bool)
    share &= np.isfinite(low)
    single = np.isfinite(low) & ~share
    if single.any():
        ax.errorbar(x[single], counts[single], yerr=[np.maximum(counts[single] - low[single], 0),
                                                     np.maximum(high[single] - counts[single], 0)],
                    fmt="none", ecolor="black", capsize=2, linewidth=0.8, label="95 % interval (count)")
    if share.any():
        bucket = released.bucket if released.bucket is not None else np.zeros(x.size)
        # runs of neighbouring cells in the same bucket (a bucket may be spread over the table)
        key = np.where(share, np.nan_to_num(bucket, nan=-1.0), -2.0)
        starts = np.flatnonzero(share & np.concatenate(([True], key[1:] != key[:-1])))
        ends = np.array([start + int(np.argmax(np.concatenate((key[start:] != key[start], [True])))) for start in starts])
        ax.bar((starts + ends - 1) / 2, high[starts] - low[starts], bottom=low[starts], width=ends - starts - 0.1,
               color="#e08030", alpha=0.45, edgecolor="#a05010", linewidth=0.6,
               label="95 % interval of the bucket's share (its true total ÷ its cells)")
    ax.legend(fontsize=8)


def _interval_note(meta: dict, released) -> str | None:
    """The figure's note on the table's intervals: None where they cover each cell's count."""
    interval = meta.get("interval") or {}
    covers = interval.get("covers")
    if covers is None:  # a release from before the report said it: read the columns
        if released.ci is None or not np.isfinite(released.ci[0]).any():
            covers = "none"
        elif released.covers is not None and (released.covers == "bucket share").any():
            covers = "bucket share"
    if covers == "none":
        return f"no intervals: {interval.get('reason', 'the table has none')}"
    if covers == "bucket share":
        return ("intervals cover bucket shares: where the algorithm spread one estimated total evenly over a bucket "
                "of cells, the interval holds the bucket's true total ÷ its cells, not each cell's count")
    return None


def _axis_labels(axis) -> list[str]:
    """One label per cell along an axis: the category, or the bin's lower edge ("missing" for the null cell)."""
    return ["missing" if null else str(v) for v, null in zip(axis.text, axis.null)]


def _ticks(set_ticks, set_labels, labels: list[str], rotate: bool = False) -> None:
    """At most about 25 labelled ticks, evenly spaced."""
    step = max(1, int(np.ceil(len(labels) / 25)))
    positions = np.arange(0, len(labels), step)
    set_ticks(positions)
    set_labels([labels[i] for i in positions], rotation=90 if rotate else 0, fontsize=8)


def _heat(fig, ax, counts: np.ndarray, labels: list[list[str]], columns: list[str], vmax=None) -> None:
    image = ax.imshow(counts, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=vmax,
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, label="count")
    _ticks(ax.set_yticks, ax.set_yticklabels, labels[0])
    _ticks(ax.set_xticks, ax.set_xticklabels, labels[1], rotate=True)
    ax.set_ylabel(columns[0])
    ax.set_xlabel(columns[1])


def table_figure(report: dict, meta: dict, released, *, log_scale: bool = False):
    """The figure of one released table (``report`` from ``load_report``, ``meta`` from ``choose_table``,
    ``released`` from ``read_table``): what ``dphist plot`` draws, as a matplotlib Figure the caller closes.
    ``log_scale`` is accepted for the richer pictures to come and not used yet.  UsageError if matplotlib is not
    installed."""
    plt = _pyplot()
    with np.errstate(over="ignore", invalid="ignore"):
        return _figure(plt, report, meta, released)
