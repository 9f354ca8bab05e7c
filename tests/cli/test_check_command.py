"""``dphist check``: the schema against the data, for the holder.  Its banner comes first, its exit code says
whether the schema fits (0) or not (6), and it spends nothing, opens no ledger and writes no file."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import cli_harness
from cli_harness import invoke, run_forked, snapshot
from conftest import SAMPLE
from dphist.read.checking import BANNER

cli_harness.start_fork_server()

SCHEMA = """\
columns:
  cut: {type: categorical, values: [Fair, Good, Very good, Premium]}
  price: {type: numeric, lower: 0, upper: 1000, bins: 10, out_of_domain: %s}
"""


def data(d, cut=("Fair",), price=("10",)) -> str:
    """A CSV of ``cut`` and ``price`` columns, the shorter repeated to the longer's length."""
    n = max(len(cut), len(price))
    rows = [f'"{cut[i % len(cut)]}",{price[i % len(price)]}' for i in range(n)]
    (d / "d.csv").write_text("cut,price\n" + "\n".join(rows) + "\n")
    return "d.csv"


def schema(d, out_of_domain: str = "clamp") -> str:
    (d / "s.yaml").write_text(SCHEMA % out_of_domain)
    return "s.yaml"


def check(d, *args):
    return invoke(["check", *args], cwd=d)


def row(label: str, count: int, note: str = "") -> str:
    """A line of a column's block in the text report: the label, the count right-aligned, what happens."""
    return f"  {label:<20}{count:>12,}" + (f"  {note}" if note else "")


def test_a_fitting_schema_exits_0_with_the_banner_first(tmp_path):
    data(tmp_path, cut=("Fair", "Good", "Very good", "Premium"), price=("10", "999.5", "0"))
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path))
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == BANNER
    assert "NOT differentially private" in BANNER and "Nothing was spent" in BANNER
    assert lines[-1] == "the schema fits: a release would count every row of the checked columns"
    assert row("counted", 4, "100.00% of the rows") in lines
    assert done.stderr == ""


def test_a_label_differing_in_case_is_named_with_its_declared_value(tmp_path):
    data(tmp_path, cut=("Very Good",) * 12_082 + ("Fair",) * 3)
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path))
    assert done.exit_code == 6, done.output
    assert ("      12,082 rows 'Very Good': not declared; did you mean 'Very good'? (differs in case)"
            in done.stdout.splitlines())
    assert row("not declared", 12_082, "dropped (1 label)") in done.stdout.splitlines()
    assert row("counted", 3, "0.02% of the rows") in done.stdout.splitlines()
    # One line on stderr, which quotes no data value (it goes to logs).
    (line,) = done.stderr.splitlines()
    assert line == "Error: d.csv does not fit s.yaml: 1 problem (see the report on standard output); nothing was spent"


def test_a_label_differing_in_white_space_is_named_with_its_declared_value(tmp_path):
    data(tmp_path, cut=(" Premium",) * 4 + ("Very  good",) * 2 + ("Good",))
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path))
    assert done.exit_code == 6
    lines = done.stdout.splitlines()
    assert "      4 rows ' Premium': not declared; did you mean 'Premium'? (differs in whitespace)" in lines
    assert "      2 rows 'Very  good': not declared; did you mean 'Very good'? (differs in whitespace)" in lines


def test_values_of_the_wrong_type_are_counted_with_examples(tmp_path):
    data(tmp_path, price=("12", "n/a", '"12,5"', "7", "n/a", "abc", "unknown"))
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path))
    assert done.exit_code == 6
    assert row("type errors", 5, "not numbers, e.g. 'n/a', '12,5', 'abc'; a release would stop at the first (row 2) "
                                 "after charging the budget") in done.stdout.splitlines()
    assert row("counted", 2, "28.57% of the rows") in done.stdout.splitlines()
    assert "n/a" not in done.stderr


@pytest.mark.parametrize("policy, action, counted, code", [
    ("clamp", "clamped into the last bin", 4, 0), ("drop", "dropped", 1, 0)])
def test_out_of_range_rows_are_clamped_or_dropped(tmp_path, policy, action, counted, code):
    data(tmp_path, price=("-3", "5", "1000", "2500"))
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path, policy), "--format", "json")
    assert done.exit_code == code, done.output
    price = json.loads(done.stdout)["columns"][1]
    assert price["below_lower"]["rows"] == 1 and price["at_or_above_upper"] == {"rows": 2, "action": action}
    assert (price["min"], price["max"], price["counted"]) == (-3, 2500, counted)


def test_nulls_are_reported_with_what_their_policy_does(tmp_path):
    (tmp_path / "d.csv").write_text("cut,price\nFair,\nGood,5\n,7\n")
    (tmp_path / "s.yaml").write_text("columns:\n  cut: {type: categorical, values: [Fair, Good], nulls: category}\n"
                                     "  price: {type: numeric, lower: 0, upper: 10, bins: 2}\n")
    done = check(tmp_path, "d.csv", "--schema", "s.yaml")
    assert done.exit_code == 0  # dropped as the schema asks: a note, not a mismatch
    lines = done.stdout.splitlines()
    assert row("nulls", 1, "counted in their own cell") in lines and row("nulls", 1, "dropped") in lines
    assert lines[-2:] == ["  'price': 1 null, dropped as the schema says", "the schema fits (see the notes)"]


