"""The release transaction under faults, with real processes: kills at every state, signals, concurrent runs
with one run key, a lock timeout of 0, --overwrite aimed at the wrong folder, and damaged ledgers.

Each run is a real ``python -m dphist`` process of its own, forked from a server that has already imported dphist
(cli_harness.start: its own pid, signals, exit status and ledger connection, without a second of imports each;
the larger variant of the concurrent runs, in the slow tier, starts each afresh).  Runs are stopped at a named
checkpoint through ``DPHIST_FAULT_AT`` (dphist/publishing/faults.py); after each, the ledger, the disk and a retry are
checked against the table in dphist/publishing/transaction.py's docstring.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import pytest

from dphist.publishing.destination import MARKER, read_marker
from dphist.publishing.ledger import Ledger

import cli_harness
from cli_harness import Outcome, invoke, start
from conftest import ROOT, SAMPLE

cli_harness.start_fork_server()  # it imports while the tests before these run

CENSUS = SAMPLE / "census.csv"
SCHEMA = SAMPLE / "census.schema.yaml"


def release_args(out: Path, *extra: str, epsilon: str = "0.5") -> list[str]:
    return ["release", str(CENSUS), "-s", str(SCHEMA), "-c", "sex", "-e", epsilon, "--dataset-id", "census",
            "-o", str(out), *extra]


def run(args: list[str], ledger: Path, fault: str | None = None, timeout: float = 120) -> Outcome:
    """``python -m dphist ARGS`` as a process of its own with ``ledger``, stopped at the checkpoint ``fault`` if
    given; waited for (a run still going after ``timeout`` seconds is killed and has exit code -1)."""
    return launch(args, ledger, fault).wait(timeout)


def launch(args: list[str], ledger: Path, fault: str | None = None) -> cli_harness.Started:
    """:func:`run` without the wait.  The process starts with SIGINT at Python's default (KeyboardInterrupt) even
    where this suite was started with it ignored (a background or nohup launch): the signal tests deliver SIGINT
    to it."""
    return start(["-m", "dphist", *args], cwd=ROOT, env={"DPHIST_LEDGER": str(ledger), "DPHIST_FAULT_AT": fault})


def kinds(ledger: Path) -> list[str]:
    return [e["kind"] for e in Ledger(ledger).history("census")]


def spent(ledger: Path) -> Fraction:
    rows = Ledger(ledger).status("census")
    return Fraction(rows[0]["epsilon_spent"]) if rows else Fraction(0)


def leftovers(folder: Path) -> list[str]:
    """Staging or aside folders of any release in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if ".dphist-staging." in p.name or ".dphist-old." in p.name)


def first_run_id(ledger: Path) -> str:
    return next(e["run_id"] for e in Ledger(ledger).history("census") if e["kind"] == "RESERVE")


# ---------------------------------------------------------------------------------------------------------------
# SIGKILL at every state, then a retry with the same run key.

# checkpoint -> (ledger after the kill, what the retry with the same key does)
KILLS = {
    "reserved": (["RESERVE"], "fresh"),      # never read: given back, the retry releases normally
    "read": (["RESERVE", "READ"], "spent"),  # read, nothing staged: the key is used up
    "computed": (["RESERVE", "READ"], "spent"),
    "staging": (["RESERVE", "READ"], "spent"),  # a partial staging folder is left by the kill
    "writing": (["RESERVE", "READ"], "spent"),  # killed with a table's first chunk written, the file unfinished
    "staged": (["RESERVE", "READ"], "finished"),  # complete in staging: recovery commits and publishes it
    "committed": (["RESERVE", "READ", "COMMIT"], "finished"),
    "moved": (["RESERVE", "READ", "COMMIT"], "finished"),
    "published": (["RESERVE", "READ", "COMMIT", "PUBLISH"], "finished"),
}


