"""The counting pass as Spark SQL.

Each declared column becomes an expression giving the same code as :class:`dphist.read.counting.Axis` (0..n-1 a
cell, n "not counted"): equal-width bins by the same arithmetic and the same correction against the published
edges, other edges by counting the edges at or below the value, dates as days since 1970-01-01, categories
through a map of their labels.  A table's cell in its extended space is the C-order combination of its codes;
Spark groups and counts every table's cells in one scan, and the driver collects the non-empty cells into
dense int64 arrays.  Nothing but counts leaves Spark.

Differences from the local reader, by design of Spark: text is matched as given and in its decomposed (NFD)
form of each declared label, not normalised in general; timestamps are floored to days in UTC.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import tempfile
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..counting import Axis, TableShape, inner_cells
from ...errors import DataError, UsageError
from ..sources import Source
from ...declare.schema import CategoricalColumn, Column, DateColumn
from ...text import quoted

DEFAULT_MASTER = "local[*]"
#: The masters Spark accepts (its SparkSubmit): local, local[N], local[*], local[N,F], local-cluster[N,C,M],
#: spark://host:port[,host:port...], yarn and k8s://...
MASTER = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn|k8s://\S+"
                    r"|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*")
#: Seconds the preflight waits for a standalone master's port to accept a connection.
CONNECT_TIMEOUT = 10


def preflight_spark(master: str | None) -> None:
    """Before the reservation: ``master`` is a Spark master, a standalone master's port answers, and the session
    starts (:func:`session`: the JVM starts here, not after the budget is reserved).  UsageError with one line
    otherwise; what the JVM printed is in the log file the line names."""
    chosen = master or DEFAULT_MASTER
    if not MASTER.fullmatch(chosen):
        raise UsageError(f"--master {_shown(chosen)} is not a Spark master: give local[*], local[N], "
                         "spark://host:port, yarn or k8s://https://host:port")
    if chosen.startswith("spark://"):
        _reachable(chosen)
    session(master)


def _reachable(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """UsageError unless one of a standalone master's host:port pairs accepts a TCP connection in time."""
    for address in master[len("spark://"):].split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
            return
        except OSError:
            continue
    raise UsageError(f"--master {_shown(master)}: no Spark master accepted a connection there within "
                     f"{timeout:g} s")


def session(master: str | None):
    """The Spark session for ``master``, started once per process.  Starting it launches the JVM, whose output
    (log lines, a Java stack trace when it cannot start) goes to a log file rather than the user's terminal: the
    file is removed once the session is up, and named by the one-line UsageError when it does not start."""
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        return _built(master)
    fd, log = tempfile.mkstemp(prefix="dphist-spark-", suffix=".log")
    try:
        with _output_to(fd):
            spark = _built(master)
    except Exception as exc:  # PySparkRuntimeError (the JVM exited), Py4JError, ...
        raise UsageError(f"--engine spark: Spark did not start with --master {_shown(master or DEFAULT_MASTER)} "
                         f"({type(exc).__name__}); what it printed is in {log}") from None
    finally:
        os.close(fd)
    os.unlink(log)  # the JVM keeps writing to it, unseen, until it ends
    return spark


def _built(master: str | None):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master or DEFAULT_MASTER).appName("dphist counting")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")  # dphist's own bar, or none, on stderr
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _output_to(fd: int) -> Iterator[None]:
    """This process's stdout and stderr (the file descriptors, which a child such as the JVM inherits) go to
    ``fd`` inside the block."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for copy in saved:
            os.close(copy)


def _shown(value: str) -> str:
    """A user's value quoted for a message, at most 100 characters of it."""
    text = str(value)
    return repr(text if len(text) <= 100 else text[:100] + "...")


_EMPTY = "\u0000dphist-empty\u0000"


def _read(spark, source: Source, columns: dict[str, Column]):
    from pyspark.sql import functions as F

    paths = [str(p) for p in source.files] or [source.name]
    if source.format == "csv":
        # Every field as text, cast in SQL: Spark's casts take nan and inf as Arrow's reader does, and fail
        # (ANSI mode) on text that is not a number.
        # An unquoted empty field is null, a quoted one ("") is the empty text, as in the local reader.
        frame = spark.read.csv(paths, header=True, inferSchema=False, mode="FAILFAST", emptyValue=_EMPTY)
        frame = frame.select(*[F.when(F.col(f"`{c}`") == _EMPTY, F.lit("")).otherwise(F.col(f"`{c}`")).alias(c)
                               for c in frame.columns])
    else:
        frame = spark.read.parquet(*paths)
    missing = [n for n in columns if n not in frame.columns]
    if missing:
        raise DataError(f"{quoted(source.name, '')}: column {quoted(missing[0])} not found in the input")
    return frame


