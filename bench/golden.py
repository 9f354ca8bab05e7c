"""Fingerprints of seeded releases: every output byte, for comparing two revisions.

    python bench/golden.py OUT.json [--only PATTERN]

Runs a fixed set of test-mode (``--seed``) commands through the real CLI -- every
algorithm on the sample data (one and two columns) and on a DPBench table in one
and two dimensions, the default release, discovery, zCDP, (ε, δ), marginal sets,
every format, ``schema --private``, ``synth`` and ``evaluate`` -- and writes, per
command, its exit code and the SHA-256 of stdout, stderr and every file it wrote.
A refactoring that changes no behaviour leaves this file unchanged:

    git stash; python bench/golden.py before.json; git stash pop
    python bench/golden.py after.json; diff before.json after.json

The commands run in a fixed folder (``/tmp/dphist-golden``, or ``$DPHIST_GOLDEN_DIR``) so
that paths printed in summaries are the same from run to run.  DPBench tables come from
``../shared/data/dpbench`` and are skipped when it is absent.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DPBENCH = ROOT.parent / "shared" / "data" / "dpbench"
WORK = Path(os.environ.get("DPHIST_GOLDEN_DIR", "/tmp/dphist-golden"))
SEED = "7"

ALGORITHMS = ("agrid ahp auto dawa dpcube efpa h hb hdmm identity kdtree mwem noisefirst "
              "privelet privtree quadtree structurefirst ugrid").split()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _dphist() -> str:
    exe = Path(sys.executable).parent / "dphist"
    return str(exe) if exe.exists() else "dphist"


def _dpbench_tables(work: Path) -> dict[str, Path]:
    """Row-level Parquet files sampled (fixed seed) from two DPBench histograms."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = {}
    rng = np.random.default_rng(20261127)
    for name, file, columns in (("medcost", "1D/MEDCOST.n4096.npy", ("x",)),
                                ("adult2d", "2D/Adult_2D_256_256.npy", ("x", "y"))):
        path = DPBENCH / file
        if not path.exists():
            continue
        counts = np.load(path).astype(float).ravel()
        cells = rng.choice(counts.size, size=100_000, p=counts / counts.sum())
        shape = np.load(path).shape
        coords = np.unravel_index(cells, shape)
        table = pa.table({c: pa.array(v.astype(np.int64)) for c, v in zip(columns, coords)})
        pq.write_table(table, work / f"{name}.parquet")
        schema = {"columns": {c: {"type": "numeric", "lower": 0, "upper": int(n), "bins": int(n)}
                              for c, n in zip(columns, shape)}}
        (work / f"{name}.schema.yaml").write_text(json.dumps(schema))
        out[name] = work / f"{name}.parquet"
    return out


