"""The ledger under faults, with real processes: a process that died before reading gets its reservation back
(one that died after reading stays charged), eight concurrent releases against a cap never overspend, and a
SIGKILL while counting or before reading leaves no files and the budget as the transaction table says, and a ledger
on a full disk (a small tmpfs, where mounting is permitted) is read by show, history and verify and refused for
writing as full, with nothing lost.  (The release transaction killed at each of its states: test_transaction.py.)

The releases run as processes forked from a server that has already imported dphist (cli_harness.start), except
where interpreter start-up is part of the check (a kill before reading) or of its larger variant (the concurrent
releases started afresh, in the slow tier)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dphist.publishing.ledger import Ledger

import cli_harness
from cli_harness import Outcome, invoke, run_forked, run_process, start
from conftest import ROOT

cli_harness.start_fork_server()  # it imports while the tests before these run

CENSUS = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml"),
          "-c", "sex"]


def dphist(*args: str) -> Outcome:
    """``python -m dphist ARGS`` as a real process in the repository, with the test's private ledger."""
    return run_process(args, cwd=ROOT)


def spent(ledger_path, dataset) -> Fraction:
    rows = Ledger(ledger_path).status(dataset)
    return Fraction(rows[0]["epsilon_spent"]) if rows else Fraction(0)


def test_a_process_that_died_before_reading_gets_its_reservation_back(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).set_cap("d", "row", 1)
    # A process reserves, then dies before reading any data (no READ entry, no chance to ABORT).
    code = ("import os, sys; from dphist.publishing.ledger import Ledger; "
            f"Ledger({str(path)!r}).reserve('d', 'row', '0.7'); os._exit(0)")
    assert start(["-c", code], cwd=ROOT).wait().exit_code == 0
    assert spent(path, "d") == 0  # status() notices the dead process and gives the reservation back
    assert [e["kind"] for e in Ledger(path).history("d")][-2:] == ["RESERVE", "ABORT"]
    # One that died after READ stays charged.
    code = ("import os; from dphist.publishing.ledger import Ledger; L = Ledger(" + repr(str(path)) + "); "
            "L.mark_read(L.reserve('d', 'row', '0.7')); os._exit(0)")
    assert start(["-c", code], cwd=ROOT).wait().exit_code == 0
    assert spent(path, "d") == Fraction(7, 10)


def test_eight_concurrent_releases_against_a_cap_never_overspend(tmp_path, private_ledger):
    """Cap 1.0, eight processes started together asking 0.3 each: exactly three succeed, five exit 3, the
    ledger shows 0.9 spent.  Two rounds, each on a fresh data set id.  (Forked processes reach the reservation
    within milliseconds of each other; the slow test below runs twenty rounds of processes started afresh.)"""
    _eight_against_a_cap(tmp_path, private_ledger, rounds=2, forked=True)


@pytest.mark.slow
def test_eight_fresh_processes_against_a_cap_never_overspend_twenty_rounds(tmp_path, private_ledger):
    """The test above with each ``python -m dphist`` started afresh (its imports spread the starts over about a
    second), twenty rounds: about three minutes on two cores."""
    _eight_against_a_cap(tmp_path, private_ledger, rounds=20, forked=False)


