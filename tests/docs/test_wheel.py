"""The distributions: ``python -m build`` makes a source distribution and, from it, a wheel.  The wheel holds the
package and the audit with the ``dphist`` entry point and the version of dphist/version.py (the one place it is
written), and no tests, benchmarks or sample data; the source distribution holds what a checkout needs to build,
test and document.  The wheel, unpacked and alone on the path (not the checkout), imports and runs
``dphist --version``; the slow test installs it into a fresh virtual environment, its dependencies from the package
index, and runs the installed command."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from dphist.version import __version__

ROOT = Path(__file__).resolve().parent.parent.parent
# One worker builds the distributions once for all the tests (make test runs with --dist loadgroup); whichever test
# runs first pays for the build in its setup, so each has room for it.
pytestmark = pytest.mark.xdist_group("distributions")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """dist/ of ``python -m build`` run on a copy of the checkout: the sdist, then the wheel built from it.  The build
    backend (setuptools >= 77) is fetched into an isolated environment unless this one has it."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the 'build' package is not installed (it is in the test extra: pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("dist")
    # setuptools stages the sdist in a folder inside the source tree, so the build runs on a copy: other tests'
    # processes work in the checkout at the same time.
    source = tmp_path_factory.mktemp("source") / "dphist"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*.egg-info", "site", "build", "dist", ".hypothesis", ".pytest_cache",
        "demo_release", "*.sqlite*", "results"))
    command = [sys.executable, "-m", "build", "--outdir", str(out), str(source)]
    if _has_backend():
        command.insert(3, "--no-isolation")
    done = subprocess.run(command, capture_output=True, text=True, cwd=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _has_backend() -> bool:
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 77
    except Exception:
        return False


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("dphist-*.whl")
    return wheel


@pytest.mark.time_limit(90)
def test_the_wheel_holds_the_package_its_entry_point_and_the_version(dist):
    wheel = _wheel(dist)
    assert wheel.name == f"dphist-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = f"dphist-{__version__}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"dphist", "dphist_audit", info}, tops
    for module in ("dphist/__init__.py", "dphist/cli/__init__.py", "dphist/version.py", "dphist_audit/__init__.py",
                   "dphist/algorithms/auto/rules.py"):
        assert module in names, module
    assert not any(re.match(r"(tests|bench|sample_data|docs)/", name) for name in names)
    assert re.search(rf"^Version: {re.escape(__version__)}$", metadata, re.MULTILINE)
    assert re.search(r"^dphist = dphist\.cli:main$", entry_points, re.MULTILINE)


@pytest.mark.time_limit(90)
def test_the_sdist_holds_what_a_checkout_needs_and_no_benchmarks(dist):
    (sdist,) = dist.glob("dphist-*.tar.gz")
    assert sdist.name == f"dphist-{__version__}.tar.gz"
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("pyproject.toml", "README.md", "Makefile", "mkdocs.yml", "dphist/cli/__init__.py",
                   "dphist_audit/__init__.py", "docs/index.md", "docs/algorithms.md", "docs/reference/report.md",
                   "sample_data/census.csv", "sample_data/census.schema.yaml", "tests/conftest.py",
                   "tests/docs/test_wheel.py"):
        assert needed in names, needed
    assert not any(name.startswith("bench/") for name in names)
    assert not any("__pycache__" in name for name in names)


@pytest.mark.time_limit(90)
def test_the_unpacked_wheel_alone_runs_dphist_version(dist, tmp_path):
    """The wheel's own files, not the checkout's, answer: the import path is inside the unpacked wheel, and the
    console script's entry point, read from the wheel's metadata, prints the version."""
    unpacked = tmp_path / "wheel"
    with zipfile.ZipFile(_wheel(dist)) as archive:
        archive.extractall(unpacked)
    probe = ("import dphist, importlib.metadata as m, sys\n"
             "print(dphist.__file__)\n"
             "(script,) = [e for e in m.entry_points(group='console_scripts') if e.name == 'dphist']\n"
             "sys.argv = ['dphist', '--version']\n"
             "script.load()()\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(unpacked)})
    assert done.returncode == 0, done.stderr
    where, version = done.stdout.splitlines()
    assert Path(where).resolve().is_relative_to(unpacked.resolve()), where
    assert version == f"dphist, version {__version__}"


@pytest.mark.slow
def test_a_fresh_virtual_environment_installs_the_wheel_and_runs_dphist(dist, tmp_path):
    """pip install dist/dphist-*.whl into a new venv (its dependencies from the package index: about a minute),
    then the installed ``dphist`` command, outside the checkout."""
    venv = tmp_path / "venv"
    # Nothing of this checkout on the path: pip would take a dphist it finds there for the installed one.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(_wheel(dist))],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    if pip.returncode != 0 and "No matching distribution" in pip.stderr + pip.stdout:
        pytest.skip("the package index is not reachable: " + pip.stderr.strip().splitlines()[-1])
    assert pip.returncode == 0, pip.stderr
    done = subprocess.run([str(venv / "bin" / "dphist"), "--version"], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dphist, version {__version__}"
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import dphist; print(dphist.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where
