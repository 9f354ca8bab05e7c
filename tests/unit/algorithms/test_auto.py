"""`--algorithm auto` (dphist/algorithms/auto/choice.py): the choice reads only public facts and one noisy total, the parts
add up to ε, and the rule table is used as written: one per workload (cells, ranges, marginals), followed as
written, with the workload a table's columns imply by default.  Under a zCDP budget auto reads no data and spends
exactly ρ."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from dphist import release
from dphist.algorithms import REGISTRY, get_algorithm
from dphist.algorithms.auto.choice import (BASELINES, SEQUENCE_ONLY, WORKLOADS, Auto, choose_gaussian, default_workload,
                                          nearest_rule, signal_baseline)
from dphist.algorithms.auto.rules import BASELINE_SIGNAL, RULES as ALL_RULES
from dphist_audit.replication import NoisePool, PooledBudget

RULES = ALL_RULES["ranges"]  # the default workload of ordered columns
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.declare.schema import parse_schema
from dphist.inference.measurements import total_measurement


def test_rule_tables_are_complete_and_name_real_algorithms():
    for workload, rules in ALL_RULES.items():
        assert {d for d, _ in rules} == {1, 2}, workload
        for (dims, cells), decades in rules.items():
            assert sorted(decades) == list(range(min(decades), max(decades) + 1))  # no gaps
            for algorithm, regret, datasets, several, baseline in decades.values():
                assert algorithm in REGISTRY and algorithm != "auto" and baseline in ("identity", "hb")
                get_algorithm(algorithm).check_shape((cells,) if dims == 1 else (int(cells ** 0.5),) * 2)
                get_algorithm(several).check_shape((8, 8))  # the choice for a one-column rule met by slices
                assert regret >= 1 and datasets >= 5


def test_nearest_rule_clips_and_picks_the_nearest_size():
    sizes = sorted(c for d, c in RULES if d == 1)
    low, high = min(RULES[(1, sizes[-1])]), max(RULES[(1, sizes[-1])])
    assert nearest_rule(RULES, 1, 10 ** 9, 1e-3)[3:] == ((1, sizes[-1]), low)  # tiny signal: lowest decade
    assert nearest_rule(RULES, 1, 10 ** 9, 1e30)[3:] == ((1, sizes[-1]), high)
    assert nearest_rule(RULES, 1, sizes[0], 1e4)[3] == (1, sizes[0])
    assert nearest_rule(RULES, 5, 10 ** 6, 1e4)[3][0] == 2  # more columns than learned: the 2-D rules
    size, = [c for c in sizes if c == 256] or [sizes[0]]
    assert nearest_rule(RULES, 1, size, 10 ** 4.4)[4] == 4 and nearest_rule(RULES, 1, size, 10 ** 4.6)[4] == 5


def test_budget_parts_add_up_and_the_total_gets_its_share():
    counts = np.random.default_rng(0).poisson(30, 512)
    for eps in (Fraction(1, 10), Fraction(1), Fraction(3, 7)):
        budget = PrivacyBudget(eps, bits=SeededBits(1))
        Auto().run(counts, budget)
        steps = budget.measurements
        assert sum(m.epsilon for m in steps) == eps == budget.spent
        assert steps[0].epsilon == eps / 20 and steps[0].scale == 20 / eps and steps[0].sensitivity == 1
        # DPCube and the k-d tree take their block size from auto's total instead of measuring another.
        assert sum("table's total" in m.what or "grand total" in m.what for m in steps) == 1


def test_a_table_of_categorical_columns_only_gets_identity_without_a_total():
    schema = parse_schema({"columns": {"sex": {"type": "categorical", "values": ["F", "M"]},
                                       "state": {"type": "categorical", "values": [f"s{i}" for i in range(5)]}}})
    budget = PrivacyBudget(Fraction(1, 3), bits=SeededBits(2))
    estimate = Auto().run(np.arange(10).reshape(2, 5), budget, columns=(schema["sex"], schema["state"]))
    assert estimate.structure["algorithm"] == "identity" and "noisy_total" not in estimate.choices["algorithm_choice"]
    record, = budget.measurements
    assert record.what == "every cell" and record.epsilon == Fraction(1, 3) and record.queries == 10


@pytest.mark.parametrize("runs", [pytest.param(3000, marks=pytest.mark.time_limit(15)),  # ~4 s alone
                                  pytest.param(20_000, marks=pytest.mark.slow)])
def test_noise_on_the_total_has_the_stated_variance(runs):
    """``runs`` runs of the total measurement: sample variance within 5 sd of the exact discrete Laplace variance
    at scale 1/(ε/20).  The sample variance's relative sd is sqrt((kurtosis - 1)/runs) (kurtosis 6): 4.1 % at
    3,000 runs, 1.6 % at 20,000, so the bound is ±20 % and ±7.9 %, a false alarm below 1e-6 per check (fixed
    seed).  A variance off by 30 % (a scale 14 % too large or 16 % too small) at 3,000 runs, by 12 % at 20,000,
    fails with probability above 0.99.  Auto is data-adaptive, so each run is a whole run on its own budget; the
    budgets draw from one pool of exact discrete Laplace noise (the audit's: a plain budget's distribution, drawn
    in bulk); a run's trace holds the noisy total, the first value drawn."""
    eps = Fraction(1, 2)
    pool, totals = NoisePool(SeededBits(7)), []
    for _ in range(runs):
        trace: list = []
        Auto().run(np.array([3, 1, 4, 1, 5, 9, 2, 6]), PooledBudget(eps, pool=pool, trace=trace))
        assert trace[0].what.startswith("the table's total")
        totals.append(trace[0].values)
    totals = np.array(totals) - 31
    expected = discrete_laplace_variance(Fraction(20) / eps)
    assert abs(totals.var() / expected - 1) < 5 * (5 / totals.size) ** 0.5
    assert abs(totals.mean()) < 5 * (expected / totals.size) ** 0.5


