"""The bad-input corpus: every case in ``corpus_cases.CASES`` through the CLI, against the error contract.

For each case, built in a fresh directory that is the working directory of the run:

- the exit code is one the case allows (always within 0-4: 5 is a bug, and no case allows it);
- no traceback, and no data value (the planted ``zzzsecret``) in anything printed;
- a failure prints exactly one line on stderr (``Error: ...``, or one JSON object with ``--log-format json``),
  after the TEST MODE banner when ``--seed`` is given, of at most MESSAGE_LIMIT characters, and nothing on stdout;
- with ``--log-format json`` every stderr line, on success too, is one JSON object;
- a failure leaves the directory exactly as it was (hidden entries such as ``.out.staging-*`` included), apart
  from the ledger the case names, which a run may create or write;
- no charge unless data was read: after exit 2, 3 or 4, or an exit 1 found before any row is read, the ledger
  shows nothing spent; a damaged ledger stays byte-identical.  A test-mode run never charges.  Whether a failed
  run charged is recorded as the test's ``charged`` property (``--junitxml`` shows it).
- the error line says that the budget stays spent exactly when the run read data (it added a READ entry),
  and never otherwise.
- after exit 0, no hidden leftovers outside the release directory.

Most cases run in-process through CliRunner (cli_harness.invoke, with a watchdog).  Cases that could hang (a FIFO
as input, exponents such as 1e-999999999) or take seconds run as real processes with a timeout (cli_harness.start:
forked from a server that has already imported dphist), all started when the first test runs and checked last;
the module's tests therefore run on one xdist worker (their xdist_group), so that only one worker starts them.
The cases in ``corpus_cases.SLOW`` (larger variants of cases that run on every change) are marked slow.
Directories are compared by kind and content (cli_harness.snapshot without modification times).

``KNOWN_BROKEN`` is for sorting cases while fixes are in progress; it stays empty in the repository.
"""

from __future__ import annotations

import json
import os
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

import cli_harness
from cli_harness import Outcome, invoke, snapshot, start
import corpus_cases as cc
from dphist.errors import BUDGET_STAYS_SPENT
from dphist.publishing.ledger import Ledger

# The process cases are started by a module fixture when the module's first test runs: every test of the module
# on one worker, or each worker would start them all.
pytestmark = pytest.mark.xdist_group("bad_input_corpus")

cli_harness.start_fork_server()  # it imports while the tests before these run

KNOWN_BROKEN: dict[str, str] = {}

SIDECARS = ("-wal", "-shm", "-journal")


# ---- running --------------------------------------------------------------------------------------------------


MESSAGE_LIMIT = 2_000  # characters in an error line: a few quoted pieces of input and the message's own words
IN_PROCESS_LIMIT = 30  # seconds: an in-process case that runs longer has hung (every case takes well under 5 s)


def corpus_snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (hidden ones included, links not followed) with its kind and content."""
    return snapshot(root, mtimes=False)


def spent(path: Path) -> list[dict]:
    """The ledger's (data set, unit) rows that show any epsilon or delta spent; [] if there is no ledger."""
    if not path.is_file():
        return []
    ledger = Ledger(path, timeout=5)
    try:
        rows = ledger.status()
    finally:
        ledger.close()
    return [r for r in rows if Fraction(r["epsilon_spent"]) or Fraction(r["delta_spent"])]


