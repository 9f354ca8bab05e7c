"""Contribution bounding for privacy units (dphist/read/contribution.py): at most K rows per unit reach the counts (a
uniform, value-blind choice, kept while counting), so one whole unit changes each table by at most K; the noise
grows K-fold (and c-fold for groups of c units); each unit is a ledger account of its own; clear errors."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

import dphist
from dphist.read.contribution import UnitBound, UnitRows, bounded_rows
from dphist.read.counting import TableShape, count_tables
from dphist.errors import DataError, UsageError
from dphist.privacy import SeededBits, discrete_laplace_variance
from dphist.declare.schema import parse_schema
from dphist.publishing.unit_cap import UNIT_CAP_SHARE

from cli_harness import invoke
from conftest import SAMPLE

SCHEMA = parse_schema({"columns": {"age": {"type": "numeric", "lower": 0, "upper": 100, "width": 10},
                                   "sex": {"type": "categorical", "values": ["F", "M"]}}})
SHAPES = [TableShape("age_sex", (SCHEMA["age"], SCHEMA["sex"])), TableShape("age", (SCHEMA["age"],))]


def counts(frame: pd.DataFrame, k: int, seed: int) -> list[np.ndarray]:
    batches = pa.Table.from_pandas(frame, preserve_index=False).to_batches(max_chunksize=700)
    return count_tables(batches, SHAPES, "test", UnitBound("person", k), SeededBits(seed))


def people(n_units: int, rows: int, rng) -> pd.DataFrame:
    return pd.DataFrame({"person": np.repeat([f"p{i}" for i in range(n_units)], rows),
                         "age": rng.integers(0, 100, n_units * rows).astype(float),
                         "sex": rng.choice(["F", "M"], n_units * rows)})


def test_bounded_rows_keeps_at_most_k_per_unit_and_drops_missing_units():
    units = np.array([0, 0, 0, 1, 2, 2, -1, 0, 2, 2, 2])
    for seed in range(20):
        keep = bounded_rows(units, 2, SeededBits(seed))
        kept = np.bincount(units[keep] + 1, minlength=4)
        assert kept.tolist() == [0, 2, 1, 2]  # missing unit dropped; min(rows, K) of each


def test_bounded_rows_choice_is_uniform():
    """One row of a 5-row unit over 5,000 draws: χ² against uniform (false-alarm rate 1e-6)."""
    units = np.zeros(5, dtype=np.int64)
    picks = [int(np.flatnonzero(bounded_rows(units, 1, SeededBits(s)))[0]) for s in range(5000)]
    assert stats.chisquare(np.bincount(picks, minlength=5)).pvalue > 1e-6


@pytest.mark.parametrize("buffer", [1, 50, 1 << 20])
def test_running_selection_keeps_exactly_the_rows_bounded_rows_keeps(monkeypatch, buffer):
    """The count keeps a running selection (memory bounded by K rows per unit), merged every `buffer` rows;
    it keeps the very rows that bounded_rows keeps when drawing over all rows at once (ties included)."""
    from dphist.read import counting

    monkeypatch.setattr(counting._UnitSelection, "BUFFER", buffer)
    rng = np.random.default_rng(8)
    n = 3000
    frame = pd.DataFrame({"person": rng.choice([f"p{i}" for i in range(120)] + [None], n),
                          "age": rng.integers(0, 100, n).astype(float), "sex": rng.choice(["F", "M"], n)})
    for k, seed in ((1, 0), (3, 1), (40, 2)):
        got = counts(frame, k, seed)
        units = frame["person"].map({f"p{i}": i for i in range(120)}).fillna(-1).to_numpy(np.int64)
        keep = bounded_rows(units, k, SeededBits(seed))
        kept = frame[keep]
        age = np.minimum(kept["age"].to_numpy() // 10, 9).astype(int)
        sex = (kept["sex"] == "M").to_numpy().astype(int)
        expected = np.zeros((10, 2), np.int64)
        np.add.at(expected, (age, sex), 1)
        assert np.array_equal(got[0], expected) and np.array_equal(got[1], expected.sum(axis=1))
        assert 0 < got[1].sum() < n


def test_unit_rows_gives_the_kept_rows_and_the_dropped_rows_clipped_per_unit():
    """Units of 1, 5, 20 and 100 rows (and rows with no unit), in batches that add units as they come: K = 5 keeps
    1 + 5 + 5 + 5 rows; C = 15 counts 0 + 0 + 15 + 15 of the 0 + 0 + 15 + 95 dropped."""
    units = np.repeat([0, 1, 2, 3, -1], [1, 5, 20, 100, 7])
    np.random.default_rng(3).shuffle(units)
    tally = UnitRows()
    for part in np.array_split(units, 9):
        tally.add(part)
    assert tally.kept_and_excess(5, 15) == (16, 30)
    assert tally.kept_and_excess(5, 1000) == (16, 110)  # a clip past every excess: the rows dropped, exactly
    assert tally.kept_and_excess(200, 15) == (126, 0)  # a bound past every unit drops nothing
    assert UnitRows().kept_and_excess(5, 15) == (0, 0)


def test_one_unit_moves_the_kept_and_dropped_sums_by_at_most_k_and_c():
    """The sensitivity docs/privacy.md §6 states: adding a unit of any size moves the kept sum by at most K, the
    clipped dropped sum by at most C, and both together by at most K + C."""
    rng = np.random.default_rng(5)
    k, clip = 4, 12
    base = rng.integers(0, 30, 50)
    for rows in [0, 1, 3, 4, 5, 9, 16, 17, 40, 10_000]:
        without, with_unit = UnitRows(), UnitRows()
        without.add(np.repeat(np.arange(50), base))
        with_unit.add(np.repeat(np.arange(51), np.r_[base, rows]))
        (n0, e0), (n1, e1) = without.kept_and_excess(k, clip), with_unit.kept_and_excess(k, clip)
        assert (n1 - n0, e1 - e0) == (min(rows, k), min(max(rows - k, 0), clip))
        assert n1 - n0 + e1 - e0 <= k + clip


def test_the_counting_pass_tells_unit_rows_every_units_rows():
    """With a unit, count_tables hands every batch's unit ids to ``unit_rows``: all rows, kept or not, and the
    kept sum is what the tables counted (every row in the domain here)."""
    rng = np.random.default_rng(6)
    frame = people(40, 9, rng)
    frame.loc[::13, "person"] = None  # rows with no unit are in neither sum
    tally = UnitRows()
    batches = pa.Table.from_pandas(frame, preserve_index=False).to_batches(max_chunksize=50)
    got = count_tables(batches, SHAPES, "test", UnitBound("person", 4), SeededBits(1), unit_rows=tally)
    expected = frame["person"].value_counts().to_numpy()
    assert tally.kept_and_excess(4, 10**6) == (int(np.minimum(expected, 4).sum()), int(np.maximum(expected - 4, 0).sum()))
    assert tally.kept_and_excess(4, 2)[0] == got[1].sum() == got[0].sum()


def test_a_whole_unit_changes_each_table_by_at_most_k():
    """The issue's check: a unit with 1,000 rows moves every table no more than a unit with K rows could."""
    rng = np.random.default_rng(4)
    k = 3
    base = people(200, 4, rng)
    big = pd.DataFrame({"person": ["whale"] * 1000, "age": rng.integers(0, 100, 1000).astype(float),
                        "sex": rng.choice(["F", "M"], 1000)})
    for seed in range(10):
        without = counts(base, k, seed)
        with_whale = counts(pd.concat([base, big]), k, seed + 100)
        for a, b in zip(without, with_whale):
            # The other units keep min(4, K) = 3 rows each whatever was drawn, so the sums differ by K exactly.
            assert abs(int(b.sum()) - int(a.sum())) == k
        # Same draws for the other units (the whale's rows come last): cell by cell, at most K differ in total.
        shifted = counts(pd.concat([base, big]), k, seed)
        same_base = counts(base, k, seed)
        assert all(np.abs(s - t).sum() <= k for s, t in zip(shifted, same_base))
    unbounded = [sum(x) for x in zip(*[count_tables(pa.Table.from_pandas(f, preserve_index=False).to_batches(),
                                                    SHAPES, "t") for f in (big,)])]
    assert unbounded[0].sum() == 1000  # without a unit bound the whale would move the table by 1,000


