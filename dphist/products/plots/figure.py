"""The figure of one released table (post-processing: it reads the release, never the data).

What a reader sees, and why:

- One column: a bar per cell, and its 95 % interval where the release has one, drawn above the bar in a dark
  colour with caps (an error bar where the interval covers the cell's count; an orange band over a bucket's cells
  where it covers the bucket's share, ci_covers "bucket share": the bucket's true total ÷ its cells).  The legend
  gives the intervals' half-widths, and says so when they are too narrow to see at the scale of the counts.
- Two columns: a heat map; three: small multiples, one heat map per value of the first column (at most
  ``MAX_PANELS``), on one colour scale.  Colours are viridis (perceptually uniform), linear or, with
  ``log_scale``, symmetric-log (linear between −1 and 1, so that released zeros have a colour).  Cells whose 95 %
  interval includes 0 but whose count is not 0 are hatched (they may be noise alone).  Cells are square when both columns are numeric bins (a map-like grid such as
  latitude × longitude) and neither side has more than ``SQUARE_RATIO`` times the cells of the other; otherwise
  the map fills the panel, since square cells of categories carry no meaning.
- A note under the figure says where the table has no intervals (and the report's reason), where they cover
  bucket shares, or what the hatching means.
- The title names the columns, the release's total ε (or ρ) and this table's share of it, and the algorithm; a
  red banner marks a test-mode release as not private.

:func:`auto_log_scale` is the choice ``dphist plot`` makes when neither ``--log`` nor ``--linear`` is given: log
when the non-zero counts span more than two decades, for on a linear scale most cells would then share the
colour of the smallest counts.
"""

from __future__ import annotations

import textwrap

import numpy as np

from ...errors import UsageError
from ...text import quoted
from .labels import axis_labels, count_text
from .panels import SQUARE_RATIO, colour_norm, decade_ticks, draw_bars, draw_heat, square_cells

__all__ = ["MAX_PANELS", "SQUARE_RATIO", "table_figure", "auto_log_scale", "interval_notes"]

MAX_PANELS = 16
_MAX_INCHES = 30.0  # a bar chart's width: beyond ~100 bars the labels thin out anyway (at most ~25 are shown)
_NOTE = "#7a2a00"
_TITLE_IN, _BANNER_IN, _NOTE_LINE_IN = 0.45, 0.3, 0.16  # inches above and below the plots


def _matplotlib():
    """The matplotlib pieces drawing needs, without pyplot (no global figure state, no backend switch):
    UsageError if matplotlib is not installed."""
    try:
        from matplotlib import ticker
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("dphist plot needs matplotlib, which is not installed: pip install 'dphist[plot]'") from None
    return Figure, ticker


def auto_log_scale(counts) -> bool:
    """True when the counts of at least 1 (in absolute value) span more than two decades: the largest is over
    100 times their lower quartile.  A linear colour scale would then give most cells the colour of 0."""
    values = np.abs(np.asarray(counts, dtype=float))
    values = values[np.isfinite(values) & (values >= 1)]
    return values.size >= 2 and float(values.max()) > 100 * float(np.percentile(values, 25))


def table_figure(report: dict, meta: dict, released, *, log_scale: bool = False):
    """The figure (a ``matplotlib.figure.Figure``, not registered with pyplot: nothing to close) of one released
    table: ``report`` as ``synth.load_report`` returns it, ``meta`` its entry for the table
    (``synth.choose_table``), ``released`` the table (``synth.read_table``).  ``log_scale``: counts on a
    symmetric-log scale (the bars' axis, the heat maps' colours).  UsageError for a table of more than 3 columns
    or without matplotlib."""
    Figure, ticker = _matplotlib()
    counts = np.asarray(released.counts, dtype=float)
    columns = list(released.columns)
    if counts.ndim > 3:
        raise UsageError(f"table {quoted(meta['name'])} has {counts.ndim} columns; plots show at most 3")
    domain = meta.get("domain") or {}
    labels = [axis_labels(axis, domain.get(axis.column)) for axis in released.axes]
    notes = interval_notes(meta, released)
    title = _title(report, meta, columns)
    formatter = ticker.FuncFormatter(lambda v, _: count_text(v))
    with np.errstate(over="ignore", invalid="ignore"):  # huge released counts are drawn, not warned about
        if counts.ndim == 1:
            fig = Figure(figsize=(min(_MAX_INCHES, max(6.5, 0.32 * counts.size)), 4.2))
            ax = fig.subplots()
            draw_bars(ax, counts, labels[0], columns[0], released, log_scale, formatter)
        else:
            panels = 1 if counts.ndim == 2 else min(counts.shape[0], MAX_PANELS)
            grid = counts if counts.ndim == 2 else counts[:panels]
            square = square_cells(released.axes[-2:], counts.shape[-2:])
            norm = colour_norm(grid, log_scale)
            low = _interval_low(released, counts.shape)
            if low is not None and counts.ndim == 3:
                low = low[:panels]
            if counts.ndim == 2:
                # square cells: the panel as tall as the grid needs at ~4.6 inches wide, plus its labels
                fig = Figure(figsize=(7.5, min(9.0, max(3.6, 4.6 * counts.shape[0] / counts.shape[1] + 2.2))
                                      if square else 6.4))
                axes = [fig.subplots()]
            else:
                cols = int(np.ceil(np.sqrt(panels)))
                rows = int(np.ceil(panels / cols))
                fig = Figure(figsize=(4.2 * cols, 3.8 * rows))
                axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
                if counts.shape[0] > MAX_PANELS:
                    title += f" (first {MAX_PANELS} of {counts.shape[0]} {columns[0]} values)"
            image = None
            for i, ax in enumerate(axes):
                if i >= panels:
                    ax.axis("off")
                    continue
                cells = grid if counts.ndim == 2 else grid[i]
                # hatched: a non-zero count that may be noise (a released 0 already has the colour of 0)
                zero = None if low is None else ((low if counts.ndim == 2 else low[i]) <= 0) & (cells != 0)
                image = draw_heat(ax, cells, labels[-2:], columns[-2:], norm, square, zero)
                if counts.ndim == 3:
                    ax.set_title(f"{columns[0]} = {labels[0][i]}", fontsize=9)
            label = "count" + (" (symmetric log scale)" if log_scale else "")
            bar = fig.colorbar(image, ax=[a for a in axes if a.axison], label=label, shrink=0.9)
            if log_scale:
                bar.set_ticks(decade_ticks(norm.vmin, norm.vmax))
            bar.ax.yaxis.set_major_formatter(formatter)
            bar.ax.minorticks_off()
            if low is not None and ((low <= 0) & (grid != 0)).any():
                notes.append("Hatched cells: a count whose 95 % interval includes 0, so it may be noise alone.")
        _frame(fig, title, bool(report.get("test_mode")), notes)
    return fig


