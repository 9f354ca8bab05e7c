"""The ``dphist`` command line: a thin click layer over the functions :mod:`dphist.api` uses (planning,
execution, output).

Every failure a user can cause ends with one line on stderr and no traceback or output files.  Exit codes:
0 done, 1 data error, 2 usage error (options, schema, spec), 3 budget exhausted, 4 ledger locked (timeout),
5 internal error (a bug), 130 interrupted.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import sys
import signal
import threading
import traceback
import warnings
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

# Only light modules here: `dphist --version` and `--help` must not load pandas, scipy or the algorithms
# (tests/test_startup.py, bench/startup.py).  Each command imports the machinery it runs.
from ..declare.choices import (DEFAULT_ALGORITHM, DEFAULT_MAX_CELLS, ENGINES, EVALUATE_WORKLOADS, FORMATS,
                               RELEASE_WORKLOADS)
from ..errors import BUDGET_STAYS_SPENT, DataError, DphistError, Terminated, UsageError, read_data
from ..text import QUOTE_LIMIT, quoted
from ..version import __version__

if TYPE_CHECKING:
    from ..publishing.ledger import Ledger


INTERNAL_ERROR = 5
_LOG = {"json": False}  # set by commands that offer --log-format


def _error_line(message: str, code: int) -> None:
    # One line whatever the message holds (a path may contain a newline).
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    if _LOG["json"]:
        click.echo(json.dumps({"event": "error", "exit_code": code, "message": message}), err=True)
    else:
        click.echo(f"Error: {message}", err=True)


def _notice(message: str, event: str = "warning", **fields) -> None:
    """One line on stderr that is not an error: a warning, or the test-mode banner."""
    if _LOG["json"]:
        click.echo(json.dumps({"event": event, "message": message, **fields}), err=True)
    elif event == "test_mode":
        click.secho(f"*** {message} ***", err=True, fg="red", bold=True)
    else:
        click.echo(f"Warning: {message}", err=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Python warnings (numpy's among them) as one line each, in the run's log format."""
    _notice(str(message).splitlines()[0] if str(message) else category.__name__)


def _wants_json(args: list[str]) -> bool:
    """``--log-format json`` anywhere on the line: known before click parses it, so that even a usage error
    found while parsing is logged as JSON."""
    for i, arg in enumerate(args):
        if arg == "--log-format=json" or (arg == "--log-format" and args[i + 1:i + 2] == ["json"]):
            return True
    return False


def _on_sigterm(signum, frame):
    raise Terminated()


@contextmanager
def _process_setup():
    """SIGTERM ends the run like Ctrl-C does (cleanup runs, exit 143); warnings print as single lines; the
    standard streams are guarded (:func:`_standard_streams`).  All are put back afterwards (the CLI may be
    called in-process, e.g. by tests)."""
    previous_warning = warnings.showwarning
    warnings.showwarning = _show_warning
    main_thread = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        with _standard_streams():
            yield
    finally:
        warnings.showwarning = previous_warning
        if main_thread:
            signal.signal(signal.SIGTERM, previous_term)


class _StdoutClosed(Exception):
    """Standard output's reader has gone (``dphist algorithms | head -3``).  The entry point ends the run quietly
    with exit 0; inside a charged run (``schema --private`` printing its schema) it is an error after reading
    like any other, so the run's budget stays spent."""


class _StreamWriter(io.RawIOBase):
    """The raw writer under the guarded stdout or stderr: ``os.write`` to ``fd``, and on a failed write,
    ``on_failure(exc)`` (which may raise)."""

    def __init__(self, fd: int, on_failure) -> None:
        super().__init__()
        self.fd, self.on_failure = fd, on_failure

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data) -> int:
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            raise
        except OSError as exc:
            self.on_failure(exc)
            return len(data)


def _to_devnull(fd: int) -> None:
    """``fd`` writes to /dev/null from now on."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:  # a closed ``fd`` is the lowest free number: os.open may have given it already
        os.dup2(null, fd)
        os.close(null)


def _stderr_failed(exc: OSError) -> None:
    # A message that cannot be shown (stderr closed, its pipe's reader gone, its disk full) must not change
    # what the run does or its exit code: the rest of the messages go to /dev/null.
    _to_devnull(2)


def _stdout_failed(exc: OSError) -> None:
    _to_devnull(1)  # what is still buffered, and the interpreter's flush at exit, go nowhere quietly
    if isinstance(exc, BrokenPipeError):
        raise _StdoutClosed() from None
    # Anything else (a full disk, a closed descriptor) lost output the user asked for: an error, one line.
    raise DataError(f"standard output cannot be written ({exc.strerror or type(exc).__name__}); what was "
                    "printed is incomplete") from None


def _guarded(stream, fd: int, on_failure):
    """A text stream like ``stream`` (None if Python found ``fd`` closed at start-up) writing to ``fd`` through
    :class:`_StreamWriter`; None when ``stream`` is not the process's own ``fd`` (an in-process run)."""
    try:
        os.fstat(fd)
    except OSError:  # closed: the next file opened would get this number, and the messages would go into it
        _to_devnull(fd)
    try:
        if stream is not None and stream.fileno() != fd:
            return None
    except (AttributeError, ValueError, OSError):
        return None
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "backslashreplace"
    return io.TextIOWrapper(io.BufferedWriter(_StreamWriter(fd, on_failure)), encoding=encoding, errors=errors,
                            line_buffering=True)


@contextmanager
def _standard_streams():
    """Standard output and error as the run's promises need them, in a real process:

    * a closed descriptor 1 or 2 (``2>&-``) is pointed at /dev/null first, so that no file the run opens (the
      input, the ledger, an output) gets that number and receives its messages;
    * a failed write to stderr is ignored (the rest go to /dev/null): a release whose log cannot be written still
      finishes, or fails, as it would have;
    * stdout whose reader has gone (``| head``) ends the run quietly with exit 0: the reader stopped reading by
      its own choice, after what it wanted, and a reading command has nothing else at stake (a release prints
      on stderr).  Python's own advice on SIGPIPE: point stdout at /dev/null, and exit;
    * stdout that cannot be written otherwise (a full disk) is a DataError: output the user asked for is lost.
    """
    saved = sys.stdout, sys.stderr
    out, err = _guarded(sys.stdout, 1, _stdout_failed), _guarded(sys.stderr, 2, _stderr_failed)
    sys.stdout, sys.stderr = out or sys.stdout, err or sys.stderr
    try:
        yield
    except _StdoutClosed:
        pass  # raised where the entry point's handlers do not reach (printing help for a bare 'dphist')
    finally:
        for stream in (out, err):
            if stream is not None:
                try:
                    stream.flush()
                except (_StdoutClosed, DataError):
                    pass  # the run's outcome is settled; a failed writer has already gone to /dev/null
        sys.stdout, sys.stderr = saved