def test_choice_reads_the_data_only_through_the_noisy_total():
    """Tables of the same shape and total, released with the same noise stream, get the same choice and the
    same noisy total, however their cells differ."""
    rng = np.random.default_rng(3)
    for eps in (Fraction(1, 100), Fraction(1, 10), Fraction(1), Fraction(10)):
        a = rng.poisson(40, 1024)
        b = rng.multinomial(int(a.sum()), np.full(1024, 1 / 1024))
        b[0] += 0  # same total by construction
        chosen = [Auto().run(x, PrivacyBudget(eps, bits=SeededBits(11))).choices["algorithm_choice"] for x in (a, b)]
        assert chosen[0]["chosen"] == chosen[1]["chosen"] and chosen[0]["noisy_total"] == chosen[1]["noisy_total"]


def test_choice_follows_the_rule_table_from_low_to_high_signal():
    auto = Auto()
    for (dims, cells), decades in RULES.items():
        shape = (cells,) if dims == 1 else (int(round(cells ** 0.5)),) * 2
        for dec, (algorithm, *_) in decades.items():
            choice = auto.choose(shape, Fraction(1), 10.0 ** dec)
            # (where the rule names a baseline, hdmm may stand in for it: test_hdmm_replaces_a_baseline_...)
            assert choice.get("instead_of", choice["chosen"]) == algorithm, (dims, cells, dec)
            assert "instead_of" not in choice or choice["chosen"] == "hdmm" and algorithm in BASELINES
            assert f"1e{dec}" in choice["reason"]


