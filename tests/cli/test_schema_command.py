"""``dphist schema --private``: a schema found with differential privacy is charged to the ledger, refused before
anything is charged when the output exists or the options do not fit, and reused by a release for free."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import yaml

from dphist.publishing.ledger import Ledger
from dphist.declare.schema import parse_schema

from cli_harness import invoke
from conftest import SAMPLE


def people(n: int = 20_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "income": rng.gamma(2.0, 20_000, n),
                         "city": rng.choice(["north", "south", "east", "west"], n),
                         "visit": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 600, n), "D")})


def test_cli_private_schema_is_charged_to_the_ledger(tmp_path):
    path = tmp_path / "people.parquet"
    people(5_000).to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "schema.yaml"
    done = invoke(["schema", str(path), "--private", "-e", "0.5", "--delta", "1e-7", "-c",
                   "age,city", "-o", str(out), "--ledger", str(ledger), "--dataset-id", "people"])
    assert done.exit_code == 0, done.output
    assert "2 column(s) found with epsilon 0.5" in done.stderr and "NOT differentially private" not in done.stderr
    assert set(parse_schema(yaml.safe_load(out.read_text())).columns) == {"age", "city"}
    (row,) = Ledger(ledger).status("people")
    assert row["epsilon_spent"] == "0.5" and Fraction(row["delta_spent"]) == Fraction(1, 10 ** 7)
    # The file exists: refused before anything is read or charged.
    again = invoke(["schema", str(path), "--private", "-e", "0.5", "--delta", "1e-7", "-o", str(out),
                    "--ledger", str(ledger), "--dataset-id", "people"])
    assert again.exit_code == 2 and "exists" in again.stderr
    assert Ledger(ledger).status("people")[0]["epsilon_spent"] == "0.5"


@pytest.mark.parametrize("args, code, message", [
    (["--private"], 2, "--private needs --epsilon"),
    (["-e", "1"], 2, "--epsilon applies to --private only"),
    (["--private", "-e", "1"], 2, "needs delta > 0"),
    (["--private", "-e", "1", "-c", "nosuch", "--delta", "1e-6"], 1, "column 'nosuch' not found"),
    (["--private", "-e", "1e-9", "--delta", "1e-6"], 2, "below the minimum"),
    (["--private", "-e", "1", "--delta", "1e-6", "--privacy-unit", "city"], 2, "needs --max-rows-per-unit"),
])
def test_cli_private_schema_errors_charge_nothing(tmp_path, args, code, message):
    path = tmp_path / "people.parquet"
    people(500).to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    result = invoke(["schema", str(path), *args, "--ledger", str(ledger)]
              if "--private" in args else ["schema", str(path), *args])
    assert result.exit_code == code, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not ledger.exists() or Ledger(ledger).status() == []


def test_cli_private_schema_charges_no_delta_when_no_column_is_text(tmp_path):
    """A δ that no column can use (no text column) is accepted and charged as 0, as in a release."""
    path = tmp_path / "people.parquet"
    people(500).to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    result = invoke(["schema", str(path), "--private", "-e", "1", "-c", "age", "--delta", "1e-6", "--ledger",
                     str(ledger), "--dataset-id", "people"])
    assert result.exit_code == 0, result.output
    assert "# Spent: epsilon 1, delta 0." in result.stdout
    (row,) = Ledger(ledger).status("people")
    assert row["epsilon_spent"] == "1" and row["delta_spent"] == "0"


def test_private_schema_of_the_sample_census_through_the_cli(tmp_path):
    out = tmp_path / "census.yaml"
    done = invoke(["schema", str(SAMPLE / "census.csv"), "--private", "-e", "1", "--delta", "1e-6",
                   "--seed", "4", "-o", str(out)])
    assert done.exit_code == 0, done.output
    schema = parse_schema(yaml.safe_load(out.read_text()))
    assert schema["sex"].values == ("F", "M")
    assert schema["interview_date"].kind == "date" and schema["age"].kind == "numeric"
    rel = invoke(["release", str(SAMPLE / "census.csv"), "-s", str(out), "-e", "1", "-c",
                  "age,sex", "--seed", "1", "-o", str(tmp_path / "rel")])
    assert rel.exit_code == 0, rel.output
    report = json.loads((tmp_path / "rel" / "report.json").read_text())
    assert "discovery" not in report and report["tables"][0]["domain"]["sex"]["values"] == ["F", "M"]


def test_a_private_schema_may_require_a_cap_and_the_variable_never_stops_a_draft(tmp_path):
    """--require-cap refuses an uncapped data set before reading (exit 3, nothing charged, no file); the same
    data set once capped is charged; $DPHIST_REQUIRE_CAP does not stop a draft, which charges nothing."""
    from conftest import SAMPLE

    data, ledger, out = SAMPLE / "census.parquet", tmp_path / "ledger.sqlite", tmp_path / "s.yaml"
    args = ["schema", data, "--private", "-e", "1", "-c", "age", "-o", out, "--ledger", ledger, "--dataset-id", "cz"]
    refused = invoke([*args, "--require-cap"])
    assert refused.exit_code == 3 and "no cap" in refused.stderr and not out.exists(), refused.stderr
    Ledger(ledger).set_cap("cz", "row", epsilon=2)
    assert Ledger(ledger).status()[0]["epsilon_spent"] == "0"
    done = invoke([*args, "--require-cap"])
    assert done.exit_code == 0 and out.exists() and "no cap" not in done.stderr, done.stderr
    assert Ledger(ledger).status()[0]["epsilon_spent"] == "1"
    draft = invoke(["schema", data, "-o", tmp_path / "d.yaml"], env={"DPHIST_REQUIRE_CAP": "1"})
    assert draft.exit_code == 0 and (tmp_path / "d.yaml").exists(), draft.stderr
    uncapped = invoke(["schema", data, "--private", "-e", "1", "-c", "age", "-o", tmp_path / "u.yaml",
                       "--ledger", ledger])
    assert uncapped.exit_code == 0 and "has no cap" in uncapped.stderr, uncapped.stderr



def test_cli_draft_of_whole_and_fractional_columns(tmp_path):
    """The non-private draft through the CLI: a count with blank cells, a flag and a code column get one bin per
    value, a wide whole column a round width, a fractional one ``--bins`` bins; the file loads and every value
    lies inside [lower, upper)."""
    data = {"n": [0, None, 6, 3, None], "flag": [0, 1, 1, 0, 1], "code": [1, 5, 2, 2, 3],
            "clock": [106, 2359, 1200, 700, 2000], "x": [0.17, 3.51, 1.2, 2.0, 0.5]}
    path, out = tmp_path / "t.csv", tmp_path / "draft.yaml"
    pd.DataFrame(data).astype({"n": "Int64"}).to_csv(path, index=False)
    assert path.read_text().count("\n,") == 2  # blank cells, not NaN
    done = invoke(["schema", str(path), "--bins", "5", "-o", str(out)])
    assert done.exit_code == 0, done.output
    assert "NOT private" in done.stderr
    columns = yaml.safe_load(out.read_text())["columns"]
    assert columns["n"] == {"type": "numeric", "lower": 0, "upper": 7, "width": 1, "nulls": "category"}
    assert columns["flag"] == {"type": "numeric", "lower": 0, "upper": 2, "width": 1}
    assert columns["code"] == {"type": "numeric", "lower": 1, "upper": 6, "width": 1}
    assert columns["clock"] == {"type": "numeric", "lower": 0, "upper": 2500, "width": 500}
    assert columns["x"] == {"type": "numeric", "lower": 0.17, "upper": 3.52, "bins": 5}
    schema = parse_schema(yaml.safe_load(out.read_text()))
    for name, values in data.items():
        edges = schema[name].edges
        assert all(edges[0] <= v < edges[-1] for v in values if v is not None), (name, edges)
