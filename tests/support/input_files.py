"""Inputs that look valid but are hostile (tables whose cell count wraps int64, rows longer than a read block,
named pipes, ISO timestamps with a zone, absurd exponents), shared by the tests of the readers, counting, the
parsers and the command line."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


def _long_field_csv(path: Path, field_bytes: int) -> Path:
    with open(path, "w") as fh:
        fh.write("a,note\n")
        fh.writelines(f"{i % 7},short\n" for i in range(1000))
        fh.write('3,"' + "x" * field_bytes + '"\n')
        fh.writelines(f'{i % 5},"two\nlines"\n' for i in range(1000))
    return path


@contextlib.contextmanager
def unblocked(*fifos: Path):
    """Keeps a test from hanging if the code under test opens one of ``fifos`` for reading: a writer thread
    per FIFO opens it (blocking until some reader does) and closes it at once, again and again, so every
    reader sees an empty file instead of waiting forever.  Afterwards non-blocking readers release them."""
    stop = threading.Event()

    def writer(fifo: Path) -> None:
        while not stop.is_set():
            open(fifo, "wb").close()

    writers = [threading.Thread(target=writer, args=(f,), daemon=True) for f in fifos]
    for w in writers:
        w.start()
    try:
        yield
    finally:
        stop.set()
        for f, w in zip(fifos, writers):
            while w.is_alive():
                fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)
                w.join(0.1)
                os.close(fd)


WRAP_SCHEMA = "columns:\n" + "".join(f"  {c}: {{type: numeric, lower: 0, upper: 65536, bins: 65536}}\n"
                                     for c in "abcd")
A_SCHEMA = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 10, "bins": 10}}}
DAY_SCHEMA = {"columns": {"d": {"type": "date", "lower": "2024-02-28", "upper": "2024-03-04", "unit": "day"}}}
ZONED = ["2024-03-01T10:00:00Z", "2024-03-01T23:30:00-05:00", "2024-03-01T00:30:00+05:00", "2024-03-01 10:00:00z",
         "2024-03-02T10:00:00.123456+0530", "2024-03-02T10:00+14:00", "2024-03-02", "2024-03-03T01:02:03", ""]
ABSURD = ["1e-999999999", "1e999999999", "-1e-999999999", "1E+999999999", "0.1e-99999", "1e-31", "1e31"]
