"""``dphist release``: its options, and the release they ask for, planned and executed by the library."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..declare.choices import DEFAULT_ALGORITHM, DEFAULT_MAX_CELLS, ENGINES, FORMATS, RELEASE_WORKLOADS
from ..errors import UsageError
from ..text import quoted
from .charges import uncapped, warn_uncapped
from .messages import notice, run_log
from .options import (algorithm_option_flags, algorithm_options, budget_options, checked_name, delta_option,
                      ledger_options, seed_option, unit_options)


@click.command("release")
@click.argument("input", required=False, metavar="[INPUT]")
@budget_options
@click.option("--schema", "-s", "schema_path", metavar="FILE", help="YAML/JSON schema declaring each column's public "
              "domain; undeclared columns are found privately with part of ε (pure ε only).")
@click.option("--columns", "-c", metavar="A,B", help="Release one table over these columns (comma-separated).")
@click.option("--spec", metavar="JOB.yaml", help="Job spec listing the tables, algorithms and budget shares.")
@click.option("--marginals", metavar="A,B;C,D", help="Several tables of the same records that agree exactly "
              "(shared sub-tables and grand total); together they cost the budget once.")
@click.option("--marginal-strategy", type=click.Choice(["auto", "full", "separate", "residual"]),
              help="With --marginals: 'full' measures the table over all their columns once and sums it; "
                   "'separate' measures each at ε/k and reconciles them by least squares; 'residual' measures "
                   "their residual bases jointly (the optimum for Gaussian noise under zCDP; under pure ε Laplace "
                   "tables at optimised shares, never worse than separate); 'auto' picks residual under zCDP, "
                   "else the lowest expected error of the three (all are in the report) [auto].")
@delta_option(text="δ: with --noise gaussian, the δ of the release's (ε, δ)-DP guarantee (0 < δ ≤ 1e-3, e.g. "
                    "1e-6); otherwise needed only to find the categories of text columns no schema declares [0]. "
                    "Not with --rho (zCDP has no δ).")
@click.option("--discovery-share", metavar="S", help="Share of ε spent finding the domains of undeclared columns "
              "[0.25].")
@click.option("--discovery-bins", type=click.IntRange(1, 4096), metavar="N", help="Most bins for a discovered "
              "numeric column, of a round width; a whole-numbered one of at most 32 values gets one bin per value "
              "instead [16].")
@click.option("--max-categories", type=click.IntRange(1, 100_000), metavar="N", help="Most categories kept for a "
              "discovered text column [100].")
@click.option("--discovery-binning", type=click.Choice(["equal-width", "quantiles"]), default="equal-width",
              show_default=True, help="Bins of a discovered numeric column: equal widths, or cut at DP quantiles "
              "(half of the column's discovery budget).")
@unit_options()
@click.option("--group-size", type=click.IntRange(min=1), metavar="C",
              help="Protect any C units (or records) together; noise grows C-fold [1].")
@click.option("--algorithm", "-a", metavar="NAME", help=f"Algorithm for tables that name none [{DEFAULT_ALGORITHM}]. "
              "See 'dphist algorithms'.")
@algorithm_option_flags
@click.option("--workload", type=click.Choice(RELEASE_WORKLOADS),
              help="The questions the tables will answer: range sums along ordered columns, single cells, or one-way "
              "marginals. auto picks the algorithm with the least "
              "expected error on them; the report states the expected error of cells and of ranges "
              "[ranges where a column is ordered; cells where every column is a category].")
@click.option("--out", "-o", metavar="DIR", help="Output directory [./release].")
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), help="Release file format [csv].")
@click.option("--raw", is_flag=True, help="Skip post-processing: publish the unbiased noisy counts (may be negative).")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@click.option("--review", is_flag=True, help="Also write review.html into the release: the page of 'dphist review' "
              "(for a disclosure review), made and published with the release's files.")
@seed_option()
@click.option("--quiet", "-q", is_flag=True, help="Do not print the summary on stderr.")
@ledger_options()
@click.option("--run-key", metavar="KEY", callback=checked_name, help="Idempotency key, e.g. nightly-2026-11-21: if "
              "a release with this key was committed, report it and exit 0 without drawing new noise.")
@click.option("--require-cap", is_flag=True, envvar="DPHIST_REQUIRE_CAP", help="Refuse (exit 3, before reading) a "
              "data set that has no cap in the ledger [$DPHIST_REQUIRE_CAP]. Without it, a release of an uncapped "
              "data set warns (unless --quiet).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one JSON object per line on stderr (result or error), for schedulers.")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="Where rows are counted: this process (all cores), Dask, or Spark (pip install "
                   "'dphist[dask]' or 'dphist[spark]'). Counts are identical; noise and output stay local.")
@click.option("--master", metavar="URL", help="Spark: the master (local[*], spark://host:7077, yarn, ...) "
              "[local[*]]. Dask: threads, processes, local-cluster or a scheduler address [threads].")
@click.option("--max-cells", type=click.IntRange(min=1), default=DEFAULT_MAX_CELLS, show_default=True, metavar="N",
              help="Refuse, before reading any row, a table of more cells than N.")
def release_command(input, epsilon, rho, noise, schema_path, columns, spec, marginals, marginal_strategy, branching,
                    budget_split, options, out, fmt, overwrite, review, quiet, ledger_path, dataset_id,
                    lock_timeout, run_key, require_cap, log_format, **settings):
    """Release differentially private tables of INPUT (a CSV or Parquet file, a directory, or a glob).

    \b
    - With --columns a,b: one table over those columns.
    - With --spec JOB.yaml: the tables the job lists, the budget split by their shares.
    - With neither: one 1-D histogram per schema column, the budget split equally.

    The budget, in one of three definitions:

    \b
        --epsilon E                          pure ε-DP, discrete Laplace noise (the default)
        --rho R                              ρ-zCDP, discrete Gaussian noise
        --epsilon E --delta D --noise gaussian
                                             (ε, δ)-DP, discrete Gaussian noise accounted as ρ-zCDP

    Under --rho and --noise gaussian every column must be declared in --schema (domains are found privately
    under pure ε only: run 'dphist schema --private' first).

    Writes one TABLE.FORMAT file per table (one row per cell: labels, count, noisy_count, ci_lower,
    ci_upper, ci_covers, bucket) and report.json into --out, atomically. The whole run spends exactly ε (or ρ), and the budget
    ledger records it against the data set (refused with exit code 3 if that would pass the data set's cap;
    see 'dphist budget').
    """
    from ..declare.job import load_job, release_arguments
    from ..publishing.execution import ReleaseFiles, execute
    from ..publishing.assemble import NOT_PRIVATE
    from ..publishing.planning import ReleaseOptions, make_plan

    run_log().json = log_format == "json"
    if marginals is not None and (columns or spec):
        raise click.UsageError("give --marginals, --columns or --spec, not more than one")
    if spec and columns:
        raise click.UsageError("give --columns or --spec, not both")
    # Named as dphist.release's arguments (``settings``: delta, privacy_unit, seed, engine, ...), so that the
    # library fills in what a job spec gives and the command line does not.
    given = {"source": input, "epsilon": epsilon, "rho": rho, "noise": noise, "schema": schema_path,
             "columns": columns, "marginals": marginals, "marginal_strategy": marginal_strategy,
             "ledger": ledger_path, "dataset_id": dataset_id, "run_key": run_key, "require_cap": require_cap,
             "out": out, "format": fmt, "review": review, **settings}
    arguments = release_arguments(load_job(spec), given) if spec else given
    input, out, fmt, ledger_path, dataset_id, run_key, require_cap, review = (arguments.pop(key) for key in (
        "source", "out", "format", "ledger", "dataset_id", "run_key", "require_cap", "review"))
    if input is None:
        raise click.UsageError("missing INPUT (a CSV or Parquet file)")
    if arguments["epsilon"] is None and arguments["rho"] is None:
        raise click.UsageError("missing the privacy budget: give --epsilon E (e.g. --epsilon 0.5) or --rho R "
                               "(rho-zCDP, e.g. --rho 0.05)")
    fmt = fmt or "csv"
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {quoted(fmt)} (choose one of {', '.join(FORMATS)})")
    if out == "":  # e.g. a cron line whose $OUT is unset: never fall back to ./release silently
        raise UsageError("--out is empty; name the output directory")
    out = out or "release"
    if arguments["marginal_strategy"] is not None and arguments["marginals"] is None:
        raise click.UsageError("--marginal-strategy applies to --marginals only")
    plan = make_plan(input, ReleaseOptions.from_keywords(
        algorithm_options=algorithm_options(branching, budget_split, options), **arguments))
    # What --overwrite must never replace, whatever the folder holds.
    protect = (*plan.source.files, *[Path(p) for p in (arguments["schema"], spec) if p])
    extra = None
    if review:
        from ..products.review import review_into

        def extra(staging, ledger):  # the page, made from the staged release inside its transaction
            return review_into(staging, ledger, str(out))
    done = execute(plan, ledger=ledger_path, dataset_id=dataset_id, run_key=run_key, lock_timeout=lock_timeout,
                   detail={"tables": [r.name for r in plan.requests]},
                   files=ReleaseFiles(out, fmt, overwrite, protect, extra),
                   # A progress bar only for a person at a terminal: never in logs, cron mail or JSON logs.
                   progress=not quiet and log_format == "text" and sys.stderr.isatty(),
                   on_test_mode=lambda: notice(NOT_PRIVATE, "test_mode"),
                   require_cap=require_cap)
    if done.existing is not None:
        where = done.existing.detail.get("out", "?")
        _report(f"release for run key '{run_key}' already committed to {where}; nothing new was drawn or spent",
                {"event": "release", "status": "exists", "dataset": done.dataset, "run_key": run_key, "out": where,
                 "ledger_entry": done.existing.entry_hash}, quiet)
        return
    ledger_info = None if plan.seed is not None else {"dataset": done.dataset, "ledger_entry": done.commit_entry,
                                                      "run_key": run_key}
    if ledger_info is not None and not quiet and uncapped(done.info):
        warn_uncapped(done.dataset, plan.ledger_unit)  # before the result, which stays the last line
    _finish(done.value, done.paths, out, quiet, ledger_info)


def _finish(result, paths, out, quiet, ledger_info=None) -> None:
    """The result's lines on stderr: a JSON record, or (unless ``quiet``) the summary and the files written."""
    if run_log().json:
        click.echo(json.dumps({"event": "release", "status": "ok", "out": str(out),
                               "files": [p.name for p in paths], "definition": result.report["definition"],
                               **{key: result.report[key] for key in ("epsilon_spent", "delta_spent", "rho_spent")
                                  if key in result.report},
                               "test_mode": result.test_mode, **(ledger_info or {})}), err=True)
    elif not quiet:
        click.echo(result.summary(banner=False), err=True)
        click.echo(f"wrote {len(paths)} files to {out}/: {', '.join(p.name for p in paths)}", err=True)


def _report(text: str, record: dict, quiet: bool) -> None:
    """A result other than a release (a run key already committed): ``record`` as JSON, else ``text``."""
    if run_log().json:
        click.echo(json.dumps(record), err=True)
    elif not quiet:
        click.echo(text, err=True)
