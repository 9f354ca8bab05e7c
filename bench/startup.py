"""Start-up time of the ``dphist`` command line, against the floor of importing its own dependencies.

    .venv/bin/python bench/startup.py                     # best of 7; about half a minute
    .venv/bin/python bench/startup.py --runs 11
    .venv/bin/python bench/startup.py --source /tmp/old   # another checkout (e.g. from `git archive`)

Each command runs in a fresh process (``python -m dphist ...``), alternating with the floor, a fresh
``python -c "import numpy, pyarrow, click"``: a command run, then a floor run, round after round, so that both
see the same load on a shared machine.  A figure is the best (least) wall time of ``--runs`` runs; the ratio is a
command's best over the best of the floor runs taken beside it.  The release is the ``make demo`` command line,
writing into a temporary folder with a temporary ledger; ``budget show`` then reads that ledger.  Bytecode is
written and used as in an installed package (PYTHONDONTWRITEBYTECODE is dropped for the runs).  Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = ["-c", "import numpy, pyarrow, click"]


def commands(work: Path) -> list[tuple[str, list[str]]]:
    """(label, arguments after ``python -m dphist``) for every command timed; files go under ``work``."""
    data = ROOT / "sample_data"
    ledger = str(work / "ledger.sqlite")
    return [
        ("--version", ["--version"]),
        ("--help", ["--help"]),
        ("budget --help", ["budget", "--help"]),
        ("release --help", ["release", "--help"]),
        ("schema (draft, census.csv)", ["schema", str(data / "census.csv"), "-o", str(work / "draft.yaml"),
                                        "--overwrite"]),
        ("release (census.csv, age,sex)", ["release", str(data / "census.csv"), "--schema",
                                           str(data / "census.schema.yaml"), "--epsilon", "1", "--columns",
                                           "age,sex", "--out", str(work / "release"), "--overwrite", "--ledger",
                                           ledger, "--quiet"]),
        ("budget show (that ledger)", ["budget", "show", "--ledger", ledger]),
    ]


def wall(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds one fresh ``python args`` takes, start to exit; fails loudly if the command fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"python {' '.join(args)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return seconds


def measure(args: list[str], runs: int, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(best of ``runs`` for the command, best of as many floor runs alternating with it), in seconds."""
    wall(args, env, cwd)  # once untimed: the first run may compile bytecode or fill the page cache
    best, floor = float("inf"), float("inf")
    for _ in range(runs):
        best = min(best, wall(args, env, cwd))
        floor = min(floor, wall(FLOOR, env, cwd))
    return best, floor


def _check_source(source: Path, env: dict[str, str], cwd: Path) -> None:
    """Exit unless ``python`` run as the bench runs it imports dphist from ``source`` (an editable install of
    another checkout could otherwise be timed instead)."""
    found = subprocess.run([sys.executable, "-c", "import dphist; print(dphist.__file__)"], env=env, cwd=cwd,
                           capture_output=True, text=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(source.resolve()):
        raise SystemExit(f"dphist is imported from {found or '(nowhere)'}, not from {source}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command and of the floor (default 7)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose dphist is timed (default: "
                        "this one); put first on PYTHONPATH")
    args = parser.parse_args()
    if not (args.source / "dphist" / "__init__.py").is_file():
        raise SystemExit(f"--source {args.source}: no dphist package there")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(args.source.resolve()),
                                                                    os.environ.get("PYTHONPATH")]))}
    # As installed (pip compiles every module): the untimed first run writes the bytecode that later runs load,
    # where PYTHONDONTWRITEBYTECODE would have every run compile dphist's modules from source again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"dphist from {args.source}; floor: python {' '.join(FLOOR)}; best of {args.runs}, fresh processes, "
          "alternating\n")
    lines = ["| command | best (s) | floor (s) | ratio |", "|---|---:|---:|---:|"]
    print("\n".join(lines))
    with tempfile.TemporaryDirectory(prefix="dphist-startup-") as tmp:
        _check_source(args.source, env, Path(tmp))
        for label, argv in commands(Path(tmp)):
            # Run from the temporary folder: the current directory comes first on sys.path, before PYTHONPATH.
            best, floor = measure(["-m", "dphist", *argv], args.runs, env, Path(tmp))
            lines.append(f"| `dphist {label}` | {best:.3f} | {floor:.3f} | {best / floor:.2f} |")
            print(lines[-1], flush=True)
    if args.source.resolve() == ROOT:  # this checkout: the `startup` section of bench/RESULTS.md
        sys.path.insert(0, str(ROOT / "bench"))
        from sections import replace_section

        replace_section("startup", "\n".join([
            "## Start-up", "", f"Each command in a fresh process (`python -m dphist ...`), alternating with the floor "
            f"`python {' '.join(FLOOR)}`; best of {args.runs} each on this 2-core machine; ratio = command ÷ floor. "
            "The release is `make demo`'s (two small tables from sample_data/census.csv).", "", *lines]))
        print("wrote bench/RESULTS.md (startup)")


if __name__ == "__main__":
    main()
