"""The kinds of failure a user can cause, the exit code each one gets, and what an error says once data was read.

Both carry a one-line message meant for a data steward: it names the file, column, field or row at fault, and
never quotes a data value (an error message is not a publication channel for private data).
"""

from __future__ import annotations

__all__ = ["DphistError", "UsageError", "DataError", "DoesNotFit", "Terminated", "BUDGET_STAYS_SPENT",
           "after_reading", "read_data"]

#: What the one line of any failure of a charged run after it started reading adds: the budget is not given back
#: (noise may have been drawn), and the ledger shows it.  A failure before reading never says so.
BUDGET_STAYS_SPENT = "the run had read data, so its budget stays spent (see 'dphist budget show')"


class DphistError(Exception):
    """Base class for errors reported to the user as one line, without a traceback."""

    exit_code = 1


class UsageError(DphistError):
    """The command, its options, the schema or the job spec are wrong (exit code 2).  No data was read."""

    exit_code = 2


class DataError(DphistError):
    """The input data cannot be read as declared (exit code 1)."""

    exit_code = 1


class DoesNotFit(DphistError):
    """``dphist check`` found rows a release would drop or stop at, or declared columns the data lacks (exit code
    6).  Unlike the other errors it comes after a complete report on stdout; nothing was spent or written."""

    exit_code = 6


class Terminated(BaseException):
    """SIGTERM arrived (exit code 143).  Like KeyboardInterrupt, it is not an Exception, so no handler meant for
    errors swallows it; every cleanup on the way out still runs."""


def after_reading(exc: BaseException) -> BaseException:
    """The exception a charged run raises for ``exc``, raised after it started reading data.

    A :class:`DphistError` becomes a DataError (exit 1: codes 2, 3 and 4 promise that nothing was read) whose
    message ends with :data:`BUDGET_STAYS_SPENT`.  Anything else (an internal error, SIGINT, SIGTERM) keeps its
    type and exit code, marked so that :func:`read_data` is true and with the same note for a traceback; the
    CLI adds the note to its one line."""
    if isinstance(exc, DphistError):
        error = DataError(f"{exc}; {BUDGET_STAYS_SPENT}")
        error.__cause__, error.__suppress_context__ = None, True
        return error
    if not read_data(exc):
        exc._dphist_read_data = True
        exc.add_note(BUDGET_STAYS_SPENT)
    return exc


def read_data(exc: BaseException) -> bool:
    """Whether ``exc`` ended a charged run after it had started reading data (:func:`after_reading`)."""
    return getattr(exc, "_dphist_read_data", False)
