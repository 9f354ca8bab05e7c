"""The one way the tests run the ``dphist`` command line: in-process through click's CliRunner (:func:`invoke`), as
a real ``python -m dphist`` process started afresh (:func:`run_process`), or as a real process forked from a server
that has already imported dphist (:func:`start`, :func:`run_forked`); all return an :class:`Outcome`.
:func:`snapshot` records a directory tree, for checking that a failed run left it exactly as it was.

A forked run is a process of its own (its own pid, signals, exit status, standard streams and ledger lock) that
starts the way ``python -m dphist ARGS`` does once its imports are done, about 0.05 s instead of the ~1 s a fresh
interpreter spends importing numpy, pandas and pyarrow, and ends as the interpreter ends it, short of tearing its
modules down.  What it cannot show is the interpreter's start-up and teardown (a kill during the imports,
something printed while importing or by a finalizer at exit): the tests of those use :func:`run_process`.

Every runner unsets ``DPHIST_DEBUG`` (a user's debug switch must not change what the tests see); everything else
comes from the test's environment (``DPHIST_LEDGER`` is the private ledger conftest.py gives every test), with
``env`` applied on top: a value of None removes that variable.
"""

from __future__ import annotations

import atexit
import gc
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from dphist.cli import main

__all__ = ["Outcome", "invoke", "run_process", "start", "run_forked", "Started", "start_fork_server",
           "snapshot", "ROOT"]

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
    environment = _environment(env)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    try:
        proc = subprocess.run([sys.executable, "-m", "dphist", *map(str, args)], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=timeout, stdin=stdin)
    except subprocess.TimeoutExpired as exc:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return Outcome(-1, text(exc.stdout), text(exc.stderr), f"no exit within {timeout:g} s (a hang)")
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def _environment(env: Mapping[str, str | None] | None) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "DPHIST_DEBUG"}
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return environment


# ---- forked processes ---------------------------------------------------------------------------------------------
# A server process imports dphist and what a release loads, then forks one child per request.  The child sets up
# what a fresh `python -m dphist ARGS` (or `python -c CODE ARGS`) would have: the environment and working directory
# asked for, stdin from /dev/null and stdout and stderr to the caller's files, new standard streams, and the signal
# dispositions a fresh interpreter has (SIGINT raises KeyboardInterrupt, even where the suite was started with it
# ignored; every other signal as the server inherited it); it then runs the module or code and exits as the
# interpreter would (exit status, traceback, atexit handlers, flushing: see _exit).  The server reports each
# child's pid and, once it has reaped it, its exit status (-N for signal N, as subprocess does) on the request's
# connection.

# Imported by the server before it forks: what `release` (pure, zCDP, approximate), `schema` (--private),
# `budget` and the Python API load.
_PRELOAD = ("dphist.cli", "dphist.api", "dphist.publishing.execution", "dphist.publishing.transaction",
            "dphist.publishing.ledger", "dphist.publishing.budget_status", "dphist.discovery.private_schema",
            "dphist.declare.draft", "dphist.publishing.writers", "dphist.read.sources", "dphist.products.output_file",
            "dphist.algorithms", "dphist.publishing.assemble", "dphist.privacy.conversions", "scipy.optimize", "pandas",
            "pyarrow.csv", "pyarrow.parquet")

_server: tuple[subprocess.Popen, str] | None = None
_server_lock = threading.Lock()