def test_noise_grows_with_rows_per_unit_and_group_size():
    """Identity's noise variance over 6 seeded releases of a 2,000-cell table (age in bins of 0.1 × sex, m =
    12,000 draws) against the exact variance at scale K·c/ε_t, ε_t = 49/50 ε the table's part (a fiftieth measures
    what the cap dropped, docs/privacy.md §6): the sample variance's relative sd is √((κ − 1)/m),
    κ ≤ 6.13 the discrete Laplace kurtosis at scales 2 and 6 (2.1 %), and 5 sd (±10.3 %) are allowed: a false
    alarm below 1e-6 per check; a variance off by 15 % fails with probability above 0.99, a scale without K or c
    (variance ratio 1/4 or 1/9) always."""
    rng = np.random.default_rng(9)
    frame = people(3000, 2, rng)  # every unit has 2 rows, so with K = 2 all rows count
    fine = parse_schema({"columns": {"age": {"type": "numeric", "lower": 0, "upper": 100, "width": 0.1},
                                     "sex": {"type": "categorical", "values": ["F", "M"]}}})
    # Many cells per release: the release's cost hardly grows with them, and each cell is one more draw.  The
    # ages are whole numbers, so one bin in ten holds about 30 rows: cells out of order would add far more than
    # 10 % to the variance.
    shape = TableShape("age_sex", (fine["age"], fine["sex"]))
    batches = pa.Table.from_pandas(frame, preserve_index=False).to_batches()
    truth = count_tables(batches, [shape], "test", UnitBound("person", 2), SeededBits(0))[0].ravel()
    assert truth.size == 2000 and truth.sum() == 6000
    for k, c in ((2, 1), (2, 3)):
        errors = []
        for seed in range(6):
            result = dphist.release(frame, "1", fine, columns="age,sex", seed=seed, privacy_unit="person",
                                    max_rows_per_unit=k, group_size=c, algorithm="identity")
            errors.append(result.tables["age_sex"]["noisy_count"].to_numpy() - truth)
        errors = np.concatenate(errors)
        table_epsilon = 1 - UNIT_CAP_SHARE
        ratio = np.var(errors) / discrete_laplace_variance(k * c / table_epsilon)
        assert abs(ratio - 1) < 5 * np.sqrt(5.13 / errors.size), (k, c, ratio)
        report = result.report
        assert report["epsilon_spent"] == "1"
        assert Fraction(report["tables"][0]["epsilon_per_row"]) == table_epsilon / (k * c)
        # Each step states its cost for the protected group (the steps add up to the table's epsilon) and the
        # sensitivity in rows of that group, K·c·Δ; the scale is that sensitivity over the step's epsilon.
        steps = report["tables"][0]["steps"]
        assert sum(Fraction(s["epsilon"]) for s in steps) == Fraction(report["tables"][0]["epsilon"]) == table_epsilon
        step, = steps
        assert step["sensitivity"] == k * c and Fraction(step["scale"]) == k * c / Fraction(step["epsilon"])
        assert report["contribution_bounding"]["max_rows_per_unit"] == k
        assert ("group_privacy" in report) == (c > 1)


