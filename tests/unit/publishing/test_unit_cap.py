"""What a unit cap dropped (dphist/publishing/unit_cap.py, docs/privacy.md §6): the rows kept and the rows dropped
(each unit's counted up to C = M·K) are measured together with the noise of their sensitivity, on a fiftieth of the
budget taken only under a cap; the parts of the budget still add up to what the ledger charges; the share is
estimated with an interval, and the summary and the note on intervals say what it bounds.

Statistical checks use fixed seeds.  A sample variance is compared with the exact variance V of the noise
through mean(x²) (the noise has mean 0 exactly), whose standard deviation is sqrt((μ₄ − V²)/n), μ₄ the exact
fourth moment from the pmf; a band of ±Z_BAND = 5.33 of those sd has a two-sided false-alarm rate of about 1e-7 per
check (normal approximation; n = 200,000 draws, tails at most exponential).  Each check shows that the band excludes
the variance at a scale 10 % off (σ × 0.9 and × 1.1 for the Gaussian): that is the smallest defect it detects with
certainty, and a scale without the clip's 1 + M (a quarter of the scale) or without K is far outside it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist.api import plan_release
from dphist.errors import UsageError
from dphist.privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_pmf, discrete_laplace_pmf,
                            discrete_laplace_variance)
from dphist.publishing.execution import run_plan
from dphist.publishing.ledger import Ledger
from dphist.publishing.planning import table_budget
from dphist.publishing.unit_cap import (DROPPED_NOTICE, EXCESS_CLIP, UNIT_CAP_SHARE, check_dropped_measurement,
                                        dropped_notice, measure_dropped, noisy_sums)
from dphist.read.contribution import UnitBound, UnitRows
from dphist_audit.replication import ReplicatedBudget, ReplicatedZCDPBudget

Z_BAND = 5.33  # P(|N(0, 1)| > 5.33) ≈ 9.8e-8
DRAWS = 100_000  # repetitions of the measurement: 200,000 noisy values

SCHEMA = {"columns": {"grade": {"type": "categorical", "values": ["A", "B", "C"]},
                      "score": {"type": "numeric", "lower": 0, "upper": 100, "bins": 10}}}


def students(rows_per_unit: list[int], seed: int = 0) -> pd.DataFrame:
    """One unit per entry, with that many rows of random grades and scores."""
    rng = np.random.default_rng(seed)
    units = np.repeat([f"s{i}" for i in range(len(rows_per_unit))], rows_per_unit)
    return pd.DataFrame({"student": units, "grade": rng.choice(["A", "B", "C"], units.size),
                         "score": rng.integers(0, 100, units.size)})


def moments(pmf, width: int) -> tuple[float, float]:
    """The exact variance and fourth moment of a symmetric integer noise of ``pmf`` (negligible beyond ``width``)."""
    k = np.arange(-width, width + 1)
    p = pmf(k)
    k = k.astype(np.float64)
    return float(np.sum(k**2 * p)), float(np.sum(k**4 * p))


def band(noise: np.ndarray, var: float, fourth: float) -> tuple[float, float]:
    """mean(noise²) and the half-width of its ±Z_BAND band around ``var``."""
    return float(np.mean(noise.astype(np.float64) ** 2)), Z_BAND * math.sqrt((fourth - var**2) / noise.size)


# ---- the noise ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k, c", [(5, 1), (3, 4)])
def test_laplace_noise_has_the_scale_of_the_clipped_sums_sensitivity(k, c):
    """Pure ε: scale K·c·(1 + M)/ε (a unit moves the pair by at most K + M·K rows, a group of c units c times that);
    200,000 draws of both sums checked against the exact variance (module docstring)."""
    epsilon = Fraction(1, 2)
    budget = ReplicatedBudget(epsilon, SeededBits(11), DRAWS, trace=[], factor=k * c)
    noisy, record = noisy_sums(900, 250, budget, UnitBound("student", k))
    scale = Fraction(k * c * (1 + EXCESS_CLIP)) / epsilon
    assert record.scale == scale and record.sensitivity == k * c * (1 + EXCESS_CLIP) and record.epsilon == epsilon
    assert noisy.shape == (DRAWS, 2) and record.queries == 2
    noise = noisy - np.array([900, 250])
    var, fourth = moments(lambda x: discrete_laplace_pmf(x, float(scale)), 80 * int(scale))
    assert var == pytest.approx(discrete_laplace_variance(scale), rel=1e-9)
    estimate, half = band(noise, var, fourth)
    assert abs(estimate - var) < half, (estimate, var, half)
    for off in (Fraction(9, 10), Fraction(11, 10), Fraction(1, 1 + EXCESS_CLIP), Fraction(1, k)):
        if off != 1:  # (K = 1 would leave the scale as it is)
            assert abs(discrete_laplace_variance(scale * off) - var) > 2 * half  # the check has power
    # The two sums get independent noise (a shared draw would correlate them: |r| < 5.33/√n).
    assert abs(np.corrcoef(noise[:, 0], noise[:, 1])[0, 1]) < Z_BAND / math.sqrt(DRAWS)


def test_gaussian_noise_has_the_variance_of_the_clipped_sums_l2_sensitivity():
    """ρ-zCDP: σ² = (K·c)²·(1 + M²)/(2ρ) (L2 sensitivity √(K² + (M·K)²) per unit); 200,000 draws checked against
    the exact discrete Gaussian variance (module docstring)."""
    k, c, rho = 4, 2, Fraction(1, 5)
    budget = ReplicatedZCDPBudget(rho, SeededBits(12), DRAWS, trace=[], factor=k * c)
    noisy, record = noisy_sums(5000, 1200, budget, UnitBound("student", k))
    sigma2 = Fraction((k * c) ** 2 * (1 + EXCESS_CLIP**2)) / (2 * rho)
    assert record.sigma2 == sigma2 and record.rho == rho and record.l2_squared == (k * c) ** 2 * (1 + EXCESS_CLIP**2)
    noise = noisy - np.array([5000, 1200])
    var, fourth = moments(lambda x: discrete_gaussian_pmf(x, sigma2), 40 * math.isqrt(int(sigma2)))
    estimate, half = band(noise, var, fourth)
    assert abs(estimate - var) < half, (estimate, var, half)
    for off in (Fraction(81, 100), Fraction(121, 100), Fraction(1, 1 + EXCESS_CLIP**2)):
        assert abs(moments(lambda x: discrete_gaussian_pmf(x, sigma2 * off), 40 * math.isqrt(int(sigma2)))[0]
                   - var) > 2 * half


# ---- the budget -----------------------------------------------------------------------------------------------


def test_the_parts_add_up_to_the_charge_and_the_ledger_is_charged_epsilon(tmp_path):
    """Under a cap: tables + the cap's fiftieth = ε exactly, in the plan, the report and the ledger."""
    frame = students([30] * 40 + [5] * 40)
    plan = plan_release(frame, "0.7", SCHEMA, privacy_unit="student", max_rows_per_unit=10)
    assert plan.unit_cap == Fraction(7, 10) * UNIT_CAP_SHARE
    assert sum(plan.budgets, plan.unit_cap) == Fraction(7, 10)
    book = Ledger(tmp_path / "ledger.sqlite")
    result = dphist.release(frame, "0.7", SCHEMA, privacy_unit="student", max_rows_per_unit=10, ledger=book,
                            dataset_id="grades")
    report = result.report
    parts = [Fraction(t["epsilon"]) for t in report["tables"]] + [Fraction(report["unit_cap"]["epsilon"])]
    assert sum(parts) == Fraction(7, 10) and report["epsilon_spent"] == report["epsilon_requested"] == "0.7"
    assert Fraction(report["unit_cap"]["step"]["epsilon"]) == Fraction(7, 10) * UNIT_CAP_SHARE
    (row,) = book.status("grades")
    assert row["unit"] == "unit:student" and row["epsilon_spent"] == "0.7"


