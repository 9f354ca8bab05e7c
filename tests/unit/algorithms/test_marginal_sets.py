"""Marginal sets (dphist/algorithms/marginal_sets.py, dphist/inference/marginals.py): exact agreement under both strategies, one
ε (or ρ: under zCDP too), exact least squares, expected errors that match Monte Carlo and follow the unit bound, and
clear errors."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist import api
from dphist.errors import UsageError
from dphist.algorithms import get_algorithm
from dphist_audit.replication import ReplicatedBudget
from dphist.inference.marginals import check_separable, consistent_marginals, expected_errors, full_table_errors, nonnegative_integer_marginals, shared_subsets
from dphist.algorithms.marginal_sets import derive_marginal, parse_marginals, plan_marginals, union_of
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.privacy.samplers import discrete_gaussian_variance

from conftest import ROOT, SAMPLE
from input_files import WRAP_SCHEMA, write_csv
ADULT_SCHEMA = ROOT / "bench" / "adult.schema.yaml"


def one_way(frame: pd.DataFrame, column: str) -> pd.Series:
    """A marginal table summed down to one column (numeric columns are keyed by their lower edge)."""
    key = column if column in frame else f"{column}_lower"
    return frame.groupby(key, dropna=False)["count"].sum().sort_index()


def check_agreement(tables: dict[str, pd.DataFrame], marginals: list[tuple[str, ...]]) -> None:
    totals = {name: int(t["count"].sum()) for name, t in tables.items()}
    assert len(set(totals.values())) == 1, totals  # one grand total
    for column in union_of(marginals):
        having = [dphist.declare.job.table_name_for(m) for m in marginals if column in m]
        sums = [one_way(tables[name], column) for name in having]
        for other in sums[1:]:
            pd.testing.assert_series_equal(sums[0], other, check_names=False)  # identical 1-D marginals
    for t in tables.values():
        assert (t["count"] >= 0).all() and np.issubdtype(t["count"].dtype, np.integer)


def test_derive_marginal_sums_and_reorders_axes():
    full = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("c", "a")), full.sum(axis=1).T)
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("b",)), full.sum(axis=(0, 2)))
    assert np.array_equal(derive_marginal(full, ("a", "b", "c"), ("a", "b", "c")), full)


def test_parse_marginals():
    assert parse_marginals("age,sex; sex,income") == [("age", "sex"), ("sex", "income")]
    assert parse_marginals([["a"], "b"]) == [("a",), ("b",)]
    assert union_of(parse_marginals("age,sex;income,sex;education")) == ("age", "sex", "income", "education")
    for bad, message in [("", "at least one"), ("a,,b", "column names"), ("a,a", "listed twice"),
                         ("a,b;a,b", "listed twice")]:
        with pytest.raises(UsageError, match=message):
            parse_marginals(bad)


@pytest.mark.parametrize("algorithm", ["identity", "hb", "privelet", "dpcube"])
def test_sample_marginals_full_agree_exactly_and_cost_epsilon_once(algorithm, tmp_path):
    marginals = "age,sex;sex,education;education,marital_status"
    result = dphist.release(SAMPLE / "census.csv", "0.5", SAMPLE / "census.schema.yaml", marginals=marginals,
                            algorithm=algorithm, marginal_strategy="full", ledger=tmp_path / "l.sqlite")
    assert list(result.tables) == ["age_sex", "sex_education", "education_marital_status"]
    check_agreement(result.tables, parse_marginals(marginals))
    report = result.report
    assert report["epsilon_spent"] == "0.5"
    full = report["marginals"]["full_table"]
    assert report["marginals"]["strategy"] == "full" and report["marginals"]["chosen_by"] == "requested"
    assert full["columns"] == ["age", "sex", "education", "marital_status"]
    assert sum(float(s["epsilon"]) for s in full["steps"]) == pytest.approx(0.5)
    assert all(t["derived_from"] == full["name"] for t in report["tables"])


def test_sample_marginals_separate_agree_exactly_and_split_epsilon(tmp_path):
    marginals = "age,sex;sex,education;education,marital_status;age"
    result = dphist.release(SAMPLE / "census.csv", "0.5", SAMPLE / "census.schema.yaml", marginals=marginals,
                            marginal_strategy="separate", ledger=tmp_path / "l.sqlite")
    check_agreement(result.tables, parse_marginals(marginals))
    report = result.report
    assert report["epsilon_spent"] == "0.5"
    assert [t["epsilon"] for t in report["tables"]] == ["0.125"] * 4
    steps = [s for t in report["tables"] for s in t["steps"]]
    assert len(steps) == 4 and {s["epsilon"] for s in steps} == {"0.125"}
    assert report["marginals"]["shared_sub_tables"] == [["age"], ["sex"], ["education"]]
    for t in report["tables"]:  # the reported sd is the exact one after consistency
        assert t["expected_cell_sd"] == pytest.approx(
            report["marginals"]["expected_error"]["separate"]["rmse_per_cell"][t["name"]], rel=1e-3)
    # the released age table equals the age marginal of age×sex (a marginal that is a shared sub-table)
    age = result.tables["age"].set_index("age_lower")["count"]
    pd.testing.assert_series_equal(age.sort_index(), one_way(result.tables["age_sex"], "age"), check_names=False)


def test_consistency_is_the_exact_least_squares_estimate():
    """Against a dense GLS solve over the full table, with unequal noise variances per marginal."""
    rng = np.random.default_rng(5)
    axes = ("a", "b", "c", "d")
    full = rng.poisson(20, size=(4, 3, 5, 2)).astype(float)
    marginals = [("a", "b"), ("c", "b"), ("a", "c"), ("d", "c"), ("d",)]
    variances = [4.0, 1.0, 2.0, 9.0, 0.5]
    operators = []
    for m in marginals:
        basis = np.eye(full.size).reshape((full.size,) + full.shape)
        operators.append(np.stack([derive_marginal(e, axes, m).ravel() for e in basis], axis=1))
    noisy = [derive_marginal(full, axes, m) + rng.normal(0, v**0.5, derive_marginal(full, axes, m).shape)
             for m, v in zip(marginals, variances)]
    whitened = np.vstack([op / v**0.5 for op, v in zip(operators, variances)])
    x = np.linalg.lstsq(whitened, np.concatenate([y.ravel() / v**0.5 for y, v in zip(noisy, variances)]),
                        rcond=None)[0]
    ours = consistent_marginals(noisy, marginals, variances)
    for op, mine in zip(operators, ours):
        np.testing.assert_allclose(mine.ravel(), op @ x, atol=1e-8)
    assert not np.allclose(ours[0], noisy[0])  # it did change something


def test_expected_errors_match_monte_carlo():
    """The report's expected squared errors of both strategies against 600 simulated releases each, through the
    identity algorithm's exact sampler.  Each comparison allows 4.5 standard errors: with 2 × 4 comparisons the
    false-alarm rate is below 1e-4 (normal approximation of the mean of 600 squared-error sums).  Identity is not
    data-adaptive: each table's 600 runs are drawn at once on a replicated budget (one repetition draws what a
    plain run draws on the same seed, checked)."""
    rng = np.random.default_rng(11)
    sizes = {"a": 6, "b": 2, "c": 3, "d": 5}
    axes = tuple(sizes)
    full = rng.poisson(4, size=tuple(sizes.values()))
    marginals = [("a", "b"), ("b", "c"), ("a", "c"), ("d", "c")]
    truth = [derive_marginal(full, axes, m) for m in marginals]
    epsilon = Fraction(1, 2)
    identity = get_algorithm("identity")
    plan = plan_marginals(marginals, sizes, epsilon, "identity", "auto")
    names = ["_".join(m) for m in marginals]
    cells = [t.size for t in truth]
    reported = {s: np.array([plan.expected[s]["rmse_per_cell"][n] ** 2 * c for n, c in zip(names, cells)])
                for s in ("full", "separate")}

    def runs(table, amount, seed, reps):
        """``reps`` runs of identity on ``table`` at once: the estimates (a leading axis of runs)."""
        return identity.run(table, ReplicatedBudget(amount, SeededBits(seed), reps, []))

    plain = identity.run(full, PrivacyBudget(epsilon, bits=SeededBits(7)))
    assert np.array_equal(plain.values, runs(full, epsilon, 7, 1).values[0])
    separate = [runs(t, epsilon / 4, 1000 + i, 600) for i, t in enumerate(truth)]
    whole = runs(full, epsilon, 5000, 600).values
    errors = {"separate": [], "full": []}
    for rep in range(600):
        consistent = consistent_marginals([e.values[rep] for e in separate], marginals,
                                          [float(e.variance.flat[0]) for e in separate])
        errors["separate"].append([((y - t) ** 2).sum() for y, t in zip(consistent, truth)])
        errors["full"].append([((derive_marginal(whole[rep], axes, m) - t) ** 2).sum()
                               for m, t in zip(marginals, truth)])
    for strategy, sums in errors.items():
        sums = np.array(sums)
        mean, se = sums.mean(axis=0), sums.std(axis=0, ddof=1) / len(sums) ** 0.5
        assert np.all(np.abs(mean - reported[strategy]) < 4.5 * se + 1e-3 * reported[strategy]), (strategy, mean,
                                                                                                  reported[strategy])
    assert reported["separate"].sum() < reported["full"].sum()
    # auto under pure ε takes the Laplace residual plan here: its expected error is below both
    assert plan.strategy == "residual" and plan.expected["residual"]["total"] < reported["separate"].sum()


def test_nonnegative_integers_keep_agreement_on_noisy_sparse_marginals():
    rng = np.random.default_rng(3)
    axes = ("a", "b", "c")
    full = (rng.random((12, 7, 5)) < 0.1) * rng.poisson(2, (12, 7, 5))
    marginals = [("a", "b"), ("b", "c"), ("c", "a"), ("b",)]
    truth = [derive_marginal(full, axes, m) for m in marginals]
    noisy = [t + rng.laplace(0, 8, t.shape) for t in truth]
    estimates = consistent_marginals(noisy, marginals, [128.0] * 4)
    assert min(e.min() for e in estimates) < -5  # the test exercises negative estimates
    counts = nonnegative_integer_marginals(estimates, marginals)
    assert all(c.dtype == np.int64 and c.min() >= 0 and c.shape == e.shape for c, e in zip(counts, estimates))
    ab, bc, ca, b = counts
    assert ab.sum() == bc.sum() == ca.sum() == b.sum()
    assert np.array_equal(ab.sum(axis=0), bc.sum(axis=1)) and np.array_equal(ab.sum(axis=0), b)
    assert np.array_equal(ab.sum(axis=1), ca.sum(axis=0)) and np.array_equal(bc.sum(axis=0), ca.sum(axis=1))
    # Clipping the negative mass is the least any non-negative table moves; keeping the sums moves as much mass
    # again out of positive cells, and rounding adds less than one per cell.
    for c, e in zip(counts, estimates):
        assert np.abs(c - e).mean() <= 2 * np.maximum(-e, 0).mean() + 1
    assert sum(np.abs(c - t).sum() for c, t in zip(counts, truth)) < sum(
        np.abs(e - t).sum() for e, t in zip(estimates, truth))  # on a sparse table, much nearer the truth


def test_two_fixed_margins_give_the_l1_closest_integer_table():
    """Brute force over every non-negative integer 2×3 table with the fixed margins of a small case."""
    rng = np.random.default_rng(8)
    for _ in range(20):
        a = rng.normal(2, 2.5, size=2)
        b = rng.normal(1.5, 2, size=3)
        ab = rng.normal(1, 2, size=(2, 3))
        estimates = consistent_marginals([a, b, ab], [("a",), ("b",), ("a", "b")], [1.0, 1.0, 1.0])
        fixed_a, fixed_b, table = nonnegative_integer_marginals(estimates, [("a",), ("b",), ("a", "b")])
        best = min(
            np.abs(np.array(c).reshape(2, 3) - estimates[2]).sum()
            for c in itertools.product(*[range(min(fixed_a[i], fixed_b[j]) + 1) for i in range(2) for j in range(3)])
            if np.array_equal(np.array(c).reshape(2, 3).sum(1), fixed_a)
            and np.array_equal(np.array(c).reshape(2, 3).sum(0), fixed_b))
        assert np.abs(table - estimates[2]).sum() == pytest.approx(best)


def test_separate_refuses_three_fixed_margins_and_auto_falls_back():
    cyclic = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b", "c")]
    assert shared_subsets(cyclic)[0] == () and ("a", "b") in shared_subsets(cyclic)
    assert "three fixed margins" in check_separable(cyclic)
    assert check_separable([("a", "b"), ("b", "c"), ("c", "a")]) is None
    sizes = {"a": 3, "b": 3, "c": 3}
    with pytest.raises(UsageError, match="does not apply"):
        plan_marginals(cyclic, sizes, Fraction(1), "identity", "separate")
    # Under pure ε the Laplace residual plan applies to any set (here it finds the full table itself: the set
    # holds abc, measured alone at ε); auto keeps full unless residual is strictly lower ...
    auto = plan_marginals(cyclic, sizes, Fraction(1), "identity", "auto")
    assert auto.strategy == "full" and auto.expected["full"]["total"] <= auto.expected["residual"]["total"]
    assert plan_marginals(cyclic, sizes, Fraction(1), "identity", "auto", "has 5 columns").strategy == "residual"
    # ... and at an ε where only one table at all of ε fits the sampler (scale 2^39; 2^40 at most), the
    # residual plan can do no better than full or separate, and auto falls back as before.
    tiny = Fraction(1, 2**39)
    auto = plan_marginals(cyclic, sizes, tiny, "identity", "auto")
    assert auto.strategy == "full" and "separate does not apply" in auto.chosen_by
    wide = plan_marginals([("a", "b"), ("b", "c")], sizes, tiny, "identity", "auto", "has 5 columns")
    assert wide.strategy == "separate" and "full does not apply" in wide.chosen_by
    assert wide.expected["residual"]["total"] == wide.expected["separate"]["total"]  # equal shares: the same
    # Neither full nor separate: the residual plan releases the set (no refusal with identity) ...
    assert plan_marginals(cyclic, sizes, tiny, "identity", "auto", "has 5 columns").strategy == "residual"
    hb = plan_marginals([("a", "b"), ("b", "c")], sizes, Fraction(1), "hb", "auto")
    assert hb.strategy == "full" and "identity" in hb.chosen_by
    # ... but with another algorithm it does not apply.
    with pytest.raises(UsageError, match="cannot be released together"):
        plan_marginals(cyclic, sizes, Fraction(1), "hb", "auto", "has 5 columns")


def test_five_columns_are_measured_table_by_table(tmp_path):
    """Three 3-way marginals over five columns: no full table (at most four columns), so auto measures tables:
    the Laplace residual plan, below separate; separate on request."""
    marginals = "age,sex,income;marital_status,sex,income;education,income"
    kwargs = dict(marginals=marginals, seed=2)
    result = dphist.release(SAMPLE / "census.csv", "1", SAMPLE / "census.schema.yaml", **kwargs)
    block = result.report["marginals"]
    assert block["strategy"] == "residual"
    assert block["expected_error"]["residual"]["total"] < block["expected_error"]["separate"]["total"]
    check_agreement(result.tables, parse_marginals(marginals))
    result = dphist.release(SAMPLE / "census.csv", "1", SAMPLE / "census.schema.yaml", marginal_strategy="separate",
                            **kwargs)
    assert result.report["marginals"]["strategy"] == "separate"
    check_agreement(result.tables, parse_marginals(marginals))
    with pytest.raises(UsageError, match="full does not apply"):
        dphist.release(SAMPLE / "census.csv", "1", SAMPLE / "census.schema.yaml", marginal_strategy="full", **kwargs)


def test_expected_errors_closed_forms():
    sizes = {"a": 10, "b": 4, "c": 7}
    # Nothing shared but the total: each marginal n_i·v, less the share of the total it gives up.
    alone = expected_errors([("a",)], sizes, [2.0])
    assert alone == pytest.approx([20.0])
    # Equal variances: the total error is v times the number of free parameters of the set.
    pairs = [("a", "b"), ("b", "c")]
    free = 1 + 9 + 3 + 6 + 9 * 3 + 3 * 6
    assert sum(expected_errors(pairs, sizes, [3.0, 3.0])) == pytest.approx(3.0 * free)
    assert full_table_errors(pairs, sizes, 2.0) == [560.0, 560.0]


@pytest.mark.parametrize("strategy", ["full", "separate"])
def test_adult_marginals_agree(shared_real, tmp_path, strategy):
    """The issue's check on the Adult table: {age×sex, sex×income, age×income, education×income}."""
    marginals = "age,sex;sex,income;age,income;education_num,income"
    result = dphist.release(shared_real / "adult.csv", "1", ADULT_SCHEMA, marginals=marginals,
                            marginal_strategy=strategy, ledger=tmp_path / "l.sqlite")
    check_agreement(result.tables, parse_marginals(marginals))
    truth = pd.read_csv(shared_real / "adult.csv")
    assert abs(int(result.tables["age_sex"]["count"].sum()) - len(truth)) < 0.01 * len(truth)
    expected = result.report["marginals"]["expected_error"]
    assert expected["separate"]["total"] < expected["full"]["total"] / 2  # k = 4 small marginals of a big table