@pytest.mark.parametrize("point", list(KILLS))
def test_sigkill_at_each_state_then_the_same_run_key(tmp_path, point):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    killed = run(release_args(out, "--run-key", "nightly-1"), ledger, fault=point)
    assert killed.exit_code == -9
    after_kill, retry_outcome = KILLS[point]
    assert kinds(ledger) == after_kill
    assert out.exists() == (point in ("moved", "published"))
    first = first_run_id(ledger)

    retry = run(release_args(out, "--run-key", "nightly-1", "--log-format", "json"), ledger)
    # Apart from the warning that the data set has no cap (this test sets none), one line.
    lines = [line for line in retry.stderr.strip().splitlines() if json.loads(line)["event"] != "warning"]
    assert len(lines) == 1 and "Traceback" not in retry.stderr, retry.stderr
    record = json.loads(lines[0])
    assert spent(ledger) == Fraction(1, 2)  # one release's epsilon, whatever happened
    assert leftovers(tmp_path) == []  # staging of the killed run cleaned, by recovery or by the sweep
    if retry_outcome == "fresh":
        assert retry.exit_code == 0 and record["status"] == "ok"
        assert kinds(ledger) == ["RESERVE", "ABORT", "RESERVE", "READ", "COMMIT", "PUBLISH"]
        assert read_marker(out)["run_id"] != first
    elif retry_outcome == "spent":
        assert retry.exit_code == 3 and record["exit_code"] == 3 and "no new noise" in record["message"]
        assert kinds(ledger) == ["RESERVE", "READ", "FAIL"]
        assert not out.exists()
    else:  # the killed run's own release, finished by recovery: no new noise drawn
        assert retry.exit_code == 0 and record["status"] == "exists", record
        assert kinds(ledger)[:3] == ["RESERVE", "READ", "COMMIT"] and kinds(ledger)[-1] == "PUBLISH"
        assert kinds(ledger).count("RESERVE") == 1
        marker = read_marker(out)
        assert marker["run_id"] == first
        assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, *marker["files"]])
    assert Ledger(ledger).verify() == []


def test_budget_recover_finishes_a_killed_run_without_a_key(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out), ledger, fault="committed").exit_code == -9
    assert not out.exists() and len(leftovers(tmp_path)) == 1
    done = run(["budget", "recover"], ledger)
    assert done.exit_code == 0 and "1 interrupted run(s) recovered" in done.stdout, done.stdout + done.stderr
    assert read_marker(out)["run_id"] == first_run_id(ledger) and leftovers(tmp_path) == []
    assert kinds(ledger)[-1] == "PUBLISH" and spent(ledger) == Fraction(1, 2)
    assert "0 interrupted" in run(["budget", "recover"], ledger).stdout  # nothing left to do


def test_a_kill_in_the_middle_of_replacing_a_release_puts_the_old_one_back_or_finishes(tmp_path):
    """--overwrite of an earlier release, killed after the commit: the retry finishes the new one; the old one
    is never lost half-way (there is always a complete release at --out once recovery ran)."""
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--run-key", "a"), ledger).exit_code == 0
    old = read_marker(out)["run_id"]
    assert run(release_args(out, "--run-key", "b", "--overwrite"), ledger, fault="committed").exit_code == -9
    assert read_marker(out)["run_id"] == old  # not yet replaced
    retry = run(release_args(out, "--run-key", "b", "--overwrite"), ledger)
    assert retry.exit_code == 0 and "already committed" in retry.stderr
    assert read_marker(out)["run_id"] != old and leftovers(tmp_path) == []
    assert spent(ledger) == 1


# ---------------------------------------------------------------------------------------------------------------
# SIGTERM and SIGINT


