"""Writing a released table's picture to a file: whole or not at all (a temp file renamed into place)."""

from __future__ import annotations

from pathlib import Path

from ...errors import UsageError
from ...text import quoted
from ..output_file import atomic_output
from ..synth import choose_table, load_report, read_table
from .figure import auto_log_scale, table_figure

__all__ = ["plot_release", "picture_suffixes"]

# Formats matplotlib lists but cannot write on its own: pgf runs LaTeX to measure the text.
_NEEDS_MORE = {".pgf"}


def picture_suffixes() -> set[str]:
    """The file name endings a picture can have (``.png``, ``.pdf``, ``.svg``, ...: what matplotlib writes by
    itself).  UsageError if matplotlib is not installed."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise UsageError("dphist plot needs matplotlib, which is not installed: pip install 'dphist[plot]'") from None
    return {f".{kind}" for kind in FigureCanvasBase.get_supported_filetypes()} - _NEEDS_MORE


def plot_release(directory: str | Path, out: str | Path, table: str | None = None,
                 log_scale: bool | None = None) -> Path:
    """Draw one released table to ``out``, a picture of the type its suffix names (see ``picture_suffixes``),
    written whole or not at all.  ``log_scale``: counts on a symmetric-log scale (True), linear (False), or
    (None) log for a heat map whose non-zero counts span more than two decades (``auto_log_scale``) and linear
    for bars, whose heights stay readable on a linear scale.  UsageError for a wrong suffix or table (checked
    before the table is read), DataError for a damaged release."""
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
    if log_scale is None:
        log_scale = released.counts.ndim > 1 and auto_log_scale(released.counts)
    fig = table_figure(report, meta, released, log_scale=log_scale)
    with atomic_output(out) as fh:
        fig.savefig(fh, format=out.suffix[1:].lower(), dpi=100)
    return out
