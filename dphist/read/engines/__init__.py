"""Engines: where the counting pass runs.

* ``local`` — this process: Arrow reads the batches, numpy counts them on worker threads (:mod:`dphist.read.counting`).
* ``dask`` — one task per Parquet row-group chunk or CSV file, each counted with the local code, summed by Dask
  (threads by default, ``--master local-cluster`` for a LocalCluster of processes, or a scheduler's address).
* ``spark`` — Spark SQL: every column's code from the same schema as an expression, the tables' cells grouped and
  counted by Spark, the dense tables collected to the driver (``--master`` any Spark master; default
  ``local[*]``).

Every engine returns exactly the local engine's counts: one int64 array per table, of the table's shape.  Noise,
inference and the release stay in this process; only counts come back.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from ...declare.choices import ENGINES
from ..contribution import UnitBound, UnitRows
from ..counting import TableShape, count_tables
from ...errors import UsageError
from ..sources import Source
from ...privacy import BitSource
from ..progress import Progress
from ...declare.schema import Column
from ...text import quoted

__all__ = ["ENGINES", "check_engine", "preflight", "count"]

_EXTRA = {"dask": ("dask", "distributed"), "spark": ("pyspark",)}


def check_engine(engine: str, master: str | None, source: Source, unit: UnitBound | None, discovery: bool) -> None:
    """Fail (UsageError) before anything is read if ``engine`` cannot run this release."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {quoted(engine)} (choose one of {', '.join(ENGINES)})")
    if engine == "local":
        if master is not None:
            raise UsageError("--master applies to --engine spark or dask")
        return
    missing = [m for m in _EXTRA[engine] if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"--engine {engine} needs the optional extra: pip install 'dphist[{engine}]'")
    if source.format == "dataframe":
        raise UsageError(f"--engine {engine} reads files or URLs; a DataFrame is counted by the local engine")
    if unit is not None:
        raise UsageError("--privacy-unit needs the local engine (bounding a unit's rows draws over all of them)")
    if discovery:
        raise UsageError(f"--engine {engine} counts declared columns only: declare every column in the schema "
                         "(dphist schema --private can find domains first)")


def preflight(engine: str, master: str | None) -> None:
    """The checks of ``engine`` that reach outside this process, run last before the budget is reserved: Dask's
    scheduler answers at ``master``; Spark's master is one, and its session starts (the JVM, which takes seconds,
    is started here rather than after the reservation).  UsageError with one line otherwise.  Run after
    :func:`check_engine`."""
    if engine == "dask":
        from .dask_engine import preflight_dask
        preflight_dask(master)
    elif engine == "spark":
        from .spark_engine import preflight_spark
        preflight_spark(master)


def count(engine: str, master: str | None, source: Source, columns: dict[str, Column], tables: list[TableShape],
          unit: UnitBound | None = None, bits: BitSource | None = None,
          progress: Progress | None = None, unit_rows: UnitRows | None = None) -> list[np.ndarray]:
    """Count ``tables`` over ``source`` on ``engine``; returns one int64 array per table, of its shape.
    ``unit_rows``: told every unit's rows (with a ``unit``, which only the local engine takes)."""
    if engine == "dask":
        from .dask_engine import count_dask
        return count_dask(source, columns, tables, master, progress)
    if engine == "spark":
        from .spark_engine import count_spark
        return count_spark(source, columns, tables, master)
    return count_tables(source.batches(columns, progress), tables, source.name, unit, bits, unit_rows=unit_rows)
