"""Marginal sets under pure ε with strategy residual (docs/algorithms.md §11.1) end to end through ``dphist
release``: auto takes the Laplace plan where it is the lowest, the tables' ε add up to the set's exactly with L1
sensitivity 1 each (times a protected group's size), the report names the plan and its expected error, the
written tables agree and their intervals are the plan's; a set separate refuses is released; the refusals read
nothing."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dphist.algorithms.marginal_sets import plan_marginals
from dphist.algorithms.residual_laplace import METHODS

from cli_harness import invoke
from marginal_files import largest_shared_difference, read_marginals, six_binary_columns
from conftest import SAMPLE

DATA, SCHEMA = str(SAMPLE / "census.csv"), str(SAMPLE / "census.schema.yaml")
#: A set where the Laplace residual plan is below full and separate (sex binary, education and income wide).
PAIRS = [("age", "sex"), ("sex", "income"), ("education", "income")]


def _release(tmp_path, name: str, *extra: str, marginals=PAIRS) -> dict:
    out = tmp_path / name
    ok = invoke(["release", DATA, "-s", SCHEMA, "--marginals", ";".join(",".join(m) for m in marginals),
                 "-o", str(out), "-q", *extra])
    assert ok.exit_code == 0, ok.output
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("group", [1, 2])
def test_auto_takes_the_laplace_plan_and_spends_epsilon_once(tmp_path, group):
    report = _release(tmp_path, f"g{group}", "-e", "1", "--seed", "3", "--group-size", str(group))
    block = report["marginals"]
    residual = block["expected_error"]["residual"]
    assert block["strategy"] == "residual" and "Laplace plan" in block["chosen_by"]
    assert residual["plan"] in METHODS and residual["total"] == min(residual["plans"].values())
    assert residual["total"] < min(block["expected_error"]["full"]["total"],
                                   block["expected_error"]["separate"]["total"])
    # the planned figures are those of plan_marginals at ε per record (ε/C for a group of C)
    sizes = {"age": 16, "sex": 2, "income": 25, "education": 9}  # education: 8 values and the null category
    planned = plan_marginals(PAIRS, sizes, Fraction(1, group), "identity", "auto")
    assert residual["total"] == planned.expected["residual"]["total"]
    # sequential composition in the kernel: the tables' ε add up to the set's; Δ₁ = 1 per record, C per group
    steps = block["steps"]
    assert report["epsilon_spent"] == "1" and sum(Fraction(s["epsilon"]) for s in steps) == 1
    assert {s["mechanism"] for s in steps} == {"discrete Laplace"} and {s["sensitivity"] for s in steps} == {group}
    assert all(Fraction(s["scale"]) == group / Fraction(s["epsilon"]) for s in steps)
    assert block["rounded_agreement"]["exact"] is True and block["rounded_agreement"]["max_difference"] == 0
    assert largest_shared_difference(read_marginals(tmp_path / f"g{group}", PAIRS)) == 0
    frames = {m: pd.read_csv(tmp_path / f"g{group}" / f"{'_'.join(m)}.csv") for m in PAIRS}
    for m, table in zip(PAIRS, report["tables"]):
        frame = frames[m]
        assert table["algorithm"] == "residual" and (frame["count"] >= 0).all()
        assert frame["count"].dtype == np.int64
        sd = table["expected_cell_sd"]
        assert sd == pytest.approx(residual["rmse_per_cell"]["_".join(m)], rel=1e-3)
        assert "discrete Laplace" in table["interval"]["method"]
        assert np.all(frame["ci_upper"] >= frame["noisy_count"] + 1.959 * sd - 1e-9)
        assert np.all(frame["ci_upper"] - frame["noisy_count"] <= 1.96 * sd + 0.011)


def test_strategies_requested_under_pure_epsilon(tmp_path):
    """residual on request is the same plan auto takes; separate and full still run."""
    auto = _release(tmp_path, "a", "-e", "1", "--seed", "5")["marginals"]
    asked = _release(tmp_path, "r", "-e", "1", "--seed", "5", "--marginal-strategy", "residual")["marginals"]
    assert asked["strategy"] == "residual" and asked["chosen_by"] == "requested"
    assert asked["expected_error"] == auto["expected_error"] and asked["steps"] == auto["steps"]
    for strategy in ("separate", "full"):
        assert _release(tmp_path, strategy, "-e", "1", "--seed", "5", "--marginal-strategy",
                        strategy)["marginals"]["strategy"] == strategy


def test_a_set_separate_refuses_is_released(tmp_path):
    """All 3-way marginals of six binary columns (three fixed margins: separate refuses): the Laplace plan releases
    them, and the max_difference it reports is the one recomputed from the written files."""
    marginals, args = six_binary_columns(tmp_path, "-e", "1")
    out = tmp_path / "o"
    ok = invoke([*args, "--seed", "2", "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    block = json.loads((out / "report.json").read_text())["marginals"]
    assert block["strategy"] == "residual" and block["rounded_agreement"]["exact"] is False
    assert "not_available" in block["expected_error"]["separate"]
    assert sum(Fraction(s["epsilon"]) for s in block["steps"]) == 1  # (one summary step beyond 64 tables)
    frames = read_marginals(out, marginals)
    assert block["rounded_agreement"]["max_difference"] == largest_shared_difference(frames)
    assert len({int(f["count"].sum()) for f in frames.values()}) == 1


def test_refusals_read_nothing(tmp_path):
    args = ["release", DATA, "-s", SCHEMA, "--marginals", "age,sex;sex,income", "--marginal-strategy", "residual",
            "-o", str(tmp_path / "o")]
    refused = invoke([*args, "-e", "1", "-a", "privelet"])
    assert refused.exit_code == 2 and "discrete Laplace noise itself" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert not (tmp_path / "o").exists()
