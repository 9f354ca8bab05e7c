"""The panels of a release's picture: bars with their intervals, and heat maps (what each shows and why:
:mod:`.figure`).  matplotlib is imported when a panel is drawn, so that its absence is told as a UsageError by
:func:`.figure.table_figure` rather than failing an import."""

from __future__ import annotations

import numpy as np

from .labels import count_text

__all__ = ["SQUARE_RATIO", "draw_bars", "draw_heat", "square_cells", "colour_norm", "decade_ticks"]

SQUARE_RATIO = 4  # square cells only while the grid is at most this much longer than wide
_MAX_TICKS = 25
_BAR = "#8fb4d8"
_INTERVAL = "#1b1b1b"
_SHARE = "#e07b20"
_NARROW = 0.01  # intervals narrower than this share of the count axis cannot be seen as bars


def draw_bars(ax, counts, labels, column, released, log_scale: bool, formatter) -> None:
    """Bars of a one-column table on ``ax``, its intervals above them, its labels below; the count axis
    linear or (``log_scale``) symmetric-log, its ticks written by ``formatter``."""
    x = np.arange(counts.size)
    ax.bar(x, counts, color=_BAR, zorder=2)
    if log_scale:
        ax.set_yscale("symlog", linthresh=1)
    ax.yaxis.set_major_formatter(formatter)
    ax.grid(axis="y", color="#e4e4e4", zorder=0)
    if released.ci is not None and np.isfinite(released.ci[0]).any():
        _intervals(ax, x, counts, released, log_scale)
    _ticks(ax, "x", labels)
    ax.set_xlim(-0.6, counts.size - 0.4)
    ax.set_xlabel(column)
    ax.set_ylabel("count" + (" (symmetric log scale)" if log_scale else ""))


def _intervals(ax, x, counts, released, log_scale) -> None:
    """A one-column table's intervals, above the bars: error bars with caps where they cover the cell's count,
    one band per run of neighbouring cells of one bucket where they cover the bucket's share."""
    low, high = released.ci
    share = (released.covers == "bucket share") if released.covers is not None else np.zeros(x.size, dtype=bool)
    share = share & np.isfinite(low)
    single = np.isfinite(low) & ~share
    inches = ax.figure.get_size_inches()[0] * 0.8 / max(1, x.size)  # a bar's width, roughly
    if single.any():
        half = (high[single] - low[single]) / 2
        ax.errorbar(x[single], counts[single], yerr=[np.maximum(counts[single] - low[single], 0),
                                                     np.maximum(high[single] - counts[single], 0)],
                    fmt="none", ecolor=_INTERVAL, elinewidth=1.4, capthick=1.4,
                    capsize=max(1.5, min(5.0, 0.3 * inches * 72)), zorder=4,
                    label=f"95 % interval of each count ({_spread(half)})" + _narrow(ax, half, log_scale))
    if share.any():
        bucket = released.bucket if released.bucket is not None else np.zeros(x.size)
        # runs of neighbouring cells in the same bucket (a bucket may be spread over the table)
        key = np.where(share, np.nan_to_num(bucket, nan=-1.0), -2.0)
        starts = np.flatnonzero(share & np.concatenate(([True], key[1:] != key[:-1])))
        ends = np.array([start + int(np.argmax(np.concatenate((key[start:] != key[start], [True]))))
                         for start in starts])
        ax.bar((starts + ends - 1) / 2, high[starts] - low[starts], bottom=low[starts], width=ends - starts - 0.1,
               color=_SHARE, alpha=0.5, edgecolor="#8a3a00", linewidth=0.8, zorder=3,
               label=f"95 % interval of the bucket's share, its true total ÷ its cells "
                     f"({_spread((high[starts] - low[starts]) / 2)})")
    ax.legend(fontsize=8, loc="best", framealpha=0.9)


def _spread(half: np.ndarray) -> str:
    low, high = count_text(float(np.min(half))), count_text(float(np.max(half)))
    return f"± {low}" if low == high else f"± {low} to {high}"  # (one text where they differ by float noise)