@pytest.mark.parametrize("signame, code", [("SIGTERM", 143), ("SIGINT", 130)])
@pytest.mark.parametrize("point, given_back", [("reserved", True), ("read", False), ("staged", False)])
def test_signals_exit_130_or_143_leaving_nothing_partial(tmp_path, signame, code, point, given_back):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    stopped = run(release_args(out, "--run-key", "k"), ledger, fault=f"{point}:{signame}")
    assert stopped.exit_code == code, stopped.stderr
    assert stopped.stderr.count("\n") == 1 and stopped.stderr.startswith("Error: ") and "Traceback" not in stopped.stderr
    assert ("stays spent" in stopped.stderr) == (not given_back), stopped.stderr  # said after READ only
    assert not out.exists() and leftovers(tmp_path) == []
    assert kinds(ledger)[-1] == ("ABORT" if given_back else "FAIL")
    assert spent(ledger) == (0 if given_back else Fraction(1, 2))


# Under a unit cap a release also measures what the cap dropped, between reading and staging: stopped there it
# settles as any release does, and the one release recovery publishes carries that measurement.

def capped_args(out: Path, *extra: str) -> list[str]:
    return release_args(out, "--privacy-unit", "state", "--max-rows-per-unit", "1000", *extra)


@pytest.mark.parametrize("point, retry_code", [("computed", 3), ("staged", 0)])
def test_a_capped_release_killed_after_measuring_settles_as_any_release(tmp_path, point, retry_code):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(capped_args(out, "--run-key", "k"), ledger, fault=point).exit_code == -9
    retry = run(capped_args(out, "--run-key", "k"), ledger)
    assert retry.exit_code == retry_code and "Traceback" not in retry.stderr, retry.stderr
    assert spent(ledger) == Fraction(1, 2) and leftovers(tmp_path) == [] and Ledger(ledger).verify() == []
    if retry_code == 0:  # the killed run's own release, with its measurement of the dropped rows
        report = json.loads((out / "report.json").read_text())
        assert report["unit_cap"]["max_rows_per_unit"] == 1000 and read_marker(out)["run_id"] == first_run_id(ledger)
    else:
        assert not out.exists() and kinds(ledger)[-1] == "FAIL"