def test_categorical_columns_are_slices_and_all_categorical_gets_identity():
    schema = parse_schema({"columns": {
        "age": {"type": "numeric", "lower": 0, "upper": 4096, "bins": 4096},
        "sex": {"type": "categorical", "values": ["F", "M"]},
        "state": {"type": "categorical", "values": [f"s{i}" for i in range(50)]}}})
    auto = Auto()
    only_categories = auto.choose((2, 50), Fraction(1), 1e6, (schema["sex"], schema["state"]))
    assert only_categories["chosen"] == "identity" and "categorical" in only_categories["reason"]
    # age x sex at total T is two slices of 4096 cells with T/2 records each.
    # A rule whose algorithm takes one column only gives way to its best algorithm for several columns.
    for dec, (algorithm, _, _, several, _) in RULES[(1, 4096)].items():
        mixed = auto.choose((4096, 2), Fraction(1), 2 * 10.0 ** dec, (schema["age"], schema["sex"]))
        assert "per slice of the 2 categories" in mixed["reason"]
        try:
            get_algorithm(algorithm).check_shape((4096, 2))
            refused = algorithm in SEQUENCE_ONLY  # DAWA would run the curve across the categories
        except UsageError:
            refused = True
        if refused:
            assert mixed["chosen"] == several != algorithm and "cannot take a table of shape" in mixed["reason"]
        else:
            assert mixed["chosen"] == algorithm


def test_a_choice_that_cannot_take_the_shape_falls_back_to_hb(monkeypatch):
    import dphist.algorithms.auto.choice as auto_module
    monkeypatch.setattr(auto_module, "RULES", {"ranges": {(1, 16): {2: ("noisefirst", 1.0, 5)}}})
    choice = Auto().choose((4, 4), Fraction(1), 100.0)
    assert choice["chosen"] == "hb" and "noisefirst cannot take a table of shape (4, 4)" in choice["reason"]
    assert Auto().choose((16,), Fraction(1), 100.0)["chosen"] == "noisefirst"


def test_release_reports_the_choice_and_spends_exactly_epsilon(tmp_path):
    rng = np.random.default_rng(5)
    import pandas as pd
    frame = pd.DataFrame({"x": rng.integers(0, 256, 20_000), "g": rng.choice(["a", "b", "c"], 20_000)})
    schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 256, "bins": 256},
                          "g": {"type": "categorical", "values": ["a", "b", "c"]}}}
    result = release(frame, "0.7", schema, tables=[{"name": "x", "columns": ["x"]},
                                                   {"name": "g", "columns": ["g"]},
                                                   {"name": "xg", "columns": ["x", "g"]}], seed=1)
    report = json.loads(json.dumps(result.report))
    assert report["epsilon_spent"] == "0.7"
    by_name = {t["name"]: t for t in report["tables"]}
    assert by_name["g"]["algorithm"] == "identity"
    for t in report["tables"]:
        choice = t["algorithm_choice"]
        assert choice["by"] == "auto" and choice["chosen"] == t["algorithm"] and choice["reason"]
        assert sum(Fraction(s["epsilon"]) for s in t["steps"]) == Fraction(7, 30)
        if t["name"] == "g":
            # Every column categorical: identity whatever the total, so no total is measured and all of the
            # table's ε goes to the cells.
            assert "noisy_total" not in choice and [s["what"] for s in t["steps"]] == ["every cell"]
            continue
        assert abs(choice["noisy_total"] - 20_000) < 2_000  # scale 1/(0.7/3/20) ≈ 86: 23 sd
        assert t["steps"][0]["what"].startswith("the table's total")
    assert "(auto)" in result.summary()


def test_named_algorithm_and_marginals_are_not_auto():
    import pandas as pd
    frame = pd.DataFrame({"x": np.arange(1000) % 16, "y": np.arange(1000) % 4})
    schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 16, "bins": 16},
                          "y": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4}}}
    named = release(frame, 1, schema, columns=["x"], algorithm="hb", seed=1).report["tables"][0]
    assert named["algorithm"] == "hb" and "algorithm_choice" not in named
    sets = release(frame, 1, schema, marginals="x;y", seed=1).report
    # a marginal set's tables are measured by its strategy (identity's cells, or residual bases), never auto's
    assert all(t["algorithm"] in ("identity", "residual") and "algorithm_choice" not in t for t in sets["tables"])