def _narrow(ax, half: np.ndarray, log_scale: bool) -> str:
    """A warning for the legend when the intervals are too short to see against the count axis."""
    bottom, top = ax.get_ylim()
    if log_scale or top <= bottom or float(np.median(half)) * 2 >= _NARROW * (top - bottom):
        return ""
    return ":\ntoo narrow to see at this scale"


def draw_heat(ax, counts, labels, columns, norm, square: bool, zero):
    """A heat map of a two-column grid on ``ax`` (the first column up, the second across) in viridis under
    ``norm``, with square cells if ``square``, hatching the cells of the mask ``zero``; returns the image."""
    from matplotlib.patches import PathPatch

    image = ax.imshow(counts, origin="lower", aspect="equal" if square else "auto", cmap="viridis", norm=norm,
                      interpolation="nearest")
    if zero is not None and zero.any():
        # light hatching on dark cells, dark on light ones, so that it shows on every colour
        red, green, blue, _ = np.moveaxis(image.cmap(norm(counts)), -1, 0)
        light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
        for cells, colour in ((zero & ~light, "#d8d8d8"), (zero & light, "#303030")):
            if cells.any():
                ax.add_patch(PathPatch(_cells_path(cells), facecolor="none", edgecolor=colour, hatch="////",
                                       linewidth=0, zorder=3))
    _ticks(ax, "y", labels[0])
    _ticks(ax, "x", labels[1])
    ax.set_ylabel(columns[0])
    ax.set_xlabel(columns[1])
    return image


def _cells_path(mask: np.ndarray):
    """One path of the unit squares around the cells of ``mask`` (image coordinates: cell (i, j) is centred at
    x = j, y = i), so that thousands of cells are one patch."""
    from matplotlib.path import Path

    rows, cols = np.nonzero(mask)
    x0, y0 = cols - 0.5, rows - 0.5
    corners = [(x0, y0), (x0 + 1, y0), (x0 + 1, y0 + 1), (x0, y0 + 1), (x0, y0)]
    vertices = np.stack([np.stack(c, axis=1) for c in corners], axis=1).reshape(-1, 2)
    codes = np.tile([Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], rows.size)
    return Path(vertices, codes)


def square_cells(axes, shape) -> bool:
    """Square cells for a grid of two numeric columns that is not much longer than wide."""
    return (all(a.kind == "numeric" for a in axes)
            and max(shape) <= SQUARE_RATIO * min(shape))


def colour_norm(counts: np.ndarray, log_scale: bool):
    """The colour scale of heat maps of ``counts``: from min(0, the least count) to the largest, linear or
    symmetric-log (linear between −1 and 1, so that a released 0 has a colour)."""
    from matplotlib import colors

    finite = counts[np.isfinite(counts)]
    low = min(0.0, float(finite.min())) if finite.size else 0.0
    high = max(float(finite.max()) if finite.size else 1.0, low + 1.0)
    if log_scale:
        return colors.SymLogNorm(linthresh=1.0, linscale=1.0, vmin=low, vmax=high, base=10)
    return colors.Normalize(vmin=low, vmax=high)


def decade_ticks(low: float, high: float) -> list[float]:
    """Colour-bar ticks of a symmetric-log scale: 0 and the powers of ten (negated below 0) within [low, high]."""
    ticks = [0.0]
    power = 1.0
    while power <= high:
        ticks.append(power)
        power *= 10
    power = 1.0
    while -power >= low:
        ticks.insert(0, -power)
        power *= 10
    return ticks


def _ticks(ax, which: str, labels: list[str]) -> None:
    """At most about 25 labelled ticks, evenly spaced; long x labels slanted."""
    step = max(1, int(np.ceil(len(labels) / _MAX_TICKS)))
    positions = np.arange(0, len(labels), step)
    shown = [labels[i] for i in positions]
    if which == "x":
        ax.set_xticks(positions)
        slant = max((len(s) for s in shown), default=0) > 3
        ax.set_xticklabels(shown, rotation=45 if slant else 0, ha="right" if slant else "center",
                           rotation_mode="anchor", fontsize=8)
    else:
        ax.set_yticks(positions)
        ax.set_yticklabels(shown, fontsize=8)
