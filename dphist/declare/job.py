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

A budget on the command line (--epsilon or --rho) replaces the job's budget as a whole: the job's ``epsilon``,
``rho``, ``delta`` and ``noise`` are all left out, so ``--epsilon E`` alone is pure ε with Laplace noise.  Without
one, the command line's --noise and --delta replace the job's ``noise`` and ``delta``.

Instead of ``tables``, a job may list ``marginals`` (tables that must agree exactly, as with ``--marginals``):

    marginals: [[age, sex], [sex, income], [age, income]]
    marginal_strategy: auto      # or full / separate / residual

``workload`` (for the whole job, or per table) names the questions the tables will answer: ``ranges``,
``cells`` or ``marginals`` (as ``--workload``); auto chooses for it and the report states it.

What is protected, and where it is charged, may be in the spec too, so that it does not live on the crontab
line (each validated as its command-line option):

    ledger: ledger.sqlite        # --ledger
    privacy_unit: person_id      # --privacy-unit, with
    max_rows_per_unit: 5         # --max-rows-per-unit
    group_size: 1                # --group-size
    require_cap: true            # --require-cap

The command line takes precedence field by field, except that its --privacy-unit replaces the spec's unit and
its contribution bound together (a bound is chosen for one unit).

The Python API runs a spec the same way, its arguments in place of the command line's
(``dphist.release(spec="job.yaml", epsilon="0.5")``): :func:`release_arguments` is the one merge of both.

Relative paths (``input``, ``schema``, ``out``, ``ledger``) are taken relative to the spec file.  ``{date}`` in
``out`` becomes today's date (YYYY-MM-DD).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..algorithms.auto.choice import WORKLOADS
from ..privacy import parse_share
from ..errors import UsageError
from ..algorithms.marginal_sets import parse_marginals
from .yamlfile import load_document
from ..text import quoted

__all__ = ["TableRequest", "Job", "load_job", "release_arguments", "parse_tables", "table_name_for",
           "check_option_names", "JOB_FIELDS", "TABLE_FIELDS"]

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
    ledger: str | None = None
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    group_size: int | None = None
    require_cap: bool = False
    review: bool = False


#: The top-level fields of a job spec, and those of one of its tables (docs/reference/job-spec.md lists them; a test
#: checks).
JOB_FIELDS = frozenset({"input", "schema", "epsilon", "rho", "noise", "delta", "out", "format", "algorithm", "tables",
                        "dataset_id", "run_key", "marginals", "marginal_strategy", "workload", "ledger",
                        "privacy_unit", "max_rows_per_unit", "group_size", "require_cap", "review"})
TABLE_FIELDS = frozenset({"name", "columns", "algorithm", "share", "options", "workload"})


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
        unknown = set(entry) - TABLE_FIELDS
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
        check_option_names(options, f"{where}: 'options'")
        workload = entry.get("workload")
        if workload is not None and workload not in WORKLOADS:
            raise UsageError(f"{where}: 'workload' must be one of {', '.join(WORKLOADS)}, not {quoted(workload)}")
        tables.append(TableRequest(name, tuple(columns), None if algorithm is None else str(algorithm), share,
                                   {str(k): v for k, v in options.items()}, workload))
    check_table_names(tables)
    return tables


def check_option_names(options: dict, where: str) -> None:
    """UsageError (prefixed by ``where``) if algorithm ``options`` name a setting of the release itself.

    ``workload`` (the questions a table will answer) is one setting per table: the table's ``workload``, else
    the run's (--workload), else what its columns suggest.  auto chooses for it and the report states it, so
    it is never also an algorithm option that could say something else."""
    if "workload" in options:
        raise UsageError(f"{where}: 'workload' is the release's own setting, not an algorithm option: give it as "
                         "--workload or as 'workload:' in the job spec or a table (mwem's candidate ranges are its "
                         "option 'queries')")


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
    unknown = set(document) - JOB_FIELDS
    if unknown:
        raise UsageError(f"{quoted(path, '')}: unknown field {quoted(sorted(map(str, unknown))[0])}")
    base = path.absolute().parent

    def relative(key: str) -> str | None:
        value = document.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:  # '' would name the spec's own folder
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

    def whole(key: str) -> int | None:  # as --max-rows-per-unit and --group-size: a whole number, at least 1
        value = document.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{path}: '{key}' must be a whole number, at least 1")
        return value

    def column(key: str) -> str | None:  # as --privacy-unit: a column name, taken as written
        value = document.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"{path}: '{key}' must be a column name")
        return value

    require_cap = document.get("require_cap", False)
    if not isinstance(require_cap, bool):
        raise UsageError(f"{path}: 'require_cap' must be true or false")
    review = document.get("review", False)
    if not isinstance(review, bool):
        raise UsageError(f"{path}: 'review' must be true or false")
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
        ledger=relative("ledger"),
        privacy_unit=column("privacy_unit"),
        max_rows_per_unit=whole("max_rows_per_unit"),
        group_size=whole("group_size"),
        require_cap=require_cap,
        review=review,
    )


# Arguments that, given, replace the job's field of the same meaning (the job's name where it differs).
_REPLACING = {"source": "input", "schema": "schema", "group_size": "group_size", "algorithm": "algorithm",
              "workload": "workload", "marginal_strategy": "marginal_strategy", "dataset_id": "dataset_id",
              "run_key": "run_key", "out": "out", "format": "format"}


def release_arguments(job: Job, given: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a release of ``job``: ``given``, named as :func:`dphist.release`'s (with ``run_key``,
    ``out`` and ``format`` for a command that writes files), filled in from the job where an argument is not
    given (None, or an empty text).

    * A budget (``epsilon`` or ``rho``) replaces the job's budget as a whole: the job's epsilon, rho, delta and
      noise are all left out, so ``epsilon`` alone is pure ε with Laplace noise and ``rho`` never meets the
      job's delta.  Without one, the job's budget is used, with ``noise`` and ``delta`` in place of its own.
    * ``privacy_unit`` replaces the job's unit and its bound together (a bound is chosen for one unit);
      ``max_rows_per_unit`` alone replaces the bound of the job's unit.
    * ``ledger`` given replaces the job's (an empty one included); ``require_cap`` and ``review`` are true if
      either is.
    * The tables are the job's (``tables``, or ``marginals``): ``columns``, ``tables`` or ``marginals`` given
      too is a UsageError.

    Returns every key of ``given`` and every one named above; the rest of ``given`` is returned as it is."""
    for key in ("columns", "tables", "marginals"):
        if given.get(key) is not None:
            raise UsageError(f"give {key} or a job spec listing the tables, not both")
    merged = dict(given)
    for key, field_name in _REPLACING.items():
        if _missing(given.get(key)):
            merged[key] = getattr(job, field_name)
    if given.get("epsilon") is None and given.get("rho") is None:
        merged.update(epsilon=job.epsilon, rho=job.rho, noise=given.get("noise") or job.noise,
                      delta=job.delta if given.get("delta") is None else given["delta"])
    if given.get("privacy_unit") is None:
        merged["privacy_unit"] = job.privacy_unit
        if given.get("max_rows_per_unit") is None:
            merged["max_rows_per_unit"] = job.max_rows_per_unit
    merged["ledger"] = job.ledger if given.get("ledger") is None else given["ledger"]
    merged["require_cap"] = bool(given.get("require_cap")) or job.require_cap
    merged["review"] = bool(given.get("review")) or job.review
    merged.update(tables=job.tables or None, marginals=job.marginals, columns=None)
    return merged


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value)