@pytest.mark.parametrize("total_share", ["0", "1", "abc"])
def test_bad_total_share_is_a_usage_error(total_share):
    from dphist.errors import UsageError
    with pytest.raises(UsageError, match="total_share"):
        get_algorithm("auto", total_share=total_share)


def test_a_tree_choice_is_refitted_with_the_noisy_total_and_nothing_more_is_measured():
    """Where auto runs a tree (hb here), its N̂ joins the tree's least squares as a measurement of the root: the
    released values are exactly the fit of the traced noisy values (N̂ as the root, the levels as drawn), no
    measurement is added, and the parts still add up to ε."""
    from dphist.inference.nonnegative import tree_least_squares
    from dphist.algorithms.strategies.trees import product_tree

    x = np.random.default_rng(8).poisson(300, 4096)
    trace: list = []
    budget = PrivacyBudget(Fraction(1, 10), bits=SeededBits(12), trace=trace)
    estimate = Auto().run(x, budget)
    choice = estimate.choices["algorithm_choice"]
    assert choice["chosen"] == "hb" and "root" in choice["noisy_total_reused"]
    assert budget.spent == Fraction(1, 10) and len(budget.measurements) == len(trace)
    assert [m.what for m in budget.measurements][0].startswith("the table's total")
    tree = product_tree((4096,), estimate.structure["branching"])
    noisy, variances = [None] * tree.levels, [np.inf] * tree.levels
    for level, (draw, record) in enumerate(zip(trace, budget.measurements)):
        noisy[level] = np.atleast_1d(draw.values)  # level 0: N̂; then the tree's levels 1, 2, …
        variances[level] = record.noise_variance
    assert np.allclose(estimate.values, tree_least_squares(tree, noisy, variances).values[-1], rtol=0, atol=1e-6)
    assert estimate.structure["root_also_from"] == "an earlier noisy total (least squares)"


@pytest.mark.parametrize("shape, chosen", [((4096,), "dawa"), ((64, 64), "dpcube")])
def test_a_data_adaptive_choice_is_refitted_with_the_noisy_total(shape, chosen, monkeypatch):
    """DAWA and DPCube (data-adaptive choices at low signal in 1-D and 2-D) take N̂ into their least squares too:
    auto's values are exactly the chosen algorithm's run on the same noise, refitted by its own ``refit`` with N̂
    and N̂'s variance; nothing more is measured, ε is spent exactly, and the report says where N̂ went."""
    import dphist.algorithms.auto.choice as auto_module
    monkeypatch.setattr(auto_module, "RULES", {"ranges": {(len(shape), 4096): {2: (chosen, 1.0, 5, chosen, "hb")}}})
    x = np.zeros(shape, dtype=np.int64)
    x.flat[:50] = 2
    eps = Fraction(1, 10)
    budget = PrivacyBudget(eps, bits=SeededBits(13))
    estimate = Auto().run(x, budget)
    choice = estimate.choices["algorithm_choice"]
    assert choice["chosen"] == chosen
    assert choice["noisy_total_reused"] == f"as {REGISTRY[chosen].total_refit}"
    assert budget.spent == eps
    # the same noise by hand: the total's share, then the chosen algorithm on the rest, then its refit
    again = PrivacyBudget(eps, bits=SeededBits(13))
    share = Auto.options["total_share"][0]
    for_total, rest = again.split([share, 1 - share])
    total, record = for_total.laplace(np.asarray(x.sum()), 1, for_total.amount, "total", composition="one query")
    assert int(total) == choice["noisy_total"]
    algo = Auto().instance(chosen, shape, 1 / rest.scale(1, rest.amount), float(total))
    plain = algo.run(x, rest)
    refit = algo.refit(plain, total_measurement(float(total), record.noise_variance))
    assert np.array_equal(estimate.values, refit.values)
    assert not np.allclose(estimate.values, plain.values)
    assert len(again.measurements) == len(budget.measurements)


