"""The counting pass as Dask tasks: each task reads one piece of the input (a chunk of a Parquet file's row
groups, or one CSV file) with the local reader and counts it with the local code; Dask sums the pieces.  The
counts are the local engine's by construction (same code, and addition is exact on integers)."""

from __future__ import annotations

import socket

import numpy as np

from ..counting import TableShape, count_tables
from ...errors import UsageError
from ..sources import Source, parquet_pieces
from ..progress import Progress
from ...declare.schema import Column

ROWS_PER_TASK = 4_000_000  # row groups are grouped into tasks of about this many rows
#: ``--master`` values that run in this process (or start their own cluster): nothing to reach beforehand.
IN_PROCESS = (None, "threads", "processes", "local-cluster")
#: Seconds the preflight waits for a scheduler (Dask's own default is 30).
CONNECT_TIMEOUT = 5


def preflight_dask(master: str | None, timeout: float = CONNECT_TIMEOUT) -> None:
    """Before the reservation: a scheduler address in ``master`` parses, and a Dask scheduler answers there
    within ``timeout`` seconds (a comm handshake, then closed; a refused TCP port fails at once).  UsageError with
    one line otherwise."""
    if master in IN_PROCESS:
        return
    import asyncio

    from distributed.comm import connect, parse_address
    from distributed.comm.addressing import parse_host_port

    async def handshake() -> None:
        comm = await connect(master, timeout=timeout)
        await comm.close()

    hint = "give threads, processes, local-cluster or the address of a running scheduler, e.g. tcp://host:8786"
    try:
        scheme, location = parse_address(master)
        address = parse_host_port(location) if scheme in ("tcp", "tls") else None
    except (ValueError, TypeError):
        raise UsageError(f"--master {_shown(master)} is not a Dask scheduler address: {hint}") from None
    try:
        if address is not None:
            socket.create_connection(address, timeout=timeout).close()
        asyncio.run(handshake())
    except Exception as exc:  # OSError (refused, timed out), a peer that is not Dask, an unknown scheme, ...
        raise UsageError(f"--master {_shown(master)}: no Dask scheduler answered there within {timeout:g} s "
                         f"({type(exc).__name__}); {hint}") from None


def _shown(value: str) -> str:
    """A user's value quoted for a message, at most 100 characters of it."""
    text = str(value)
    return repr(text if len(text) <= 100 else text[:100] + "...")


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
