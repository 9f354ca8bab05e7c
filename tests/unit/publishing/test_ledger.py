"""The budget ledger (dphist/publishing/ledger.py): exact sums, aborts before and after reading, run keys, a tamper-evident
chain and a lock that is waited for; and budget definitions: a data set is capped in ε (with δ) or in ρ, every
release is counted in the cap's definition (pure ε²/2 under a ρ cap; approximate releases in both), releases that
have no figure in the cap's definition are refused with nothing charged, old ledgers still verify, and ``status``
shows the other definition converted.  (The ledger from the command line: cli/test_budget_commands.py; under
crashes and concurrent processes: faults/test_ledger_faults.py.)"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
from fractions import Fraction

import numpy as np
import pytest

from dphist.errors import UsageError
from dphist.publishing.ledger import REFERENCE_DELTA, BudgetExhausted, Existing, Ledger, LedgerLocked
from dphist.privacy.conversions import epsilon_for, rho_for

from ledger_steps import D, ROW, kinds, release, row


def spent(ledger_path, dataset) -> Fraction:
    rows = Ledger(ledger_path).status(dataset)
    return Fraction(rows[0]["epsilon_spent"]) if rows else Fraction(0)




def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "l.sqlite")


def refused(book: Ledger, match: str, *args, **kw) -> BudgetExhausted:
    """The reservation is refused (exit 3, one line) and the ledger is left exactly as it was."""
    before = (book.head(), book.status(D))
    with pytest.raises(BudgetExhausted, match=match) as info:
        book.reserve(D, ROW, *args, **kw)
    assert info.value.exit_code == 3 and "\n" not in str(info.value)
    assert (book.head(), book.status(D)) == before  # nothing charged, nothing appended
    return info.value


APPROX_EPS, APPROX_DELTA = Fraction(1), Fraction(1, 10**6)
APPROX_RHO = rho_for(APPROX_EPS, APPROX_DELTA)


# ---------------------------------------------------------------------------------------------------------------
# The ledger itself


def test_fifty_small_releases_add_up_exactly(tmp_path):
    """50 × 0.02 is exactly the cap of 1: the fiftieth fits (in floats the sum would pass 1 there,
    1.0000000000000004), and then nothing is left.  (Each reservation sums every earlier one, and each step is a
    synced transaction: the thousand below are in the slow tier.)"""
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_cap("d", "row", 1)
    for _ in range(50):
        r = ledger.reserve("d", "row", "0.02")
        ledger.mark_read(r)
        ledger.commit(r, {})
    assert spent(tmp_path / "l.sqlite", "d") == 1
    with pytest.raises(BudgetExhausted, match="only epsilon 0 of the cap 1 is left"):
        ledger.reserve("d", "row", Fraction(1, 10**9))
    assert sum([0.02] * 50) != 1 and spent(tmp_path / "l.sqlite", "d") == Fraction(1)


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------------------------------------
# Against a ρ cap


def test_rho_cap_counts_pure_as_half_epsilon_squared_and_zcdp_and_approximate_as_their_rho(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="1/2")
    release(book, "0.5")                                   # pure, δ = 0: ε²/2 = 1/8
    assert row(book)["rho_spent"] == "0.125"
    release(book, rho="0.1")                               # zcdp
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)  # approximate: its ρ, not its (ε, δ)
    expected = Fraction(1, 8) + Fraction(1, 10) + APPROX_RHO
    r = row(book)
    assert Fraction(r["rho_spent"]) == expected and r["rho_cap"] == "0.5"
    assert Fraction(r["rho_remaining"]) == Fraction(1, 2) - expected
    assert r["definition"] == "zcdp" and r["releases"] == 3
    assert r["epsilon_spent"] is None and r["epsilon_cap"] is None  # a zcdp release has no ε
    assert book.verify() == []


def test_rho_cap_refuses_past_the_cap_with_nothing_charged(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="0.3")
    release(book, rho="0.1")
    release(book, rho="0.2")
    assert row(book)["rho_remaining"] == "0"
    refused(book, r"needs rho 0.000001 but only rho 0 of the cap 0.3 is left", None, rho="0.000001")
    # A pure release is refused with the ρ it would have counted.
    book.set_cap(D, ROW, rho="0.32", reason="a little more")
    refused(book, r"needs rho 0.03125 \(epsilon 0.25 counted as epsilon\^2/2\) but only rho 0.02 of the cap 0.32",
            "0.25")
    release(book, "0.2")  # 0.02 exactly fits: ε²/2 = 1/50
    assert row(book)["rho_spent"] == "0.32" and row(book)["rho_remaining"] == "0"


def test_many_small_rho_releases_add_up_exactly(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho=1)
    # 1/60 has no finite decimal, and 60 of it in floats pass 1 at the last one (1.0000000000000013).
    for _ in range(60):
        book.reserve(D, ROW, None, rho=Fraction(1, 60))
    assert row(book)["rho_spent"] == "1"  # 60 × 1/60 is exactly 1
    refused(book, "only rho 0 of the cap 1", None, rho=Fraction(1, 10**12))


def test_rho_cap_refuses_a_pure_release_with_delta(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="1")
    exc = refused(book, r"capped in rho .* epsilon 0.5 with delta 0.000001 > 0 \(partition selection\) has no rho",
                  "0.5", "0.000001")
    assert "nothing was charged" in str(exc)
    assert kinds(book) == ["CAP"]


def test_rho_cap_after_a_pure_delta_release_says_so_and_refuses_everything(tmp_path):
    book = ledger(tmp_path)
    release(book, "0.5", "1e-7")  # uncapped: accepted
    book.set_cap(D, ROW, rho="1")
    r = row(book)
    assert r["rho_spent"] is None and r["rho_remaining"] is None  # no ρ bounds that release
    assert "no rho bound" in r["cap_note"]
    refused(book, "capped in rho .*an earlier release spent .*delta > 0", None, rho="0.01")
    refused(book, "capped in rho", "0.1")
    # Changing the cap to ε (with δ) counts everything again.
    book.set_cap(D, ROW, "1", "1e-6")
    assert row(book)["cap_note"] is None
    release(book, "0.25")
    assert row(book)["epsilon_spent"] == "0.75" and row(book)["delta_spent"] == "0.0000001"


# ---------------------------------------------------------------------------------------------------------------
# Against an ε cap


def test_epsilon_cap_counts_pure_and_approximate_in_epsilon_and_delta(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, "2.5", "0.000003")
    release(book, "0.5", "0.000001")                        # pure with partition selection's δ
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)  # approximate: its (ε, δ)
    r = row(book)
    assert r["definition"] == "approximate"
    assert (r["epsilon_spent"], r["delta_spent"], r["epsilon_remaining"]) == ("1.5", "0.000002", "1")
    assert r["rho_spent"] is None  # the pure release with δ > 0 has no ρ
    # δ is capped too: a third 1e-6 fits, a fourth does not.
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    refused(book, r"needs epsilon 0.5, delta 0.000001 but only epsilon 0, delta 0 of the cap 2.5", "0.5",
            "0.000001")


def test_epsilon_cap_refuses_a_zcdp_release_and_tells_how_to_go_on(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, "1")
    exc = refused(book, "capped in epsilon", None, rho="0.01")
    assert "--epsilon E --delta D --noise gaussian" in str(exc) and "--rho R" in str(exc)
    assert "nothing was charged" in str(exc)


def test_epsilon_cap_after_a_zcdp_release_says_so_and_refuses_everything(tmp_path):
    book = ledger(tmp_path)
    release(book, rho="0.01")
    book.set_cap(D, ROW, "5")
    r = row(book)
    assert r["epsilon_spent"] is None and r["epsilon_remaining"] is None and "spent rho alone" in r["cap_note"]
    refused(book, "capped in epsilon, but an earlier release spent rho alone", "0.1")


def test_epsilon_cap_shows_the_rho_its_releases_imply(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, "3", "0.00001")
    release(book, "0.5")
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    r = row(book)
    assert Fraction(r["rho_spent"]) == Fraction(1, 8) + APPROX_RHO  # exact: ε²/2 plus the approximate ρ
    assert r["rho_cap"] is None and r["rho_remaining"] is None  # the cap is in ε
    assert r["reference_delta"] is None and r["epsilon_spent_at_delta"] is None


# ---------------------------------------------------------------------------------------------------------------
# Without a cap, and the request itself


def test_without_a_cap_everything_is_accepted_and_recorded(tmp_path):
    book = ledger(tmp_path)
    release(book, "0.5")
    release(book, "0.5", "1e-9")
    release(book, rho="0.02")
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    r = row(book)
    assert r["definition"] == "none" and r["releases"] == 4
    assert r["epsilon_spent"] is None and r["rho_spent"] is None  # neither account covers all four
    defs = [e["detail"].get("definition") for e in book.history(D) if e["kind"] == "RESERVE"]
    assert defs == ["pure", "pure", "zcdp", "approximate"]
    rhos = [e["detail"].get("rho") for e in book.history(D) if e["kind"] == "RESERVE"]
    assert rhos == [None, None, "1/50", str(APPROX_RHO)]
    assert book.verify() == []


def test_reservation_carries_its_definition_and_both_accounts(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="1", delta="1e-9")
    first = book.reserve(D, ROW, "0.5")
    assert (first.definition, first.epsilon, first.rho) == ("pure", Fraction(1, 2), None)
    z = book.reserve(D, ROW, None, rho="0.25")
    assert (z.definition, z.epsilon, z.delta, z.rho) == ("zcdp", None, 0, Fraction(1, 4))
    assert (z.rho_spent_before, z.rho_cap, z.spent_before, z.cap) == (Fraction(1, 8), 1, Fraction(1, 2), None)
    a = book.reserve(D, ROW, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    assert (a.definition, a.epsilon, a.delta, a.rho) == ("approximate", 1, APPROX_DELTA, APPROX_RHO)
    assert a.rho_spent_before == Fraction(3, 8) and a.spent_before is None  # the zcdp release has no ε


@pytest.mark.parametrize("args, kw, match", [
    ((None,), {}, "needs an epsilon or a rho"),
    ((APPROX_EPS, APPROX_DELTA), {"rho": APPROX_RHO * 2}, "more than the .* guarantee allows"),
])
def test_reservations_that_name_no_definition_are_refused(tmp_path, args, kw, match):
    """Nothing is written for a request the accountant refuses (its cases: tests/unit/privacy/test_accountant.py)."""
    book = ledger(tmp_path)
    with pytest.raises(UsageError, match=match):
        book.reserve(D, ROW, *args, **kw)
    assert book.status() == []


def test_a_cap_is_in_epsilon_or_in_rho(tmp_path):
    book = ledger(tmp_path)
    for kw in ({"epsilon": "1", "rho": "1"}, {}):
        with pytest.raises(UsageError, match="exactly one"):
            book.set_cap(D, ROW, **kw)
    assert book.status() == []


# ---------------------------------------------------------------------------------------------------------------
# Shown as converted


def _rounded_up_ok(text: str, rho, delta) -> None:
    """The shown ε is the tight conversion's, never below it, and rounded up by less than 1e-5 relative."""
    exact = epsilon_for(rho, delta)
    assert float(text) >= exact and float(text) <= exact * (1 + 1e-5)


