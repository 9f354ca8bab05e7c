"""Job specs: the YAML file a cron job runs, listing the tables to release and their budget shares.

    input: data.parquet
    schema: schema.yaml
    epsilon: "1.0"
    out: releases/{date}
    format: parquet
    tables:
      - {name: age_by_sex, columns: [age, sex], algorithm: identity, share: 2}
      - {name: income, columns: [income], share: 1}

The budget is ``epsilon`` (pure ε-DP, discrete Laplace noise) or ``rho`` (ρ-zCDP, discrete Gaussian noise), not
both; ``epsilon`` with ``delta`` and ``noise: gaussian`` is an (ε, δ)-DP release with discrete Gaussian noise:

    rho: "0.05"                  # or: epsilon: "1", delta: "1e-6", noise: gaussian

The command line's --epsilon or --rho replaces the job's budget as a whole; its --noise and --delta replace the
job's ``noise`` and ``delta``.

Instead of ``tables``, a job may list ``marginals`` (tables that must agree exactly, as with ``--marginals``):

    marginals: [[age, sex], [sex, income], [age, income]]
    marginal_strategy: auto      # or full / separate

``workload`` (for the whole job, or per table) names the questions the tables will answer: ``ranges``,
``cells`` or ``marginals`` (as ``--workload``); auto chooses for it and the report states it.

Relative paths are taken relative to the spec file.  ``{date}`` in ``out`` becomes today's date (YYYY-MM-DD).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .algorithms.auto import WORKLOADS
from .privacy import parse_share
from .errors import UsageError
from .marginals import parse_marginals
from .yamlfile import load_document
from .text import quoted

__all__ = ["TableRequest", "Job", "load_job", "parse_tables", "table_name_for"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class TableRequest:
    """One table to release: a name, its columns (axes, in order), an algorithm, a budget share, the algorithm's
    options and the workload (the questions it will answer: ranges, cells or marginals; None: the run's)."""

    name: str
    columns: tuple[str, ...]
    algorithm: str | None = None
    share: Any = 1
    options: dict = field(default_factory=dict)
    workload: str | None = None


@dataclass
class Job:
    input: str | None = None
    schema: str | None = None
    epsilon: Any = None
    rho: Any = None
    noise: str | None = None
    delta: Any = None
    out: str | None = None
    format: str | None = None
    algorithm: str | None = None
    tables: list[TableRequest] = field(default_factory=list)
    dataset_id: str | None = None
    run_key: str | None = None
    marginals: list[list[str]] | None = None
    marginal_strategy: str | None = None
    workload: str | None = None


def table_name_for(columns: list[str] | tuple[str, ...]) -> str:
    """The default table name: the column names joined by '_'."""
    return "_".join(columns)


def parse_tables(entries: Any, source: str = "job spec") -> list[TableRequest]:
    """Validate a list of table entries (mappings with ``columns`` and optional name, algorithm, share)."""
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{quoted(source, '')}: 'tables' must be a non-empty list")
    try:
        return _parse_tables(entries, source)
    except UsageError as exc:
        message = str(exc)
        prefix = quoted(source, "")
        raise UsageError(message if message.startswith(prefix) else f"{prefix}: {message}") from None


def _parse_tables(entries: list, source: str) -> list[TableRequest]:
    tables = []
    for i, entry in enumerate(entries, start=1):
        where = f"{quoted(source, '')}: table {i}"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: must be a mapping with 'columns'")
        unknown = set(entry) - {"name", "columns", "algorithm", "share", "options", "workload"}
        if unknown:
            raise UsageError(f"{where}: unknown field {quoted(sorted(map(str, unknown))[0])}")
        columns = entry.get("columns")
        if isinstance(columns, str):
            columns = [c.strip() for c in columns.split(",")]
        if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns):
            raise UsageError(f"{where}: 'columns' must be a non-empty list of column names")
        name = str(entry.get("name") or table_name_for(columns))
        share = parse_share(entry.get("share", 1), name)
        algorithm = entry.get("algorithm")
        options = entry.get("options", {})
        if not isinstance(options, dict):
            raise UsageError(f"{where}: 'options' must be a mapping such as {{branching: 16}}")
        workload = entry.get("workload")
        if workload is not None and workload not in WORKLOADS:
            raise UsageError(f"{where}: 'workload' must be one of {', '.join(WORKLOADS)}, not {quoted(workload)}")
        tables.append(TableRequest(name, tuple(columns), None if algorithm is None else str(algorithm), share,
                                   {str(k): v for k, v in options.items()}, workload))
    check_table_names(tables)
    return tables


