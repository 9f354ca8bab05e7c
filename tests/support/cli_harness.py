"""The one way the tests run the ``dphist`` command line: in-process through click's CliRunner (:func:`invoke`) or
as a real ``python -m dphist`` process (:func:`run_process`); both return an :class:`Outcome`.  :func:`snapshot`
records a directory tree, for checking that a failed run left it exactly as it was.

Both runners unset ``DPHIST_DEBUG`` (a user's debug switch must not change what the tests see); everything else
comes from the test's environment (``DPHIST_LEDGER`` is the private ledger conftest.py gives every test), with
``env`` applied on top: a value of None removes that variable.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from dphist.cli import main

__all__ = ["Outcome", "invoke", "run_process", "snapshot", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/support/cli_harness.py


@dataclass
class Outcome:
    """What a run of the command line did."""

    exit_code: int
    stdout: str
    stderr: str
    crash: str = ""  # an exception that escaped the CLI (in-process only), or why the run was stopped (a hang)
    interleaved: str | None = None  # stdout and stderr in the order they were written, where the runner knows it

    @property
    def output(self) -> str:
        """Everything printed, as a terminal shows it (click's ``Result.output``); stdout then stderr where the
        order is not known (a real process, or click < 8.2)."""
        return self.stdout + self.stderr if self.interleaved is None else self.interleaved


def _runner() -> tuple[CliRunner, bool]:
    """A CliRunner keeping stderr apart from stdout, and whether its ``output`` interleaves the two."""
    try:
        return CliRunner(mix_stderr=False), False  # click < 8.2: output is stdout alone
    except TypeError:
        return CliRunner(), True  # click >= 8.2: stderr is kept apart, output mixes both as written


class _Hung(BaseException):
    """Raised by the watchdog alarm; a BaseException, so neither the CLI nor CliRunner turns it into an exit code."""


def _alarm(signum, frame):
    raise _Hung()


@contextmanager
def _watchdog(seconds: float | None):
    """Interrupt the run after ``seconds`` (SIGALRM; only where it is available, in the main thread)."""
    armed = (seconds is not None and hasattr(signal, "setitimer")
             and threading.current_thread() is threading.main_thread())
    if not armed:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _working_directory(cwd: str | os.PathLike | None):
    if cwd is None:
        yield
        return
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(previous)


def invoke(args: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
           env: Mapping[str, str | None] | None = None, input: str | bytes | None = None,
           timeout: float | None = 30, **extra) -> Outcome:
    """Run ``dphist ARGS`` in this process through click's CliRunner (prog_name "dphist"), in ``cwd`` if given (the
    working directory is put back afterwards).  Any exception other than SystemExit comes back as ``crash`` (its
    formatted traceback), never raised; a run still going after ``timeout`` seconds is stopped and comes back
    with exit code -1 and a crash saying so (None: no limit).  ``extra`` goes to click's ``main`` (e.g.
    ``terminal_width``)."""
    runner, mixed = _runner()
    overrides = {"DPHIST_DEBUG": None, **(env or {})}
    try:
        with _working_directory(cwd), _watchdog(timeout):
            result = runner.invoke(main, [str(a) for a in args], input=input, env=overrides, prog_name="dphist",
                                   **extra)
    except _Hung:
        return Outcome(-1, "", "", f"no exit within {timeout:g} s in-process (a hang)")
    crash = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(*result.exc_info))
    return Outcome(result.exit_code, result.stdout, result.stderr, crash, result.output if mixed else None)


def run_process(args: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
                env: Mapping[str, str | None] | None = None, timeout: float = 60,
                stdin=subprocess.DEVNULL) -> Outcome:
    """Run ``python -m dphist ARGS`` as a real process (PYTHONPATH starts with the repository, so this checkout's
    dphist runs), capturing its output as text.  A process still running after ``timeout`` seconds is killed and
    comes back with exit code -1 and a crash saying it hung; a process killed by a signal has exit code -signal."""
    environment = {k: v for k, v in os.environ.items() if k != "DPHIST_DEBUG"}
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    try:
        proc = subprocess.run([sys.executable, "-m", "dphist", *map(str, args)], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=timeout, stdin=stdin)
    except subprocess.TimeoutExpired as exc:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return Outcome(-1, text(exc.stdout), text(exc.stderr), f"no exit within {timeout:g} s (a hang)")
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def snapshot(root: str | os.PathLike, *, mtimes: bool = True) -> dict[str, tuple]:
    """Every entry under ``root`` (hidden ones included, links not followed) with its kind and content: a link's
    target, a file's size, modification time (unless ``mtimes`` is false) and bytes, a special file's type."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = os.path.relpath(path, root)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                state[rel] = (("file", st.st_size, st.st_mtime_ns, path.read_bytes()) if mtimes
                              else ("file", st.st_size, path.read_bytes()))
            else:
                state[rel] = ("special", stat.S_IFMT(st.st_mode))
    return state