def test_a_rho_cap_is_shown_as_epsilon_at_the_reference_delta(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="0.5")
    release(book, rho="0.1")
    r = row(book)
    assert r["reference_delta"] == "0.000001" and REFERENCE_DELTA == Fraction(1, 10**6)
    _rounded_up_ok(r["epsilon_spent_at_delta"], Fraction(1, 10), REFERENCE_DELTA)
    _rounded_up_ok(r["epsilon_cap_at_delta"], Fraction(1, 2), REFERENCE_DELTA)
    # ρ = 0.5 at δ = 1e-6 is ε ≈ 5.6 by the classic bound; the tight one is smaller but of that size.
    assert 4 < float(r["epsilon_cap_at_delta"]) < 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    # The δ given with the ρ cap is the reference.
    book.set_cap(D, ROW, rho="0.5", delta="1e-9")
    r = row(book)
    assert r["reference_delta"] == "0.000000001" and r["delta_cap"] is None
    _rounded_up_ok(r["epsilon_cap_at_delta"], Fraction(1, 2), Fraction(1, 10**9))


def test_uncapped_zcdp_spend_is_shown_converted_and_zero_is_zero(tmp_path):
    book = ledger(tmp_path)
    release(book, rho="0.02")
    r = row(book)
    assert r["epsilon_spent"] is None and r["rho_spent"] == "0.02"
    _rounded_up_ok(r["epsilon_spent_at_delta"], Fraction(1, 50), REFERENCE_DELTA)
    assert r["epsilon_cap_at_delta"] is None
    other = ledger(tmp_path)
    other.set_cap("fresh", ROW, rho="0.1")
    assert row(other, "fresh")["epsilon_spent_at_delta"] == "0"


