"""The command line's promise on failure: every failure a user can cause ends with one line on stderr, an exit
code and no traceback or output files.  Exit codes: 0 done, 1 data error, 2 usage error (options, schema, spec),
3 budget exhausted, 4 ledger locked (timeout), 5 internal error (a bug), 6 the data does not fit the schema
(``dphist check``, after its report), 130 interrupted, 143 stopped (SIGTERM).

:class:`Group` is the ``dphist`` group's class: its ``main`` sets the process up for the run
(:func:`process_setup`) and turns whatever the command raised into that line and code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
import warnings
from contextlib import contextmanager

import click

from ..errors import BUDGET_STAYS_SPENT, DphistError, Terminated, read_data
from ..text import QUOTE_LIMIT, quoted
from .messages import LogFormat, error_line, warning_printer
from .streams import StdoutClosed, standard_streams

INTERNAL_ERROR = 5


def _on_sigterm(signum, frame):
    raise Terminated()


@contextmanager
def process_setup(log: LogFormat):
    """SIGTERM ends the run like Ctrl-C does (cleanup runs, exit 143); warnings print as single lines in the log
    format ``log``; the standard streams are guarded (:func:`~dphist.cli.streams.standard_streams`).  All are put
    back afterwards (the CLI may be called in-process, e.g. by tests)."""
    previous_warning = warnings.showwarning
    warnings.showwarning = warning_printer(log)
    main_thread = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        with standard_streams():
            yield
    finally:
        warnings.showwarning = previous_warning
        if main_thread:
            signal.signal(signal.SIGTERM, previous_term)


class Group(click.Group):
    """Turns every error into one line on stderr and an exit code, never a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        log = LogFormat.from_args(args)  # each invocation starts afresh (matters when called in-process)
        code = 0
        with process_setup(log):
            try:
                with self.make_context(prog_name or "dphist", args, obj=log, **extra) as ctx:
                    self.invoke(ctx)
            except click.exceptions.Exit as exc:
                code = exc.exit_code
            except click.exceptions.NoArgsIsHelpError as exc:  # plain 'dphist': its help, not an error
                click.echo(exc.ctx.get_help())
            except click.exceptions.Abort:
                code = _interrupted(log, 130, "interrupted")
            except click.ClickException as exc:
                hint = ""
                if isinstance(exc, click.UsageError) and exc.ctx is not None:
                    hint = f" (see '{exc.ctx.command_path} --help')"
                # click's messages repeat the value or option given, whatever its length: bounded as a whole.
                error_line(f"{quoted(exc.format_message(), '', limit=4 * QUOTE_LIMIT)}{hint}", exc.exit_code, log)
                code = exc.exit_code
            except DphistError as exc:
                error_line(str(exc), exc.exit_code, log)
                code = exc.exit_code
            except StdoutClosed as exc:
                if read_data(exc):  # a charged run's output (schema --private's schema) did not reach its reader
                    error_line(f"standard output was closed before the output was written; {BUDGET_STAYS_SPENT}", 1,
                               log)
                    code = 1
                # otherwise exit 0: the reader has what it wanted (see standard_streams)
            except KeyboardInterrupt as exc:
                code = _interrupted(log, 130, "interrupted (SIGINT)", exc)
            except Terminated as exc:
                code = _interrupted(log, 143, "stopped (SIGTERM)", exc)
            except Exception as exc:  # a bug: keep the promise of no traceback, but make it debuggable
                if os.environ.get("DPHIST_DEBUG"):
                    traceback.print_exc()
                error_line(f"internal error ({type(exc).__name__}); nothing was written{_spent(exc)}. "
                           "Set DPHIST_DEBUG=1 to see the traceback and please report it.", INTERNAL_ERROR, log)
                code = INTERNAL_ERROR
        sys.exit(code)


def _spent(exc: BaseException) -> str:
    """What the line of an error that is not a DphistError adds when the release transaction marked it as
    raised after reading data (dphist.errors.after_reading; a DphistError's own message says it already)."""
    return f"; {BUDGET_STAYS_SPENT}" if read_data(exc) else ""


def _interrupted(log: LogFormat, code: int, what: str, exc: BaseException | None = None) -> int:
    error_line(f"{what}; no partial output was left{'' if exc is None else _spent(exc)}", code, log)
    return code
