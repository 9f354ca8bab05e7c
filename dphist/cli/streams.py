"""The standard streams as the run's promises need them: a closed descriptor pointed at /dev/null, a failed write
to stderr ignored, stdout whose reader has gone ending the run quietly, any other failure of stdout an error
(:func:`standard_streams`)."""

from __future__ import annotations

import io
import os
import sys
from contextlib import contextmanager

from ..errors import DataError


class StdoutClosed(Exception):
    """Standard output's reader has gone (``dphist algorithms | head -3``).  The entry point ends the run quietly
    with exit 0; inside a charged run (``schema --private`` printing its schema) it is an error after reading
    like any other, so the run's budget stays spent."""


class StreamWriter(io.RawIOBase):
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


def to_devnull(fd: int) -> None:
    """``fd`` writes to /dev/null from now on."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:  # a closed ``fd`` is the lowest free number: os.open may have given it already
        os.dup2(null, fd)
        os.close(null)


def stderr_failed(exc: OSError) -> None:
    # A message that cannot be shown (stderr closed, its pipe's reader gone, its disk full) must not change
    # what the run does or its exit code: the rest of the messages go to /dev/null.
    to_devnull(2)


def stdout_failed(exc: OSError) -> None:
    to_devnull(1)  # what is still buffered, and the interpreter's flush at exit, go nowhere quietly
    if isinstance(exc, BrokenPipeError):
        raise StdoutClosed() from None
    # Anything else (a full disk, a closed descriptor) lost output the user asked for: an error, one line.
    raise DataError(f"standard output cannot be written ({exc.strerror or type(exc).__name__}); what was "
                    "printed is incomplete") from None


def guarded(stream, fd: int, on_failure):
    """A text stream like ``stream`` (None if Python found ``fd`` closed at start-up) writing to ``fd`` through
    :class:`StreamWriter`; None when ``stream`` is not the process's own ``fd`` (an in-process run)."""
    try:
        os.fstat(fd)
    except OSError:  # closed: the next file opened would get this number, and the messages would go into it
        to_devnull(fd)
    try:
        if stream is not None and stream.fileno() != fd:
            return None
    except (AttributeError, ValueError, OSError):
        return None
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "backslashreplace"
    return io.TextIOWrapper(io.BufferedWriter(StreamWriter(fd, on_failure)), encoding=encoding, errors=errors,
                            line_buffering=True)


@contextmanager
def standard_streams():
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
    out, err = guarded(sys.stdout, 1, stdout_failed), guarded(sys.stderr, 2, stderr_failed)
    sys.stdout, sys.stderr = out or sys.stdout, err or sys.stderr
    try:
        yield
    except StdoutClosed:
        pass  # raised where the entry point's handlers do not reach (printing help for a bare 'dphist')
    finally:
        for stream in (out, err):
            if stream is not None:
                try:
                    stream.flush()
                except (StdoutClosed, DataError):
                    pass  # the run's outcome is settled; a failed writer has already gone to /dev/null
        sys.stdout, sys.stderr = saved