def test_auto_runs_dpcube_as_its_rule_table_measured_it():
    """At 1,000 records on 256 × 256 the stand-alone DPCube caps its blocks at 9 cells, raises its split penalty
    to 4.5 and takes the significance cut; auto, whose rules were learned without them (as_learned), runs it with
    16 × 16 blocks, penalty 3 and no significance cut, whatever N̂."""
    eps = Fraction(95, 1000)
    for name in ("dpcube", "kdtree"):
        algo = Auto().instance(name, (256, 256), eps, 1000.0)
        assert algo.params["block"] == 16 and algo.params["penalty"] == 3.0 and algo.params["significance"] == "off"
    alone = get_algorithm("dpcube")
    assert alone.auto_block(1000.0, (256, 256), eps) == (9, 9) and alone.auto_penalty(1000.0, (256, 256), eps) == 4.5
    import dphist.algorithms.auto.choice as auto_module
    rules = {"ranges": {(2, 65536): {2: ("dpcube", 1.0, 5, "dpcube", "hb")}}}
    x = np.zeros((256, 256), dtype=np.int64)
    x[100:110, 40:60] = 5
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(auto_module, "RULES", rules)
        estimate = Auto().run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(3)))
    assert estimate.choices["algorithm_choice"]["chosen"] == "dpcube" and estimate.choices["penalty"] == 3.0
    assert estimate.choices["significance_cut"] is False


def test_auto_runs_a_one_column_dawa_at_low_signal_with_its_low_signal_options():
    """Below N̂·ε = 10^2.5 and 0.2 per cell a 1-D DAWA gets prefix_threshold 1 and fit=nnls (LOW_SIGNAL_OPTIONS),
    and the report says so; at or above either bound, on 2-D grids and for other algorithms, nothing is added.
    The gate reads N̂ and public facts only."""
    from dphist.algorithms.auto.choice import LOW_SIGNAL, LOW_SIGNAL_OPTIONS, LOW_SIGNAL_PER_CELL, low_signal_options

    eps = Fraction(95, 1000)
    low = Auto().instance("dawa", (4096,), eps, 1000.0)  # 95 < 316, 0.023 per cell
    assert low.params["prefix_threshold"] == 1 and low.params["fit"] == "nnls"
    for shape, total in (((4096,), 4000.0), ((256,), 1000.0), ((256, 256), 1000.0)):  # 380; 0.37 per cell; 2-D
        plain = Auto().instance("dawa", shape, eps, total)
        assert plain.params["prefix_threshold"] == Fraction(3, 10) and plain.params["fit"] == "lsq"
    assert low_signal_options("dawa", (4096,), LOW_SIGNAL * 0.999) == LOW_SIGNAL_OPTIONS["dawa"]
    assert low_signal_options("dawa", (4096,), LOW_SIGNAL) == {} and low_signal_options("hb", (4096,), 1.0) == {}
    assert low_signal_options("dawa", (1000,), LOW_SIGNAL_PER_CELL * 1000 * 0.999) == LOW_SIGNAL_OPTIONS["dawa"]
    assert low_signal_options("dawa", (1000,), LOW_SIGNAL_PER_CELL * 1000) == {}
    x = np.zeros(4096, dtype=np.int64)
    x[:100] = 10
    estimate = Auto().run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(1)))
    choice = estimate.choices["algorithm_choice"]
    assert choice["chosen"] == "dawa" and estimate.choices["fit"] == "nnls"
    assert choice["low_signal_options"] == {"prefix_threshold": "1", "fit": "nnls"}
    x[:100] = 1000  # N̂·ε ≈ 9,500
    high = Auto().run(x, PrivacyBudget(Fraction(1, 10), bits=SeededBits(1)))
    assert high.choices.get("fit", "lsq") == "lsq" and "low_signal_options" not in high.choices["algorithm_choice"]


# ---- workloads ------------------------------------------------------------------------------------------------------


SCHEMA = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 256, "bins": 256},
                      "g": {"type": "categorical", "values": ["a", "b", "c"]},
                      "h": {"type": "categorical", "values": ["u", "v"]}}}


