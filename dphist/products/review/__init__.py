"""``dphist review``: one self-contained HTML page for a privacy officer signing off a release (post-processing:
it reads the release folder and the budget ledger, never the data, and spends nothing).

    gather.py   the facts, from report.json, the table files and the ledger (pure data)
    render.py   the page (HTML with inline CSS, no script, no request)
    figures.py  each table's picture as an inline SVG

:func:`write_review` writes the page of a published release to a file of the reviewer's choice, whole or not at all.
It refuses a file inside a release folder: a release's files are hashed in the ledger when it is committed, and a
file added later would make the folder differ from its record (:mod:`dphist.publishing.transaction`); the page of
a release belongs in it only when the release itself writes it (``dphist release --review``, through
:func:`review_into`, inside the release transaction).
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import UsageError
from ...text import quoted
from ..output_file import atomic_output, check_output_file
from .gather import Review, gather
from .render import SECTIONS, render

__all__ = ["write_review", "review_into", "review_page", "gather", "render", "Review", "SECTIONS", "PAGE_NAME",
           "RELEASE_MARKER"]

#: The page's file name inside a release written with --review.
PAGE_NAME = "review.html"
#: The hidden file that marks a dphist release folder (its files' hashes).
RELEASE_MARKER = ".dphist-release.json"


def review_page(directory: str | os.PathLike, ledger: str | os.PathLike | None = None, **options) -> str:
    """The review page of the release in ``directory`` as HTML text (see :func:`~.gather.gather` for the
    options and errors)."""
    return render(gather(directory, ledger, **options))


def write_review(directory: str | os.PathLike, out: str | os.PathLike, ledger: str | os.PathLike | None = None,
                 overwrite: bool = False) -> Path:
    """Write the review page of the release in ``directory`` to ``out``, whole or not at all.  UsageError for an
    ``out`` that cannot be written, exists (unless ``overwrite``) or lies inside a release folder; UsageError or
    DataError for a folder that is not a release or is damaged; both before anything is written."""
    path = check_output_file(out, overwrite, {".html", ".htm"})
    folder = path.absolute().parent
    if (folder / RELEASE_MARKER).exists() or (folder / "report.json").exists():
        raise UsageError(f"--out {quoted(out, '')} is inside a release folder, whose files the ledger has hashed: "
                         "write the page elsewhere, or make it with the release ('dphist release --review')")
    text = review_page(directory, ledger)
    with atomic_output(path) as fh:
        fh.write(text.encode("utf-8"))
    return path


def review_into(staging: str | os.PathLike, ledger: str | os.PathLike | None, shown_as: str) -> list[str]:
    """Write ``review.html`` into a release's staging folder, which holds its tables and report already, before
    the files are hashed and committed; returns the names written.  ``ledger``: the release's ledger (None in
    test mode); ``shown_as``: the folder the release is published to."""
    staging = Path(staging)
    text = review_page(staging, ledger, shown_as=shown_as, being_published=True, extra_files=(PAGE_NAME,))
    with open(staging / PAGE_NAME, "wb") as fh:
        fh.write(text.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    return [PAGE_NAME]