class _Group(click.Group):
    """Turns every error into one line on stderr and an exit code, never a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        _LOG["json"] = _wants_json(args)  # each invocation starts afresh (matters when called in-process)
        code = 0
        with _process_setup():
            try:
                with self.make_context(prog_name or "dphist", args, **extra) as ctx:
                    self.invoke(ctx)
            except click.exceptions.Exit as exc:
                code = exc.exit_code
            except click.exceptions.NoArgsIsHelpError as exc:  # plain 'dphist': its help, not an error
                click.echo(exc.ctx.get_help())
            except click.exceptions.Abort:
                code = _interrupted(130, "interrupted")
            except click.ClickException as exc:
                hint = ""
                if isinstance(exc, click.UsageError) and exc.ctx is not None:
                    hint = f" (see '{exc.ctx.command_path} --help')"
                # click's messages repeat the value or option given, whatever its length: bounded as a whole.
                _error_line(f"{quoted(exc.format_message(), '', limit=4 * QUOTE_LIMIT)}{hint}", exc.exit_code)
                code = exc.exit_code
            except DphistError as exc:
                _error_line(str(exc), exc.exit_code)
                code = exc.exit_code
            except _StdoutClosed as exc:
                if read_data(exc):  # a charged run's output (schema --private's schema) did not reach its reader
                    _error_line(f"standard output was closed before the output was written; {BUDGET_STAYS_SPENT}", 1)
                    code = 1
                # otherwise exit 0: the reader has what it wanted (see _standard_streams)
            except KeyboardInterrupt as exc:
                code = _interrupted(130, "interrupted (SIGINT)", exc)
            except Terminated as exc:
                code = _interrupted(143, "stopped (SIGTERM)", exc)
            except Exception as exc:  # a bug: keep the promise of no traceback, but make it debuggable
                if os.environ.get("DPHIST_DEBUG"):
                    traceback.print_exc()
                _error_line(f"internal error ({type(exc).__name__}); nothing was written{_spent(exc)}. "
                            "Set DPHIST_DEBUG=1 to see the traceback and please report it.", INTERNAL_ERROR)
                code = INTERNAL_ERROR
        sys.exit(code)


def _spent(exc: BaseException) -> str:
    """What the line of an error that is not a DphistError adds when the release transaction marked it as
    raised after reading data (dphist.errors.after_reading; a DphistError's own message says it already)."""
    return f"; {BUDGET_STAYS_SPENT}" if read_data(exc) else ""


def _interrupted(code: int, what: str, exc: BaseException | None = None) -> int:
    _error_line(f"{what}; no partial output was left{'' if exc is None else _spent(exc)}", code)
    return code


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dphist")
def main():
    """Publish differentially private histograms and contingency tables from CSV or Parquet files.

    \b
    Typical use:
      dphist schema data.csv -o schema.yaml      # draft a schema, then REVIEW it (it is public)
      dphist release data.csv --schema schema.yaml --epsilon 0.5 --columns age,sex
    """


# --------------------------------------------------------------------------------------------------------------
# Options shared by commands, declared once.  ``when`` prefixes the help of a command where the option applies
# only with another one (schema: "With --private").

LEDGER_DEFAULT = "$DPHIST_LEDGER, else ~/.local/share/dphist/ledger.sqlite"


def _help(when: str | None, text: str) -> str:
    if not when:
        return text
    return f"{when}: " + (text[0].lower() + text[1:] if text[1:2].islower() else text)  # "Protect" but "TEST"


def _options(*decorators):
    """One decorator applying ``decorators`` in the order listed (their options appear in --help in that order)."""
    def apply(command):
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return apply


DELTA_HELP = "δ of (ε, δ)-DP, needed only to find the categories of text columns no schema declares, e.g. 1e-6 [0]."


def _delta_option(when: str | None = None, text: str = DELTA_HELP):
    return click.option("--delta", metavar="D", help=_help(when, text))


def _budget_options(command):
    """--epsilon, --rho and --noise: the release's budget in one of three definitions (planning.DEFINITIONS)."""
    return _options(
        click.option("--epsilon", "-e", metavar="E", help="Total privacy budget ε > 0, e.g. 0.5 (kept exact): pure "
                     "ε-DP with discrete Laplace noise; with --delta D --noise gaussian, (ε, δ)-DP with discrete "
                     "Gaussian noise. Give --epsilon or --rho."),
        click.option("--rho", metavar="R", help="Total budget ρ of ρ-zCDP, e.g. 0.05 (kept exact, at most 1000): "
                     "discrete Gaussian noise of variance Δ₂²/(2ρ), ρ adding up exactly over tables and steps; the "
                     "report also gives the ε it implies at δ = 1e-6. Every column must be declared in --schema."),
        click.option("--noise", type=click.Choice(["laplace", "gaussian"]), help="Noise on the counts: 'laplace' "
                     "(pure ε-DP; the default with --epsilon; not with --rho) or 'gaussian' (the discrete Gaussian: implied by --rho; "
                     "with --epsilon E it needs --delta D and releases (ε, δ)-DP, run as ρ-zCDP with the largest ρ "
                     "whose (ε, δ) holds by the tight CKS20 conversion). Gaussian noise suits many measurements: "
                     "marginal sets, deep trees, large tables."))(command)


def _unit_options(when: str | None = None):
    """--privacy-unit and --max-rows-per-unit: the protected unit and its contribution bound."""
    return _options(
        click.option("--privacy-unit", metavar="COLUMN", help=_help(when, "Protect each value of COLUMN (a person, "
                     "a household) with all its rows, not one row; needs --max-rows-per-unit.")),
        click.option("--max-rows-per-unit", type=click.IntRange(min=1), metavar="K", help="With --privacy-unit: "
                     "count at most K rows per unit (chosen at random); noise grows K-fold."))


def _seed_option(when: str | None = None):
    return click.option("--seed", type=click.IntRange(min=0), metavar="N", help=_help(
        when, "TEST MODE: deterministic noise. The result is NOT differentially private and is not recorded in "
              "the ledger."))


def _checked_name(ctx, param, value):
    """--dataset-id and --run-key as checked, normalised names (dphist.declare.identifiers), refused before anything runs."""
    from ..declare import identifiers

    if value is None:
        return None
    check = identifiers.run_key if param.name == "run_key" else identifiers.dataset_id
    return check(value, param.opts[0])


def _ledger_options(when: str | None = None):
    """--ledger, --dataset-id and --lock-timeout: where a run outside test mode is charged."""
    return _options(
        click.option("--ledger", "ledger_path", metavar="PATH", help=_help(
            when, f"Budget ledger [{LEDGER_DEFAULT}]. Every run outside test mode is recorded there.")),
        click.option("--dataset-id", metavar="ID", callback=_checked_name, help="The data set's name in the ledger, "
                     "one line of at most 200 characters [the real path of the input file, or of the directory "
                     "holding a directory's or glob's files]."),
        click.option("--lock-timeout", default=60.0, show_default=True, type=click.FloatRange(0, 86_400),
                     metavar="S", callback=lambda ctx, param, value: _finite(param, value),
                     help="Seconds to wait for another run holding the ledger (then exit 4)."))


def _algorithm_option_flags(command):
    """--branching, --budget-split and --option: the algorithms' options (see :func:`_algorithm_options`)."""
    return _options(
        click.option("--branching", "-b", metavar="B", help="Tree algorithms (h, hb, quadtree): splits per node and "
                     "axis, or 'auto' [h, quadtree: 2; hb: chosen for the domain]."),
        click.option("--budget-split", type=click.Choice(["uniform", "geometric"]),
                     help="Tree algorithms: how ε is shared among tree levels [h, hb: uniform; quadtree: "
                          "geometric]."),
        click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
                     help="An algorithm option, e.g. alpha=0.25 or cap=100 (repeatable; every algorithm's options "
                          "and what they do: 'dphist algorithms')."))(command)