def _cases(work: Path) -> list[tuple[str, list[str]]]:
    csv = str(ROOT / "sample_data" / "census.csv")
    schema = str(ROOT / "sample_data" / "census.schema.yaml")
    base = ["release", csv, "-s", schema, "--seed", SEED, "-e", "1"]
    cases = []
    for a in ALGORITHMS:
        cases.append((f"census-1d-{a}", base + ["-c", "age", "-a", a]))
        cases.append((f"census-2d-{a}", base + ["-c", "age,income", "-a", a]))
    cases += [
        ("census-default", base),
        ("census-sex-education", base + ["-c", "sex,education"]),
        ("census-raw", base + ["-c", "age", "-a", "hb", "--raw"]),
        ("census-parquet", base + ["-c", "age,sex", "-f", "parquet"]),
        ("census-json", base + ["-c", "age,sex", "-f", "json"]),
        ("census-discovery", ["release", csv, "--seed", SEED, "-e", "1", "--delta", "1e-6"]),
        ("census-discovery-quantiles", ["release", csv, "--seed", SEED, "-e", "1", "--delta", "1e-6",
                                        "--discovery-binning", "quantiles"]),
        ("census-rho", ["release", csv, "-s", schema, "--seed", SEED, "--rho", "0.5", "-c", "age,sex"]),
        ("census-rho-hb", ["release", csv, "-s", schema, "--seed", SEED, "--rho", "0.5", "-c", "age",
                           "-a", "hb"]),
        ("census-gaussian", base + ["--delta", "1e-6", "--noise", "gaussian", "-c", "age,sex"]),
        ("census-workload-cells", base + ["-c", "age", "--workload", "cells"]),
        ("census-hb-geometric", base + ["-c", "age", "-a", "hb", "--budget-split", "geometric"]),
        ("census-group-size", base + ["-c", "age", "--group-size", "3"]),
    ]
    for strategy in ("auto", "full", "separate"):
        cases.append((f"census-marginals-{strategy}",
                      base + ["--marginals", "age,sex;sex,education;education,age",
                              "--marginal-strategy", strategy]))
        cases.append((f"census-marginals-rho-{strategy}",
                      ["release", csv, "-s", schema, "--seed", SEED, "--rho", "1",
                       "--marginals", "sex,education;education,marital_status",
                       "--marginal-strategy", strategy]))
    spec = work / "job.yaml"
    spec.write_text(json.dumps({
        "input": csv, "schema": schema, "epsilon": "1",
        "tables": [{"name": "a", "columns": ["age"], "algorithm": "hb", "share": 2},
                   {"name": "b", "columns": ["sex", "state"], "algorithm": "auto", "share": 1},
                   {"name": "c", "columns": ["interview_date"], "algorithm": "dawa", "share": 1}]}))
    cases.append(("census-spec", ["release", "--spec", str(spec), "--seed", SEED]))
    cases.append(("census-schema-private", ["schema", csv, "--private", "-e", "0.5", "--delta", "1e-6",
                                            "--seed", SEED]))
    cases.append(("census-schema-draft", ["schema", csv]))
    cases.append(("census-evaluate", ["evaluate", csv, "-s", schema, "-c", "age", "-e", "0.5",
                                      "-a", "identity,hb,dawa", "--seed", SEED]))
    for name, path in _dpbench_tables(work).items():
        ds_schema = str(work / f"{name}.schema.yaml")
        for a in ALGORITHMS:
            cases.append((f"{name}-{a}", ["release", str(path), "-s", ds_schema, "--seed", SEED,
                                          "-e", "0.1", "-a", a]))
    return cases


def _run(name: str, argv: list[str], work: Path) -> dict:
    out = work / "out" / name
    shutil.rmtree(out, ignore_errors=True)
    if argv[0] == "release":
        argv = argv + ["-o", str(out)]
    elif argv[0] == "schema":
        out.mkdir(parents=True)
        argv = argv + ["-o", str(out / "schema.yaml")]
    # hdmm's optimised strategies are cached in the work folder, not the user's (a cached and a fresh strategy
    # are the same, so the fingerprints do not depend on what ran before)
    env = dict(os.environ, DPHIST_LEDGER=str(work / "ledger.sqlite"), COLUMNS="100",
               DPHIST_CACHE_DIR=str(work / "strategy-cache"))
    env.pop("DPHIST_REQUIRE_CAP", None)
    started = time.perf_counter()
    proc = subprocess.run([_dphist(), *argv], cwd=work, env=env, capture_output=True)
    stdout = proc.stdout
    if argv[0] == "evaluate":  # its last column is a timing
        stdout = re.sub(rb"[ \t]+[0-9.]+(?=\n)", b"", stdout)
    record = {"exit": proc.returncode, "stdout": _sha(stdout), "stderr": _sha(proc.stderr),
              "files": {}}
    if out.exists():
        for f in sorted(out.rglob("*")):
            if f.is_file():
                data = f.read_bytes()
                if f.name == ".dphist-release.json":  # its run id is random by design
                    data = re.sub(rb'"run_id": "[0-9a-f]+"', b"", data)
                record["files"][str(f.relative_to(out))] = _sha(data)
    if argv[0] == "release" and proc.returncode == 0 and name == "census-1d-hb":
        synth = work / "out" / "synth.csv"
        synth.unlink(missing_ok=True)
        s = subprocess.run([_dphist(), "synth", str(out), "-n", "500", "--seed", SEED, "-o", str(synth)],
                           cwd=work, env=env, capture_output=True)
        record["synth"] = {"exit": s.returncode, "stderr": _sha(s.stderr),
                           "file": _sha(synth.read_bytes()) if synth.exists() else None}
    record["seconds"] = round(time.perf_counter() - started, 2)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--only", default="*")
    args = parser.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    results = {}
    for name, argv in _cases(WORK):
        if not fnmatch.fnmatch(name, args.only):
            continue
        results[name] = _run(name, argv, WORK)
        print(f"{name:40s} exit {results[name]['exit']}  {results[name]['seconds']:7.2f} s", flush=True)
    timings = {k: v.pop("seconds") for k, v in results.items()}
    Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"{len(results)} commands, {sum(timings.values()):.0f} s")


if __name__ == "__main__":
    main()