def start_fork_server() -> str:
    """Start this process's fork server if it is not running (it imports in the background; a module whose tests
    fork calls this when it is imported, so the imports overlap other tests); returns its socket's path."""
    global _server
    with _server_lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        path = os.path.join(tempfile.mkdtemp(prefix="dphist-forks-"), "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)  # requests queue here until the server has finished importing
        code = ("import sys; sys.path[:0] = sys.argv[2:]; import cli_harness; "
                "cli_harness._serve(int(sys.argv[1]))")
        # stdin is a pipe nobody writes to: the server exits when this process (the pipe's writer) has ended.
        proc = subprocess.Popen([sys.executable, "-c", code, str(listener.fileno()), str(Path(__file__).parent),
                                 str(ROOT)], stdin=subprocess.PIPE, pass_fds=[listener.fileno()], cwd=ROOT)
        listener.close()
        _server = (proc, path)
        return path


def _stop_fork_server() -> None:
    if _server is not None:
        proc, path = _server
        proc.stdin.close()  # the server reads the end of its stdin and returns
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


atexit.register(_stop_fork_server)


class Started:
    """A process started by :func:`start`: ``pid``, :meth:`send_signal` while it runs, :meth:`wait` for its
    :class:`Outcome` (stdout and stderr are kept in files until then)."""

    def __init__(self, connection: socket.socket, stdout, stderr):
        self._connection, self._stdout, self._stderr = connection, stdout, stderr
        self._pid: int | None = None
        self.returncode: int | None = None
        self._outcome: Outcome | None = None

    @property
    def pid(self) -> int:
        """The process id (the server sends it once it has forked: processes started one after another are
        forked as fast as the server can, without waiting for each other)."""
        if self._pid is None:
            self._pid = _read_number(self._connection)
        return self._pid

    def poll(self) -> int | None:
        """The exit status (-N for signal N) if the process has ended, else None."""
        if self.returncode is None:
            self.pid  # noqa: B018  (it comes first on the connection)
            self._connection.setblocking(False)
            try:
                self.returncode = _read_number(self._connection)
            except BlockingIOError:
                pass
            finally:
                self._connection.setblocking(True)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the process, unless it has already ended (its pid may then belong to another process)."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def wait(self, timeout: float | None = 60) -> Outcome:
        """Wait for the exit; a process still running after ``timeout`` seconds is killed and comes back with exit
        code -1 and a crash saying it hung, like :func:`run_process`."""
        if self._outcome is not None:
            return self._outcome
        crash = ""
        if self.returncode is None:
            self.pid  # noqa: B018  (it comes first on the connection)
            self._connection.settimeout(timeout)
            try:
                self.returncode = _read_number(self._connection)
            except TimeoutError:
                os.kill(self.pid, signal.SIGKILL)
                self._connection.settimeout(None)
                _read_number(self._connection)
                self.returncode, crash = -1, f"no exit within {timeout:g} s (a hang)"
        self._connection.close()
        self._outcome = Outcome(self.returncode, _text(self._stdout), _text(self._stderr), crash)
        return self._outcome


def start(argv: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
          env: Mapping[str, str | None] | None = None, stdout: int | None = None,
          stderr: int | None = None) -> Started:
    """Start ``python ARGV`` as a forked process (see the module docstring): ``argv`` is ``["-m", "dphist",
    *ARGS]`` or ``["-c", CODE, *ARGS]``.  Returns at once; the server forks it as soon as it can.  ``stdout`` or
    ``stderr``, a file descriptor (a pipe, /dev/full), replaces that stream's capture (its Outcome text is then
    empty)."""
    argv = [str(a) for a in argv]
    if len(argv) < 2 or argv[0] not in ("-m", "-c"):
        raise ValueError(f"argv starts with -m MODULE or -c CODE, not {argv[:2]}")
    environment = _environment(env)
    # As run_process's: a Python process the run starts finds this checkout's dphist.
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    request = json.dumps({"argv": argv, "cwd": str(cwd) if cwd is not None else os.getcwd(),
                          "env": environment}).encode()
    captured = [tempfile.TemporaryFile() if fd is None else None for fd in (stdout, stderr)]
    fds = [fd if file is None else file.fileno() for fd, file in zip((stdout, stderr), captured)]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(start_fork_server())
    with open(os.devnull, "rb") as stdin:
        socket.send_fds(connection, [b"R"], [stdin.fileno(), *fds])
    connection.sendall(struct.pack("q", len(request)) + request)
    return Started(connection, *captured)


def run_forked(args: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
               env: Mapping[str, str | None] | None = None, timeout: float = 60) -> Outcome:
    """:func:`run_process`'s ``python -m dphist ARGS``, as a forked process: started, then waited for."""
    return start(["-m", "dphist", *args], cwd=cwd, env=env).wait(timeout)


def _read_number(connection: socket.socket) -> int:
    data = b""
    while len(data) < 8:
        chunk = connection.recv(8 - len(data))
        if not chunk:
            raise EOFError("the fork server closed the connection (did it die?)")
        data += chunk
    return struct.unpack("q", data)[0]


def _text(file) -> str:
    """A captured stream as subprocess's text mode reads it (locale encoding, universal newlines); "" for one
    that was not captured."""
    if file is None:
        return ""
    file.seek(0)
    with open(os.dup(file.fileno()), encoding=locale.getpreferredencoding(False), errors="replace") as text:
        content = text.read()
    file.close()
    return content


def _serve(listener_fd: int) -> None:
    """The fork server's loop (run in its own process by :func:`start_fork_server`)."""
    for name in _PRELOAD:
        __import__(name)
    # What the imports made is never collected: a child's full garbage collections then leave those pages shared
    # with the server instead of copying most of them.
    gc.freeze()
    listener = socket.socket(fileno=listener_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wake-up pipe
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    for source in (listener, wake_r, sys.stdin.fileno()):
        selector.register(source, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                connection, _ = listener.accept()
                _, fds, _, _ = socket.recv_fds(connection, 1, 3)
                size = struct.unpack("q", _receive(connection, 8))[0]
                request = json.loads(_receive(connection, size))
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in children.values():
                        other.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(request, fds, connection)  # never returns: the interpreter exits with the run
                for fd in fds:
                    os.close(fd)
                connection.sendall(struct.pack("q", pid))
                children[pid] = connection
            elif key.fileobj == wake_r:
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                while children:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    connection = children.pop(pid)
                    try:
                        connection.sendall(struct.pack("q", os.waitstatus_to_exitcode(status)))
                    except OSError:
                        pass  # the caller is gone
                    connection.close()
            elif not os.read(sys.stdin.fileno(), 1):
                return  # the test process has ended


def _receive(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _child(request: dict, fds: list[int], connection: socket.socket) -> None:
    """In the forked child: become ``python ARGV`` (see the comment above), run it and exit; never returns."""
    import runpy
    import types

    connection.close()
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's; every other disposition is what it inherited
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    encoding = getattr(sys.__stdout__, "encoding", None) or locale.getpreferredencoding(False)
    sys.stdin = sys.__stdin__ = open(0, encoding=encoding, closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding=encoding, closefd=False)
    sys.stderr = sys.__stderr__ = open(2, "w", encoding=encoding, errors="backslashreplace", buffering=1,
                                       closefd=False)
    option, target, *args = request["argv"]
    try:
        if option == "-m":
            sys.argv = ["-m", *args]
            sys.path[0:0] = [os.getcwd()]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *args]
            sys.path[0:0] = [""]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
        code = None
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # as the interpreter's top level does: the traceback, then exit status 1
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = exc if isinstance(exc, KeyboardInterrupt) else 1
    _exit(code)


def _exit(code) -> None:
    """End the forked child the way the interpreter ends ``python``: wait for its other threads, run the atexit
    handlers, flush the standard streams (exit status 120 if stdout cannot be), and leave with SystemExit's status
    (None: 0; an int; anything else is printed and gives 1) or, after an uncaught KeyboardInterrupt, by SIGINT.
    What it skips is tearing the modules down, which in a forked child costs 0.2 s of copying the pages the server
    shares (and whose only output would be a finalizer's "Exception ignored" message, which run_process shows)."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    elif isinstance(code, KeyboardInterrupt):
        status = None
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
    except Exception:
        status = 120
    try:
        sys.stderr.flush()
    except Exception:
        pass
    if status is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status)


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