@main.command("release")
@click.argument("input", required=False, metavar="[INPUT]")
@_budget_options
@click.option("--schema", "-s", "schema_path", metavar="FILE", help="YAML/JSON schema declaring each column's public "
              "domain; undeclared columns are found privately with part of ε (pure ε only).")
@click.option("--columns", "-c", metavar="A,B", help="Release one table over these columns (comma-separated).")
@click.option("--spec", metavar="JOB.yaml", help="Job spec listing the tables, algorithms and budget shares.")
@click.option("--marginals", metavar="A,B;C,D", help="Several tables of the same records that agree exactly "
              "(shared sub-tables and grand total); together they cost the budget once.")
@click.option("--marginal-strategy", type=click.Choice(["auto", "full", "separate"]),
              help="With --marginals: 'full' measures the table over all their columns once and sums it; "
                   "'separate' measures each at ε/k and reconciles them by least squares; 'auto' picks the "
                   "lower expected error (both are in the report) [auto].")
@_delta_option(text="δ: with --noise gaussian, the δ of the release's (ε, δ)-DP guarantee (0 < δ ≤ 1e-3, e.g. "
                    "1e-6); otherwise needed only to find the categories of text columns no schema declares [0]. "
                    "Not with --rho (zCDP has no δ).")
@click.option("--discovery-share", metavar="S", help="Share of ε spent finding the domains of undeclared columns "
              "[0.1].")
@click.option("--discovery-bins", type=click.IntRange(1, 4096), metavar="N", help="Bins for a discovered numeric "
              "column [16].")
@click.option("--max-categories", type=click.IntRange(1, 100_000), metavar="N", help="Most categories kept for a "
              "discovered text column [100].")
@click.option("--discovery-binning", type=click.Choice(["equal-width", "quantiles"]), default="equal-width",
              show_default=True, help="Bins of a discovered numeric column: equal widths, or cut at DP quantiles "
              "(half of the column's discovery budget).")
@_unit_options()
@click.option("--group-size", type=click.IntRange(min=1), metavar="C",
              help="Protect any C units (or records) together; noise grows C-fold [1].")
@click.option("--algorithm", "-a", metavar="NAME", help=f"Algorithm for tables that name none [{DEFAULT_ALGORITHM}]. "
              "See 'dphist algorithms'.")
@_algorithm_option_flags
@click.option("--workload", type=click.Choice(RELEASE_WORKLOADS),
              help="The questions the tables will answer: range sums along ordered columns, single cells, or one-way "
              "marginals. auto picks the algorithm with the least "
              "expected error on them; the report states the expected error of cells and of ranges "
              "[ranges where a column is ordered; cells where every column is a category].")
@click.option("--out", "-o", metavar="DIR", help="Output directory [./release].")
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), help="Release file format [csv].")
@click.option("--raw", is_flag=True, help="Skip post-processing: publish the unbiased noisy counts (may be negative).")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@_seed_option()
@click.option("--quiet", "-q", is_flag=True, help="Do not print the summary on stderr.")
@_ledger_options()
@click.option("--run-key", metavar="KEY", callback=_checked_name, help="Idempotency key, e.g. nightly-2026-11-21: if "
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
                    budget_split, options, out, fmt, overwrite, quiet, ledger_path, dataset_id, lock_timeout,
                    run_key, require_cap, log_format, **settings):
    """Release differentially private tables of INPUT (a CSV or Parquet file, a directory, or a glob).

    \b
    With --columns a,b: one table over those columns.
    With --spec JOB.yaml: the tables the job lists, the budget split by their shares.
    With neither: one 1-D histogram per schema column, the budget split equally.

    \b
    The budget, in one of three definitions:
      --epsilon E                          pure ε-DP, discrete Laplace noise (the default)
      --rho R                              ρ-zCDP, discrete Gaussian noise
      --epsilon E --delta D --noise gaussian
                                           (ε, δ)-DP, discrete Gaussian noise accounted as ρ-zCDP
    Under --rho and --noise gaussian every column must be declared in --schema (domains are found privately
    under pure ε only: run 'dphist schema --private' first).

    Writes one <table>.<format> file per table (one row per cell: labels, count, noisy_count, ci_lower,
    ci_upper) and report.json into --out, atomically. The whole run spends exactly ε (or ρ), and the budget
    ledger records it against the data set (refused with exit code 3 if that would pass the data set's cap;
    see 'dphist budget').
    """
    from ..publishing.execution import ReleaseFiles, execute
    from ..declare.job import load_job
    from ..publishing.output import NOT_PRIVATE
    from ..publishing.planning import ReleaseOptions, make_plan

    # ``settings`` holds the options named as in dphist.release (delta, privacy_unit, seed, engine, ...).
    _LOG["json"] = log_format == "json"
    tables, job = None, None
    if marginals is not None and (columns or spec):
        raise click.UsageError("give --marginals, --columns or --spec, not more than one")
    if spec:
        if columns:
            raise click.UsageError("give --columns or --spec, not both")
        job = load_job(spec)
        input = input or job.input
        epsilon, rho, noise, settings["delta"] = _job_budget(job, epsilon, rho, noise, settings["delta"])
        settings["privacy_unit"], settings["max_rows_per_unit"] = _job_unit(
            job, settings["privacy_unit"], settings["max_rows_per_unit"])
        settings["group_size"] = settings["group_size"] or job.group_size
        ledger_path = job.ledger if ledger_path is None else ledger_path
        schema_path = schema_path or job.schema
        out = out or job.out
        fmt = fmt or job.format
        settings["algorithm"] = settings["algorithm"] or job.algorithm
        settings["workload"] = settings["workload"] or job.workload
        tables = job.tables or None
        marginals = job.marginals
        marginal_strategy = marginal_strategy or job.marginal_strategy
        dataset_id = dataset_id or job.dataset_id
        run_key = run_key or job.run_key
    if input is None:
        raise click.UsageError("missing INPUT (a CSV or Parquet file)")
    if epsilon is None and rho is None:
        raise click.UsageError("missing the privacy budget: give --epsilon E (e.g. --epsilon 0.5) or --rho R "
                               "(rho-zCDP, e.g. --rho 0.05)")
    fmt = fmt or "csv"
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {quoted(fmt)} (choose one of {', '.join(FORMATS)})")
    if out == "":  # e.g. a cron line whose $OUT is unset: never fall back to ./release silently
        raise UsageError("--out is empty; name the output directory")
    out = out or "release"
    if marginal_strategy is not None and marginals is None:
        raise click.UsageError("--marginal-strategy applies to --marginals only")
    plan = make_plan(input, ReleaseOptions.from_keywords(
        epsilon=epsilon, rho=rho, noise=noise, schema=schema_path, columns=columns, tables=tables, marginals=marginals,
        marginal_strategy=marginal_strategy, algorithm_options=_algorithm_options(branching, budget_split, options),
        **settings))
    # What --overwrite must never replace, whatever the folder holds.
    protect = (*plan.source.files, *[Path(p) for p in (schema_path, spec) if p])
    done = execute(plan, ledger=ledger_path, dataset_id=dataset_id, run_key=run_key, lock_timeout=lock_timeout,
                   detail={"tables": [r.name for r in plan.requests]}, files=ReleaseFiles(out, fmt, overwrite, protect),
                   # A progress bar only for a person at a terminal: never in logs, cron mail or JSON logs.
                   progress=not quiet and log_format == "text" and sys.stderr.isatty(),
                   on_test_mode=lambda: _notice(NOT_PRIVATE, "test_mode"),
                   require_cap=require_cap or (job is not None and job.require_cap))
    if done.existing is not None:
        where = done.existing.detail.get("out", "?")
        _report(f"release for run key '{run_key}' already committed to {where}; nothing new was drawn or spent",
                {"event": "release", "status": "exists", "dataset": done.dataset, "run_key": run_key, "out": where,
                 "ledger_entry": done.existing.entry_hash}, quiet)
        return
    ledger_info = None if plan.seed is not None else {"dataset": done.dataset, "ledger_entry": done.commit_entry,
                                                      "run_key": run_key}
    if ledger_info is not None and not quiet and _uncapped(done.info):
        _warn_uncapped(done.dataset, plan.ledger_unit)  # before the result, which stays the last line
    _finish(done.value, done.paths, out, quiet, ledger_info)