def test_with_discovery_the_cap_takes_a_fiftieth_of_what_is_left_and_the_parts_still_add_up():
    frame = students([30] * 400 + [5] * 400)
    result = dphist.release(frame, "50", None, columns="score", seed=3, privacy_unit="student",
                            max_rows_per_unit=10)
    report = result.report
    discovery, (table,), cap = report["discovery"], report["tables"], report["unit_cap"]
    assert Fraction(cap["epsilon"]) == (50 - Fraction(discovery["epsilon"])) * UNIT_CAP_SHARE
    assert Fraction(discovery["epsilon"]) + Fraction(table["epsilon"]) + Fraction(cap["epsilon"]) == 50
    assert report["epsilon_spent"] == "50"


@pytest.mark.parametrize("budget", [{"rho": "0.3"}, {"epsilon": "2", "delta": "1e-7", "noise": "gaussian"}])
def test_under_zcdp_and_epsilon_delta_the_cap_takes_a_fiftieth_of_rho(budget):
    frame = students([30] * 40 + [5] * 40)
    result = dphist.release(frame, schema=SCHEMA, seed=4, privacy_unit="student", max_rows_per_unit=10, **budget)
    report = result.report
    cap = report["unit_cap"]
    rho = Fraction(report["rho_requested"])
    assert Fraction(cap["rho"]) == rho * UNIT_CAP_SHARE and "epsilon" not in cap
    assert sum((Fraction(t["rho"]) for t in report["tables"]), Fraction(cap["rho"])) == rho
    assert report["rho_spent"] == report["rho_requested"]
    step = cap["step"]
    assert step["mechanism"] == "discrete Gaussian"
    assert Fraction(step["sigma2"]) == Fraction(10**2 * (1 + EXCESS_CLIP**2)) / (2 * Fraction(cap["rho"]))
    assert cap["noise_sd"] == pytest.approx(step["noise_sd"])


