"""A progress bar for the counting pass, on stderr, for people watching a terminal.

It shows how much of the input is done (rows of Parquet, bytes of CSV), the rate and the time left.  It is off
unless asked for (the CLI asks when stderr is a terminal and --quiet is not given), so scheduled jobs and logs
never see it; when on, it redraws at most a few times a second, from the thread that reads the batches.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

import click

__all__ = ["Progress"]


class Progress:
    """Counts work done toward ``total`` units (``"rows"`` or ``"bytes"``) and draws a bar on ``stream``.

    ``add(n)`` only counts (any thread may call it); ``show()`` redraws, at most every ``interval`` seconds.
    """

    def __init__(self, total: int, unit: str, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.total, self.unit, self.done = max(int(total), 1), unit, 0
        self.interval, self.started, self.last = interval, time.monotonic(), 0.0
        self.bar = click.progressbar(length=self.total, label="counting", file=stream or sys.stderr,
                                     show_eta=True, show_percent=True, width=30,
                                     item_show_func=lambda text: text)
        self.bar.__enter__()
        self.shown = 0

    def add(self, n: int) -> None:
        self.done += n

    def show(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        done = min(self.done, self.total)
        rate = self.done / max(now - self.started, 1e-9)
        self.bar.update(done - self.shown, _rate(rate, self.unit))
        self.shown = done

    def close(self) -> None:
        self.show(force=True)
        self.bar.__exit__(None, None, None)


def _rate(per_second: float, unit: str) -> str:
    if unit == "bytes":
        return f"{per_second / 2**20:,.0f} MiB/s"
    return f"{per_second / 1e6:,.1f}M rows/s" if per_second >= 1e5 else f"{per_second:,.0f} rows/s"