def _job_budget(job, epsilon, rho, noise, delta) -> tuple:
    """(epsilon, rho, noise, delta) of a release of ``job`` with these command-line values (None: not given).

    A budget on the command line (--epsilon or --rho) replaces the job's as a whole: the job's epsilon, rho,
    delta and noise are all left out, so --epsilon E alone is pure epsilon with Laplace noise and --rho R never
    meets the job's delta.  Without one, the job's budget is used, with --noise and --delta in place of its own."""
    if epsilon is not None or rho is not None:
        return epsilon, rho, noise, delta
    return job.epsilon, job.rho, noise or job.noise, job.delta if delta is None else delta


def _job_unit(job, privacy_unit, max_rows_per_unit) -> tuple:
    """(privacy unit, max rows per unit) of a release of ``job`` with these command-line values (None: not
    given).  --privacy-unit replaces the job's unit and its bound together (a bound is chosen for one unit);
    --max-rows-per-unit alone replaces the bound of the job's unit."""
    if privacy_unit is not None:
        return privacy_unit, max_rows_per_unit
    return job.privacy_unit, job.max_rows_per_unit if max_rows_per_unit is None else max_rows_per_unit


def _uncapped(ledger_block: dict) -> bool:
    """Whether a charged run's ledger block (its report's ``ledger``) shows no cap in either definition."""
    return ledger_block.get("epsilon_cap") is None and ledger_block.get("rho_cap") is None


def _warn_uncapped(dataset: str, unit: str) -> None:
    """After a charged release of a data set without a cap: nothing limits what its releases spend.  Not under
    --quiet, which promises silence on success (cron mails any output); --require-cap is how an unattended run
    makes this a refusal instead."""
    import shlex

    from ..publishing.ledger import ROW_UNIT

    per = "" if unit == ROW_UNIT else f" --privacy-unit {shlex.quote(unit.removeprefix('unit:'))}"
    _notice(f"data set '{dataset}' has no cap: this release was recorded, but nothing limits what its releases "
            f"spend in all; cap it with 'dphist budget set {shlex.quote(dataset)} --epsilon E{per}' (or --rho R), or "
            "add --require-cap to refuse uncapped data sets", dataset=dataset)


def _finish(result, paths, out, quiet, ledger_info=None) -> None:
    if _LOG["json"]:
        click.echo(json.dumps({"event": "release", "status": "ok", "out": str(out),
                               "files": [p.name for p in paths], "definition": result.report["definition"],
                               **{key: result.report[key] for key in ("epsilon_spent", "delta_spent", "rho_spent")
                                  if key in result.report},
                               "test_mode": result.test_mode, **(ledger_info or {})}), err=True)
    elif not quiet:
        click.echo(result.summary(banner=False), err=True)
        click.echo(f"wrote {len(paths)} files to {out}/: {', '.join(p.name for p in paths)}", err=True)


def _report(text: str, record: dict, quiet: bool) -> None:
    if _LOG["json"]:
        click.echo(json.dumps(record), err=True)
    elif not quiet:
        click.echo(text, err=True)


def _finite(param, value: float) -> float:
    if value != value:  # click's FloatRange lets NaN through
        raise click.BadParameter("must be a number, not nan", param=param)
    return value


def _algorithm_options(branching, budget_split, pairs=()) -> dict:
    """The algorithm options of --option KEY=VALUE (repeatable), --branching and --budget-split.  Each option is
    given once: a key repeated, or given both by --option and by its own flag, is a UsageError (which one was
    meant cannot be told).  ('workload', the release's own setting, is refused by ReleaseOptions.)"""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option needs KEY=VALUE, got {quoted(pair)}")
        key = key.strip().replace("-", "_")
        if key in options:
            raise click.UsageError(f"--option {quoted(key, '')} is given twice; give each option once")
        value = value.strip()
        # Whole numbers in ASCII digits become ints; anything else stays text for the algorithm to validate
        # ('²'.isdigit() is true, but int('²') fails).
        whole = re.fullmatch(r"-?[0-9]+", value) is not None and len(value) <= 30
        options[key] = int(value) if whole else value
    for flag, key, value in (("--branching", "branching", branching), ("--budget-split", "budget_split",
                                                                      budget_split)):
        if value is not None and key in options:
            raise click.UsageError(f"{flag} and --option {key}=... both set {key}; give it once")
    if branching is not None:
        options["branching"] = branching if branching == "auto" else _int_option("--branching", branching)
    if budget_split is not None:
        options["budget_split"] = budget_split
    return options