def test_without_a_cap_nothing_is_taken_and_the_report_has_no_unit_cap():
    frame = students([30] * 40 + [5] * 40)
    plan = plan_release(frame, "1", SCHEMA)
    assert plan.unit_cap is None and sum(plan.budgets) == 1
    release = run_plan(plan)
    report = release.report
    assert "unit_cap" not in report and [t["epsilon"] for t in report["tables"]] == ["0.5", "0.5"]
    steps = [s for t in report["tables"] for s in t["steps"]]
    assert sum(Fraction(s["epsilon"]) for s in steps) == 1  # every step is a table's
    assert not any("unit cap" in note for note in report["notes"]) and "unit cap" not in release.summary()
    # A per-row release of rows that a cap would cut hard says nothing about capping.
    grouped = dphist.release(frame, "1", SCHEMA, seed=1, group_size=3)
    assert "unit_cap" not in grouped.report and "unit cap" not in grouped.summary()


def test_a_probe_too_small_for_exact_noise_is_refused_in_one_line():
    """The plan tries the measurement on its part before reading; a scale past the samplers' 2^40 is refused."""
    with pytest.raises(UsageError) as refused:
        check_dropped_measurement(table_budget(Fraction(1, 10**12), "pure", 10**3), UnitBound("student", 10**3))
    message = str(refused.value)
    assert message.startswith("measuring what --max-rows-per-unit 1000 drops would get epsilon") and "\n" not in message
    check_dropped_measurement(table_budget(Fraction(1, 50), "pure", 20), UnitBound("student", 20))  # fits
    check_dropped_measurement(table_budget(Fraction(1, 500), "zcdp", 20), UnitBound("student", 20))


# ---- the estimate and what is said about it --------------------------------------------------------------------


def entry(share, low, high, k=20, column="student"):
    return {"unit_column": column, "max_rows_per_unit": k, "dropped_rows_counted_up_to": EXCESS_CLIP * k,
            "dropped_share": share, "dropped_share_interval": [low, high]}


def test_the_summary_line_appears_above_the_threshold_and_says_when_the_estimate_cannot_rule_out_none():
    assert dropped_notice(entry(DROPPED_NOTICE, 0.01, 0.09)) is None
    assert dropped_notice(entry(0.01, 0.0, 0.2)) is None
    line = dropped_notice(entry(0.3333, 0.3171, 0.3502))
    assert line == ("the unit cap (20 rows per student) dropped about 33 % of the rows (± 2 %, counting at most 80 rows "
                    "per student); the counts and their intervals are for the capped rows")
    noisy = dropped_notice(entry(0.12, 0.0, 0.41, k=5, column="household"))
    assert noisy == ("the unit cap (5 rows per household) may have dropped rows: about 12 % by an estimate too noisy "
                     "to rule out none (95 % interval 0 to 41 %, counting at most 20 rows per household); the counts "
                     "and their intervals are for the capped rows")


