"""The Python API: ``dphist.release(...)`` plans a release, executes it, and returns the tables and the report.

    plan (planning.py: options and every check,  ─►  execute (execution.py: reserve, read,  ─►  Release
          no row read)                                 measure, post-process, commit)            (output.py)

The CLI calls the same functions (:mod:`dphist.cli`).
"""

from __future__ import annotations

import os
from typing import Any

from .declare.job import load_job, release_arguments
from .errors import UsageError
from .publishing.execution import execute, run_plan
from .read.sources import is_path
from .publishing.ledger import Ledger
from .publishing.assemble import Release
from .publishing.planning import DEFAULT_ALGORITHM, ReleaseOptions, ReleasePlan, make_plan
from .text import quoted

__all__ = ["Release", "ReleasePlan", "ReleaseOptions", "release", "plan_release", "run_plan", "DEFAULT_ALGORITHM"]


def release(source: Any = None, epsilon: Any = None, schema: Any = None, *, spec: str | os.PathLike | None = None,
            rho: Any = None, noise: str | None = None, ledger: Ledger | str | os.PathLike | None = None,
            dataset_id: str | None = None, require_cap: bool = False, **options: Any) -> Release:
    """Release differentially private tables of ``source``, charged to the budget ledger.

    Parameters
    ----------
    source
        path (CSV/Parquet file, directory or glob) or pandas DataFrame; with ``spec``, the job's ``input``
        if not given.
    spec
        a job spec (YAML; :mod:`dphist.declare.job`), as ``dphist release --spec``: its tables (or marginals),
        budget, schema, algorithm, workload, privacy unit, group size, ledger, data set id and require_cap, each
        replaced by the argument of the same meaning if that is given (a budget argument, ``epsilon`` or
        ``rho``, replaces the spec's epsilon, rho, delta and noise together; ``privacy_unit`` replaces its unit
        and bound together; see :func:`dphist.declare.job.release_arguments`).  ``columns``, ``tables`` or
        ``marginals`` with a spec is a UsageError.  The spec is read and checked before any row is.  Its
        ``out``, ``format`` and ``run_key`` are the command line's (which writes the files): the returned
        Release is written with :meth:`Release.write`, and the run is charged without a run key.
    epsilon
        total privacy budget ε, a positive number (at most 1000); a decimal string keeps it exact
        (``"0.5"``).  Pure ε-DP with discrete Laplace noise; with ``noise="gaussian"`` and ``delta`` > 0,
        (ε, δ)-DP (below).  Give exactly one of ``epsilon`` and ``rho``.
    schema
        path to a YAML/JSON schema, a parsed schema mapping, or a ``Schema``.  Columns it does not declare
        (all of them without a schema) get their domain privately from the data, with ``discovery_share`` of
        epsilon (default 1/4): DP bounds and ``discovery_bins`` bins (default 16) for numbers and dates, of
        equal width or, with ``discovery_binning="quantiles"``, cut at DP quantiles (numbers); for text, the
        categories held by enough records (at most ``max_categories``, default 100), which needs ``delta`` > 0.
    rho
        total budget ρ of ρ-zCDP (Bun and Steinke 2016), a positive number up to 1000 (``"0.05"``; exact):
        linear queries get discrete Gaussian noise of variance Δ₂²/(2ρ) per part, data-adaptive steps keep
        their discrete Laplace / exponential-mechanism noise at ε = √(2ρ) (rounded down), and the ρ of all steps
        adds up to exactly ``rho``.  The report also states the ε it implies at δ = 1e-6 (``epsilon_implied``;
        tight CKS20 conversion).  Every column must be declared in ``schema`` (no private discovery).
    noise
        ``"laplace"`` (default with ``epsilon``) or ``"gaussian"`` (implied by ``rho``).  ``epsilon`` with
        ``noise="gaussian"`` and ``delta`` D > 0 is an (ε, δ)-DP release run as ρ-zCDP with ρ the largest value
        whose (ε, δ) guarantee holds by the tight conversion of Canonne, Kamath and Steinke 2020
        (``dphist.privacy.conversions.rho_for``): (1, 1e-6) gives ρ ≈ 0.02436 (the classic conversion
        ε = ρ + 2√(ρ ln(1/δ)) only 0.01747); every column must then be declared.  ``rho`` with ``noise="laplace"`` is refused
        (for Laplace noise give ``epsilon``).
    delta
        with ``noise="gaussian"``, the δ of the release's (ε, δ) guarantee (0 < δ ≤ 1e-3).  Otherwise the δ
        of (ε, δ)-DP used only to discover categories (e.g. ``"1e-6"``); 0 otherwise.  Not with ``rho``.
    columns
        one table over these columns (``["age", "sex"]`` or ``"age,sex"``).
    tables
        several tables, each ``{"name", "columns", "algorithm", "share", "options", "workload"}``; epsilon
        is split by share.
        With neither ``columns`` nor ``tables``, one 1-D table per schema column, epsilon split equally.
    algorithm
        default algorithm for tables that do not name one (``auto``: chosen per table from a noisy
        total; ``identity`` for marginal sets).
    algorithm_options
        options for the algorithms (e.g. ``{"branching": 16}``); a table's own ``options``
        take precedence.
    workload
        the questions the tables will answer: ``"ranges"`` (range sums along ordered columns),
        ``"cells"`` (single cells) or ``"marginals"`` (one-way marginals); a table's own ``workload`` takes
        precedence.  By default ranges where a column is ordered, cells where every column is a category.
        ``auto`` chooses the algorithm with the least expected error on it; every table's report states it
        with the expected error of single cells and of ranges.
    seed
        test mode.  Deterministic noise; the release is marked NOT differentially private, and the ledger is
        not touched.
    raw
        skip post-processing; ``count`` is then the unbiased noisy estimate.
    marginals
        a set of tables that agree exactly with each other (shared sub-tables and grand total),
        ``"age,sex;sex,income"`` or a list of column lists.
    marginal_strategy
        ``"full"``: the table over all the marginals' columns is measured once with all of
        epsilon and each marginal is a sum of its released counts; ``"separate"``: each marginal is measured
        with epsilon/k, then they are made consistent by least squares and rounded keeping the agreement;
        ``"residual"``: their residual bases are measured jointly (under zCDP the optimal Gaussian linear
        measurement; under pure ε estimated by least squares from Laplace tables at optimised shares,
        docs/algorithms.md §11.1) and every marginal rebuilt from them; ``"auto"`` (default): residual under
        zCDP, else the strategy with the lowest expected error (``report["marginals"]`` gives every strategy's
        figures).
    privacy_unit, max_rows_per_unit
        protect every value of this column (a person, a household) rather than
        one row: at most ``max_rows_per_unit`` rows per unit are counted (chosen at random), and the algorithms
        run at epsilon / max_rows_per_unit, so the whole unit is protected at epsilon (group privacy).  A fiftieth
        of the budget measures how many rows the cap dropped (``report["unit_cap"]``, docs/privacy.md §6); the
        tables share the rest.  The ledger keeps this budget apart from per-row budgets.
    group_size
        protect any group of this many units (or records) together at epsilon.
    ledger
        a :class:`~dphist.publishing.ledger.Ledger` or a path to one (default: ``$DPHIST_LEDGER``, else
        ``~/.local/share/dphist/ledger.sqlite``).  The release is recorded there against ``dataset_id`` (default:
        the real path of the input file, or of the directory holding a directory's or glob's files; every
        DataFrame shares one id), and refused (BudgetExhausted) past its cap.  An id that is empty, has whitespace
        at an end, holds an unprintable character or is longer than 200 characters is a UsageError.
    require_cap
        refuse (CapRequired, a BudgetExhausted) a data set that has no cap in the ledger, before
        reading anything.
    engine, master
        where the counting pass runs: ``"local"`` (default; this process, all cores), ``"dask"``
        (``master``: "threads", "processes", "local-cluster" or a scheduler address) or ``"spark"`` (``master``:
        any Spark master, default ``local[*]``; ``source`` may then be a URL Spark reads, such as s3a:// or
        hdfs://).  Counts are the same on every engine; noise and output stay in this process.
    max_cells
        refuse (UsageError, before reading) any table of more cells than this (default 2**24).

    Notes
    -----
    Every keyword but ``ledger``, ``dataset_id`` and ``require_cap`` is an option of the release, checked once by
    :class:`~dphist.publishing.planning.ReleaseOptions` (an unknown one is a UsageError naming it).

    The total epsilon spent is exactly ``epsilon`` (sequential composition over tables), or the total ρ exactly
    ``rho`` (the ρ of an (ε, δ) release exactly rho_for(ε, δ)), under add/remove of one record.  The report's
    ``definition`` is "pure", "zcdp" or "approximate".  Raises UsageError for an argument of the wrong type or
    value (``source`` neither a path nor a DataFrame, ``schema`` neither a path, a mapping nor a Schema,
    ``ledger`` neither a path nor a Ledger, an option out of its range), before reading data or charging
    anything, and DataError for data that cannot be read as declared.
    """
    check_ledger(ledger)
    if spec is not None:
        given = {"source": source, "epsilon": epsilon, "schema": schema, "rho": rho, "noise": noise,
                 "ledger": ledger, "dataset_id": dataset_id, "require_cap": require_cap, **options}
        arguments = release_arguments(load_job(spec), given)
        for key in ("out", "format", "run_key", "review"):  # the command line's: see above
            del arguments[key]
        return release(**arguments)
    plan = plan_release(source, epsilon, schema, rho=rho, noise=noise, **options)
    return execute(plan, ledger=ledger, dataset_id=dataset_id, detail={"command": "Python API"},
                   require_cap=require_cap).value


def check_ledger(ledger: Any) -> None:
    """UsageError unless ``ledger`` is None, a :class:`~dphist.publishing.ledger.Ledger` or a path (str or os.PathLike):
    checked first, so that a wrong one is refused before the input is opened, in test mode too."""
    if ledger is None or isinstance(ledger, Ledger) or is_path(ledger):
        return
    raise UsageError(f"ledger must be a path (str or os.PathLike) or a dphist.publishing.ledger.Ledger, not "
                     f"{quoted(type(ledger).__name__, '')}")


def plan_release(source: Any, epsilon: Any = None, schema: Any = None, **options: Any) -> ReleasePlan:
    """The plan of ``release(source, epsilon, schema, **options)`` (``rho`` and ``noise`` among the options)
    without running it: every check that needs no row of data (UsageError or DataError), nothing read, nothing
    spent."""
    return make_plan(source, ReleaseOptions.from_keywords(epsilon=epsilon, schema=schema, **options))