@pytest.fixture(scope="module")
def process_runs(request, tmp_path_factory):
    """Build every selected case that needs a real process and start them all at once (they may sit out a
    timeout: each is killed if it has not ended ``case.timeout`` seconds after its test starts waiting for it)."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")}
    runs: dict[str, tuple] = {}
    for name in sorted(cc.PROCESS & selected):
        builder = cc.CASES[name]
        d = tmp_path_factory.mktemp(name)
        try:
            case = builder(d)
        except pytest.skip.Exception as exc:
            runs[name] = ("skip", str(exc))
            continue
        assert case.timeout is not None, name
        ledger = tmp_path_factory.mktemp(f"{name}-ledger") / "ledger.sqlite"
        before = corpus_snapshot(d)
        env = {"DPHIST_LEDGER": str(d / case.ledger if case.ledger else ledger)}
        reads_before = reads(d / case.ledger if case.ledger else ledger)
        runs[name] = (d, case, before, ledger, reads_before, start(["-m", "dphist", *case.args], cwd=d, env=env))
    yield runs
    for run in runs.values():  # a test that did not run (stopped by -x) leaves its process
        if run[0] != "skip":
            run[-1].wait(run[1].timeout)


def reads(path: Path) -> int:
    """How many READ entries (a run started reading data) the ledger at ``path`` holds; 0 if there is none."""
    if not path.is_file():
        return 0
    db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM entries WHERE kind = 'READ'").fetchone()[0]
    except sqlite3.DatabaseError:  # a ledger that was never made
        return 0
    finally:
        db.close()


# ---- the contract ---------------------------------------------------------------------------------------------


def json_logs(args: list[str]) -> bool:
    return any(a == "json" and i and args[i - 1] == "--log-format" for i, a in enumerate(args)) or \
        "--log-format=json" in args


def verify(name: str, case: cc.Case, outcome: Outcome, d: Path, before: dict, ledger: Path,
           reads_before: int) -> dict:
    """Assert the contract; returns facts worth recording (whether an exit 1 charged)."""
    seen = (f"case {name}: dphist {' '.join(case.args)}\nexit {outcome.exit_code}\nstdout: {outcome.stdout[:2000]!r}"
            f"\nstderr: {outcome.stderr[:2000]!r}\n{outcome.crash}")
    assert not outcome.crash, seen
    printed = outcome.stdout + outcome.stderr
    assert "Traceback" not in printed, seen
    assert cc.SECRET not in printed, seen
    allowed = case.code if isinstance(case.code, tuple) else (case.code,)
    assert outcome.exit_code in allowed, f"exit {outcome.exit_code}, expected one of {allowed}\n{seen}"
    assert outcome.exit_code in (0, 1, 2, 3, 4), seen

    lines = outcome.stderr.splitlines()
    as_json = json_logs(case.args)
    if as_json:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                raise AssertionError(f"stderr line is not JSON: {line!r}\n{seen}") from None
            assert isinstance(record, dict), f"stderr line is not a JSON object: {line!r}\n{seen}"
    if case.seeded:
        # The banner comes first once the run starts; a refusal before that (a bad option) may come without it.
        if lines and cc.BANNER in lines[0]:
            lines = lines[1:]
        else:
            assert outcome.exit_code != 0, f"no TEST MODE banner first\n{seen}"
    assert not any(cc.BANNER in line for line in lines), seen

    if outcome.exit_code == 0:
        assert not any(line.startswith("Error") for line in lines), seen
        if "--quiet" in case.args and not as_json:
            assert lines == [], f"--quiet printed on stderr\n{seen}"
        hidden = hidden_leftovers(case, d, before, corpus_snapshot(d))
        assert not hidden, f"hidden leftovers after exit 0: {hidden}\n{seen}"
        if case.check is not None:
            case.check(d)
        if case.seeded:
            assert not spent(ledger), f"a test-mode run charged the ledger\n{seen}"
        return {}

    assert outcome.stdout == "", f"a failure printed on stdout\n{seen}"
    assert len(lines) == 1, f"{len(lines)} stderr lines for a failure, expected 1\n{seen}"
    if as_json:
        record = json.loads(lines[0])
        assert record.get("event") == "error" and record.get("exit_code") == outcome.exit_code, seen
        message = str(record.get("message", ""))
    else:
        assert lines[0].startswith("Error: "), seen
        message = lines[0]
    assert "internal error" not in message, seen
    for word in case.keywords:
        assert word in message, f"{word!r} missing from the error message\n{seen}"
    # A message quotes at most about 200 characters of any one piece of input (dphist.text.quoted).
    assert len(message) <= MESSAGE_LIMIT, f"an error line of {len(message):,} characters\n{seen}"

    after = corpus_snapshot(d)
    exempt = set(case.may_create)
    if case.ledger:
        exempt |= {case.ledger + s for s in SIDECARS}
        if not case.damaged_ledger:
            exempt.add(case.ledger)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k) and k not in exempt)
    assert not changed, f"the failed run changed the file system: {changed}\n{seen}"

    facts = {}
    if not case.damaged_ledger:
        charged = spent(ledger)
        facts["charged"] = bool(charged)
        if outcome.exit_code in (2, 3, 4) or not case.may_charge:
            assert not charged, f"charged after exit {outcome.exit_code} (no data read): {charged}\n{seen}"
        read = reads(ledger) > reads_before  # this run's READ, not an earlier run's the case set up
        assert (BUDGET_STAYS_SPENT in message) == read, (
            f"the error line of a run that {'read' if read else 'did not read'} data must "
            f"{'' if read else 'not '}say that its budget stays spent\n{seen}")
    return facts


def output_dir(args: list[str], d: Path) -> Path | None:
    """The release directory a command line names (--out/-o, else ./release for a release), links resolved."""
    out = "release" if args and args[0] == "release" else None
    for i, arg in enumerate(args[:-1]):
        if arg in ("--out", "-o"):
            out = args[i + 1]
    for arg in args:
        if arg.startswith("--out="):
            out = arg[len("--out="):]
    return (d / out).resolve() if out else None


def hidden_leftovers(case: cc.Case, d: Path, before: dict, after: dict) -> list[str]:
    """New hidden entries (staging folders, temporary files) outside the release directory, whose own hidden
    files (a release marker) belong to it."""
    out = output_dir(case.args, d)
    found = []
    for key in sorted(after.keys() - before.keys()):
        if not any(part.startswith(".") for part in Path(key).parts):
            continue
        if out is not None and (d / key).parent.resolve() == out and after[key][0] == "file":
            continue
        found.append(key)
    return found


def check_frozen(case: cc.Case, before: dict, d: Path, outcome: Outcome) -> None:
    """Paths the run must never change, whatever its exit code (the input, a user's files)."""
    after = corpus_snapshot(d)
    for path in case.frozen:
        for key in before:
            if key == path or key.startswith(path + os.sep):
                assert after.get(key) == before[key], (f"{key} was changed or removed\nexit {outcome.exit_code}\n"
                                                       f"stderr: {outcome.stderr!r}")


#: Cases that release a table whose report simulates its expected error (auto's zCDP choice, hdmm): about 4.5 s
#: alone, so more than 5 s beside another worker.
LONGER = {"job_approx_with_cli_rho": 20}


def _params():
    # Process cases last: they run in the background from the first test on, so waiting for them comes at the end.
    for name in sorted(cc.CASES, key=lambda n: n in cc.PROCESS):
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BROKEN[name])] if name in KNOWN_BROKEN else []
        if name in cc.SLOW:
            marks.append(pytest.mark.slow)
        if name in LONGER:
            marks.append(pytest.mark.time_limit(LONGER[name]))
        yield pytest.param(name, id=name, marks=marks)



