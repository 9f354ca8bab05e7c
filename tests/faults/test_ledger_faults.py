"""The ledger under faults, with real processes: a process that died before reading gets its reservation back
(one that died after reading stays charged), eight concurrent releases against a cap never overspend, and a
SIGKILL while counting or before reading leaves no files and the budget as the transaction table says.  (The
release transaction killed at each of its states: test_transaction.py.)

The releases run as processes forked from a server that has already imported dphist (cli_harness.start), except
where interpreter start-up is part of the check (a kill before reading) or of its larger variant (the concurrent
releases started afresh, in the slow tier)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from dphist.ledger import Ledger

import cli_harness
from cli_harness import Outcome, run_forked, run_process, start
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
    code = ("import os, sys; from dphist.ledger import Ledger; "
            f"Ledger({str(path)!r}).reserve('d', 'row', '0.7'); os._exit(0)")
    assert start(["-c", code], cwd=ROOT).wait().exit_code == 0
    assert spent(path, "d") == 0  # status() notices the dead process and gives the reservation back
    assert [e["kind"] for e in Ledger(path).history("d")][-2:] == ["RESERVE", "ABORT"]
    # One that died after READ stays charged.
    code = ("import os; from dphist.ledger import Ledger; L = Ledger(" + repr(str(path)) + "); "
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
