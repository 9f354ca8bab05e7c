"""The run's lines on stderr that are not a command's output: the error line, warnings and the test-mode banner,
in the run's log format (plain text, or one JSON object per line under ``--log-format json``).

The log format belongs to one invocation: the entry point makes a :class:`LogFormat` and hands it to click as the
context's ``obj``, every context of the run inherits it, a command that offers ``--log-format`` sets it, and the
entry point's error handler, which runs after the command's context has closed, reads the same object.
"""

from __future__ import annotations

import json

import click


class LogFormat:
    """How this run writes its lines on stderr: ``json`` true for one JSON object per line."""

    def __init__(self, json: bool = False) -> None:
        self.json = json

    @classmethod
    def from_args(cls, args: list[str]) -> LogFormat:
        """``--log-format json`` anywhere on the command line: known before click parses it, so that even a usage
        error found while parsing is logged as JSON."""
        for i, arg in enumerate(args):
            if arg == "--log-format=json" or (arg == "--log-format" and args[i + 1:i + 2] == ["json"]):
                return cls(True)
        return cls(False)


def run_log() -> LogFormat:
    """The log format of the run whose command is executing; a command invoked on its own, outside the
    ``dphist`` group, gets a plain-text one on its context; plain text outside any command."""
    ctx = click.get_current_context(silent=True)
    return LogFormat() if ctx is None else ctx.ensure_object(LogFormat)


def error_line(message: str, code: int, log: LogFormat) -> None:
    """The one line of a failed run, exit code ``code``."""
    # One line whatever the message holds (a path may contain a newline).
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    if log.json:
        click.echo(json.dumps({"event": "error", "exit_code": code, "message": message}), err=True)
    else:
        click.echo(f"Error: {message}", err=True)


def notice(message: str, event: str = "warning", **fields) -> None:
    """One line on stderr that is not an error, in the current run's log format: a warning, or the test-mode
    banner (``event="test_mode"``); ``fields`` are added to its JSON object."""
    write_notice(run_log(), message, event, fields)


def write_notice(log: LogFormat, message: str, event: str = "warning", fields: dict | None = None) -> None:
    """:func:`notice` in the log format ``log``."""
    if log.json:
        click.echo(json.dumps({"event": event, "message": message, **(fields or {})}), err=True)
    elif event == "test_mode":
        click.secho(f"*** {message} ***", err=True, fg="red", bold=True)
    else:
        click.echo(f"Warning: {message}", err=True)


def warning_printer(log: LogFormat):
    """A ``warnings.showwarning`` printing Python warnings (numpy's among them) as one line each in the log format
    ``log``: bound to the run's object rather than read from the click context, which a worker thread that
    warns does not have."""
    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        write_notice(log, str(message).splitlines()[0] if str(message) else category.__name__)
    return show_warning