def _int_option(flag: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise click.UsageError(f"{flag} must be an integer or 'auto', got {quoted(value)}") from None


@main.command("schema")
@click.argument("input", metavar="INPUT")
@click.option("--out", "-o", metavar="FILE", help="Write the schema here instead of stdout.")
@click.option("--private", is_flag=True, help="Find every domain with differential privacy (spends --epsilon, "
              "charged to the ledger): the result may be frozen and used for later releases.")
@click.option("--epsilon", "-e", metavar="E", help="With --private: the ε to spend, shared equally by the columns.")
@_delta_option("With --private")
@click.option("--columns", "-c", metavar="A,B", help="With --private: only these columns [all].")
@click.option("--bins", type=click.IntRange(1, 10_000), metavar="N",
              help="Bins per numeric column [10; with --private 16].")
@click.option("--max-categories", type=click.IntRange(1, 100_000), metavar="N",
              help="Text columns: the draft leaves columns with more values for you to declare [100]; with "
                   "--private, the most categories kept [100].")
@click.option("--binning", type=click.Choice(["equal-width", "quantiles"]), help="With --private: bins of a numeric "
              "column, equal widths or cut at DP quantiles [equal-width].")
@_unit_options("With --private")
@_seed_option("With --private")
@_ledger_options("With --private")
@click.option("--require-cap", is_flag=True, envvar="DPHIST_REQUIRE_CAP", help="With --private: refuse (exit 3, "
              "before reading) a data set that has no cap in the ledger [$DPHIST_REQUIRE_CAP]; without it, an "
              "uncapped data set gets a warning.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
@click.pass_context
def schema_command(ctx, input, out, private, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                   max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap, overwrite):
    """Write a schema for INPUT.

    Without --private: a DRAFT that copies bounds and categories FROM THE DATA; they are not private. Review them
    and replace them with public, coarsened values (round bounds, categories from a code list) before any release.

    With --private --epsilon E: the domains are found from noisy counts, exactly as a release without a schema
    finds them, and E (and --delta) is charged to the ledger. The schema may be frozen and reused; releases that
    use it spend nothing on discovery.
    """
    from ..declare.draft import draft_schema
    from ..products.output_file import atomic_output, check_output_file

    if out is not None:  # before the data is read (and, with --private, before anything is charged)
        check_output_file(out, overwrite)
        if Path(out).suffix.lower() == ".json":
            raise UsageError(f"--out {quoted(out, '')}: a schema is written as YAML, and a .json file is read back as "
                             "JSON: name it .yaml or .yml")
    if private:
        _private_schema(input, out, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                        max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap)
        return
    given = {p.name: p for p in ctx.command.params}
    used = [given[name].opts[0] for name in ("epsilon", "delta", "columns", "privacy_unit", "max_rows_per_unit",
                                             "seed", "ledger_path", "dataset_id", "lock_timeout", "binning")
            if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)]
    # $DPHIST_REQUIRE_CAP, set for a cron job, must not stop a draft, which charges nothing.
    if ctx.get_parameter_source("require_cap") == ParameterSource.COMMANDLINE:
        used.append("--require-cap")
    if used:
        raise click.UsageError(f"{used[0]} applies to --private only")
    text = draft_schema(input, bins=bins or 10, max_categories=max_categories or 100)
    if out:
        with atomic_output(out) as fh:
            fh.write(text.encode("utf-8"))
        click.echo(f"wrote draft schema to {out}", err=True)
    else:
        click.echo(text, nl=False)
    click.secho("WARNING: the draft's bounds and categories were copied from the data and are NOT private. "
                "Review and coarsen them before use.", err=True, fg="yellow")


def _private_schema(input, out, epsilon, delta, columns, bins, max_categories, binning, privacy_unit,
                    max_rows_per_unit, seed, ledger_path, dataset_id, lock_timeout, require_cap):
    from ..publishing.execution import charged
    from ..products.output_file import atomic_output
    from ..publishing.output import NOT_PRIVATE
    from ..discovery.private_schema import plan_private_schema, run_private_schema

    if epsilon is None:
        raise click.UsageError("--private needs --epsilon E: the budget spent finding the domains")
    plan = plan_private_schema(input, epsilon, delta or 0, columns, bins, max_categories, privacy_unit,
                               max_rows_per_unit, seed, binning or "equal-width")

    def work(ledger_info) -> None:
        result = run_private_schema(plan)
        if out:
            with atomic_output(out) as fh:
                fh.write(result.text.encode("utf-8"))
        else:
            click.echo(result.text, nl=False)
        found = [r["column"] for r in result.report["columns"] if "failed" not in r]
        click.echo(f"schema: {len(found)} column(s) found with epsilon {result.report['epsilon']}, delta "
                   f"{result.report['delta']}" + (f"; written to {out}" if out else ""), err=True)
        for r in result.report["columns"]:
            if "failed" in r:
                click.echo(f"  {r['column']}: not found: {r['failed']}", err=True)

    done = charged(plan, work, ledger=ledger_path, dataset_id=dataset_id, lock_timeout=lock_timeout,
                   detail={"command": "schema --private", "schema": str(Path(out).absolute()) if out else "stdout"},
                   on_test_mode=lambda: _notice(NOT_PRIVATE, "test_mode"), require_cap=require_cap)
    if plan.seed is None and _uncapped(done.info):
        _warn_uncapped(done.dataset, plan.ledger_unit)


@main.command("evaluate")
@click.argument("input", metavar="INPUT")
@_budget_options
@_delta_option(text="With --epsilon and --noise gaussian: the release's δ.")
@click.option("--schema", "-s", "schema_path", required=True, metavar="FILE", help="The release's schema.")
@click.option("--columns", "-c", required=True, metavar="A,B", help="The table to evaluate.")
@click.option("--algorithm", "-a", "algorithms", default=None, metavar="A,B",
              help="Algorithms to compare, comma-separated [every one that fits the table and needs no option].")
@click.option("--trials", "-k", default=10, show_default=True, type=click.IntRange(1, 10_000),
              help="Runs per algorithm.")
@click.option("--workload", "-w", type=click.Choice(EVALUATE_WORKLOADS),
              help="Queries to score: ranges (all ranges for one column, 2000 random boxes otherwise; the default), "
                   "cells, marginals (one-way), or all-ranges, prefix, random-ranges, random-boxes, identity.")
@_algorithm_option_flags
@click.option("--seed", type=click.IntRange(min=0), metavar="N", help="Deterministic noise.")
def evaluate_command(input, epsilon, rho, noise, delta, schema_path, columns, algorithms, trials, workload,
                     branching, budget_split, options, seed):
    """Compare algorithms on your own table: error on a range workload over several runs.

    A TUNING AID computed from the TRUE counts: the figures are NOT private and must not be published.
    Choosing an algorithm from them depends on the data; for a strict guarantee evaluate a public or synthetic
    stand-in with the same schema. Reports the scaled average L1 error per query (error / number of rows)
    and the RMSE per query of the released (post-processed) table.
    """
    from ..algorithms import REGISTRY
    from ..evaluation.evaluate import WARNING, evaluate

    names = [a.strip() for a in algorithms.split(",")] if algorithms else sorted(REGISTRY)
    table, info = evaluate(input, epsilon, schema_path, columns, names, trials=trials, workload=workload,
                           seed=seed, algorithm_options=_algorithm_options(branching, budget_split, options),
                           skip_refused=not algorithms, rho=rho, noise=noise, delta=delta)
    click.secho(WARNING, err=True, fg="yellow")  # after the checks, so that a failure stays one line
    for name, reason in info["skipped"].items():
        click.echo(f"skipped {name}: {reason}", err=True)
    budget = f"rho {info['rho']}" if info["definition"] == "zcdp" else f"epsilon {info['epsilon']}" + (
        f" (Gaussian noise, rho {info['rho']})" if info["definition"] == "approximate" else "")
    click.echo(f"table {info['table']} ({info['cells']} cells), {budget}, workload "
               f"{info['workload']} ({info['queries']} queries), {info['trials']} runs each")
    click.echo(f"{'algorithm':<10} {'scaled L1':>12} {'± sd':>10} {'RMSE/query':>12} {'ms/run':>8}")
    for row in table.itertuples():
        sd = "" if row.scaled_l1_sd != row.scaled_l1_sd else f"{row.scaled_l1_sd:.2e}"
        click.echo(f"{row.algorithm:<10} {row.scaled_l1_mean:>12.3e} {sd:>10} {row.rmse_mean:>12.3g} "
                   f"{1000 * row.seconds_per_run:>8.1f}")


@main.command("audit")
@click.option("--algorithm", "-a", "algorithm", default="all", show_default=True, metavar="NAME|all",
              help="Audit one algorithm, 'marginals' (the separate marginal-set strategy), 'units' (contribution "
                   "bounding per privacy unit), 'discovery' (private domain discovery), or all of them.")
@click.option("--quick", is_flag=True,
              help="Under a minute: one case per algorithm and the mutants of large effect, at 2e4 runs per table "
                   "(400 for data-adaptive algorithms), instead of every case at 2e6.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Audit seed.")
@click.option("--no-mutants", is_flag=True, help="Skip the deliberately broken variants.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="Cases run in N processes at once [the number of CPUs].")
def audit_command(algorithm, quick, seed, no_mutants, jobs):
    """Black-box privacy audit: try to show that an algorithm leaks more than its claimed ε.

    First the production samplers: χ² against the exact discrete Laplace and discrete Gaussian pmfs must pass
    (p > 1e-9, unseeded) and must reject 0.9x and 1.1x the scale (σ). Then for every case (algorithm, tiny table,
    neighbouring table with one record more or less), runs the algorithm many times on both, picks the most
    revealing event of its noisy outputs on one sample and bounds the privacy loss of that event from below on
    fresh samples (Clopper–Pearson, Bonferroni over cases, total false-alarm rate 1e-6). Real algorithms must
    pass; deliberately broken mutants must be caught. Prints a line per case as it finishes. Exits 0 only if
    both hold.
    """
    from ..algorithms import REGISTRY
    from dphist_audit import FULL, QUICK, audit, default_cases, quick_cases
    from dphist_audit.sampler import check_gaussian_sampler, check_sampler
    from ..privacy import SystemBits

    names = None if algorithm == "all" else [algorithm]
    if names and names[0] not in REGISTRY and names[0] not in ("marginals", "units", "discovery"):
        raise UsageError(f"unknown algorithm {quoted(algorithm)} (available: {', '.join(sorted(REGISTRY))}, "
                         "marginals, units, discovery, all)")
    draws = 300_000 if quick else 2_000_000
    click.echo(f"{'sampler (OS CSPRNG)':<30} {'draws':>10} {'p exact':>9} {'p x0.9':>9} {'p x1.1':>9}  verdict")
    sampler_ok = True
    for scale in ("1", "10", "100/3"):
        s = check_sampler(scale, draws, SystemBits(), threshold=1e-9)
        sampler_ok &= s.ok
        click.echo(f"{'discrete Laplace, scale ' + scale:<30} {draws:>10,} {s.p_exact:>9.2g} {s.p_smaller:>9.2g} "
                   f"{s.p_larger:>9.2g}  {'pass' if s.ok else 'FAIL'}")
    for sigma2 in ("1", "100", "12345/7"):
        s = check_gaussian_sampler(sigma2, draws, SystemBits(), threshold=1e-9)
        sampler_ok &= s.ok
        click.echo(f"{'discrete Gaussian, sigma2 ' + sigma2:<30} {draws:>10,} {s.p_exact:>9.2g} {s.p_smaller:>9.2g} "
                   f"{s.p_larger:>9.2g}  {'pass' if s.ok else 'FAIL'}")

    size = QUICK if quick else FULL
    recipe = functools.partial(quick_cases if quick else default_cases, names, mutants=not no_mutants)
    count = len(recipe())
    width = len(str(count))
    click.echo(f"{'':<{2 * width + 3}}{'case':<52} {'claimed ε':>9} {'ε lower bound':>13} {'at δ':>9} "
               f"{'runs':>9} {'s':>6}  verdict")

    def progress(i, m, r):
        at = f"{r.delta:>9.3g}" if r.rho is not None else f"{'0':>9}"
        click.echo(f"[{i + 1:>{width}}/{m}] {r.case:<52} {float(r.epsilon):>9.3g} {r.lower_bound:>13.3f} {at} "
                   f"{r.runs:>9,} {r.seconds:>6.1f}  {r.verdict}")

    results = audit(recipe, size=size, seed=seed, progress=progress, jobs=jobs or os.cpu_count() or 1)
    bad = [r for r in results if not r.ok]
    click.echo(f"{len(results)} cases ({size.name} audit: {size.n_test:,} test runs per table, "
               f"{size.runs_note()}), seed {seed}: "
               + ("all real algorithms pass, all mutants caught" if not bad else f"{len(bad)} problem(s)")
               + ("" if sampler_ok else "; the sampler check FAILED"))
    if bad or not sampler_ok:
        sys.exit(1)


@main.command("bench")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--algorithm", "-a", "algorithms", default=None, metavar="A,B", help="Algorithms [all].")
@click.option("--scale", "scales", multiple=True, type=click.IntRange(1), default=(1_000, 100_000),
              show_default=True, help="Records drawn per sample (repeatable).")
@click.option("--epsilon", "-e", "epsilons", multiple=True, default=("0.1", "1"), show_default=True,
              help="Budgets to try (repeatable).")
@click.option("--samples", default=5, show_default=True, type=click.IntRange(1), help="Data samples per setting.")
@click.option("--runs", default=2, show_default=True, type=click.IntRange(1), help="Noise runs per sample.")
@click.option("--jsonl", metavar="FILE", help="Also write one JSON record per run here.")
def bench_command(files, algorithms, scales, epsilons, samples, runs, jsonl):
    """Benchmark algorithms on your own count histograms (.npy, or CSV of numbers), DPBench style.

    Each FILE is treated as a distribution: samples of --scale records are drawn from it and every algorithm
    is scored on range queries (prefix queries in 1-D, 2000 random boxes in 2-D) by the scaled average L1
    error. Uses the histograms' true counts: the output is NOT private; do not publish it.
    """
    from ..algorithms import REGISTRY
    from ..evaluation.benchmark import load_histogram, run_benchmark, summarize
    from ..publishing.writers import write_text_atomic
    from ..privacy import parse_epsilon

    for e in epsilons:
        parse_epsilon(e)
    names = [a.strip() for a in algorithms.split(",")] if algorithms else sorted(REGISTRY)
    for name in names:
        if name not in REGISTRY:
            raise UsageError(f"unknown algorithm {quoted(name)} (available: {', '.join(sorted(REGISTRY))})")
    data = {}
    for f in files:
        x = load_histogram(f)
        data[os.path.basename(f)] = x
    click.secho("NOT PRIVATE: computed from the histograms' true counts; do not publish.", err=True, fg="yellow")
    records = run_benchmark(data, names, list(scales), list(epsilons), samples, runs)
    if jsonl:
        write_text_atomic(jsonl, "".join(json.dumps(r) + "\n" for r in records))
    click.echo(summarize(records))


@main.command("synth")
@click.argument("release_dir", metavar="RELEASE_DIR")
@click.option("--rows", "-n", required=True, type=click.IntRange(0, 10**9), metavar="N", help="Rows to generate.")
@click.option("--table", "-t", metavar="NAME", help="The released table to sample (needed if there are several).")
@click.option("--joint", is_flag=True, help="Draw records over the columns of all tables together: a "
              "maximum-entropy table fitted to all of them by iterative proportional fitting.")
@click.option("--out", "-o", required=True, metavar="FILE", help="Output file: .csv, .parquet or .json.")
@click.option("--seed", type=click.IntRange(min=0), metavar="N", help="Reproducible sampling.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
def synth_command(release_dir, rows, table, joint, out, seed, overwrite):
    """Synthetic records drawn from a released table: cells in proportion to their released counts, then a
    value inside each cell (uniform within a numeric or date bin, the label of a category).

    Post-processing only: it reads the release, never the private data, and spends no budget. The records
    reproduce the released table, nothing more: relations inside a bin, or between columns that are not in one
    table together, are not in the release and are not in the records.

    With --joint the records have the columns of all tables, drawn from the maximum-entropy table that has them
    all as marginals (they must agree, as the tables of 'dphist release --marginals' do). It reproduces each
    table and invents no other association: from age,sex and sex,income, age and income are independent given
    sex.
    """
    import numpy as np

    from ..products.output_file import TABLE_SUFFIXES, atomic_output, check_output_file, write_frames
    from ..products.synth import plan_synthesis

    if joint and table is not None:
        raise click.UsageError("give --table or --joint, not both")
    path = check_output_file(out, overwrite, TABLE_SUFFIXES)  # before the release is read
    with warnings.catch_warnings(record=True) as caught:  # shown as one line each, not Python's two-line form
        warnings.simplefilter("always")
        plan = plan_synthesis(release_dir, rows, table, joint)  # every check, before any record is drawn
    for warning in caught:
        click.echo(f"Warning: {warning.message}", err=True)
    # Streamed a chunk at a time into a temp file renamed into place: memory does not grow with --rows.
    with atomic_output(path) as fh:
        written = write_frames(fh, plan.chunks(np.random.default_rng(seed)), TABLE_SUFFIXES[path.suffix.lower()],
                               plan.prototype())
    click.echo(f"wrote {written} synthetic rows to {out}", err=True)


@main.command("plot")
@click.argument("release_dir", metavar="RELEASE_DIR")
@click.option("--table", "-t", metavar="NAME", help="The released table to draw (needed if there are several).")
@click.option("--out", "-o", required=True, metavar="FILE", help="The picture, e.g. chart.png.")
@click.option("--overwrite", is_flag=True, help="Replace FILE if it exists.")
def plot_command(release_dir, table, out, overwrite):
    """Draw a released table: bars with 95 % intervals (one column), a heat map (two), or small multiples of
    heat maps (three). Reads the release only. Needs matplotlib: pip install 'dphist[plot]'."""
    from ..products.output_file import check_output_file
    from ..products.plot import picture_suffixes, plot_release

    check_output_file(out, overwrite, picture_suffixes())  # before the release is read
    plot_release(release_dir, out, table)
    click.echo(f"wrote {out}", err=True)


@main.group("budget")
def budget_group():
    """The privacy-budget ledger: caps per data set, what was spent, and a tamper check.

    \b
    dphist budget set ID --epsilon 5          # cap a data set (releases past it exit 3)
    dphist budget set ID --rho 0.5            # or cap it in rho (zCDP)
    dphist budget show [ID]                   # spent, remaining, number of releases
    dphist budget history ID [--format json]  # every entry, oldest first
    dphist budget verify                      # check the file and the hash chain (exit 1 if damaged)
    dphist budget recover                     # finish or clean up runs that were killed
    """


_ledger_option = click.option("--ledger", "ledger_path", metavar="PATH", help=f"Ledger file [{LEDGER_DEFAULT}].")


def _account_name(ctx, param, value):
    """A DATASET argument as a checked, normalised account name (dphist.declare.identifiers.account)."""
    from ..declare import identifiers

    return None if value is None else identifiers.account(value, "the data set id")


def _recorded_as(dataset: str) -> str | None:
    """If ``dataset`` names an existing file, directory or glob, the id its releases get without --dataset-id,
    when that differs from ``dataset``: a cap set on the path as typed would not apply to them."""
    import glob

    from ..declare import identifiers

    try:
        if not (os.path.lexists(dataset) or glob.glob(dataset, recursive=True)):
            return None
        default = identifiers.default_dataset_id(dataset)
    except (DphistError, OSError, ValueError):
        return None
    return None if default == dataset else default


@budget_group.command("set")
@click.argument("dataset", callback=_account_name)
@click.option("--epsilon", "-e", metavar="E", help="Cap the data set in epsilon: its total ε over all releases "
              "(pure and --noise gaussian (ε, δ) releases count their ε and δ; --rho releases are refused).")
@click.option("--rho", metavar="R", help="Cap the data set in rho (zCDP) instead: its total ρ over all releases "
              "(--rho and --noise gaussian releases count their ρ, pure ones ε²/2; pure releases with a δ are "
              "refused).")
@click.option("--delta", default="0", show_default=True, metavar="D", help="With --epsilon, the data set's total "
              "δ; with --rho, the δ at which its spend is shown as (ε, δ) (default then 1e-6).")
@click.option("--reason", default="", metavar="TEXT", help="Why the cap is set or changed (kept in the ledger).")
@click.option("--privacy-unit", metavar="COLUMN", help="Cap the budget of releases protecting each COLUMN value "
              "(release --privacy-unit COLUMN), a separate account from the per-row budget.")
@_ledger_option
def budget_set(dataset, epsilon, rho, delta, reason, privacy_unit, ledger_path):
    """Set (or change) the cap of DATASET, in epsilon (--epsilon, with --delta) or in rho (--rho); the change is
    itself a ledger entry. Every release is counted in the cap's definition (see 'dphist budget show')."""
    from ..publishing.ledger import ROW_UNIT, Ledger
    from ..privacy import parse_delta, parse_epsilon, parse_rho

    if epsilon is not None and rho is not None:
        raise click.UsageError("give the cap as --epsilon E (with --delta D) or as --rho R, not both")
    if epsilon is None and rho is None:
        raise click.UsageError("missing --epsilon E or --rho R (the data set's total budget, e.g. --epsilon 5)")
    eps = None if epsilon is None else parse_epsilon(epsilon)
    r = None if rho is None else parse_rho(rho, "--rho")
    dlt = parse_delta(delta, "--delta")
    ledger = Ledger(ledger_path)
    unit = ROW_UNIT if privacy_unit is None else f"unit:{privacy_unit}"
    ledger.set_cap(dataset, unit, eps, dlt, reason, rho=r)
    recorded_as = _recorded_as(dataset)
    if recorded_as is not None:
        _notice(f"'{dataset}' is a path, but its releases are recorded as '{recorded_as}' unless they give "
                f"--dataset-id '{dataset}': this cap applies only to those that do")
    row = next(r for r in ledger.status(dataset) if r["unit"] == unit)
    who = f"{dataset}{'' if privacy_unit is None else ' (per ' + privacy_unit + ')'}"
    if row["rho_cap"] is not None:
        spent = "n/a (a release with a delta has no rho)" if row["rho_spent"] is None else row["rho_spent"]
        click.echo(f"{who}: cap rho {row['rho_cap']} (epsilon {row['epsilon_cap_at_delta']} at delta "
                   f"{row['reference_delta']}); spent rho {spent}, remaining {row['rho_remaining'] or 'n/a'}")
    else:
        spent = "n/a (a --rho release has no epsilon)" if row["epsilon_spent"] is None else row["epsilon_spent"]
        click.echo(f"{who}: cap epsilon {row['epsilon_cap']}, delta {row['delta_cap']}; spent epsilon {spent}, "
                   f"remaining {row['epsilon_remaining'] or 'n/a'}")
    if row["cap_note"]:
        _notice(f"{who}: {row['cap_note']}")


@budget_group.command("show")
@click.argument("dataset", required=False, callback=_account_name)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_ledger_option
def budget_show(dataset, fmt, ledger_path):
    """Cap, spent and remaining budget of DATASET (or of every data set in the ledger), in the cap's definition
    (epsilon or rho), and the other definition as converted: a rho cap and its spend as epsilon at a reference
    delta (the cap's, else 1e-6; tight conversion, rounded up), an epsilon-capped spend as rho."""
    from ..declare import identifiers

    ledger = _reading_ledger(ledger_path)
    rows = ledger.status(dataset)
    if dataset and not rows:
        raise UsageError(_not_in(ledger, dataset))
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"ledger {ledger.path}: no entries; nothing has been recorded there yet")
    for r in rows:
        parts = []
        if r["definition"] == "zcdp":
            spent = "n/a (a release with a delta has no rho)" if r["rho_spent"] is None else r["rho_spent"]
            remaining = "" if r["rho_remaining"] is None else f", remaining {r['rho_remaining']}"
            parts.append(f"rho spent {spent}, cap {r['rho_cap']}{remaining}")
        else:
            spent = "n/a (a --rho release has no epsilon)" if r["epsilon_spent"] is None else r["epsilon_spent"]
            text = f"epsilon spent {spent}"
            if r["delta_spent"] not in (None, "0"):
                text += f", delta spent {r['delta_spent']}"
            if r["epsilon_cap"] is None:
                text += ", no cap"
            else:
                text += f", cap {r['epsilon_cap']}" + ("" if r["delta_cap"] == "0" else f" delta {r['delta_cap']}")
                text += "" if r["epsilon_remaining"] is None else f", remaining {r['epsilon_remaining']}"
            parts.append(text)
            if r["rho_spent"] is not None and r["rho_spent"] != "0":
                parts.append(f"as rho: spent {r['rho_spent']}")
        if r["epsilon_spent_at_delta"] is not None:
            cap = "" if r["epsilon_cap_at_delta"] is None else f" of {r['epsilon_cap_at_delta']}"
            parts.append(f"as (epsilon, delta): epsilon {r['epsilon_spent_at_delta']}{cap} at delta "
                         f"{r['reference_delta']}")
        if r["cap_note"]:
            parts.append(f"note: {r['cap_note']}")
        click.echo(f"{identifiers.shown(r['dataset'])} ({r['unit']}): {'; '.join(parts)}; {r['releases']} "
                   f"release(s), last entry {r['last_entry']}")


@budget_group.command("history")
@click.argument("dataset", callback=_account_name)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_ledger_option
def budget_history(dataset, fmt, ledger_path):
    """Every ledger entry of DATASET, oldest first."""
    from ..privacy import format_fraction

    ledger = _reading_ledger(ledger_path)
    entries = ledger.history(dataset)
    if not entries:
        raise UsageError(_not_in(ledger, dataset))
    if fmt == "json":
        click.echo(json.dumps(entries, indent=2))
        return
    for e in entries:
        amount = ""
        if e["kind"] in ("RESERVE", "CAP"):
            # An entry with no ε (a --rho release, a rho cap) has an empty epsilon column; ρ is in its detail.
            detail = e["detail"]
            if e["epsilon"]:
                amount += f" epsilon {format_fraction(Fraction(e['epsilon']))}"
            if e["delta"] not in ("", "0") and not (e["kind"] == "CAP" and detail.get("definition") == "zcdp"):
                amount += f" delta {format_fraction(Fraction(e['delta']))}"
            if detail.get("definition") in ("zcdp", "approximate") and "rho" in detail:
                amount += f" rho {format_fraction(Fraction(detail['rho']))}"
        key = f" key {e['run_key']}" if e["run_key"] else ""
        click.echo(f"{e['seq']:>6} {e['ts']} {e['kind']:<7} run {e['run_id'][:8]}{amount}{key}")


@budget_group.command("verify")
@_ledger_option
def budget_verify(ledger_path):
    """Check the ledger file and its hash chain: exit 0 if intact, 1 if damaged (the problems on stdout, one line
    on stderr), 2 if it could not be checked (no file there, a full disk, an I/O error: the line says which; the
    ledger was not found damaged). Reads only: it works on a full disk."""
    from ..publishing.ledger import LedgerDamaged, LedgerError

    try:
        ledger = _reading_ledger(ledger_path)
        problems = ledger.verify()
    except LedgerDamaged as exc:
        raise DataError(str(exc)) from None
    except LedgerError as exc:
        raise type(exc)(f"cannot check {exc}") from None
    if problems:
        for p in problems:
            click.echo(p)
        raise DataError(f"ledger {ledger.path}: damaged or edited outside dphist ({len(problems)} problem(s): "
                        f"{problems[0]}); restore it from a backup")
    click.echo(f"ledger {ledger.path}: hash chain intact, head {ledger.head()}")


@budget_group.command("recover")
@_ledger_option
def budget_recover(ledger_path):
    """Finish or clean up the runs of this host that were killed: a release that was complete is moved into
    place, partial output is removed, and reservations of runs that never read data are given back. Every
    release also does this before it starts; this command does it now. It never reads data or draws noise.

    A release whose folder no longer holds exactly the files it committed (a file put in, changed or removed) is
    left as it is, with a line saying what to do, and the command exits 1; run it again once that is done."""
    from ..publishing.ledger import Ledger
    from ..publishing.transaction import recover

    ledger = Ledger(ledger_path)
    done = recover(ledger)
    for run in done:
        click.echo(run.line)
    left = sum(run.left for run in done)
    click.echo(f"ledger {ledger.path}: {len(done) - left} interrupted run(s) recovered"
               + (f", {left} left as they are" if left else ""))
    if left:
        raise DataError(f"ledger {ledger.path}: {left} interrupted run(s) could not be finished and were left as "
                        "they are (the lines above say why and what to do); their budget stays spent")


def _reading_ledger(ledger_path) -> Ledger:
    """The ledger for the reading commands (show, history, verify), opened read-only: they never write it, so they
    work on a full disk or a read-only mount (reservations of runs that died before reading are shown as given
    back; the next release or 'budget recover' records that).  No file there is LedgerMissing (exit 2): a
    mistyped --ledger must not look like a ledger with nothing spent."""
    from ..publishing.ledger import Ledger, default_ledger_path

    return Ledger(Path(ledger_path) if ledger_path else default_ledger_path(), readonly=True)


def _not_in(ledger: Ledger, dataset: str) -> str:
    """The data set is not in the ledger: say so, and under which id its releases are recorded if it is a path."""
    recorded_as = _recorded_as(dataset)
    hint = "" if recorded_as is None else f" (releases of that path are recorded as '{recorded_as}')"
    return f"data set '{dataset}' is not in the ledger {ledger.path}{hint}"


@main.command("algorithms")
def algorithms_command():
    """List the available algorithms and their options (set with --option KEY=VALUE or a job spec's options)."""
    from ..algorithms import REGISTRY

    for name in sorted(REGISTRY):
        click.echo(f"{name:<14} {REGISTRY[name].summary}")
        cls = REGISTRY[name]
        for key, (default, _) in cls.options.items():
            # Tree methods leave branching and budget_split to the method's own default.
            shown = {"branching": getattr(cls, "default_branching", None),
                     "budget_split": getattr(cls, "default_split", None)}.get(key) if default is None else default
            note = f": {cls.option_help[key]}" if key in cls.option_help else ""
            click.echo(f"{'':<15}option {key} ({'required' if shown is None else f'default {shown}'}){note}")
        for ceiling in cls.ceilings:  # checked before any row is read
            click.echo(f"{'':<15}ceiling on {', '.join(ceiling.options)}: {ceiling.describe()}")


if __name__ == "__main__":  # pragma: no cover
    main()
