"""The ledger across budget definitions (issue 21): a data set is capped in ε (with δ) or in ρ, every release is
counted in the cap's definition (pure ε²/2 under a ρ cap; approximate releases in both), releases that have no
figure in the cap's definition are refused with nothing charged, old ledgers still verify, and ``status`` /
``budget show`` show the other definition converted."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from fractions import Fraction
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from dphist.cli import main
from dphist.errors import UsageError
from dphist.ledger import REFERENCE_DELTA, BudgetExhausted, Ledger
from dphist.privacy.conversions import epsilon_for, rho_for
from dphist.publish import charged_run

D = "d"
ROW = "row"


def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "l.sqlite")


def release(book: Ledger, epsilon=None, delta=0, rho=None, dataset=D):
    """A whole release (RESERVE, READ, COMMIT, PUBLISH) charged in the definition the amounts name."""
    r = book.reserve(dataset, ROW, epsilon, delta, rho=rho)
    book.mark_read(r)
    book.commit(r, {})
    book.published(r, {"published": True})
    return r


def row(book: Ledger, dataset=D) -> dict:
    (r,) = book.status(dataset)
    return r


def kinds(book: Ledger, dataset=D) -> list[str]:
    return [e["kind"] for e in book.history(dataset)]


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
    for _ in range(300):
        book.reserve(D, ROW, None, rho=Fraction(1, 300))
    assert row(book)["rho_spent"] == "1"  # 300 × 1/300 is exactly 1
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
    ((None, "1e-6"), {"rho": "0.1"}, "has no delta"),
    ((None,), {"rho": "0"}, "rho must be greater than 0"),
    (("1", "0"), {"rho": "0.01"}, "needs epsilon > 0 and delta > 0"),
    # ρ above what (ε, δ) allows would make the (ε, δ) claim false.
    ((APPROX_EPS, APPROX_DELTA), {"rho": APPROX_RHO * 2}, "more than the .* guarantee allows"),
])
def test_reservations_that_name_no_definition_are_refused(tmp_path, args, kw, match):
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


# ---------------------------------------------------------------------------------------------------------------
# The release transaction


def _plan(**kw):
    return SimpleNamespace(source=SimpleNamespace(public_name="frame", name="frame", format="dataframe"), **kw)


def test_charged_run_reserves_in_the_plans_definition(tmp_path):
    book = ledger(tmp_path)
    book.set_cap(D, ROW, rho="0.5")
    seen = []
    done = charged_run(_plan(definition="zcdp", epsilon=None, rho=Fraction(1, 10), delta=0),
                       lambda info: seen.append(info) or "v", book, dataset_id=D)
    assert done.value == "v" and seen[0]["rho_cap"] == "0.5" and seen[0]["rho_spent_before"] == "0"
    assert seen[0]["epsilon_cap"] is None
    charged_run(_plan(definition="approximate", epsilon=APPROX_EPS, delta=APPROX_DELTA, rho=APPROX_RHO),
                lambda info: None, book, dataset_id=D)
    charged_run(_plan(epsilon=Fraction(1, 2), delta=0), lambda info: None, book, dataset_id=D)  # an older plan
    assert Fraction(row(book)["rho_spent"]) == Fraction(1, 10) + APPROX_RHO + Fraction(1, 8)
    assert kinds(book).count("PUBLISH") == 3
    with pytest.raises(BudgetExhausted):
        charged_run(_plan(definition="zcdp", epsilon=None, rho=Fraction(1, 2), delta=0),
                    lambda info: pytest.fail("read data after a refusal"), book, dataset_id=D)


# ---------------------------------------------------------------------------------------------------------------
# The CLI


def cli(*args, ledger_path):
    result = CliRunner().invoke(main, [*args, "--ledger", str(ledger_path)])
    return result


def test_budget_set_rho_and_show(tmp_path):
    path = tmp_path / "l.sqlite"
    done = cli("budget", "set", "census", "--rho", "0.5", "--reason", "annual", ledger_path=path)
    assert done.exit_code == 0, done.output
    assert "cap rho 0.5" in done.output and "at delta 0.000001" in done.output
    release(Ledger(path), rho="0.125", dataset="census")
    shown = cli("budget", "show", "census", "--format", "json", ledger_path=path)
    (r,) = json.loads(shown.stdout)
    assert (r["definition"], r["rho_spent"], r["rho_cap"], r["rho_remaining"]) == ("zcdp", "0.125", "0.5", "0.375")
    _rounded_up_ok(r["epsilon_spent_at_delta"], Fraction(1, 8), REFERENCE_DELTA)
    text = cli("budget", "show", "census", ledger_path=path)
    assert text.exit_code == 0
    assert "rho spent 0.125, cap 0.5, remaining 0.375" in text.stdout
    assert f"epsilon {r['epsilon_spent_at_delta']} of {r['epsilon_cap_at_delta']} at delta 0.000001" in text.stdout
    history = cli("budget", "history", "census", ledger_path=path)
    assert history.exit_code == 0 and "rho 1/2" not in history.stdout and "rho 0.125" in history.stdout


def test_budget_set_needs_exactly_one_of_epsilon_and_rho(tmp_path):
    path = tmp_path / "l.sqlite"
    both = cli("budget", "set", "x", "--rho", "0.5", "--epsilon", "1", ledger_path=path)
    neither = cli("budget", "set", "x", ledger_path=path)
    bad = cli("budget", "set", "x", "--rho", "-1", ledger_path=path)
    for result, words in ((both, "not both"), (neither, "missing --epsilon E or --rho R"), (bad, "--rho")):
        assert result.exit_code == 2 and words in result.stderr and result.stderr.count("\n") == 1
    assert not path.exists() or Ledger(path).status() == []


def test_budget_set_warns_when_earlier_releases_do_not_fit_the_cap(tmp_path):
    path = tmp_path / "l.sqlite"
    release(Ledger(path), rho="0.01")
    result = cli("budget", "set", D, "--epsilon", "1", ledger_path=path)
    assert result.exit_code == 0 and "spent rho alone" in result.stderr
    shown = cli("budget", "show", D, ledger_path=path)
    assert "spent rho alone" in shown.stdout and "epsilon spent n/a" in shown.stdout


def test_releases_in_each_definition_against_caps_end_to_end(tmp_path, private_ledger):
    """The release command reserves in its definition: under a ρ cap a --rho, a pure and a --noise gaussian
    release count ρ, ε²/2 and ρ; a refusal exits 3 with one line and no output; under an ε cap --rho is refused."""
    import subprocess
    import sys

    from conftest import ROOT

    census = [str(ROOT / "sample_data" / "census.csv"), "-s", str(ROOT / "sample_data" / "census.schema.yaml"),
              "-c", "sex", "--dataset-id", "census", "-q"]

    def run(*args, out):
        return subprocess.run([sys.executable, "-m", "dphist", "release", *census, *args, "-o", str(tmp_path / out)],
                              capture_output=True, text=True, cwd=ROOT)

    book = Ledger(private_ledger)
    book.set_cap("census", ROW, rho="0.05")
    assert run("--rho", "0.02", out="a").returncode == 0
    assert run("-e", "0.2", out="b").returncode == 0  # counts 0.2²/2 = 0.02
    too_much = run("-e", "1", "--delta", "1e-6", "--noise", "gaussian", out="c")
    assert too_much.returncode == 3 and too_much.stderr.count("\n") == 1 and "only rho 0.01 of the cap 0.05" in \
        too_much.stderr and not (tmp_path / "c").exists()
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["ledger"]["rho_cap"] == "0.05" and report["ledger"]["rho_spent_before"] == "0"
    assert row(book, "census")["rho_spent"] == "0.04"
    book.set_cap("other", ROW, "1", "1e-5")
    refusal = subprocess.run([sys.executable, "-m", "dphist", "release", *census[:-3], "--dataset-id", "other",
                              "--rho", "0.01", "-o", str(tmp_path / "d")], capture_output=True, text=True, cwd=ROOT)
    assert refusal.returncode == 3 and "--noise gaussian" in refusal.stderr and not (tmp_path / "d").exists()
    assert row(book, "other")["releases"] == 0 and kinds(book, "other") == ["CAP"]
    assert book.verify() == []
