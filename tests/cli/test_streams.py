"""Standard output and error that go away: a reader that stops reading (``dphist algorithms | head -3``), a closed
stderr (``2>&-``), a full disk under stdout.  A closed stdout pipe ends a reading command quietly with exit 0; a
failed stderr write changes nothing the run does; lost output the user asked for is one error line, exit 1.

The runs are real processes, forked (cli_harness.start) with a pipe or /dev/full as a stream, or started afresh
where a descriptor closed at start-up is part of the check (Python then has no ``sys.stderr``, and the next file
the run opens would get the number).  The processes of a test run at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_harness import ROOT, run_forked, start
from conftest import SAMPLE
from dphist.cli import streams
from dphist.errors import DataError

RELEASE = ["release", str(SAMPLE / "census.csv"), "--schema", str(SAMPLE / "census.schema.yaml"), "--columns", "age",
           "--epsilon", "0.01"]


def _fresh(args, ledger: Path, close: tuple[int, ...]) -> subprocess.Popen:
    """``python -m dphist ARGS`` in a new interpreter, the descriptors in ``close`` closed before it starts."""
    env = {k: v for k, v in os.environ.items() if k != "DPHIST_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DPHIST_LEDGER"] = str(ledger)

    def closing():
        for fd in close:
            os.close(fd)
    return subprocess.Popen([sys.executable, "-m", "dphist", *map(str, args)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL if 1 not in close else None,
                            stderr=subprocess.DEVNULL if 2 not in close else None, env=env, preexec_fn=closing)


def _readerless_pipe() -> int:
    """The write end of a pipe whose read end is already closed: every write fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


def _entries(ledger: Path) -> list[str]:
    from dphist.publishing.ledger import Ledger

    book = Ledger(ledger, readonly=True)
    try:
        assert book.verify() == []
        return [e["kind"] for e in book.history(str(SAMPLE / "census.csv"))]
    finally:
        book.close()


def test_reading_commands_end_quietly_when_the_reader_has_gone(tmp_path):
    env = {"DPHIST_LEDGER": str(tmp_path / "ledger.sqlite")}
    assert run_forked([*RELEASE, "--out", tmp_path / "r", "--quiet"], env=env).exit_code == 0
    commands = [["algorithms"], ["--help"], [], ["budget", "show"], ["budget", "history", SAMPLE / "census.csv"],
                ["budget", "history", SAMPLE / "census.csv", "--format", "json"], ["schema", SAMPLE / "census.csv"]]
    pipe = _readerless_pipe()
    try:
        runs = [start(["-m", "dphist", *args], env=env, stdout=pipe) for args in commands]
        outcomes = [run.wait(60) for run in runs]
    finally:
        os.close(pipe)
    for args, outcome in zip(commands, outcomes):
        assert outcome.exit_code == 0, (args, outcome)
        assert "Error" not in outcome.stderr and "Traceback" not in outcome.stderr, (args, outcome)


def test_a_private_schema_whose_reader_has_gone_is_an_error_after_reading(tmp_path):
    """``schema --private`` prints the schema it paid for: a reader gone before it arrives is not the quiet exit of
    a reading command but one error line, exit 1, saying the budget stays spent (the ledger: RESERVE, READ, FAIL)."""
    ledger = tmp_path / "ledger.sqlite"
    pipe = _readerless_pipe()
    try:
        outcome = start(["-m", "dphist", "schema", SAMPLE / "census.parquet", "--private", "--epsilon", "1",
                         "--columns", "age,income"], env={"DPHIST_LEDGER": str(ledger)}, stdout=pipe).wait(60)
    finally:
        os.close(pipe)
    assert outcome.exit_code == 1, outcome
    (line,) = outcome.stderr.splitlines()
    assert line.startswith("Error: standard output was closed") and "budget stays spent" in line, line
    from dphist.publishing.ledger import Ledger
    book = Ledger(ledger, readonly=True)
    try:
        assert [e["kind"] for e in book.history(str(SAMPLE / "census.parquet"))] == ["RESERVE", "READ", "FAIL"]
    finally:
        book.close()


