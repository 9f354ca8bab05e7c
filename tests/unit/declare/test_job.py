"""Job specs (dphist/declare/job.py): the fields a spec may carry, each validated as its command-line option, paths
relative to the spec, and algorithm options that may not name a release setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from dphist.errors import UsageError
from dphist.declare.job import TableRequest, check_option_names, load_job, parse_tables, release_arguments

TABLES = "tables:\n  - {columns: [age]}\n"


def _job(tmp_path: Path, text: str):
    spec = tmp_path / "specs" / "job.yaml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(text + TABLES)
    return load_job(spec)


def test_the_spec_carries_what_is_protected_and_where_it_is_charged(tmp_path):
    job = _job(tmp_path, "epsilon: '1'\nledger: books/l.sqlite\nprivacy_unit: person\nmax_rows_per_unit: 5\n"
                         "group_size: 2\nrequire_cap: true\n")
    assert job.ledger == str(tmp_path / "specs" / "books" / "l.sqlite")
    assert (job.privacy_unit, job.max_rows_per_unit, job.group_size, job.require_cap) == ("person", 5, 2, True)
    # An absolute ledger path is kept; left out, every field is unset and require_cap is false.
    assert _job(tmp_path, f"ledger: {tmp_path / 'abs.sqlite'}\n").ledger == str(tmp_path / "abs.sqlite")
    job = _job(tmp_path, "epsilon: '1'\n")
    assert (job.ledger, job.privacy_unit, job.max_rows_per_unit, job.group_size, job.require_cap) == (
        None, None, None, None, False)


@pytest.mark.parametrize("line, message", [
    ("ledger: 5", "'ledger' must be a path"),
    ("ledger: ''", "'ledger' must be a path"),
    ("ledger: [a.sqlite]", "'ledger' must be a path"),
    ("privacy_unit: [person]", "'privacy_unit' must be a column name"),
    ("privacy_unit: '  '", "'privacy_unit' must be a column name"),
    ("privacy_unit: 7", "'privacy_unit' must be a column name"),
    ("max_rows_per_unit: 0", "'max_rows_per_unit' must be a whole number, at least 1"),
    ("max_rows_per_unit: -3", "'max_rows_per_unit' must be a whole number"),
    ("max_rows_per_unit: 2.5", "'max_rows_per_unit' must be a whole number"),
    ("max_rows_per_unit: true", "'max_rows_per_unit' must be a whole number"),
    ("max_rows_per_unit: 'five'", "'max_rows_per_unit' must be a whole number"),
    ("group_size: 0", "'group_size' must be a whole number, at least 1"),
    ("group_size: .inf", "'group_size' must be a whole number"),
    ("require_cap: 'true'", "'require_cap' must be true or false"),
    ("require_cap: 1", "'require_cap' must be true or false"),
    ("require_cap: null", "'require_cap' must be true or false"),
    ("out: ''", "'out' must be a path"),
])
def test_each_field_is_validated_as_its_option(tmp_path, line, message):
    with pytest.raises(UsageError, match=message):
        _job(tmp_path, f"epsilon: '1'\n{line}\n")


def test_workload_is_no_algorithm_option():
    with pytest.raises(UsageError, match="'workload' is the release's own setting"):
        parse_tables([{"columns": ["x"], "algorithm": "auto", "options": {"workload": "cells"}}])
    with pytest.raises(UsageError, match="^there: 'workload'"):
        check_option_names({"workload": "dyadic"}, "there")
    check_option_names({"queries": "dyadic"}, "there")  # every other name is the algorithm's to judge
    (table,) = parse_tables([{"columns": ["x"], "workload": "cells", "options": {"cap": 5}}])
    assert table == TableRequest("x", ("x",), None, table.share, {"cap": 5}, "cells")


def test_an_unknown_field_is_named_and_quoted_short(tmp_path):
    with pytest.raises(UsageError, match=r"unknown field 'x+[^x]*' \(1,000 characters\)$") as refused:
        _job(tmp_path, "epsilon: '1'\n" + "x" * 1000 + ": 1\n")
    assert len(str(refused.value)) < 400


def test_arguments_given_replace_the_jobs_fields_and_the_rest_come_from_the_job(tmp_path):
    job = _job(tmp_path, "input: data.csv\nepsilon: '1'\nalgorithm: identity\nout: o\nledger: l.sqlite\n"
                         "dataset_id: census\ngroup_size: 2\n")
    merged = release_arguments(job, {"source": "", "algorithm": "h", "ledger": "", "group_size": None, "raw": True})
    assert merged["source"] == str(tmp_path / "specs" / "data.csv")  # an empty text is not given...
    assert merged["ledger"] == ""  # ...except a ledger, which is taken as given
    assert (merged["algorithm"], merged["group_size"], merged["dataset_id"]) == ("h", 2, "census")
    assert merged["out"] == str(tmp_path / "specs" / "o") and merged["raw"] is True
    assert [t.columns for t in merged["tables"]] == [("age",)] and merged["marginals"] is None


@pytest.mark.parametrize("given, expected", [
    ({}, ("0.5", None, "gaussian", "1e-6")),
    ({"noise": "laplace", "delta": "0"}, ("0.5", None, "laplace", "0")),
    ({"epsilon": "2"}, ("2", None, None, None)),  # a budget replaces the job's as a whole
    ({"rho": "0.1", "noise": "gaussian"}, (None, "0.1", "gaussian", None)),
])
def test_a_budget_argument_replaces_the_jobs_budget_as_a_whole(tmp_path, given, expected):
    merged = release_arguments(_job(tmp_path, "epsilon: '0.5'\ndelta: 1e-6\nnoise: gaussian\n"), given)
    assert tuple(merged.get(key) for key in ("epsilon", "rho", "noise", "delta")) == expected


@pytest.mark.parametrize("given, expected", [
    ({}, ("person", 5)),
    ({"max_rows_per_unit": 2}, ("person", 2)),
    ({"privacy_unit": "household"}, ("household", None)),  # a unit replaces the job's unit with its bound
])
def test_a_privacy_unit_replaces_the_jobs_unit_and_bound_together(tmp_path, given, expected):
    merged = release_arguments(_job(tmp_path, "epsilon: '1'\nprivacy_unit: person\nmax_rows_per_unit: 5\n"),
                               given)
    assert (merged["privacy_unit"], merged.get("max_rows_per_unit")) == expected


def test_the_tables_and_the_cap_requirement(tmp_path):
    job = _job(tmp_path, "epsilon: '1'\nrequire_cap: true\n")
    assert release_arguments(job, {"require_cap": False})["require_cap"] is True
    assert release_arguments(_job(tmp_path, "epsilon: '1'\n"), {"require_cap": True})["require_cap"] is True
    for key in ("columns", "tables", "marginals"):
        with pytest.raises(UsageError, match=f"^give {key} or a job spec listing the tables, not both$"):
            release_arguments(job, {key: "age"})
