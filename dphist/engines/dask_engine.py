"""The counting pass as Dask tasks: each task reads one piece of the input (a chunk of a Parquet file's row
groups, or one CSV file) with the local reader and counts it with the local code; Dask sums the pieces.  The
counts are the local engine's by construction (same code, and addition is exact on integers)."""

from __future__ import annotations

import numpy as np

from ..counting import TableShape, count_tables
from ..io.sources import Source, parquet_pieces
from ..progress import Progress
from ..schema import Column

ROWS_PER_TASK = 4_000_000  # row groups are grouped into tasks of about this many rows


def _count_piece(source: Source, piece, columns: dict[str, Column], tables: list[TableShape]) -> list[np.ndarray]:
    return count_tables(source.piece_batches(piece, columns), tables, source.name, workers=1)


def _add(parts: list[list[np.ndarray]]) -> list[np.ndarray]:
    return [np.sum(arrays, axis=0, dtype=np.int64) for arrays in zip(*parts)]


def count_dask(source: Source, columns: dict[str, Column], tables: list[TableShape], master: str | None,
               progress: Progress | None = None) -> list[np.ndarray]:
    """``master``: None or "threads" (Dask's threaded scheduler), "processes", "local-cluster" (a LocalCluster
    started for this run), or a distributed scheduler's address such as tcp://host:8786."""
    import dask

    pieces = parquet_pieces(source, ROWS_PER_TASK) if source.format == "parquet" else [[f] for f in source.files]
    tasks = [dask.delayed(_count_piece)(source, piece, columns, tables) for piece in pieces]
    # A tree of sums, so no one task holds every piece's tables at once.
    while len(tasks) > 1:
        tasks = [dask.delayed(_add)(tasks[i:i + 8]) for i in range(0, len(tasks), 8)]
    if not tasks:
        return [np.zeros(t.shape, dtype=np.int64) for t in tables]
    if master in (None, "threads", "processes"):
        (result,) = dask.compute(tasks[0], scheduler=master or "threads")
    else:
        from distributed import Client, LocalCluster

        if master == "local-cluster":
            with LocalCluster(processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
                result = client.compute(tasks[0]).result()
        else:
            with Client(master) as client:
                result = client.compute(tasks[0]).result()
    if progress is not None:
        progress.add(progress.total)
        progress.show(force=True)
    return [np.asarray(r, dtype=np.int64).reshape(t.shape) for r, t in zip(result, tables)]