@pytest.mark.parametrize("signame, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_capped_release_signalled_after_measuring_exits_with_one_line(tmp_path, signame, code):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    stopped = run(capped_args(out), ledger, fault=f"computed:{signame}")
    assert stopped.exit_code == code, stopped.stderr
    assert stopped.stderr.count("\n") == 1 and "stays spent" in stopped.stderr and "Traceback" not in stopped.stderr
    assert not out.exists() and leftovers(tmp_path) == [] and spent(ledger) == Fraction(1, 2)


# ``schema --private`` and the Python API spend budget through the same path as ``release`` (execution.charged).

def private_schema_args(out: Path) -> list[str]:
    return ["schema", str(CENSUS), "--private", "-e", "0.5", "--delta", "1e-6", "-c", "age", "--dataset-id", "census",
            "-o", str(out)]


@pytest.mark.parametrize("point, after, given_back", [("reserved", ["RESERVE"], True),
                                                       ("read", ["RESERVE", "READ"], False)])
def test_private_schema_killed_writes_nothing_and_recovery_settles_the_ledger(tmp_path, point, after, given_back):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "s.yaml"
    assert run(private_schema_args(out), ledger, fault=point).exit_code == -9
    assert kinds(ledger) == after and not out.exists()
    assert run(["budget", "recover"], ledger).exit_code == 0
    assert kinds(ledger)[-1] == ("ABORT" if given_back else "FAIL")
    assert spent(ledger) == (0 if given_back else Fraction(1, 2)) and not out.exists()


@pytest.mark.parametrize("signame, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_private_schema_signalled_after_reading_exits_with_one_line_and_stays_charged(tmp_path, signame, code):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "s.yaml"
    stopped = run(private_schema_args(out), ledger, fault=f"read:{signame}")
    assert stopped.exit_code == code, stopped.stderr
    assert stopped.stderr.count("\n") == 1 and stopped.stderr.startswith("Error: ") and "Traceback" not in stopped.stderr
    assert "stays spent" in stopped.stderr
    assert not out.exists() and kinds(ledger)[-1] == "FAIL" and spent(ledger) == Fraction(1, 2)


def test_python_api_killed_after_reading_stays_charged_and_recovers(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    code = (f"import dphist; r = dphist.release({str(CENSUS)!r}, '0.5', {str(SCHEMA)!r}, columns='sex', "
            f"ledger={str(ledger)!r}, dataset_id='census'); r.write({str(out)!r})")
    assert start(["-c", code], cwd=ROOT, env={"DPHIST_FAULT_AT": "read"}).wait(120).exit_code == -9
    assert kinds(ledger) == ["RESERVE", "READ"] and not out.exists()
    assert run(["budget", "recover"], ledger).exit_code == 0
    assert kinds(ledger)[-1] == "FAIL" and spent(ledger) == Fraction(1, 2)


def test_a_signal_during_the_commit_is_held_until_the_release_is_in_place(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    stopped = run(release_args(out), ledger, fault="committed:SIGTERM")
    assert stopped.exit_code == 143
    assert kinds(ledger) == ["RESERVE", "READ", "COMMIT", "PUBLISH"]  # commit and move were not split
    assert read_marker(out) is not None and leftovers(tmp_path) == []


def test_sigkill_in_test_mode_leaves_staging_that_the_next_run_removes(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    assert run(release_args(out, "--seed", "1"), ledger, fault="staged").exit_code == -9
    assert len(leftovers(tmp_path)) == 1 and not out.exists()
    assert run(release_args(out, "--seed", "1"), ledger).exit_code == 0
    assert leftovers(tmp_path) == [] and (out / "NOT_PRIVATE.txt").exists()


# ---------------------------------------------------------------------------------------------------------------
# Concurrency


def _start_together(commands: list[tuple[list[str], Path]]) -> list[Outcome]:
    """Start every run (the server forks them a few milliseconds apart), then wait for them all."""
    started = [launch(*c) for c in commands]
    return [p.wait(120) for p in started]


def test_concurrent_runs_with_one_run_key_publish_one_release(tmp_path):
    """Eight processes started together with the same run key, each with its own --out, three rounds: exactly one
    commits and publishes; the others report it (exit 0) or exit 4 having read and written nothing.  (The slow
    test below runs five rounds of processes started afresh.)"""
    _one_run_key(tmp_path, rounds=3, together=_start_together)


@pytest.mark.slow
def test_concurrent_fresh_processes_with_one_run_key_publish_one_release(tmp_path):
    """The test above with each ``python -m dphist`` started afresh (its imports spread the starts over about a
    second), five rounds."""
    def afresh(commands: list[tuple[list[str], Path]]) -> list[Outcome]:
        with ThreadPoolExecutor(len(commands)) as pool:
            return list(pool.map(lambda c: _run_afresh(*c), commands))

    _one_run_key(tmp_path, rounds=5, together=afresh)


def _run_afresh(args: list[str], ledger: Path) -> Outcome:
    """``python -m dphist ARGS`` started afresh, with SIGINT at its default action (see :func:`launch`)."""
    env = {**os.environ, "DPHIST_LEDGER": str(ledger)}
    env.pop("DPHIST_FAULT_AT", None)
    done = subprocess.run([sys.executable, "-m", "dphist", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return Outcome(done.returncode, done.stdout, done.stderr)


def _one_run_key(tmp_path: Path, rounds: int, together) -> None:
    ledger = tmp_path / "l.sqlite"
    for round_ in range(rounds):
        key = f"nightly-{round_}"
        outs = [tmp_path / f"r{round_}-{i}" for i in range(8)]
        results = together([(release_args(o, "--run-key", key, "-q"), ledger) for o in outs])
        codes = [r.exit_code for r in results]
        assert set(codes) <= {0, 4}, [r.stderr for r in results]
        assert sum(o.exists() for o in outs) == 1  # one published release
        history = [e for e in Ledger(ledger).history("census") if e["run_key"] == key]
        assert [e["kind"] for e in history] == ["RESERVE", "COMMIT"]  # one reservation, one commit
        for r in results:
            if r.exit_code == 4:
                assert "held by another run" in r.stderr and r.stderr.count("\n") == 1
    assert spent(ledger) == Fraction(rounds, 2) and Ledger(ledger).verify() == []
    assert leftovers(tmp_path) == []


def test_lock_timeout_zero_never_charges_a_run_that_exits_4(tmp_path):
    """Sixteen runs at once with --lock-timeout 0 against a cap of 2.5, 0.5 each: exit 4 means nothing read,
    spent or written; the ledger's spend is exactly 0.5 per published release, never past the cap."""
    ledger = tmp_path / "l.sqlite"
    assert run(["budget", "set", "census", "--epsilon", "2.5"], ledger).exit_code == 0
    outs = [tmp_path / f"o{i}" for i in range(16)]
    results = _start_together([(release_args(o, "--lock-timeout", "0", "-q"), ledger) for o in outs])
    codes = [r.exit_code for r in results]
    assert set(codes) <= {0, 3, 4}, [r.stderr for r in results]
    for r, o in zip(results, outs):
        assert o.exists() == (r.exit_code == 0)
    released = codes.count(0)
    assert 1 <= released <= 5
    assert spent(ledger) == Fraction(released, 2)
    assert kinds(ledger).count("READ") == released and kinds(ledger).count("COMMIT") == released
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------------
# --overwrite and --out


def _invoke(args: list[str], ledger: Path) -> Outcome:
    return invoke([*args, "--ledger", str(ledger)])


def test_overwrite_never_replaces_the_input_the_ledger_or_foreign_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "census.csv").write_bytes(CENSUS.read_bytes())
    ledger = tmp_path / "books" / "l.sqlite"
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"\xff\xd8 not a release")
    for out, words in ((data, "contains"), (ledger.parent, "contains"), (foreign, "does not hold a dphist release"),
                       (tmp_path, "contains")):
        ledger.parent.mkdir(exist_ok=True)
        Ledger(ledger).close()
        args = ["release", str(data / "census.csv"), "-s", str(SCHEMA), "-c", "sex", "-e", "0.5", "-o", str(out),
                "--overwrite"]
        result = _invoke(args, ledger)
        assert result.exit_code == 2 and words in result.output, (out, result.output)
        assert (data / "census.csv").read_bytes() == CENSUS.read_bytes() and ledger.exists()
        assert (foreign / "cat.jpg").exists()
        assert Ledger(ledger).status() == []  # refused before reading: nothing charged


def test_overwrite_replaces_an_earlier_release_and_a_symlinked_out_keeps_its_link(tmp_path):
    ledger = tmp_path / "l.sqlite"
    target = tmp_path / "2026-11-24"
    link = tmp_path / "current"
    link.symlink_to(target, target_is_directory=True)
    assert _invoke(release_args(link), ledger).exit_code == 2  # a dangling link is refused, nothing spent
    assert Ledger(ledger).status() == [] or spent(ledger) == 0
    target.mkdir()
    assert _invoke(release_args(link), ledger).exit_code == 0
    first = read_marker(target)["run_id"]
    assert _invoke(release_args(link, "--overwrite"), ledger).exit_code == 0
    assert link.is_symlink() and read_marker(target)["run_id"] != first
    assert leftovers(tmp_path) == [] and spent(ledger) == 1


# ---------------------------------------------------------------------------------------------------------------
# Damaged ledgers


def _damaged(kind: str, path: Path) -> None:
    if kind == "random bytes":
        path.write_bytes(os.urandom(4096))
    elif kind == "text file":
        path.write_text("this is not a ledger\n" * 50)
    elif kind == "directory":
        path.mkdir()
    elif kind == "truncated":
        db = Ledger(path)
        for i in range(200):
            db.set_cap(f"d{i}", "row", 1, reason="x" * 200)
        db.close()
        sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif kind == "foreign sqlite":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE people (name TEXT)")
        db.commit()
        db.close()


@pytest.mark.parametrize("kind", ["random bytes", "text file", "directory", "truncated", "foreign sqlite"])
def test_a_damaged_ledger_is_one_line_and_nothing_is_read(tmp_path, kind):
    ledger = tmp_path / "l.sqlite"
    _damaged(kind, ledger)
    before = ledger.read_bytes() if ledger.is_file() else None
    out = tmp_path / "out"
    for args, codes in ((release_args(out), (1, 2)), (["budget", "show"], (1, 2)),
                        (["budget", "set", "census", "-e", "1"], (1, 2)), (["budget", "verify"], (1,)),
                        (["budget", "history", "census"], (1, 2))):
        result = _invoke(args, ledger)
        assert result.exit_code in codes, (args, result.exit_code, result.output)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output, result.output
        assert str(ledger) in result.stderr
    assert not out.exists() and leftovers(tmp_path) == []
    if before is not None:
        assert ledger.read_bytes() == before  # nothing was written to it


def test_a_read_only_ledger_refuses_releases_before_reading(tmp_path, monkeypatch):
    ledger = tmp_path / "l.sqlite"
    Ledger(ledger).set_cap("census", "row", 5)
    real = os.access
    monkeypatch.setattr("dphist.publishing.ledger.os.access",
                        lambda p, mode, **kw: False if Path(p) == ledger and mode & os.W_OK else real(p, mode, **kw))
    result = _invoke(release_args(tmp_path / "out"), ledger)
    assert result.exit_code == 2 and "read-only" in result.output and not (tmp_path / "out").exists()
    monkeypatch.undo()
    assert spent(ledger) == 0


def test_a_full_ledger_at_commit_exits_1_publishes_nothing_and_stays_charged(tmp_path, monkeypatch):
    ledger = tmp_path / "l.sqlite"
    real = Ledger._append

    def full_at_commit(self, dataset, unit, kind, *rest):
        if kind == "COMMIT":  # what SQLite raises when the disk fills, through the ledger's own mapping
            raise self._error(sqlite3.OperationalError("database or disk is full"))
        return real(self, dataset, unit, kind, *rest)

    monkeypatch.setattr(Ledger, "_append", full_at_commit)
    out = tmp_path / "out"
    result = _invoke(release_args(out, "--run-key", "k"), ledger)
    assert result.exit_code == 1 and "full" in result.output and "stays spent" in result.output
    assert result.output.count("\n") == 1
    assert not out.exists() and leftovers(tmp_path) == []
    monkeypatch.setattr(Ledger, "_append", real)
    assert kinds(ledger) == ["RESERVE", "READ", "FAIL"] and spent(ledger) == Fraction(1, 2)
    again = _invoke(release_args(out, "--run-key", "k"), ledger)
    assert again.exit_code == 3 and not out.exists()  # no new noise under the key


def test_processes_creating_one_new_ledger_together_all_succeed(tmp_path):
    """The first runs on a new ledger create its table at the same moment; none may take the half-made file for a
    foreign one (seen as 1 failure in 120 process starts before the fix)."""
    code = "import sys; from dphist.publishing.ledger import Ledger; Ledger(sys.argv[1]).set_cap('x', 'row', 1)"
    for round_ in range(6):
        path = tmp_path / f"new-{round_}.sqlite"
        started = [start(["-c", code, path], cwd=ROOT) for _ in range(8)]
        results = [p.wait(120) for p in started]
        assert [r.exit_code for r in results] == [0] * 8, [r.stderr[-300:] for r in results if r.exit_code]
        assert [e["kind"] for e in Ledger(path).history("x")] == ["CAP"] * 8


# ---------------------------------------------------------------------------------------------------------------
# zCDP releases go through the same transaction: the ledger counts them in rho.


def rho_spent(ledger: Path) -> Fraction:
    rows = Ledger(ledger).status("census")
    return Fraction(rows[0]["rho_spent"]) if rows else Fraction(0)


def zcdp_args(out: Path, *extra: str) -> list[str]:
    return ["release", str(CENSUS), "-s", str(SCHEMA), "-c", "sex", "--rho", "1/4", "--dataset-id", "census",
            "-o", str(out), *extra]


@pytest.mark.parametrize("point", ["reserved", "read", "staged"])
def test_a_killed_zcdp_release_is_charged_its_rho_once_and_the_retry_follows_the_table(tmp_path, point):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    Ledger(ledger).set_cap("census", "row", rho=Fraction(1, 2))
    killed = run(zcdp_args(out, "--run-key", "k1"), ledger, fault=point)
    assert killed.exit_code == -9
    retry = run(zcdp_args(out, "--run-key", "k1", "--log-format", "json"), ledger)
    record = json.loads(retry.stderr.strip().splitlines()[-1])
    after_kill, outcome = KILLS[point]
    assert rho_spent(ledger) == Fraction(1, 4)  # one release's rho, whatever happened
    if outcome == "spent":
        assert retry.exit_code == 3 and "no new noise" in record["message"]
    else:
        assert retry.exit_code == 0, retry.stderr
        report = json.loads((out / "report.json").read_text())
        assert report["definition"] == "zcdp" and report["rho_spent"] == "0.25"
    assert leftovers(tmp_path) == [] and Ledger(ledger).verify() == []


def test_concurrent_zcdp_releases_never_pass_a_rho_cap(tmp_path):
    ledger = tmp_path / "l.sqlite"
    Ledger(ledger).set_cap("census", "row", rho=Fraction(1, 2))
    results = _start_together([(zcdp_args(tmp_path / f"out{i}", "--quiet"), ledger) for i in range(4)])
    codes = sorted(r.exit_code for r in results)
    assert codes == [0, 0, 3, 3], [r.stderr for r in results]
    assert rho_spent(ledger) == Fraction(1, 2) and Ledger(ledger).verify() == []
    for r in results:
        if r.exit_code == 3:
            assert len(r.stderr.strip().splitlines()) == 1 and "rho" in r.stderr


def test_a_disk_full_halfway_through_a_streamed_table_publishes_nothing_and_stays_charged(tmp_path, monkeypatch):
    """The table is written a chunk (here one row) at a time; the disk fills after the first chunk."""
    from dphist.publishing import tidy
    from dphist.publishing import writers

    def full_after_the_first(chunks, name):
        yield next(chunks)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tidy, "CHUNK_ROWS", 1)
    monkeypatch.setattr(writers, "_after_each", full_after_the_first)
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    result = _invoke(release_args(out, "--run-key", "k", "--format", "parquet"), ledger)
    assert result.exit_code == 1 and "No space left on device" in result.output, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert not out.exists() and leftovers(tmp_path) == []
    assert kinds(ledger) == ["RESERVE", "READ", "FAIL"] and spent(ledger) == Fraction(1, 2)


# ---------------------------------------------------------------------------------------------------------------
# Nothing is reserved for a run that a check can still refuse; a failure after READ says the budget stays spent.


@pytest.mark.parametrize("extra", [
    ["--engine", "dask", "--master", "tcp://127.0.0.1:1"],  # the engine's preflight: no scheduler there
    ["-a", "mwem", "--option", "replay=100000000"],  # a work ceiling
    ["-a", "ahp", "--option", "ratio=1e-30"],  # a step starved past the samplers' range
])
def test_a_run_refused_by_a_late_check_never_reserves(tmp_path, extra):
    if "dask" in extra and not all(map(_installed, ("dask", "distributed"))):
        pytest.skip("the dask extra is not installed")
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    args = ["release", str(CENSUS), "-s", str(SCHEMA), "-c", "age", "-e", "0.5", "--dataset-id", "census",
            "-o", str(out), "--run-key", "k", *extra]
    refused = run(args, ledger)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "stays spent" not in refused.stderr and not out.exists()
    assert not ledger.exists() or kinds(ledger) == []  # not even a RESERVE given back later


def test_a_data_error_after_reading_is_one_line_that_says_the_budget_stays_spent(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("age,sex\n" + "30,F\n" * 2000 + "abc,M\n" + "40,M\n" * 10)
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    args = ["release", str(data), "-s", str(SCHEMA), "-c", "age", "-e", "0.5", "--dataset-id", "census", "-o",
            str(out), "--run-key", "k"]
    failed = run(args, ledger)
    assert failed.exit_code == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert "line 2002" in failed.stderr and failed.stderr.rstrip().endswith(
        "the run had read data, so its budget stays spent (see 'dphist budget show')")
    assert kinds(ledger) == ["RESERVE", "READ", "FAIL"] and spent(ledger) == Fraction(1, 2) and not out.exists()
    assert run(args, ledger).exit_code == 3  # the key was used up by a run that read data


def _installed(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


# A marginal set under zCDP is measured jointly (strategy residual: every residual basis in one step over the
# counted tables): killed or signalled anywhere it settles as any release does, charged its rho once, and what
# is published is the whole set or nothing.

def residual_args(out: Path, *extra: str) -> list[str]:
    return ["release", str(CENSUS), "-s", str(SCHEMA), "--marginals", "age,sex;sex,income;age,income", "--rho",
            "1/4", "--dataset-id", "census", "-o", str(out), *extra]


@pytest.mark.parametrize("point", ["read", "computed", "staged"])
def test_a_killed_residual_marginal_set_is_charged_once_and_publishes_the_whole_set_or_nothing(tmp_path, point):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    Ledger(ledger).set_cap("census", "row", rho=Fraction(1, 2))
    killed = run(residual_args(out, "--run-key", "k1"), ledger, fault=point)
    assert killed.exit_code == -9
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []
    retry = run(residual_args(out, "--run-key", "k1", "--log-format", "json"), ledger)
    assert rho_spent(ledger) == Fraction(1, 4)
    if KILLS[point][1] == "spent":
        assert retry.exit_code == 3 and not out.exists()
    else:
        assert retry.exit_code == 0, retry.stderr
        report = json.loads((out / "report.json").read_text())
        assert report["marginals"]["strategy"] == "residual" and report["rho_spent"] == "0.25"
        assert {"age_sex.csv", "sex_income.csv", "age_income.csv"} <= {p.name for p in out.iterdir()}
    assert leftovers(tmp_path) == [] and Ledger(ledger).verify() == []


def test_a_residual_marginal_set_signalled_after_reading_exits_143_in_one_line_and_stays_charged(tmp_path):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    stopped = run(residual_args(out, "--run-key", "k"), ledger, fault="read:SIGTERM")
    assert stopped.exit_code == 143 and stopped.stderr.count("\n") == 1 and "stays spent" in stopped.stderr
    assert not out.exists() and leftovers(tmp_path) == [] and kinds(ledger)[-1] == "FAIL"
    assert rho_spent(ledger) == Fraction(1, 4)


# With --review the page is written into staging beside the tables, so it is part of the one release: killed
# anywhere, the folder holds the whole release with its page or nothing, and a finished retry has both.

@pytest.mark.parametrize("point", ["read", "computed", "staged"])
def test_a_killed_release_with_its_review_page_publishes_both_or_nothing(tmp_path, point):
    ledger, out = tmp_path / "l.sqlite", tmp_path / "out"
    Ledger(ledger).set_cap("census", "row", epsilon=Fraction(3, 4))
    killed = run(release_args(out, "--review", "--run-key", "k1"), ledger, fault=point)
    assert killed.exit_code == -9
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []
    retry = run(release_args(out, "--review", "--run-key", "k1"), ledger)
    assert spent(ledger) == Fraction(1, 2)
    if KILLS[point][1] == "spent":
        assert retry.exit_code == 3 and not out.exists()
    else:
        assert retry.exit_code == 0, retry.stderr
        names = {p.name for p in out.iterdir()}
        assert {"review.html", "report.json"} <= names
        page = (out / "review.html").read_text(encoding="utf-8")
        assert page.rstrip().endswith("</html>") and "Disclosure review" in page
    assert leftovers(tmp_path) == [] and Ledger(ledger).verify() == []