def test_every_workload_has_a_complete_rule_table():
    assert set(ALL_RULES) == set(WORKLOADS)
    for workload, table in ALL_RULES.items():
        assert {d for d, _ in table} == {1, 2}, workload
        for decades in table.values():
            assert sorted(decades) == list(range(min(decades), max(decades) + 1))


def test_default_workload_follows_the_columns():
    s = parse_schema({"columns": {**SCHEMA["columns"], "r": {"type": "categorical", "values": ["a", "b"],
                                                               "hierarchy": {"all": ["a", "b"]}}}})
    assert default_workload((s["x"],)) == "ranges"
    assert default_workload((s["g"], s["h"])) == "cells"
    assert default_workload((s["x"], s["g"])) == "ranges"  # ranges along x, single categories along g
    assert default_workload((s["r"],)) == "ranges"  # a declared hierarchy orders the categories
    assert default_workload(None) == "ranges"


def test_auto_follows_the_workloads_rule_table():
    """Each workload's rule as written, except that where a workload's baseline follows the signal per cell
    (cells, marginals) a rule naming identity or hb gives way to the one the signal per cell names."""
    for workload in WORKLOADS:
        auto = Auto(workload=workload)
        for (dims, cells), decades in ALL_RULES[workload].items():
            shape = (cells,) if dims == 1 else (int(round(cells ** 0.5)),) * 2
            for dec, (algorithm, *_) in decades.items():
                choice = auto.choose(shape, Fraction(1), 10.0 ** dec)
                expected = signal_baseline(workload, dims, 10.0 ** dec / cells) if algorithm in BASELINES else None
                assert choice.get("instead_of", choice["chosen"]) == (expected or algorithm), (workload, dims, cells,
                                                                                          dec)
                assert "instead_of" not in choice or workload == "ranges" and choice["chosen"] == "hdmm"
                assert choice["workload"] == workload and choice["reason"].startswith(f"{workload} rule")


def test_baseline_thresholds_are_learned_for_cells_and_marginals_only():
    assert set(BASELINE_SIGNAL) == {"cells", "marginals"}
    for thresholds in BASELINE_SIGNAL.values():
        assert set(thresholds) == {1, 2} and all(-3 <= t <= 2 for t in thresholds.values())


def test_on_cells_the_signal_per_cell_picks_identity_or_hb(monkeypatch):
    """With the cells threshold at 10^-1 records × ε per cell, a 1,024-cell table at ε₁ = 1 gets hb below N̂ =
    102.4 and identity from there on, whatever the rule's baseline says; a rule naming another algorithm is
    followed; two decades whose rules are both baselines leave nothing in doubt, a decade naming another does."""
    import dphist.algorithms.auto.choice as auto_module
    rules = {"cells": {(1, 1024): {1: ("identity", 1.0, 5, "identity", "identity"),
                                   2: ("hb", 1.0, 5, "hb", "hb"), 3: ("privelet", 1.0, 5, "privelet", "identity")}}}
    monkeypatch.setattr(auto_module, "RULES", rules)
    monkeypatch.setattr(auto_module, "BASELINE_SIGNAL", {"cells": {1: -1.0}})
    auto, eps = Auto(workload="cells"), Fraction(1)
    low = auto.choose((1024,), eps, 100.0)
    assert low["chosen"] == "hb" and "signal per cell" in low["reason"] and "0.0977" in low["reason"]
    assert auto.choose((1024,), eps, 103.0)["chosen"] == "identity"  # decade 2's rule says hb
    assert auto.choose((1024,), eps, 1000.0)["chosen"] == "privelet"
    assert auto.choose((1024,), eps, 60.0, total_sd=30.0)["chosen"] == "hb"  # decades 1–2: both baselines
    doubtful = auto.choose((1024,), eps, 1000.0, total_sd=400.0)  # 200–1,800: decades 2–3: privelet or a baseline
    assert doubtful["chosen"] == "identity" and "its baseline identity" in doubtful["reason"]
    # ranges keep the rule table's own baseline: no threshold is learned for them
    monkeypatch.setattr(auto_module, "RULES", {"ranges": rules["cells"]})
    assert Auto(workload="ranges").choose((1024,), eps, 100.0)["chosen"] == "hb"
    assert Auto(workload="ranges").choose((1024,), eps, 10.0)["chosen"] == "identity"