def check_table_names(tables: list[TableRequest]) -> None:
    seen = set()
    for t in tables:
        if not _NAME.match(t.name) or t.name.lower() == "report":
            raise UsageError(f"table name {quoted(t.name)} is not usable as a file name (letters, digits, _ . - only)")
        if t.name in seen:
            raise UsageError(f"table name {quoted(t.name)} is used twice")
        seen.add(t.name)
        if len(set(t.columns)) != len(t.columns):
            raise UsageError(f"table {quoted(t.name)}: a column is listed twice")


def load_job(path: str | Path, today: _dt.date | None = None) -> Job:
    """Read and validate a job spec.  Raises UsageError naming the problem."""
    path = Path(path)
    document = load_document(path, "job spec")
    if not isinstance(document, dict):
        raise UsageError(f"{quoted(path, '')}: a job spec must be a mapping with a 'tables' list")
    known = {"input", "schema", "epsilon", "rho", "noise", "delta", "out", "format", "algorithm", "tables",
             "dataset_id", "run_key", "marginals", "marginal_strategy", "workload"}
    unknown = set(document) - known
    if unknown:
        raise UsageError(f"{quoted(path, '')}: unknown field {quoted(sorted(map(str, unknown))[0])}")
    base = path.absolute().parent

    def relative(key: str) -> str | None:
        value = document.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise UsageError(f"{quoted(path, '')}: {quoted(key)} must be a path")
        if key == "out":
            value = value.replace("{date}", (today or _dt.date.today()).isoformat())
        return str(base / value) if not Path(value).is_absolute() else value

    def text(key: str) -> str | None:
        value = document.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{quoted(path, '')}: {quoted(key)} must be a non-empty text")
        return value.replace("{date}", (today or _dt.date.today()).isoformat())

    if document.get("epsilon") is not None and document.get("rho") is not None:
        raise UsageError(f"{quoted(path, '')}: give 'epsilon' or 'rho', not both")
    noise = document.get("noise")
    if noise is not None and noise not in ("laplace", "gaussian"):
        raise UsageError(f"{quoted(path, '')}: 'noise' must be laplace or gaussian, not {quoted(noise)}")
    workload = document.get("workload")
    if workload is not None and workload not in WORKLOADS:
        raise UsageError(f"{quoted(path, '')}: 'workload' must be one of {', '.join(WORKLOADS)}, not "
                         f"{quoted(workload)}")
    marginals = document.get("marginals")
    if marginals is not None:
        if "tables" in document:
            raise UsageError(f"{quoted(path, '')}: give 'tables' or 'marginals', not both")
        marginals = parse_marginals(marginals)
    elif "marginal_strategy" in document:
        raise UsageError(f"{quoted(path, '')}: 'marginal_strategy' applies to 'marginals' only")
    return Job(
        marginals=marginals,
        marginal_strategy=text("marginal_strategy"),
        workload=workload,
        dataset_id=text("dataset_id"),
        run_key=text("run_key"),
        input=relative("input"),
        schema=relative("schema"),
        epsilon=document.get("epsilon"),
        rho=document.get("rho"),
        noise=noise,
        delta=document.get("delta"),
        out=relative("out"),
        format=document.get("format"),
        algorithm=document.get("algorithm"),
        tables=[] if marginals is not None else parse_tables(document.get("tables"), str(path)),
    )
