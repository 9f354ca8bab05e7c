"""Pictures of a release (post-processing: reads the release directory only).

One column: a bar per cell with its 95 % interval (when the release has one).  Two columns: a heat map.  Three:
small multiples, one heat map per value of the first column (at most 16 panels).  Needs matplotlib, an optional
extra: ``pip install 'dphist[plot]'``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .errors import UsageError
from .synth import load_release

__all__ = ["plot_release", "MAX_PANELS"]

MAX_PANELS = 16


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("dphist plot needs matplotlib, which is not installed: pip install 'dphist[plot]'") from None
    return plt


def plot_release(directory: str | Path, out: str | Path, table: str | None = None) -> Path:
    """Draw one released table to ``out`` (PNG, or any format matplotlib knows by the suffix)."""
    report, tables = load_release(directory)
    if table is None:
        if len(tables) != 1:
            raise UsageError(f"the release has {len(tables)} tables: choose one with --table ({', '.join(tables)})")
        table = next(iter(tables))
    if table not in tables:
        raise UsageError(f"the release has no table '{table}' (it has: {', '.join(tables)})")
    meta = next(t for t in report["tables"] if t["name"] == table)
    frame, shape, columns = tables[table], tuple(meta["shape"]), meta["columns"]
    if len(shape) > 3:
        raise UsageError(f"table '{table}' has {len(shape)} columns; plots show at most 3")
    plt = _pyplot()
    labels = [_axis_labels(frame, c, shape, axis) for axis, c in enumerate(columns)]
    counts = frame["count"].to_numpy(np.float64).reshape(shape)
    title = f"{table}: ε = {meta['epsilon']} ({meta['algorithm']})" + (" — TEST MODE, NOT PRIVATE"
                                                                        if report.get("test_mode") else "")
    if len(shape) == 1:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * shape[0]), 4.0))
        x = np.arange(shape[0])
        ax.bar(x, counts, color="#4878a8")
        if {"ci_lower", "ci_upper"} <= set(frame.columns):
            low, high = frame["ci_lower"].to_numpy(np.float64), frame["ci_upper"].to_numpy(np.float64)
            ax.errorbar(x, counts, yerr=[np.maximum(counts - low, 0), np.maximum(high - counts, 0)], fmt="none",
                        ecolor="black", capsize=2, linewidth=0.8, label="95 % interval")
            ax.legend()
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
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _axis_labels(frame: pd.DataFrame, column: str, shape: tuple[int, ...], axis: int) -> list[str]:
    """One label per cell along ``axis``: the category, or the bin's lower edge ("missing" for the null cell).
    Rows are in C order, so index k of the axis first appears at row k · (product of the later axes' sizes)."""
    values = frame[column] if column in frame else frame[f"{column}_lower"]
    stride = int(np.prod(shape[axis + 1:], dtype=np.int64))
    picked = values.iloc[np.arange(shape[axis]) * stride].to_numpy(object)
    return ["missing" if pd.isna(v) else str(v) for v in picked]


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