def test_auto_rejects_an_unknown_workload():
    with pytest.raises(UsageError, match="workload"):
        Auto(workload="rows")


# ---- under a zCDP budget --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(64,), (1024,), (4096,), (30, 40)])
def test_auto_under_zcdp_reads_no_data_and_spends_rho(shape):
    rho = Fraction(1, 10)
    runs = []
    for seed, data in [(1, np.zeros(shape, dtype=np.int64)),
                       (2, np.random.default_rng(4).integers(0, 10**5, shape))]:
        budget = ZCDPBudget(rho, bits=SeededBits(seed))
        est = get_algorithm("auto").run(data, budget)
        runs.append((est.structure["algorithm"], est.choices["algorithm_choice"],
                     [(m.what, m.l2_squared, m.sigma2, m.rho) for m in budget.measurements]))
        assert budget.spent == rho
        assert not any("total" in m.what for m in budget.measurements)  # no noisy total
    assert runs[0] == runs[1]
    assert runs[0][0] == choose_gaussian(shape)["chosen"] and runs[0][0] != "identity"


def test_auto_under_zcdp_categorical_is_identity():
    class Col:
        kind, hierarchy = "categorical", ()
    budget = ZCDPBudget(Fraction(1), bits=SeededBits(0))
    est = get_algorithm("auto").run(np.ones((5, 7), dtype=np.int64), budget, columns=[Col(), Col()])
    assert est.structure["algorithm"] == "identity" and budget.spent == 1


def test_a_choice_in_doubt_between_decades_is_the_rules_baseline(monkeypatch):
    """The rule differs between decades 2 (dawa) and 3 (hb): with N̂ = 1,000 at ε = 0.1 (signal 100) auto runs
    dawa when N̂ is exact, and hb, the rule's baseline, when N̂ ± 2 sd reaches decade 3; a rule that is the same on
    every decade in reach is followed whatever the doubt."""
    import dphist.algorithms.auto.choice as auto_module
    rules = {"ranges": {(1, 4096): {2: ("dawa", 1.0, 5, "hb", "hb"), 3: ("hb", 1.0, 5, "hb", "identity")}}}
    monkeypatch.setattr(auto_module, "RULES", rules)
    eps = Fraction(1, 10)
    assert Auto().choose((4096,), eps, 1000.0)["chosen"] == "dawa"
    assert Auto().choose((4096,), eps, 1000.0, total_sd=100.0)["chosen"] == "dawa"  # 800–1,200: decade 2
    doubtful = Auto().choose((4096,), eps, 1000.0, total_sd=2000.0)
    assert doubtful["chosen"] == "hb" and "its baseline hb" in doubtful["reason"]
    rules["ranges"][(1, 4096)][3] = ("dawa", 1.0, 5, "hb", "identity")
    assert Auto().choose((4096,), eps, 1000.0, total_sd=2000.0)["chosen"] == "dawa"


def test_auto_under_zcdp_weighs_hdmm_where_its_strategy_is_at_hand():
    """hdmm's exact average range variance enters the zCDP choice on ordered columns of at most HDMM_AUTO_CELLS
    cells (or cached): it is below Privelet's there and chosen; past the bound without a cache it is not weighed.
    The figure is the integer strategy's own, checked against the dense covariance on 16 cells."""
    from dphist.algorithms.auto.choice import HDMM_AUTO_CELLS, _hdmm_error
    from dphist.algorithms.hdmm import HDMM
    from dphist.algorithms.strategies.range_grams import RangeGram

    small = choose_gaussian((64,))
    assert small["chosen"] == "hdmm" and small["expected"]["hdmm"] < small["expected"]["privelet"]
    assert "hdmm" not in choose_gaussian((4 * HDMM_AUTO_CELLS,))["expected"]
    strategy = HDMM().plan((16,), None, "gaussian").strategy
    a = strategy.factors[0].astype(float)
    covariance = float(strategy.l2_squared) * np.linalg.inv(a.T @ a)
    gram = RangeGram("all_ranges", 16)
    assert _hdmm_error((16,), None, [True]) == pytest.approx(np.sum(gram.dense() * covariance) / gram.queries, rel=1e-9)


