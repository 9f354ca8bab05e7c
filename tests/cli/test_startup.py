"""The command line starts without its heavy dependencies: ``import dphist.cli``, ``--version`` and
``--help`` load none of scipy, pandas, matplotlib, pyspark or dask, and ``import dphist`` stays cheap while
``from dphist import release, Release`` still works.  Each check runs in a fresh interpreter, since this test
process has long imported everything.  Timings are in bench/startup.py, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_harness import invoke
from conftest import ROOT, SAMPLE

HEAVY = ("scipy", "pandas", "matplotlib", "pyspark", "dask")

# Runs `dphist ARGS...` (argv after the script) in-process, then writes the exit code and every loaded module
# to the file named by the environment variable, after the CLI's sys.exit.
CLI_PROBE = """
import json, os, runpy, sys
args = sys.argv[1:]
sys.argv = ["dphist", *args]
code = 0
try:
    runpy.run_module("dphist", run_name="__main__")
except SystemExit as exc:
    code = exc.code
with open(os.environ["PROBE_OUT"], "w") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""


def _loaded_after(code: str, tmp_path, *args: str) -> tuple[int, set[str]]:
    """(exit code, modules loaded) of a fresh ``python -c code args...`` run in the repository root."""
    out = tmp_path / "probe.json"
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PROBE_OUT": str(out)}, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    return result["code"], set(result["modules"])


def _heavy(modules: set[str], roots=HEAVY) -> list[str]:
    return sorted({m.split(".")[0] for m in modules if m.split(".")[0] in roots})


IMPORT_PROBE = """
import json, os, sys
import {module}
with open(os.environ["PROBE_OUT"], "w") as fh:
    json.dump({{"code": 0, "modules": sorted(sys.modules)}}, fh)
"""


@pytest.mark.parametrize("module", ["dphist", "dphist.cli"])
def test_import_loads_nothing_heavy(tmp_path, module):
    code, modules = _loaded_after(IMPORT_PROBE.format(module=module), tmp_path)
    assert module in modules  # the probe really imported it
    assert _heavy(modules) == []
    # Nor the release machinery: every algorithm, the planner, the executor.
    assert not {"dphist.algorithms", "dphist.publishing.planning", "dphist.publishing.execution", "dphist.api"} & modules


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["release", "--help"], ["schema", "--help"],
                                  ["evaluate", "--help"], ["budget", "--help"]], ids=" ".join)
def test_version_and_help_load_nothing_heavy(tmp_path, args):
    code, modules = _loaded_after(CLI_PROBE, tmp_path, *args)
    assert code == 0
    assert "dphist.cli" in modules
    assert _heavy(modules) == []


def test_budget_show_and_schema_draft_load_neither_scipy_nor_pandas(tmp_path):
    from dphist.publishing.ledger import ROW_UNIT, Ledger

    Ledger(tmp_path / "l.sqlite").set_cap("census", ROW_UNIT, 1)
    code, modules = _loaded_after(CLI_PROBE, tmp_path, "budget", "show", "--ledger", str(tmp_path / "l.sqlite"))
    assert code == 0 and "dphist.publishing.ledger" in modules
    assert _heavy(modules) == []
    code, modules = _loaded_after(CLI_PROBE, tmp_path, "schema", str(SAMPLE / "census.csv"), "-o",
                                  str(tmp_path / "draft.yaml"))
    assert code == 0 and (tmp_path / "draft.yaml").is_file()
    assert _heavy(modules) == []


def test_pure_epsilon_release_needs_no_optimizer(tmp_path):
    """A small pure-ε release loads pandas (its tables are frames) but not scipy.optimize (ε/ρ conversions,
    marginal transports) nor any optional extra."""
    code, modules = _loaded_after(CLI_PROBE, tmp_path, "release", str(SAMPLE / "census.csv"), "--schema",
                                  str(SAMPLE / "census.schema.yaml"), "--epsilon", "1", "--columns", "age,sex",
                                  "--out", str(tmp_path / "out"), "--ledger", str(tmp_path / "l.sqlite"), "--quiet")
    assert code == 0 and (tmp_path / "out" / "age_sex.csv").is_file()
    assert "pandas" in modules  # the probe sees what the release loaded
    assert "scipy.optimize" not in modules
    assert _heavy(modules, ("matplotlib", "pyspark", "dask")) == []


def test_release_exports_still_work():
    import dphist
    import dphist.api
    import dphist.publishing.assemble
    from dphist import Release, release

    assert release is dphist.api.release
    assert Release is dphist.publishing.assemble.Release
    assert {"__version__", "release", "Release"} <= set(dir(dphist))
    assert all(hasattr(dphist, name) for name in dphist.__all__)
    assert dphist.declare.schema.load_schema  # a submodule by attribute, as when everything was imported eagerly
    with pytest.raises(AttributeError, match="no_such_thing"):
        dphist.no_such_thing  # noqa: B018
    assert not hasattr(dphist, "_private")


def test_choices_are_the_ones_the_modules_use():
    """The light module's names are the very objects the heavy modules check against (one definition each)."""
    from dphist.declare import choices
    from dphist.evaluation import evaluate
    from dphist.publishing import planning
    from dphist.algorithms.auto import choice as auto
    from dphist.read.engines import ENGINES
    from dphist.publishing import writers

    assert writers.FORMATS is choices.FORMATS
    assert ENGINES is choices.ENGINES
    assert auto.WORKLOADS is choices.RELEASE_WORKLOADS
    assert evaluate.WORKLOADS is choices.EVALUATE_WORKLOADS
    assert planning.DEFAULT_ALGORITHM is choices.DEFAULT_ALGORITHM
    assert planning.DEFAULT_MAX_CELLS == choices.DEFAULT_MAX_CELLS


def test_help_still_lists_the_choices():
    text = invoke(["release", "--help"], terminal_width=200).output
    assert "[csv|parquet|json]" in text
    assert "[local|dask|spark]" in text
    assert "[ranges|cells|marginals]" in text
    assert "[auto]" in text and "16777216" in text  # the default algorithm and --max-cells
    text = invoke(["evaluate", "--help"], terminal_width=200).output
    assert "all-ranges|prefix|random-ranges" in text