def test_the_estimate_counts_each_units_dropped_rows_up_to_the_clip_and_says_it_is_a_lower_bound():
    """Units of 200 rows at K = 10 drop 190 rows each, of which C = 30 are counted: the estimate is the clipped
    share (a lower bound), far below the true share, and the entry says so.  At ε = 200 the scale is 10·4/4 = 10
    rows, and each noisy sum is within 175 rows of its truth but with probability below 1e-7."""
    frame = students([200] * 200 + [10] * 1000)  # kept 12,000; dropped 38,000, of which 6,000 counted
    result = dphist.release(frame, "200", SCHEMA, columns="grade", seed=5, privacy_unit="student",
                            max_rows_per_unit=10)
    cap = result.report["unit_cap"]
    assert cap["dropped_rows_counted_up_to"] == 30 and cap["max_rows_per_unit"] == 10
    assert Fraction(cap["step"]["scale"]) == 10
    assert abs(cap["rows_kept"] - 12_000) < 175 and abs(cap["rows_dropped"] - 6000) < 175
    low, high = cap["dropped_share_interval"]
    assert 5825 / 18_000 < cap["dropped_share"] < 6175 / 18_000  # the clipped share, 1/3, within the noise
    assert low <= cap["dropped_share"] <= high < 38_000 / 50_000  # far below the true share, 0.76
    assert "lower bound on the share the cap dropped" in cap["estimate"] and "more than 40 rows" in cap["estimate"]
    assert "rows with no student are in neither" in cap["measured"]
    assert any("the cap dropped about 33 %" in note for note in result.report["notes"])
    assert "dropped about 33 % of the rows" in result.summary()


def test_the_interval_covers_the_clipped_share_at_least_95_percent_of_the_time():
    """2,000 seeded measurements at a scale (200 rows) where the interval is wide: it holds the clipped share in at
    least 95 % of them.  Misses are at most Binomial(2000, 0.05) (mean 100, sd 9.7); more than 152 is a false alarm
    below 1e-7.  (The box of two 97.5 % intervals is conservative: these seeds miss 7 times.)  A point estimate
    misses 1,996 times of these 2,000, an interval built from each sum's 50 % interval 848 times: both far past
    152."""
    units = np.repeat(np.arange(300), [60] * 100 + [20] * 200)  # kept 6,000, dropped 4,000: a share of 0.4
    tally = UnitRows()
    tally.add(units)
    truth = 4000 / 10_000
    misses = 0
    for seed in range(2000):
        budget = PrivacyBudget(Fraction(2, 5), bits=SeededBits(seed), factor=20)  # scale 20·4/0.4 = 200
        cap = measure_dropped(tally, budget, UnitBound("student", 20))
        low, high = cap["dropped_share_interval"]
        misses += not low <= truth <= high
    assert misses <= 152, misses


def test_a_cap_that_drops_nothing_is_estimated_near_zero_and_not_announced():
    """Every unit within K: the dropped sum is 0.  At ε = 200 (scale 10 rows) the estimate exceeds the 5 % line only
    if the noise on it passes 105 rows, with probability about e^-10.5 ≈ 3e-5."""
    frame = students([10] * 200)
    result = dphist.release(frame, "200", SCHEMA, columns="grade", seed=6, privacy_unit="student",
                            max_rows_per_unit=10)
    cap = result.report["unit_cap"]
    assert abs(cap["rows_kept"] - 2000) < 175 and abs(cap["rows_dropped"]) < 175
    assert cap["dropped_share"] <= DROPPED_NOTICE and cap["dropped_share_interval"][0] < DROPPED_NOTICE
    assert dropped_notice(cap) is None and "unit cap" not in result.summary()


def test_the_measurement_is_paid_from_the_caps_own_part():
    """The measurement spends exactly its part: a budget of that amount has nothing left."""
    budget = PrivacyBudget(Fraction(1, 50), bits=SeededBits(0), factor=20)
    noisy_sums(10, 0, budget, UnitBound("student", 20))
    assert budget.remaining == 0 and budget.spent == Fraction(1, 50)
    zcdp = ZCDPBudget(Fraction(1, 50), bits=SeededBits(0), factor=20)
    noisy_sums(10, 0, zcdp, UnitBound("student", 20))
    assert zcdp.remaining == 0