# ---- under a zCDP budget --------------------------------------------------------------------------------------------


def test_marginal_sets_under_zcdp_agree_on_shared_sub_marginals():
    sizes = {"a": 4, "b": 3, "c": 5}
    marginals = [("a", "b"), ("b", "c"), ("a",)]
    rho = Fraction(1, 2)
    x = np.random.default_rng(3).integers(0, 20, (4, 3, 5))
    budget = ZCDPBudget(rho, bits=SeededBits(9))
    parts = budget.split([1] * len(marginals))
    estimates = [get_algorithm("identity").run(derive_marginal(x, ("a", "b", "c"), m), part)
                 for m, part in zip(marginals, parts)]
    assert budget.spent == rho and all(m.l2_squared == 1 for m in budget.measurements)
    variances = [float(e.variance.flat[0]) for e in estimates]
    assert variances == [discrete_gaussian_variance(3 / (2 * rho))] * 3  # σ² = k/(2ρ)
    ab, bc, a = consistent_marginals([e.values for e in estimates], marginals, variances)
    assert np.allclose(ab.sum(axis=0), bc.sum(axis=1), rtol=0, atol=1e-9)
    assert np.allclose(ab.sum(axis=1), a, rtol=0, atol=1e-9)
    # the plan compares the strategies with Gaussian variances
    plan = plan_marginals(marginals, sizes, rho, "identity", "auto", noise="gaussian")
    full = 60 * discrete_gaussian_variance(1 / (2 * rho))
    assert plan.expected["full"]["total"] == pytest.approx(3 * full, rel=1e-3)
    sep = sum(expected_errors(marginals, sizes, [discrete_gaussian_variance(3 / (2 * rho))] * 3))
    assert plan.expected["separate"]["total"] == pytest.approx(sep, rel=1e-3)
    # auto under zCDP takes the residual bases, whose total is the least of the three
    assert plan.strategy == "residual" and plan.chosen_by.startswith("auto: residual")
    assert plan.expected["residual"]["total"] <= min(sep, 3 * full) * (1 + 1e-3)
    assert plan_marginals(marginals, sizes, rho, "identity", "separate", noise="gaussian").strategy == "separate"
    pure = plan_marginals(marginals, sizes, rho, "identity", "auto")
    assert pure.expected["separate"]["total"] > plan.expected["separate"]["total"]  # Laplace: k² not k