# ---------------------------------------------------------------------------------------------------------------
# The hash chain and old ledgers


def _old_hash(prev: str, body: dict) -> str:
    # The chain as every ledger so far wrote it (written out here, not imported, so a change to it fails).
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256((prev + text).encode()).hexdigest()


def _write_old_ledger(path) -> None:
    """A ledger as dphist wrote it before definitions: pure entries only, no definition in any detail."""
    db = sqlite3.connect(path)
    db.execute("""CREATE TABLE entries (seq INTEGER PRIMARY KEY, ts TEXT NOT NULL, dataset TEXT NOT NULL,
        unit TEXT NOT NULL, kind TEXT NOT NULL, run_id TEXT NOT NULL, run_key TEXT, epsilon TEXT NOT NULL,
        delta TEXT NOT NULL, detail TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)""")
    prev = "0" * 64
    entries = [("CAP", "c", "2", "0", {"reason": "", "operator": "x", "spent_at_change": {"epsilon": "0",
                                                                                        "delta": "0"}}),
               ("RESERVE", "r1", "1/2", "0", {"command": "release", "pid": 1, "pid_start": None, "host": "elsewhere"}),
               ("READ", "r1", "0", "0", {}), ("COMMIT", "r1", "0", "0", {"files": {}}),
               ("RESERVE", "r2", "1/4", "1/1000000", {"command": "release", "pid": 1, "pid_start": None,
                                                       "host": "elsewhere"}),
               ("READ", "r2", "0", "0", {})]
    for seq, (kind, run, eps, delta, detail) in enumerate(entries, 1):
        body = {"seq": seq, "ts": "2025-01-01T00:00:00Z", "dataset": D, "unit": ROW, "kind": kind, "run_id": run,
                "run_key": None, "epsilon": eps, "delta": delta, "detail": json.dumps(detail, sort_keys=True)}
        digest = _old_hash(prev, body)
        db.execute("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                   (seq, body["ts"], D, ROW, kind, run, None, eps, delta, body["detail"], prev, digest))
        prev = digest
    db.commit()
    db.close()


def test_an_old_ledger_still_verifies_counts_as_pure_and_takes_new_entries(tmp_path):
    path = tmp_path / "old.sqlite"
    _write_old_ledger(path)
    book = Ledger(path)
    assert book.verify() == []
    r = row(book)
    assert (r["definition"], r["epsilon_spent"], r["delta_spent"], r["epsilon_remaining"]) == \
        ("pure", "0.75", "0.000001", "1.25")
    assert r["rho_spent"] is None  # the second release had a δ
    # Mixing onto it: an approximate release fits the ε cap once the cap has a δ; a zcdp one is refused.
    book.set_cap(D, ROW, "2", "0.00001")
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    refused(book, "capped in epsilon", None, rho="0.001")
    assert row(book)["epsilon_spent"] == "1.75" and book.verify() == []
    assert Ledger(path, readonly=True).verify() == []


def test_the_chain_covers_rho_and_the_definition(tmp_path):
    path = tmp_path / "l.sqlite"
    book = Ledger(path)
    book.set_cap(D, ROW, rho="1")
    release(book, "0.5")
    release(book, rho="0.25")
    release(book, APPROX_EPS, APPROX_DELTA, rho=APPROX_RHO)
    assert book.verify() == []
    db = sqlite3.connect(path)
    (seq, detail), = db.execute("SELECT seq, detail FROM entries WHERE kind='RESERVE' AND epsilon=''").fetchall()
    db.execute("UPDATE entries SET detail=? WHERE seq=?", (detail.replace('"1/4"', '"1/400"'), seq))
    db.commit()
    assert any(f"entry {seq}: contents do not match" in p for p in Ledger(path).verify())
    db.execute("UPDATE entries SET detail=? WHERE seq=?", (detail, seq))
    (cap_seq, cap_detail), = db.execute("SELECT seq, detail FROM entries WHERE kind='CAP'").fetchall()
    db.execute("UPDATE entries SET detail=? WHERE seq=?", (cap_detail.replace('"rho": "1"', '"rho": "9"'), cap_seq))
    db.commit()
    assert any(f"entry {cap_seq}: contents do not match" in p for p in Ledger(path).verify())


def test_an_entry_without_epsilon_stops_a_dphist_from_before_definitions(tmp_path):
    # Older versions read the epsilon column with Fraction(): the empty string stops them instead of counting 0.
    book = ledger(tmp_path)
    book.reserve(D, ROW, None, rho="0.1")
    (eps,), = sqlite3.connect(tmp_path / "l.sqlite").execute("SELECT epsilon FROM entries WHERE kind='RESERVE'")
    with pytest.raises(ValueError):
        Fraction(eps)


# ---- accounts: checked names, runs that require a cap, read-only reading, and why a ledger cannot be used --------


def test_reserve_and_set_cap_take_only_names_that_are_one_line_of_visible_text(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, 1)
    head = book.head()
    for bad in ["", "   ", " d", "a\nb", "x" * 4097]:
        with pytest.raises(UsageError):
            book.reserve(bad, ROW, "0.1")
        with pytest.raises(UsageError):
            book.set_cap(bad, ROW, 1)
    with pytest.raises(UsageError, match="run key"):
        book.reserve(D, ROW, "0.1", run_key="k" * 201)
    assert book.head() == head  # nothing was written
    # A decomposed "é" is the same account as a composed one.
    book.set_cap("caf\u00e9", ROW, 1)
    release(book, "0.25", dataset="cafe\u0301")
    assert [r["dataset"] for r in book.status()] == ["caf\u00e9", D]
    assert row(book, "caf\u00e9")["epsilon_remaining"] == "0.75"


def test_require_cap_refuses_an_uncapped_data_set_in_the_reservation(tmp_path):
    from dphist.publishing.ledger import CapRequired

    book = ledger(tmp_path)
    release(book, "0.5", dataset="other")
    head = book.head()
    with pytest.raises(CapRequired, match="'d' has no cap.*nothing was read or charged.*dphist budget set d") as caught:
        book.reserve(D, ROW, "0.5", require_cap=True)
    assert caught.value.exit_code == 3 and book.head() == head
    # A cap on the per-row account does not cap the per-person one.
    book.set_cap(D, ROW, 1)
    assert book.reserve(D, ROW, "0.5", require_cap=True).cap == 1
    with pytest.raises(CapRequired, match=r"\(unit:person\) has no cap.*--privacy-unit person"):
        book.reserve(D, "unit:person", "0.5", require_cap=True)
    # A run key already committed is reported, capped or not (nothing is spent).
    r = book.reserve("other", ROW, "0.1", run_key="k")
    book.mark_read(r)
    book.commit(r, {}, "k")
    assert isinstance(book.reserve("other", ROW, "0.1", run_key="k", require_cap=True), Existing)


def test_reading_read_only_writes_nothing_and_shows_a_dead_reservation_as_given_back(tmp_path, monkeypatch):
    import socket

    import dphist.publishing.ledger as ledger_module

    path = tmp_path / "l.sqlite"
    book = Ledger(path)
    book.set_cap(D, ROW, 1)
    release(book, "0.25")
    with monkeypatch.context() as m:  # a reservation by a process of this host that has ended (a pid above pid_max)
        m.setattr(ledger_module, "process_identity",
                  lambda: {"pid": 2 ** 22 + 1, "pid_start": None, "host": socket.gethostname()})
        book.reserve(D, ROW, "0.5")
    book.close()
    before = path.read_bytes()
    reader = Ledger(path, readonly=True)
    assert row(reader)["epsilon_spent"] == "0.25" and kinds(reader)[-1] == "RESERVE"
    reader.close()
    assert path.read_bytes() == before  # no ABORT written: the next writer records it
    assert row(Ledger(path))["epsilon_spent"] == "0.25" and kinds(Ledger(path))[-1] == "ABORT"


def test_a_missing_or_empty_file_is_stated_not_created(tmp_path):
    from dphist.publishing.ledger import LedgerMissing

    with pytest.raises(LedgerMissing, match="no such file, so nothing has been recorded there"):
        Ledger(tmp_path / "none.sqlite", readonly=True)
    assert not (tmp_path / "none.sqlite").exists()
    (tmp_path / "empty.sqlite").write_bytes(b"")
    empty = Ledger(tmp_path / "empty.sqlite", readonly=True)
    assert empty.status() == [] and empty.history(D) == [] and empty.verify() == [] and empty.open_runs() == []
    assert (tmp_path / "empty.sqlite").read_bytes() == b""


def _sqlite_error(code: int, text: str, kind=sqlite3.OperationalError) -> sqlite3.Error:
    exc = kind(text)
    exc.sqlite_errorcode = code
    return exc


@pytest.mark.parametrize("code, text, free, expected, advice", [
    (sqlite3.SQLITE_BUSY, "database is locked", 10 ** 9, "LedgerLocked", "still locked"),
    (sqlite3.SQLITE_READONLY, "attempt to write a readonly database", 10 ** 9, "LedgerReadOnly", "permissions"),
    (sqlite3.SQLITE_FULL, "database or disk is full", 10 ** 9, "LedgerFull", "the ledger is intact"),
    (sqlite3.SQLITE_IOERR_SHMSIZE, "disk I/O error", 0, "LedgerFull", "free space there"),
    (sqlite3.SQLITE_IOERR_WRITE, "disk I/O error", 4096, "LedgerFull", "do not restore it from a backup"),
    (sqlite3.SQLITE_IOERR_READ, "disk I/O error", 10 ** 9, "LedgerUnreadable", "need not mean it is damaged"),
    (sqlite3.SQLITE_CANTOPEN, "unable to open database file", 10 ** 9, "LedgerUnreadable", "check the disk"),
    (sqlite3.SQLITE_CORRUPT, "database disk image is malformed", 10 ** 9, "LedgerDamaged", "restore it from a backup"),
    (sqlite3.SQLITE_NOTADB, "file is not a database", 10 ** 9, "LedgerDamaged", "restore it from a backup"),
])
def test_each_ledger_failure_has_its_own_class_and_advice(monkeypatch, tmp_path, code, text, free, expected, advice):
    import dphist.publishing.ledger as ledger_module

    monkeypatch.setattr(ledger_module, "_free_space", lambda path: free)
    kind = sqlite3.DatabaseError if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) else \
        sqlite3.OperationalError
    problem = ledger_module._sqlite_problem(tmp_path / "l.sqlite", _sqlite_error(code, text, kind), 3)
    assert type(problem).__name__ == expected and advice in str(problem), str(problem)
    assert str(problem).startswith(f"ledger {tmp_path / 'l.sqlite'}: ") and "\n" not in str(problem)
    restore = "restore it from a backup and run 'dphist budget verify'"
    assert (restore in str(problem)) == (expected == "LedgerDamaged")  # only damage is restored from a backup