def test_unit_budget_is_its_own_ledger_account(tmp_path):
    from dphist.publishing.ledger import Ledger
    book = Ledger(tmp_path / "l.sqlite")
    frame = people(50, 2, np.random.default_rng(1))
    dphist.release(frame, "0.5", SCHEMA, columns="age", ledger=book, dataset_id="d", privacy_unit="person",
                   max_rows_per_unit=2)
    dphist.release(frame, "0.25", SCHEMA, columns="age", ledger=book, dataset_id="d")
    spent = {row["unit"]: row["epsilon_spent"] for row in book.status("d")}
    assert spent == {"unit:person": "0.5", "row": "0.25"}
    capped = invoke(["budget", "set", "d", "-e", "0.6", "--privacy-unit", "person", "--ledger",
                     str(tmp_path / "l.sqlite")])
    assert capped.exit_code == 0 and "remaining 0.1" in capped.output, capped.output
    first = invoke(["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"),
                      "-e", "0.2", "-c", "age", "--privacy-unit", "state", "--max-rows-per-unit",
                      "5", "--dataset-id", "d", "--ledger", str(tmp_path / "l.sqlite"), "-o",
                      str(tmp_path / "out")])
    assert first.exit_code == 0  # the census has no 'person': this account is per state, uncapped
    over = invoke(["budget", "set", "d", "-e", "0.3", "--privacy-unit", "state", "--ledger",
                   str(tmp_path / "l.sqlite")])
    assert over.exit_code == 0
    again = invoke(["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"),
                    "-e", "0.2", "-c", "age", "--privacy-unit", "state", "--max-rows-per-unit", "5",
                    "--dataset-id", "d", "--ledger", str(tmp_path / "l.sqlite"), "-o",
                    str(tmp_path / "out2")])
    assert again.exit_code == 3 and not (tmp_path / "out2").exists()


def test_errors_before_reading(tmp_path):
    frame = people(5, 2, np.random.default_rng(2))
    with pytest.raises(UsageError, match="needs --max-rows-per-unit"):
        dphist.release(frame, "1", SCHEMA, columns="age", seed=1, privacy_unit="person")
    with pytest.raises(UsageError, match="needs --privacy-unit"):
        dphist.release(frame, "1", SCHEMA, columns="age", seed=1, max_rows_per_unit=3)
    with pytest.raises(DataError, match="privacy-unit column 'nobody'"):
        dphist.release(frame, "1", SCHEMA, columns="age", seed=1, privacy_unit="nobody", max_rows_per_unit=3)
    args = ["release", str(SAMPLE / "census.csv"), "-s", str(SAMPLE / "census.schema.yaml"), "-e", "1", "-c", "age"]
    missing = invoke([*args, "--privacy-unit", "nosuch", "--max-rows-per-unit", "2", "-o",
                      str(tmp_path / "x")])
    assert missing.exit_code == 1 and "nosuch" in missing.stderr and not (tmp_path / "x").exists()
    ok = invoke([*args, "--privacy-unit", "state", "--max-rows-per-unit", "20", "--seed", "1", "-q", "-a", "identity",
                 "-o", str(tmp_path / "ok")])
    assert ok.exit_code == 0, ok.output
    report = json.loads((tmp_path / "ok" / "report.json").read_text())
    assert report["privacy_unit"] == "one state (all its rows)"
    step = report["tables"][0]["steps"][0]
    # 20 rows per unit: the step costs the whole table's epsilon (49/50 of the run's) for a unit, at sensitivity 20
    # (not 1/20 per row).
    assert report["tables"][0]["epsilon"] == "0.98" and step["epsilon"] == report["tables"][0]["epsilon"]
    assert Fraction(step["scale"]) == 20 / Fraction("0.98") and step["sensitivity"] == 20