def _eight_against_a_cap(tmp_path: Path, ledger: Path, rounds: int, forked: bool) -> None:
    for round_ in range(rounds):
        dataset = f"round-{round_}"
        setting = ["budget", "set", dataset, "--epsilon", "1"]
        assert (run_forked(setting, cwd=ROOT) if forked else dphist(*setting)).exit_code == 0
        runs = [["release", *CENSUS, "-e", "0.3", "-q", "--dataset-id", dataset, "-o", str(tmp_path / f"{dataset}-{i}")]
                for i in range(8)]
        if forked:
            started = [start(["-m", "dphist", *args], cwd=ROOT) for args in runs]
            outcomes = [p.wait(120) for p in started]
        else:
            procs = [subprocess.Popen([sys.executable, "-m", "dphist", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True) for args in runs]
            errors = [p.communicate(timeout=300)[1] for p in procs]
            outcomes = [Outcome(p.returncode, "", e) for p, e in zip(procs, errors)]
        codes = sorted(o.exit_code for o in outcomes)
        assert codes == [0, 0, 0, 3, 3, 3, 3, 3], (round_, [o.stderr for o in outcomes])
        assert spent(ledger, dataset) == Fraction(9, 10)
        assert sum((tmp_path / f"{dataset}-{i}").exists() for i in range(8)) == 3
    assert Ledger(ledger).verify() == []


def _big_csv(path: Path, rows: int) -> Path:
    block = b"".join(b"%d\n" % (i % 100) for i in range(100_000))  # the values do not matter, only the reading time
    with open(path, "wb") as fh:
        fh.write(b"v\n")
        for _ in range(rows // 100_000):
            fh.write(block)
    return path


def test_sigkill_while_counting_leaves_no_files_and_stays_charged(tmp_path, private_ledger):
    data = _big_csv(tmp_path / "big.csv", 6_000_000)  # a second or more of counting: the window for the kill
    schema = tmp_path / "s.yaml"
    schema.write_text(yaml.safe_dump({"columns": {"v": {"type": "numeric", "lower": 0, "upper": 100, "bins": 10}}}))
    out = tmp_path / "out"
    proc = start(["-m", "dphist", "release", str(data), "-s", str(schema), "-c", "v", "-e", "0.5", "--dataset-id",
                  "big", "-o", str(out)], cwd=ROOT)
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until the run has recorded that it is reading, then kill it
        if private_ledger.exists() and any(e["kind"] == "READ" for e in _entries(private_ledger)):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kinds = [e["kind"] for e in _entries(private_ledger)]
    assert kinds == ["RESERVE", "READ"], kinds  # killed before it could finish or commit
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert spent(private_ledger, "big") == Fraction(1, 2)  # charged: the data was being read


def test_sigkill_before_reading_leaves_the_budget_unchanged(tmp_path, private_ledger):
    """Killed while the interpreter is still importing: a process started afresh, as cron starts it."""
    assert run_forked(["budget", "set", "census", "--epsilon", "1"], cwd=ROOT).exit_code == 0
    proc = subprocess.Popen([sys.executable, "-m", "dphist", "release", *CENSUS, "-e", "0.5", "--dataset-id",
                             "census", "-o", str(tmp_path / "k")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.2)  # still starting up: nothing reserved or read yet
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert spent(private_ledger, "census") == 0 and not (tmp_path / "k").exists()


def _entries(path: Path) -> list[dict]:
    db = sqlite3.connect(path)
    try:
        return [{"kind": k} for (k,) in db.execute("SELECT kind FROM entries ORDER BY seq")]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


# ---- a ledger on a full disk ----------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs at tmp_path/disk, unmounted afterwards; skipped where mounting is not permitted (it needs
    root, or a container that allows it)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _fill(disk: Path) -> None:
    """Write a file on ``disk`` until no byte more fits."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 1 << 12, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)
    assert shutil.disk_usage(disk).free == 0


def test_a_full_disk_is_stated_as_full_reading_still_works_and_nothing_is_written(small_disk, tmp_path):
    ledger = small_disk / "ledger.sqlite"
    # A process that dies holding the ledger leaves its newest entries in the write-ahead log.
    code = ("import os; from dphist.publishing.ledger import Ledger; L = Ledger(" + repr(str(ledger)) + "); "
            "L.set_cap('census', 'row', 5); L._db.execute('PRAGMA wal_autocheckpoint=0'); "
            "r = L.reserve('census', 'row', '0.5'); L.mark_read(r); L.commit(r, {}); os._exit(0)")
    assert start(["-c", code], cwd=ROOT).wait().exit_code == 0
    _fill(small_disk)
    files = ("ledger.sqlite", "ledger.sqlite-wal")  # not -shm: the log's index in shared memory, which readers use

    def contents() -> dict[str, bytes]:
        return {name: (small_disk / name).read_bytes() for name in files}

    before, entries = contents(), [e["hash"] for e in Ledger(ledger, readonly=True).history("census")]
    shown = invoke(["budget", "show", "census", "--format", "json", "--ledger", str(ledger)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)[0]["epsilon_spent"] == "0.5"  # the entries in the log were read too
    history = invoke(["budget", "history", "census", "--ledger", str(ledger)])
    assert history.exit_code == 0 and "COMMIT" in history.stdout, history.output
    verified = invoke(["budget", "verify", "--ledger", str(ledger)])
    assert verified.exit_code == 0 and "hash chain intact" in verified.stdout, verified.output
    assert contents() == before  # reading wrote nothing

    out = tmp_path / "out"
    for args in (["release", *CENSUS, "-e", "0.5", "--dataset-id", "census", "-o", str(out)],
                 ["budget", "set", "census", "--epsilon", "6"], ["budget", "recover"]):
        refused = invoke([*args, "--ledger", str(ledger)])
        assert refused.exit_code == 2 and refused.stdout == "", (args, refused.output)
        (line,) = refused.stderr.splitlines()
        assert "the disk holding it is full" in line and "the ledger is intact" in line, line
        assert "restore it from a backup and" not in line  # restoring would forget what was spent since
    assert not out.exists()
    # A write that found no space may leave part of a frame past the log's last commit, which SQLite ignores: the
    # file and the entries are as they were.
    assert (small_disk / "ledger.sqlite").read_bytes() == before["ledger.sqlite"]
    assert [e["hash"] for e in Ledger(ledger, readonly=True).history("census")] == entries

    (small_disk / "filler").unlink()  # space again: the same ledger works, nothing was lost
    done = invoke(["budget", "set", "census", "--epsilon", "6", "--ledger", str(ledger)])
    assert done.exit_code == 0 and "spent epsilon 0.5, remaining 5.5" in done.stdout, done.output
    assert Ledger(ledger).verify() == []
