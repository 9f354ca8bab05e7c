"""Shared fixtures.  Tests that need ../shared (DPBench and real data) skip cleanly when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
SHARED = ROOT.parent / "shared"


def write(d: Path, name: str, content: str | bytes) -> str:
    """Write ``content`` to ``d / name`` (making folders); returns ``name``, as test cases build their files."""
    path = d / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return name


@pytest.fixture(scope="session", autouse=True)
def strategy_cache_dir(tmp_path_factory):
    """The optimised strategies of the hdmm algorithm are cached in a temporary directory for the whole run,
    never in the real home (``DPHIST_CACHE_DIR``, read by dphist.algorithms.strategies.strategy_cache).  Set in
    the environment, so that the CLI's subprocesses and the audit's worker processes inherit it."""
    from dphist.algorithms.strategies.strategy_cache import CACHE_ENV

    patch = pytest.MonkeyPatch()
    # One directory for every xdist worker (their base temps are siblings), so that a strategy is optimised once
    # per run rather than once per worker; the cache's writes are atomic, so workers can share it.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    directory = shared / "strategies"
    directory.mkdir(exist_ok=True)
    patch.setenv(CACHE_ENV, str(directory))
    yield directory
    patch.undo()


@pytest.fixture
def sample_csv() -> Path:
    return SAMPLE / "census.csv"


@pytest.fixture
def sample_parquet() -> Path:
    return SAMPLE / "census.parquet"


@pytest.fixture
def sample_schema() -> Path:
    return SAMPLE / "census.schema.yaml"


@pytest.fixture
def shared_real() -> Path:
    path = SHARED / "data" / "real"
    if not path.is_dir():
        pytest.skip("../shared/data/real is not present (only in the project's CI checkout)")
    return path


@pytest.fixture
def urandom_calls(monkeypatch) -> list[int]:
    """Records the sizes of every os.urandom call the privacy kernel's bit sources make (the production source)."""
    from dphist.privacy import bits

    calls: list[int] = []
    real = bits.os.urandom

    def spy(n):
        calls.append(n)
        return real(n)

    monkeypatch.setattr(bits.os, "urandom", spy)
    return calls


@pytest.fixture(autouse=True)
def private_ledger(tmp_path_factory, monkeypatch):
    """Every test (and every dphist process it starts) records releases in its own ledger, never the user's."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite"
    monkeypatch.setenv("DPHIST_LEDGER", str(path))
    return path


# ---- the tiers --------------------------------------------------------------------------------------------------
# `make test` runs every test not marked slow; `make test-full` runs them all.  So that the split stays true, an
# unmarked test fails when its setup and call take longer than TIME_LIMIT seconds (wall time on a 2-core machine
# running two workers); a test marked time_limit(s) is held to s instead (the few real-process and audit tests
# that cannot be shorter and must run on every change).  --time-limit 0 turns the check off (for a debugger, a
# coverage run, or timing the suite on a loaded machine).

TIME_LIMIT = 5.0


def pytest_addoption(parser):
    parser.addoption("--time-limit", type=float, default=TIME_LIMIT, metavar="SECONDS",
                     help=f"fail a test not marked slow that takes longer than this [{TIME_LIMIT:g}]; 0: no limit")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "setup":
        item.stash[_SETUP_SECONDS] = call.duration
        return
    if call.when != "call" or not report.passed or item.get_closest_marker("slow") is not None:
        return
    limit = item.config.getoption("--time-limit")
    marker = item.get_closest_marker("time_limit")
    if marker is not None and limit:
        limit = float(marker.args[0])
    seconds = item.stash.get(_SETUP_SECONDS, 0.0) + call.duration
    if limit and seconds > limit:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {seconds:.1f} s (setup and call) without @pytest.mark.slow; the "
                           f"limit is {limit:g} s: make it faster or mark it slow (make test-full runs it)")


_SETUP_SECONDS = pytest.StashKey[float]()


# ---- hypothesis profiles -----------------------------------------------------------------------------------------
# `make test`, CI and a plain pytest run use the profile "repeatable": every property test draws its examples from a
# seed fixed by the test itself (derandomize; hypothesis hashes the test function), so every run of the same code
# tries the same examples and a failure means the code changed, never an unlucky draw.  The price is that these
# runs search nothing new.  The profile "explore" draws fresh random examples on every run and keeps any it finds
# failing in .hypothesis/, where the next explore run tries it first:
#     pytest --hypothesis-profile=explore tests/...        or        HYPOTHESIS_PROFILE=explore make test
# A failure found so belongs in the repeatable suite as an explicit test of that example (st.data() examples cannot
# be pinned with @example).  Neither profile has a deadline: a per-example time limit fails by the machine's load,
# and the tiers' 5-second check above already bounds each test.

settings.register_profile("repeatable", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)


def pytest_configure(config):
    if not config.getoption("--hypothesis-profile", None):  # hypothesis's own option wins
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