def test_the_unit_cap_drops_a_third_of_the_rows(tmp_path):
    """50 people with 4 rows each and 100 with one, at most 2 rows each: 100 of 300 rows are dropped."""
    people = [f"p{i}" for i in range(50) for _ in range(4)] + [f"q{i}" for i in range(100)]
    pd.DataFrame({"person": people, "cut": "Fair", "price": 10}).to_csv(tmp_path / "d.csv", index=False)
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path), "--privacy-unit", "person",
                 "--max-rows-per-unit", "2")
    assert done.exit_code == 0 and "  unit cap: 100 rows dropped (50 units over 2 rows)" in done.stdout
    assert ("unit cap ('person', at most 2 rows each): drops 100 of 300 rows (33.33% of the rows); 50 of 150 units "
            "are over the cap") in done.stdout.splitlines()
    as_json = json.loads(check(tmp_path, "d.csv", "--schema", "s.yaml", "--privacy-unit", "person",
                               "--max-rows-per-unit", "2", "--format", "json").stdout)["unit"]
    assert (as_json["rows_dropped"], as_json["units_over_cap"], as_json["units"]) == (100, 50, 150)
    assert as_json["share_dropped"] == pytest.approx(1 / 3)
    assert check(tmp_path, "d.csv", "--schema", "s.yaml", "--privacy-unit", "person",
                 "--max-rows-per-unit", "4").exit_code == 0


def test_json_has_the_banner_first_the_columns_and_the_problems(tmp_path):
    data(tmp_path, cut=("Fair", "Nope"))
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path), "--format", "json", "--columns", "cut,price")
    assert done.exit_code == 6
    report = json.loads(done.stdout)
    assert list(report)[0] == "banner" and report["banner"] == BANNER
    assert [c["name"] for c in report["columns"]] == ["cut", "price"]
    assert report["problems"] == 1 and report["problem_list"] == [
        "'cut': 1 row with labels the schema does not declare, dropped"]
    assert report["table"] == {"columns": ["cut", "price"], "counted": 1, "dropped": 1}
    assert report["columns"][0]["not_declared"]["top"] == [
        {"label": "Nope", "rows": 1, "suggestion": None, "differs": None}]


def test_missing_and_undeclared_columns_are_listed(tmp_path):
    (tmp_path / "d.csv").write_text("cut,colour,size\nFair,red,1\n")
    done = check(tmp_path, "d.csv", "--schema", schema(tmp_path))
    assert done.exit_code == 6
    lines = done.stdout.splitlines()
    assert "  not in the data: a release over this column is refused before reading" in lines
    assert "not in the schema (2 columns, not checked): colour, size" in lines


def test_nothing_is_spent_or_written(tmp_path, private_ledger):
    """The ledger the other commands would use ($DPHIST_LEDGER) is never created; the folder is unchanged."""
    data(tmp_path, cut=("Fair", "Bad"))
    schema(tmp_path)
    before = snapshot(tmp_path)
    for args in (["d.csv", "-s", "s.yaml"], ["d.csv", "-s", "s.yaml", "-f", "json"], ["nosuch.csv", "-s", "s.yaml"]):
        assert check(tmp_path, *args).exit_code in (1, 6)
    assert snapshot(tmp_path) == before
    assert not private_ledger.exists() and not private_ledger.parent.joinpath("ledger.sqlite-wal").exists()


@pytest.mark.parametrize("args, code, message", [
    (["nosuch.csv", "-s", "s.yaml"], 1, "input not found: nosuch.csv"),
    (["d.csv", "-s", "nosuch.yaml"], 2, "nosuch.yaml"),
    (["d.csv", "-s", "bad.yaml"], 2, "bad.yaml"),
    (["d.csv", "-s", "s.yaml", "-c", "cut,colour"], 2, "column 'colour' is not declared in the schema"),
    (["d.csv", "-s", "s.yaml", "--privacy-unit", "cut"], 2, "needs --max-rows-per-unit"),
    (["d.csv", "-s", "s.yaml", "--privacy-unit", "who", "--max-rows-per-unit", "1"], 1,
     "privacy-unit column 'who' not found"),
    (["d.csv"], 2, "Missing option '--schema'"),
    (["ragged.csv", "-s", "s.yaml"], 1, "ragged.csv: line 3: expected 2 fields, found 3"),
])
def test_bad_input_is_one_line_and_no_report(tmp_path, args, code, message):
    data(tmp_path)
    schema(tmp_path)
    (tmp_path / "bad.yaml").write_text("columns: [unclosed\n")
    (tmp_path / "ragged.csv").write_text("cut,price\nFair,1\nGood,2,3\n")
    done = check(tmp_path, *args)
    assert done.exit_code == code, done.output
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: ") and message in line


@pytest.mark.time_limit(60)
def test_a_real_process_gates_a_release(tmp_path):
    """As a cron line would run it: 'check && release' releases when the schema fits and not otherwise."""
    data(tmp_path, cut=("Fair", "Good"), price=("1", "2"))
    schema(tmp_path)
    fits = run_forked(["check", "d.csv", "--schema", "s.yaml"], cwd=tmp_path)
    assert fits.exit_code == 0 and fits.stdout.splitlines()[0] == BANNER, fits.stderr
    (tmp_path / "d.csv").write_text("cut,price\nFair,1\nGood,n/a\n")
    stops = run_forked(["check", "d.csv", "--schema", "s.yaml"], cwd=tmp_path)
    assert stops.exit_code == 6 and "n/a" in stops.stdout and "n/a" not in stops.stderr
    assert "Traceback" not in stops.stderr and len(stops.stderr.splitlines()) == 1


def test_the_census_sample_schema_fits_its_release_columns():
    """The quick start's check step (README): age and sex fit; the whole schema drops the null incomes."""
    done = invoke(["check", SAMPLE / "census.csv", "--schema", SAMPLE / "census.schema.yaml", "--columns", "age,sex"])
    assert done.exit_code == 0, done.output
    assert "a table over age, sex would count 60,000 of 60,000 rows (100.00% of the rows)" in done.stdout