def _lit_array(values):
    from pyspark.sql import functions as F

    return F.array(*[F.lit(float(v)) for v in values])


def _numeric_code(axis: Axis, value):
    """Spark expression for the code of ``value`` (a double column expression) along a numeric or date axis,
    from the local engine's own prepared axis (its edges, position codes and arithmetic)."""
    from pyspark.sql import functions as F

    codes = F.array(*[F.lit(int(c)) for c in axis.position_code])
    if axis.equal_width:
        t = value * F.lit(axis.scale) + F.lit(1.0 - axis.lower * axis.scale)
        p = F.floor(F.least(F.greatest(t, F.lit(0.0)), F.lit(float(axis.bins + 1)))).cast("int")
        bounds = _lit_array(axis.bounds)
        # element_at is 1-based: bounds[p] is element p + 1.
        p = p - F.when(value < F.element_at(bounds, p + 1), 1).otherwise(0)
        p = p + F.when(value >= F.element_at(bounds, p + 2), 1).otherwise(0)
    else:
        p = F.size(F.filter(_lit_array(axis.edges), lambda e: e <= value))
    return (F.when(value.isNull() | F.isnan(value), F.lit(axis.null_code))
            .otherwise(F.element_at(codes, p + 1)))


def _text(value, typ):
    """Values as the local engine's label text: text as it is, integral numbers without '.0'."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(typ, T.StringType):
        return value
    if isinstance(typ, (T.DoubleType, T.FloatType, T.DecimalType)):
        whole = value == F.floor(value)
        return F.when(whole, value.cast("long").cast("string")).otherwise(value.cast("string"))
    return value.cast("string")


def _categorical_code(axis: Axis, value, typ):
    from pyspark.sql import functions as F

    column, drop = axis.column, axis.drop
    pairs = {}
    for i, label in enumerate(column.values):
        for form in (unicodedata.normalize("NFD", label), label):
            pairs[form] = i
    lookup = F.create_map(*[x for k, v in pairs.items() for x in (F.lit(k), F.lit(v))])
    text = _text(value, typ)
    return F.when(value.isNull(), F.lit(axis.null_code)).otherwise(
        F.coalesce(F.element_at(lookup, text), F.lit(drop)))


def _date_days(value, typ):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    day = value if isinstance(typ, T.DateType) else F.to_date(value)
    return F.datediff(day, F.lit("1970-01-01").cast("date")).cast("double")


def _code(column: Column, frame):
    from pyspark.sql import functions as F

    value = F.col(f"`{column.name}`")
    typ = frame.schema[column.name].dataType
    axis = Axis(column)
    if isinstance(column, CategoricalColumn):
        return _categorical_code(axis, value, typ)
    if isinstance(column, DateColumn):
        return _numeric_code(axis, _date_days(value, typ))
    return _numeric_code(axis, value.cast("double"))


def count_spark(source: Source, columns: dict[str, Column], tables: list[TableShape],
                master: str | None = None) -> list[np.ndarray]:
    """One Spark job: every table's extended cell per row, grouped and counted; dense int64 tables back."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    spark = session(master)
    try:
        frame = _read(spark, source, columns)
        codes = {name: _code(col, frame).cast("long") for name, col in columns.items()}
        cells = []
        for i, table in enumerate(tables):
            flat = F.lit(0).cast("long")
            for column in table.columns:
                flat = flat * F.lit(column.n_cells + 1) + codes[column.name]
            cells.append(F.struct(F.lit(i).alias("t"), flat.alias("cell")))
        grouped = (frame.select(F.explode(F.array(*cells)).alias("c"))
                   .groupBy("c.t", "c.cell").count())
        result = grouped.toArrow()
    except (PySparkException, Py4JError) as exc:
        # Spark's messages can quote the data; say only what kind of failure it was.
        raise DataError(f"{quoted(source.name, '')}: Spark could not read or count the input ({type(exc).__name__}); "
                        "check the path and that the declared types match the data") from None
    which = result.column("t").to_numpy()
    cell = result.column("cell").to_numpy()
    count = result.column("count").to_numpy()
    out = []
    for i, table in enumerate(tables):
        ext = np.zeros(int(np.prod([n + 1 for n in table.shape], dtype=np.int64)), dtype=np.int64)
        mine = which == i
        ext[cell[mine]] = count[mine]
        out.append(inner_cells(ext, table))
    return out