def test_a_release_is_unaffected_by_its_streams(tmp_path):
    """A release prints nothing on stdout, and a failed write to stderr changes nothing it does: piped to a reader
    that has gone, it publishes and commits as it would have; a release that fails exits as it would have."""
    ledger = tmp_path / "ledger.sqlite"
    env = {"DPHIST_LEDGER": str(ledger)}
    pipe = _readerless_pipe()
    full = os.open("/dev/full", os.O_WRONLY) if os.path.exists("/dev/full") else pipe  # a disk with no space left
    try:
        runs = {
            "stdout gone": start(["-m", "dphist", *RELEASE, "--out", tmp_path / "a"], env=env, stdout=pipe),
            "stderr full": start(["-m", "dphist", *RELEASE, "--out", tmp_path / "d"], env=env, stderr=full),
            "stderr gone": start(["-m", "dphist", *RELEASE, "--out", tmp_path / "b"], env=env, stderr=pipe),
            "seeded, stderr gone": start(["-m", "dphist", *RELEASE, "--seed", "1", "--out", tmp_path / "c"], env=env,
                                         stderr=pipe),
            "failing, stderr gone": start(["-m", "dphist", *RELEASE, "--columns", "nosuch", "--out", tmp_path / "f"],
                                          env=env, stderr=pipe),
        }
        codes = {name: run.wait(60).exit_code for name, run in runs.items()}
    finally:
        os.close(pipe)
        if full != pipe:
            os.close(full)
    assert codes == {"stdout gone": 0, "stderr full": 0, "stderr gone": 0, "seeded, stderr gone": 0,
                     "failing, stderr gone": 1}
    for name in "abcd":
        assert {"age.csv", "report.json"} <= {p.name for p in (tmp_path / name).iterdir()}, name
    assert not (tmp_path / "f").exists()
    # Three charged releases (run at once), each reserved, read, committed and published; the failing one was
    # refused before reserving.
    assert sorted(_entries(ledger)) == sorted(["RESERVE", "READ", "COMMIT", "PUBLISH"] * 3)


def test_stderr_closed_at_start_up(tmp_path):
    """``2>&-``: the release publishes and commits, and no file it opens gets descriptor 2 (the ledger verifies).
    (A failing release with stderr gone exits as it would have: test_a_release_is_unaffected_by_its_streams.)"""
    ledger = tmp_path / "ledger.sqlite"
    assert _fresh([*RELEASE, "--out", tmp_path / "a"], ledger, close=(2,)).wait(timeout=60) == 0
    assert {"age.csv", "report.json"} <= {p.name for p in (tmp_path / "a").iterdir()}
    assert _entries(ledger) == ["RESERVE", "READ", "COMMIT", "PUBLISH"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_that_cannot_be_written_is_one_error_line(tmp_path):
    env = {"DPHIST_LEDGER": str(tmp_path / "ledger.sqlite")}
    with open("/dev/full", "w") as full:
        runs = [start(["-m", "dphist", *args], env=env, stdout=full.fileno())
                for args in (["algorithms"], ["schema", SAMPLE / "census.csv"])]
        outcomes = [run.wait(60) for run in runs]
    for outcome in outcomes:
        lines = outcome.stderr.splitlines()
        assert outcome.exit_code == 1, lines
        assert lines[0].startswith("Error: standard output cannot be written") and len(lines) == 1, lines


# ---- the writers themselves, in this process ------------------------------------------------------------------------


def test_the_stdout_writer_stops_the_run_on_a_closed_pipe_and_then_writes_nowhere(monkeypatch):
    fd = _readerless_pipe()
    sent = []
    monkeypatch.setattr(streams, "to_devnull", sent.append)
    writer = streams.StreamWriter(fd, streams.stdout_failed)
    try:
        with pytest.raises(streams.StdoutClosed):
            writer.write(b"line\n")
        assert sent == [1]
    finally:
        os.close(fd)


def test_the_stdout_writer_reports_other_failures_as_data_errors(monkeypatch):
    monkeypatch.setattr(streams, "to_devnull", lambda fd: None)
    read, fd = os.pipe()
    os.close(read)
    os.close(fd)  # now a closed descriptor: EBADF
    with pytest.raises(DataError, match="standard output cannot be written"):
        streams.StreamWriter(fd, streams.stdout_failed).write(b"x")


def test_the_stderr_writer_swallows_failures(monkeypatch):
    fd = _readerless_pipe()
    sent = []
    monkeypatch.setattr(streams, "to_devnull", sent.append)
    try:
        assert streams.StreamWriter(fd, streams.stderr_failed).write(b"Error: x\n") == len(b"Error: x\n")
        assert sent == [2]
    finally:
        os.close(fd)


def test_in_process_runs_keep_their_streams():
    """Under click's CliRunner the streams are the runner's, not descriptors 1 and 2: they are left alone."""
    from cli_harness import invoke

    outcome = invoke(["algorithms"])
    assert outcome.exit_code == 0 and "identity" in outcome.stdout