def interval_notes(meta: dict, released) -> list[str]:
    """The figure's notes on the table's intervals: none where every cell has one covering its count; else where
    the table has none (and the report's reason), where they cover bucket shares, and cells left without one."""
    interval = meta.get("interval") or {}
    covers = interval.get("covers")
    has = np.zeros(released.counts.size, dtype=bool) if released.ci is None else np.isfinite(released.ci[0])
    if covers is None:  # a release from before the report said it: read the columns
        if not has.any():
            covers = "none"
        elif released.covers is not None and (released.covers == "bucket share").any():
            covers = "bucket share"
    if covers == "none" or not has.any():
        reason = interval.get("reason") or "the release gives none for this table"
        return [f"No 95 % intervals: {reason}"]
    notes = []
    if covers == "bucket share":
        notes.append("Intervals cover bucket shares: where the algorithm spread one estimated total evenly over a "
                     "bucket of cells, the interval holds the bucket's true total ÷ its cells, not each cell's count.")
    if not has.all():
        notes.append(f"{int((~has).sum())} of {has.size} cells have no interval.")
    return notes


def _title(report: dict, meta: dict, columns: list[str]) -> str:
    """"age × sex — release ε = 1 (this table 0.5), identity": the release's total budget, as spent, and the
    table's share, in the release's own definition (ε, ρ, or ε, δ run as ρ)."""
    what = " × ".join(columns)
    if meta.get("name") not in (None, "_".join(columns)):
        what = f"{meta['name']}: {what}"
    definition = report.get("definition")
    if definition == "zcdp" or (definition is None and "rho" in meta and "epsilon" not in meta):
        budget = f"release ρ = {report.get('rho_spent', '?')} (this table {meta.get('rho', '?')})"
    elif definition == "approximate":
        budget = (f"release ε = {report.get('epsilon_spent', '?')}, δ = {report.get('delta_spent', '?')} "
                  f"(this table ρ = {meta.get('rho', '?')})")
    else:
        delta = report.get("delta_spent")
        total = f"ε = {report.get('epsilon_spent', '?')}" + (f", δ = {delta}" if delta not in (None, "0") else "")
        budget = f"release {total} (this table {meta.get('epsilon', '?')})"
    return f"{what} — {budget}, {meta.get('algorithm', '?')}"


def _frame(fig, title: str, test_mode: bool, notes: list[str]) -> None:
    """Title, test-mode banner and notes around the plots, with room kept for each: figure texts of gid "title",
    "banner" and "note" (the notes, one paragraph each, wrapped to the figure's width)."""
    width, height = fig.get_size_inches()
    chars = max(40, int(width * 17))  # characters of 8-point text per line
    note = "\n".join(textwrap.fill(n, chars) for n in notes)
    lines = note.count("\n") + 1 if notes else 0
    top = _TITLE_IN + (_BANNER_IN if test_mode else 0.0)
    bottom = lines * _NOTE_LINE_IN + (0.12 if notes else 0.0)
    fig.set_size_inches(width, height + top + bottom)
    total = height + top + bottom
    fig.text(0.5, 1 - 0.12 / total, textwrap.fill(title, max(40, int(width * 11))), ha="center", va="top",
             fontsize=11, gid="title")
    if test_mode:
        fig.text(0.5, 1 - (_TITLE_IN + 0.04) / total, "TEST MODE — seeded noise, NOT differentially private",
                 ha="center", va="top", fontsize=9, fontweight="bold", color="#c00000", gid="banner")
    if notes:
        fig.text(0.01, 0.06 / total, note, ha="left", va="bottom", fontsize=8, color=_NOTE, gid="note",
                 bbox={"boxstyle": "round,pad=0.3", "facecolor": "#fff4e6", "edgecolor": "#e0a060"})
    # constrained layout places the colour bar beside square-celled maps and closes the gaps they leave
    fig.set_layout_engine("constrained", rect=(0, bottom / total, 1, 1 - (top + bottom) / total), compress=True)










def _interval_low(released, shape) -> np.ndarray | None:
    """The intervals' lower ends as a grid (NaN where a cell has none), or None when the table has no interval."""
    if released.ci is None or not np.isfinite(released.ci[0]).any():
        return None
    return np.asarray(released.ci[0], dtype=float).reshape(shape)