# ---- cell counts beyond int64 ---------------------------------------------------------------------------------------


def test_marginals_whose_full_table_wraps_int64_do_not_take_the_full_strategy(tmp_path):
    (tmp_path / "s.yaml").write_text(WRAP_SCHEMA)
    data = write_csv(tmp_path / "d.csv", "a,b,c,d", ["1,2,3,4"])
    with pytest.raises(UsageError, match="cells"):
        api.plan_release(data, 1, tmp_path / "s.yaml", marginals="a,b;c,d", marginal_strategy="full")


# ---- privacy units --------------------------------------------------------------------------------------------------


def test_marginal_expected_errors_account_for_the_unit_bound():
    """With K rows per unit the noise scale is K times larger, and every expected error in the report follows
    (full: scale 1/ε → K/ε; separate with 2 marginals: 2/ε → 2K/ε).  Under the unit cap the tables get 49/50 of ε
    (a fiftieth measures what the cap dropped), so the rows are released at ε = 0.98 to compare."""
    kwargs = dict(marginals="age,sex;sex,income", seed=1)
    schema = SAMPLE / "census.schema.yaml"
    rows = dphist.release(SAMPLE / "census.csv", "0.98", schema, **kwargs).report["marginals"]["expected_error"]
    units = dphist.release(SAMPLE / "census.csv", "1", schema, privacy_unit="state", max_rows_per_unit=3,
                           **kwargs).report["marginals"]["expected_error"]
    for strategy, scale in (("full", 1), ("separate", 2)):
        ratio = (discrete_laplace_variance(3 * scale) / discrete_laplace_variance(scale)) ** 0.5
        for name, rmse in rows[strategy]["rmse_per_cell"].items():
            assert units[strategy]["rmse_per_cell"][name] == pytest.approx(ratio * rmse, rel=2e-3)