def test_auto_under_zcdp_checks_the_budget_its_choice_will_run_on():
    """At the smallest ρ a table may get, auto's zCDP choice (hdmm on 64 cells) is planned at the quantum that
    budget can take, as its run will be: the budget check passes and the run spends exactly ρ."""
    rho = Fraction(1, 2 * 10**12)
    budget = ZCDPBudget(rho, bits=SeededBits(0))
    Auto().check_budget((64,), budget)
    estimate = Auto().run(np.zeros(64, dtype=np.int64), budget)
    assert estimate.structure["algorithm"] == "hdmm" and budget.spent == rho


def test_hdmm_replaces_a_baseline_exactly_where_its_exact_range_variance_is_lower():
    """Pure ε, ranges: where the rule names identity or hb, hdmm runs instead iff its exact average variance per
    range is below the baseline's.  The figures are checked against an independent computation: identity's is
    2·(n + 2)/3 per unit 1/ε² (the mean range length times Var = 2/ε²), and hdmm's from the dense strategy's
    pseudo-inverse over every range."""
    from dphist.algorithms.auto.choice import _baseline_error, _hdmm_error
    from dphist.algorithms.hdmm import HDMM

    for n in (8, 64):
        ranges = np.array([[1.0 if lo <= i < hi else 0.0 for i in range(n)]
                           for lo in range(n) for hi in range(lo + 1, n + 1)])
        assert _baseline_error("identity", (n,), [True]) == pytest.approx(2 * np.mean(ranges.sum(axis=1)))
        strategy = HDMM().plan((n,), None, "laplace").strategy
        a = strategy.factors[0].astype(np.float64)
        covariance = 2.0 * float(strategy.l1) ** 2 * np.linalg.pinv(a.T @ a)
        direct = float(np.mean(np.einsum("qi,ij,qj->q", ranges, covariance, ranges)))
        assert _hdmm_error((n,), None, [True], "laplace") == pytest.approx(direct, rel=1e-9)
    # 8 cells: hdmm's strategy is the identity itself, so the rule's baseline stands; 64: hdmm is 0.71x identity
    small = Auto().choose((8,), Fraction(1), 1e3)
    assert small["chosen"] in BASELINES and "instead_of" not in small
    big = Auto().choose((64,), Fraction(1), 1e4)
    assert big["chosen"] == "hdmm" and big["instead_of"] in BASELINES and "exact average variance" in big["reason"]
    # not for single cells (identity is the best unbiased estimate of each), nor over categorical columns only
    assert Auto(workload="cells").choose((64,), Fraction(1), 1e4)["chosen"] in BASELINES


def test_hdmm_gives_way_to_the_baseline_where_its_measurement_does_not_fit_the_budget(monkeypatch):
    """The choice is made before the budget is known to fit hdmm's step; where it does not (a noise scale past
    the samplers'), the baseline it replaced runs instead, and the report says why."""
    from dphist.algorithms.hdmm import HDMM

    def refuse(self, shape, budget, columns=None):
        raise UsageError("too little")
    monkeypatch.setattr(HDMM, "check_budget", refuse)
    estimate = Auto().run(np.arange(64), PrivacyBudget(Fraction(1), bits=SeededBits(3)))
    choice = estimate.choices["algorithm_choice"]
    assert choice["chosen"] == choice["instead_of"] == estimate.structure["algorithm"]
    assert "does not fit this budget" in choice["reason"]
