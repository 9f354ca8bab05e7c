"""The review page's pictures: each released table's figure (:func:`dphist.products.plot.table_figure`) as an SVG
inside a ``data:`` URI, so the page needs no file beside it and no request.

An SVG shown through ``<img>`` runs no script and loads nothing, so labels drawn from the schema (data-derived
category names) cannot act on the page whatever they hold.  A table with more than three columns, or too many
cells, has no figure; so has every table when matplotlib is missing (an optional extra), or where drawing fails:
the page then says why instead of failing, since the figure only repeats the table the page lists.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

from ...errors import UsageError

__all__ = ["Figure", "table_figure_uri", "MAX_FIGURE_COLUMNS", "MAX_BARS", "MAX_FIGURE_CELLS"]

MAX_FIGURE_COLUMNS = 3
#: The most bars of a one-column figure, and the most cells of any: beyond them drawing takes longer than the page
#: is worth, and the picture could not show each cell anyway.
MAX_BARS = 2_000
MAX_FIGURE_CELLS = 250_000


@dataclass(frozen=True)
class Figure:
    """A table's picture as a ``data:image/svg+xml;base64,...`` URI, or None with ``why`` there is none."""

    uri: str | None
    why: str | None = None


def table_figure_uri(report: dict, meta: dict, released) -> Figure:
    """The figure of one released table (see the module docstring)."""
    if len(meta["shape"]) > MAX_FIGURE_COLUMNS:
        return Figure(None, f"no figure: the table has {len(meta['shape'])} columns (figures show at most "
                            f"{MAX_FIGURE_COLUMNS})")
    cells = math.prod(meta["shape"])
    if cells > (MAX_BARS if len(meta["shape"]) == 1 else MAX_FIGURE_CELLS):
        return Figure(None, f"no figure: the table has {cells:,} cells, too many to draw one by one")
    try:
        from ..plot import auto_log_scale, table_figure
        import matplotlib.pyplot as plt

        # the scale `dphist plot` would choose: log where the counts span decades, so most cells are not one colour
        fig = table_figure(report, meta, released, log_scale=auto_log_scale(released.counts))
    except UsageError as exc:  # matplotlib is not installed
        return Figure(None, f"no figure: {exc}")
    except (ValueError, RuntimeError, OverflowError) as exc:
        # A label matplotlib cannot typeset (mathtext in a category name, say): the table below still lists it.
        return Figure(None, f"no figure: it could not be drawn ({type(exc).__name__})")
    try:
        buffer = io.BytesIO()
        # Text as paths: the picture looks the same in any browser and in print, with no font to fetch.
        with plt.rc_context({"svg.fonttype": "path", "svg.hashsalt": "dphist-review"}):
            fig.savefig(buffer, format="svg", metadata={"Date": None})
    except (ValueError, RuntimeError, OverflowError) as exc:
        return Figure(None, f"no figure: it could not be drawn ({type(exc).__name__})")
    finally:
        plt.close(fig)
    return Figure("data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"))