class _Failing:
    """A connection whose statements matching ``sql`` fail with ``exc`` (sqlite3.Connection cannot be patched)."""

    def __init__(self, db, sql: str, exc: sqlite3.Error):
        self._db, self._sql, self._exc = db, sql, exc

    def execute(self, sql, *args):
        if self._sql in sql:
            raise self._exc
        return self._db.execute(sql, *args)

    def close(self):
        self._db.close()


def test_verify_tells_damage_from_a_ledger_it_could_not_check(tmp_path, monkeypatch):
    import dphist.publishing.ledger as ledger_module

    path = tmp_path / "l.sqlite"
    release(Ledger(path), "0.5")
    book = Ledger(path, readonly=True)
    monkeypatch.setattr(ledger_module, "_free_space", lambda path: 10 ** 9)
    book._db = _Failing(book._db, "integrity_check", _sqlite_error(sqlite3.SQLITE_IOERR_READ, "disk I/O error"))
    with pytest.raises(ledger_module.LedgerUnreadable):
        book.verify()
    book._db = _Failing(book._db._db, "integrity_check", _sqlite_error(sqlite3.SQLITE_CORRUPT, "malformed",
                                                                        sqlite3.DatabaseError))
    assert book.verify() == ["the file is damaged (malformed)"]


def test_reading_where_no_log_index_can_be_made_reads_the_file_if_the_log_is_empty(tmp_path, monkeypatch):
    """On a full disk (or in a folder that cannot be written) SQLite cannot make the -shm index a read-only
    connection needs.  With an empty write-ahead log the file is the whole ledger and is read as it stands; with
    entries in the log it is refused as full, never read without them."""
    import dphist.publishing.ledger as ledger_module

    path = tmp_path / "l.sqlite"
    book = Ledger(path)
    release(book, "0.5")
    book.close()  # the last connection: the log is checkpointed into the file and removed
    real = sqlite3.connect

    def no_index(database, *args, **kw):
        if "mode=ro" in str(database):
            raise _sqlite_error(sqlite3.SQLITE_IOERR_SHMSIZE, "disk I/O error")
        return real(database, *args, **kw)

    monkeypatch.setattr(ledger_module.sqlite3, "connect", no_index)
    monkeypatch.setattr(ledger_module, "_free_space", lambda path: 0)
    assert row(Ledger(path, readonly=True))["epsilon_spent"] == "0.5"
    writer = Ledger(path)  # a writer whose log is not yet checkpointed into the file
    writer._db.execute("PRAGMA wal_autocheckpoint=0")
    writer.set_cap(D, ROW, 2)
    assert (tmp_path / "l.sqlite-wal").stat().st_size > 0
    with pytest.raises(ledger_module.LedgerFull, match="free space there"):
        Ledger(path, readonly=True)
    writer.close()


def test_a_ledger_created_by_another_process_between_its_checks_is_read_in_full(tmp_path, monkeypatch):
    """Two processes opening one new ledger together: the second may find no table on its first check and the
    table (with the first one's entries) on its next.  It must then read every entry: chain its own to the last
    one and count the other's spend, never take the file for empty."""
    path = tmp_path / "ledger.sqlite"
    original = Ledger._check_table
    raced = []

    def racing(self, create):
        original(self, create)
        if not create and not raced:  # between this process's first check and its creating the table
            raced.append(True)
            other = Ledger(path)
            other.set_cap("census", "row", epsilon=1)
            other.reserve("census", "row", Fraction(1, 2))
            other.close()

    monkeypatch.setattr(Ledger, "_check_table", racing)
    late = Ledger(path)
    assert raced
    assert Fraction(late.status("census")[0]["epsilon_spent"]) == Fraction(1, 2)
    with pytest.raises(BudgetExhausted):
        late.reserve("census", "row", Fraction(3, 4))
    late.reserve("census", "row", Fraction(1, 4))
    late.close()
    assert Ledger(path, readonly=True).verify() == []
