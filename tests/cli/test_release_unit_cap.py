"""``dphist release --privacy-unit COL --max-rows-per-unit K`` says what the cap dropped (docs/privacy.md §6): on a
table where the cap drops a third of the rows, the summary prints the estimated share and the report holds the
measurement; without a cap neither appears and the tables get the whole budget.

The table: 300 students with 60 rows and 900 with 20, 36,000 rows.  At K = 20 the cap keeps 20 rows of each
(24,000) and drops 40 of each of the 300 (12,000, a third; each counted in full, as 40 <= C = 60).  At ε = 100 the
measurement gets ε 2 and its discrete Laplace scale is 20·4/2 = 40 rows: each noisy sum is within 680 rows of its
truth but with probability below 1e-7 (2·e^(−680/40)), so the share is within [11,320/36,000, 12,680/36,000] ⊂
[31 %, 36 %]; a share computed from the unclipped excess over the kept rows (50 %) or with each student's dropped
rows counted up to K only (20 %) is far outside.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from cli_harness import Outcome, invoke

LINE = re.compile(r"the unit cap \(20 rows per student\) dropped about (\d+) % of the rows \(± (\d+) %, counting at "
                  r"most 80 rows per student\); the counts and their intervals are for the capped rows")
TOLERANCE = 680  # rows: each noisy sum is further from its truth with probability below 1e-7 (module docstring)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("students")
    rng = np.random.default_rng(40)
    units = np.r_[np.repeat([f"s{i}" for i in range(300)], 60), np.repeat([f"t{i}" for i in range(900)], 20)]
    frame = pd.DataFrame({"student": units, "grade": rng.choice(list("ABCDE"), units.size),
                          "score": rng.integers(0, 100, units.size)})
    frame.sample(frac=1, random_state=1).to_csv(d / "students.csv", index=False)
    (d / "students.schema.yaml").write_text("columns:\n  grade: {type: categorical, values: [A, B, C, D, E]}\n"
                                            "  score: {type: numeric, lower: 0, upper: 100, bins: 10}\n")
    return str(d / "students.csv"), str(d / "students.schema.yaml")


def release(table, out, *extra) -> Outcome:
    data, schema = table
    result = invoke(["release", data, "-s", schema, "-e", "100", "--seed", "7", "-o", str(out), *extra])
    assert not result.crash and result.exit_code == 0, result.stderr
    return result


def test_a_cap_that_drops_a_third_of_the_rows_is_reported_in_the_summary_and_the_report(table, tmp_path):
    result = release(table, tmp_path / "out", "--privacy-unit", "student", "--max-rows-per-unit", "20")
    (line,) = [m for m in map(LINE.search, result.stderr.splitlines()) if m]
    assert 31 <= int(line.group(1)) <= 36 and 1 <= int(line.group(2)) <= 2, line.group(0)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    cap = report["unit_cap"]
    assert (cap["unit_column"], cap["max_rows_per_unit"], cap["dropped_rows_counted_up_to"]) == ("student", 20, 60)
    assert abs(cap["rows_kept"] - 24_000) < TOLERANCE and abs(cap["rows_dropped"] - 12_000) < TOLERANCE
    assert 11_320 / 36_000 < cap["dropped_share"] < 12_680 / 36_000
    low, high = cap["dropped_share_interval"]
    assert low <= cap["dropped_share"] <= high and high - low < 0.05
    step = cap["step"]
    assert cap["epsilon"] == step["epsilon"] == "2" and step["scale"] == "40" and step["sensitivity"] == 80
    assert cap["noise_sd"] == step["noise_sd"] == pytest.approx(40 * 2**0.5, rel=1e-3)
    # The budget: the tables share 98, the measurement 2; the release spent the 100 it was asked for.
    assert sum(Fraction(t["epsilon"]) for t in report["tables"]) + Fraction(cap["epsilon"]) == 100
    assert report["epsilon_spent"] == "100"
    # The note on intervals says they are for the capped rows, with the same estimate.
    (note,) = [n for n in report["notes"] if n.startswith("ci_lower/ci_upper")]
    assert f"the cap dropped about {line.group(1)} % of them" in note and "for the rows it kept" in note


def test_without_a_cap_there_is_no_line_no_entry_and_the_tables_get_everything(table, tmp_path):
    result = release(table, tmp_path / "out")
    assert "unit cap" not in result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert "unit_cap" not in report and [t["epsilon"] for t in report["tables"]] == ["50", "50"]
    assert not any("unit cap" in n for n in report["notes"])
