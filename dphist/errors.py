"""The two kinds of failure a user can cause, and the exit code each one gets.

Both carry a one-line message meant for a data steward: it names the file, column, field or row at fault, and
never quotes a data value (an error message is not a publication channel for private data).
"""


class DphistError(Exception):
    """Base class for errors reported to the user as one line, without a traceback."""

    exit_code = 1


class UsageError(DphistError):
    """The command, its options, the schema or the job spec are wrong (exit code 2).  No data was read."""

    exit_code = 2


class DataError(DphistError):
    """The input data cannot be read as declared (exit code 1)."""

    exit_code = 1


class Terminated(BaseException):
    """SIGTERM arrived (exit code 143).  Like KeyboardInterrupt, it is not an Exception, so no handler meant for
    errors swallows it; every cleanup on the way out still runs."""