@pytest.mark.parametrize("name", list(_params()))
def test_bad_input(name, tmp_path, monkeypatch, private_ledger, process_runs, record_property):
    run = process_runs.get(name)
    if run is not None and run[0] == "skip":
        pytest.skip(run[1])
    if run is not None:
        d, case, before, ledger, reads_before, process = run
        outcome = process.wait(case.timeout)
        ledger = d / case.ledger if case.ledger else ledger
    else:
        d = tmp_path / "case"
        d.mkdir()
        try:
            case = cc.CASES[name](d)
            assert case.timeout is None, f"{name} sets a timeout: list it in corpus_cases.PROCESS"
            before = corpus_snapshot(d)
            ledger = d / case.ledger if case.ledger else private_ledger
            reads_before = reads(ledger)
            outcome = invoke(case.args, cwd=d, timeout=IN_PROCESS_LIMIT)
        finally:
            cc.release_locks()
    record_property("exit_code", outcome.exit_code)
    check_frozen(case, before, d, outcome)
    facts = verify(name, case, outcome, d, before, ledger, reads_before)
    for key, value in facts.items():
        record_property(key, value)


def test_the_corpus_is_big_enough():
    assert len(cc.CASES) >= 170, len(cc.CASES)
    assert not KNOWN_BROKEN, "KNOWN_BROKEN is for local sorting only"
