"""The budget ledger: caps that hold under concurrent runs, crashes and retries; exact sums; a tamper-evident
chain; and the CLI around it (exit codes 3 and 4, --run-key, --log-format json, test mode kept out)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml

from dphist.ledger import BudgetExhausted, Existing, Ledger, LedgerLocked

from conftest import ROOT

CENSUS = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml"),
          "-c", "sex"]


def dphist(*args, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dphist", *args], capture_output=True, text=True,
                          env=env or os.environ.copy(), cwd=ROOT, **kw)


def spent(ledger_path, dataset) -> Fraction:
    rows = Ledger(ledger_path).status(dataset)
    return Fraction(rows[0]["epsilon_spent"]) if rows else Fraction(0)


# ---------------------------------------------------------------------------------------------------------------
# The ledger itself


def test_a_thousand_small_releases_add_up_exactly(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("d", "row", 1)
    for _ in range(1000):
        r = ledger.reserve("d", "row", "0.001")
        ledger.mark_read(r)
        ledger.commit(r, {})
    assert spent(tmp_path / "l.sqlite", "d") == 1  # 1000 × 0.001 is exactly 1, not 0.9999999999999062
    with pytest.raises(BudgetExhausted, match="only epsilon 0 of the cap 1 is left"):
        ledger.reserve("d", "row", Fraction(1, 10**9))
    assert 0.1 * 3 != 0.3 and spent(tmp_path / "l.sqlite", "d") == Fraction(1)


def test_abort_before_reading_gives_back_and_after_reading_does_not(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("d", "row", 1)
    early = ledger.reserve("d", "row", "0.6")
    assert ledger.abort(early, "failed before reading") is True
    late = ledger.reserve("d", "row", "0.6")  # the first reservation was given back, so this fits
    ledger.mark_read(late)
    assert ledger.abort(late, "failed while counting") is False  # data was read: stays charged
    assert spent(tmp_path / "l.sqlite", "d") == Fraction(3, 5)
    with pytest.raises(BudgetExhausted):
        ledger.reserve("d", "row", "0.6")


def test_a_run_key_that_was_committed_is_not_charged_again(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    r = ledger.reserve("d", "row", "0.5", run_key="nightly-1")
    ledger.mark_read(r)
    ledger.commit(r, {"out": "/x"}, run_key="nightly-1")
    again = ledger.reserve("d", "row", "0.5", run_key="nightly-1")
    assert isinstance(again, Existing) and again.detail["out"] == "/x"
    assert spent(tmp_path / "l.sqlite", "d") == Fraction(1, 2)


def test_verify_detects_edits_deletions_and_cap_changes_are_entries(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = Ledger(path)
    ledger.set_cap("d", "row", 2, reason="annual budget")
    for _ in range(3):
        r = ledger.reserve("d", "row", "0.25")
        ledger.mark_read(r)
        ledger.commit(r, {})
    ledger.set_cap("d", "row", 1, reason="policy change")
    assert ledger.verify() == []
    kinds = [e["kind"] for e in ledger.history("d")]
    assert kinds.count("CAP") == 2 and kinds.count("RESERVE") == 3
    db = sqlite3.connect(path)
    db.execute("UPDATE entries SET epsilon='1/100' WHERE kind='RESERVE' AND seq=2")  # understate a spend
    db.commit()
    assert any("edited" in p for p in Ledger(path).verify())
    db.execute("UPDATE entries SET epsilon='1/4' WHERE seq=2")  # put it back: the chain is whole again
    db.commit()
    assert Ledger(path).verify() == []
    db.execute("DELETE FROM entries WHERE seq=3")
    db.commit()
    assert any("deleted or reordered" in p for p in Ledger(path).verify())


def test_a_transaction_waits_for_the_lock_then_gives_up(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    started = time.perf_counter()
    with pytest.raises(LedgerLocked, match="still locked by another process after 0.3 s"):
        Ledger(path, timeout=0.3).reserve("d", "row", "0.1")
    assert time.perf_counter() - started >= 0.25  # it did wait
    holder.execute("ROLLBACK")
    assert Ledger(path, timeout=0.3).reserve("d", "row", "0.1").epsilon == Fraction(1, 10)


def test_a_process_that_died_before_reading_gets_its_reservation_back(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).set_cap("d", "row", 1)
    # A process reserves, then dies before reading any data (no READ entry, no chance to ABORT).
    code = ("import os, sys; from dphist.ledger import Ledger; "
            f"Ledger({str(path)!r}).reserve('d', 'row', '0.7'); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert spent(path, "d") == 0  # status() notices the dead process and gives the reservation back
    assert [e["kind"] for e in Ledger(path).history("d")][-2:] == ["RESERVE", "ABORT"]
    # One that died after READ stays charged.
    code = ("import os; from dphist.ledger import Ledger; L = Ledger(" + repr(str(path)) + "); "
            "L.mark_read(L.reserve('d', 'row', '0.7')); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert spent(path, "d") == Fraction(7, 10)


# ---------------------------------------------------------------------------------------------------------------
# The CLI


def test_release_is_recorded_and_cap_refusal_exits_3_without_output(tmp_path, private_ledger):
    assert dphist("budget", "set", "census", "--epsilon", "1", "--reason", "test").returncode == 0
    first = dphist("release", *CENSUS, "-e", "0.6", "--dataset-id", "census", "-o", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["ledger"]["dataset"] == "census" and len(report["ledger"]["reservation_entry"]) == 64
    second = dphist("release", *CENSUS, "-e", "0.6", "--dataset-id", "census", "-o", str(tmp_path / "b"))
    assert second.returncode == 3
    assert second.stderr.count("\n") == 1 and "only epsilon 0.4 of the cap 1 is left" in second.stderr
    assert not (tmp_path / "b").exists()
    shown = json.loads(dphist("budget", "show", "census", "--format", "json").stdout)
    assert shown[0]["epsilon_spent"] == "0.6" and shown[0]["releases"] == 1
    history = json.loads(dphist("budget", "history", "census", "--format", "json").stdout)
    assert [e["kind"] for e in history] == ["CAP", "RESERVE", "READ", "COMMIT", "PUBLISH"]
    assert history[-2]["detail"]["files"]["sex.csv"]  # the published files' hashes
    assert dphist("budget", "verify").returncode == 0


def test_same_run_key_twice_spends_once_and_leaves_the_files_alone(tmp_path):
    out = tmp_path / "nightly"
    args = ["release", *CENSUS, "-e", "0.5", "--dataset-id", "census", "-o", str(out), "--run-key", "n-2026-11-21"]
    assert dphist(*args).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = dphist(*args, "--log-format", "json")
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stderr.strip().splitlines()[-1])
    assert record["status"] == "exists" and record["out"] == str(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert json.loads(dphist("budget", "show", "census", "--format", "json").stdout)[0]["epsilon_spent"] == "0.5"


def test_editing_the_ledger_by_hand_is_caught_by_verify(tmp_path, private_ledger):
    assert dphist("release", *CENSUS, "-e", "0.5", "--dataset-id", "c", "-o", str(tmp_path / "a")).returncode == 0
    db = sqlite3.connect(private_ledger)
    db.execute("UPDATE entries SET epsilon='1/1000' WHERE kind='RESERVE'")
    db.commit()
    result = dphist("budget", "verify")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "edited" in result.stderr and "edited" in result.stdout


def test_test_mode_never_touches_the_ledger(tmp_path, private_ledger):
    assert dphist("release", *CENSUS, "-e", "0.5", "-o", str(tmp_path / "t"), "--seed", "1").returncode == 0
    assert not private_ledger.exists() or Ledger(private_ledger).status() == []


def test_a_held_lock_exits_4_without_reading(tmp_path, private_ledger):
    Ledger(private_ledger)  # create it
    holder = sqlite3.connect(private_ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = dphist("release", *CENSUS, "-e", "0.5", "-o", str(tmp_path / "x"), "--lock-timeout", "0.5",
                        "--log-format", "json")
    finally:
        holder.execute("ROLLBACK")
    assert result.returncode == 4
    record = json.loads(result.stderr.strip())
    assert record == {"event": "error", "exit_code": 4, "message": record["message"]}
    assert "still locked" in record["message"] and not (tmp_path / "x").exists()


def test_job_spec_with_dated_output_and_run_key(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({
        "input": str(ROOT / "sample_data" / "census.csv"), "schema": str(ROOT / "sample_data" / "census.schema.yaml"),
        "epsilon": "0.5", "out": "out/{date}", "dataset_id": "census", "run_key": "nightly-{date}",
        "tables": [{"columns": ["sex"]}, {"columns": ["age"], "share": 2}]}))
    first = dphist("release", "--spec", str(spec), "--log-format", "json")
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stderr.strip().splitlines()[-1])
    assert record["status"] == "ok" and record["run_key"].startswith("nightly-20")
    assert (tmp_path / "out" / record["run_key"][len("nightly-"):] / "report.json").exists()
    assert dphist("release", "--spec", str(spec), "-q").returncode == 0  # the cron retry: nothing new
    assert json.loads(dphist("budget", "show", "census", "--format", "json").stdout)[0]["epsilon_spent"] == "0.5"


# ---------------------------------------------------------------------------------------------------------------
# The stress tests: concurrency and crashes


def test_eight_concurrent_releases_against_a_cap_never_overspend(tmp_path, private_ledger):
    """Cap 1.0, eight processes started together asking 0.3 each: exactly three succeed, five exit 3, the
    ledger shows 0.9 spent.  Twenty rounds, each on a fresh data set id."""
    env = os.environ.copy()
    for round_ in range(20):
        dataset = f"round-{round_}"
        assert dphist("budget", "set", dataset, "--epsilon", "1").returncode == 0
        procs = [subprocess.Popen([sys.executable, "-m", "dphist", "release", *CENSUS, "-e", "0.3", "-q",
                                   "--dataset-id", dataset, "-o", str(tmp_path / f"{dataset}-{i}")],
                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i in range(8)]
        codes = sorted(p.wait(timeout=300) for p in procs)
        assert codes == [0, 0, 0, 3, 3, 3, 3, 3], (round_, [p.stderr.read() for p in procs])
        assert spent(private_ledger, dataset) == Fraction(9, 10)
        assert sum((tmp_path / f"{dataset}-{i}").exists() for i in range(8)) == 3
    assert Ledger(private_ledger).verify() == []


def _big_csv(path: Path, rows: int) -> Path:
    values = np.random.default_rng(0).integers(0, 100, rows)
    path.write_text("v\n" + "\n".join(map(str, values)) + "\n")
    return path


def test_sigkill_while_counting_leaves_no_files_and_stays_charged(tmp_path, private_ledger):
    data = _big_csv(tmp_path / "big.csv", 6_000_000)
    schema = tmp_path / "s.yaml"
    schema.write_text(yaml.safe_dump({"columns": {"v": {"type": "numeric", "lower": 0, "upper": 100, "bins": 10}}}))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dphist", "release", str(data), "-s", str(schema), "-c", "v",
                             "-e", "0.5", "--dataset-id", "big", "-o", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    assert dphist("budget", "set", "census", "--epsilon", "1").returncode == 0
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


def test_the_python_api_is_charged_too(tmp_path):
    import pandas as pd

    import dphist

    path = tmp_path / "api.sqlite"
    Ledger(path).set_cap("frame", "row", "0.75")
    frame = pd.DataFrame({"v": np.arange(100) % 10})
    schema = {"columns": {"v": {"type": "numeric", "lower": 0, "upper": 10, "bins": 10}}}
    result = dphist.release(frame, "0.5", schema, columns="v", ledger=path, dataset_id="frame")
    assert result.report["ledger"]["dataset"] == "frame" and spent(path, "frame") == Fraction(1, 2)
    with pytest.raises(BudgetExhausted):
        dphist.release(frame, "0.5", schema, columns="v", ledger=path, dataset_id="frame")
    dphist.release(frame, "0.5", schema, columns="v", ledger=path, dataset_id="frame", seed=3)  # test mode: free
    assert spent(path, "frame") == Fraction(1, 2)
    assert [e["kind"] for e in Ledger(path).history("frame")] == ["CAP", "RESERVE", "READ", "COMMIT", "PUBLISH"]
