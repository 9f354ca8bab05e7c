"""The expected error a release's report states for each table (dphist/evaluation/expected_error.py): of single cells and of
ranges of the table's workload, computed from public facts only: exact RMS for the linear estimates (refitted with a
noisy total where auto does) that a long simulation confirms, simulated mean absolute errors printed only to the
digits their standard error supports, and the typical figure for a data-adaptive algorithm."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dphist import release
from dphist.algorithms import get_algorithm
from dphist.algorithms.auto.rules import TYPICAL
from dphist.evaluation.expected_error import (STABLE_UNITS, expected_errors, figure_text, linear_errors, noise_errors,
                                              range_workload, stable_decimals, stable_round, typical_errors)
from dphist.privacy import PrivacyBudget, SeededBits, discrete_laplace_variance
from dphist.privacy.samplers import discrete_gaussian_variance

from conftest import SAMPLE
from workload_data import WORKLOAD_SCHEMA as SCHEMA, workload_frame as _frame




def test_identity_noise_errors_match_the_exact_variance():
    """Identity at ε: every cell has the discrete Laplace variance v at scale 1/ε, a range of |R| cells |R|·v.
    The simulation is seeded (deterministic).  With 1024 runs over 256 cells the RMS of the cells has a relative
    sd of about 0.2 % and that of the ranges (whose errors within one run share noise, so the runs are the
    samples) about 0.4/√1024 ≈ 1.3 % (measured: 5 % at 64 runs): the 2 % and 7 % bounds are ≥ 5 sd
    (false-alarm rate < 1e-6).  The stated standard error must agree with that spread to within a factor 2."""
    eps = Fraction(1, 2)
    v = discrete_laplace_variance(Fraction(1) / eps)
    figures = noise_errors(get_algorithm("identity"), (256,), None, eps, "pure", repeats=1024, rounded=False)
    assert abs(figures["cells"]["rms"] / v ** 0.5 - 1) < 0.02
    ranges = range_workload((256,), [True])
    lo, hi = ranges.boxes()
    mean_size = float(np.mean(np.prod(np.asarray(hi) - np.asarray(lo), axis=1)))
    assert abs(figures["ranges"]["rms"] / (mean_size * v) ** 0.5 - 1) < 0.07
    assert 0.006 < figures["ranges"]["rms_relative_se"] < 0.03


def test_tree_noise_errors_match_its_own_cell_variance():
    """Hb's estimate states each cell's exact variance; the simulation's cell RMS must agree (32 runs of 4096
    cells, each run's mean over cells sharing noise through the tree: relative sd measured by the stated
    standard error; bound 5 sd of it plus 1 %)."""
    eps = Fraction(1)
    hb = get_algorithm("hb")
    variance = hb.run(np.zeros(4096, dtype=np.int64), PrivacyBudget(eps, bits=SeededBits(0))).variance
    figures = noise_errors(hb, (4096,), None, eps, "pure", repeats=32, rounded=False)
    bound = 5 * figures["cells"]["rms_relative_se"] + 0.01
    assert abs(figures["cells"]["rms"] / float(np.sqrt(np.mean(variance))) - 1) < bound < 0.05


def test_gaussian_noise_errors_match_the_exact_variance():
    rho = Fraction(1, 8)
    figures = noise_errors(get_algorithm("identity"), (1024,), None, rho, "zcdp", repeats=64, rounded=False)
    expected = discrete_gaussian_variance(Fraction(1) / (2 * rho)) ** 0.5
    assert abs(figures["cells"]["rms"] / expected - 1) < 0.02


def test_categorical_axes_get_single_categories_in_the_range_workload():
    ranges = range_workload((256, 3), [True, False])
    lo, hi = (np.asarray(a) for a in ranges.boxes())
    assert np.all(hi[:, 1] - lo[:, 1] == 1) and (hi[:, 0] - lo[:, 0]).max() > 100


def test_expected_errors_read_no_data():
    """A data-independent algorithm's figures are the same for any two tables of one shape and budget."""
    rng = np.random.default_rng(4)
    tables = [rng.poisson(lam, 512) for lam in (0.1, 500)]
    figures = [expected_errors(get_algorithm("privelet"), (512,), None, Fraction(1), "pure", 1, float(t.sum()))
               for t in tables]
    relative = [f["cells"].pop("mean_abs_relative") for f in figures]
    assert figures[0] == figures[1] and figures[0]["cells"]["rms"] > 0
    # beside the absolute error, its share of the mean released cell (released total / cells: a DP output), both
    # rounded to their stable digits (each within half a unit, a unit at most 10 x STABLE_UNITS standard errors)
    for r, t, f in zip(relative, tables, figures):
        mean = t.sum() / 512
        tolerance = 10 * STABLE_UNITS * f["cells"]["mean_abs_se"] / mean
        assert r == pytest.approx(f["cells"]["mean_abs"] / mean, abs=tolerance)


def test_a_data_adaptive_algorithm_gets_the_typical_figure():
    key = next(k for k in sorted(TYPICAL) if k[0] == 1)
    dec = sorted(TYPICAL[key])[0]
    name, (cells, ranges) = sorted(TYPICAL[key][dec].items())[0]
    total = 10.0 ** dec  # ε = 1: the signal decade dec
    figures = typical_errors(name, (key[1],), total, 1.0)
    assert figures["cells"]["mean_abs"] == pytest.approx(cells * total, rel=1e-3)
    assert figures["ranges"]["mean_abs"] == pytest.approx(ranges * total, rel=1e-3)
    assert figures["basis"].startswith("typical, not a bound")
    block = expected_errors(get_algorithm(name), (key[1],), None, Fraction(1), "pure", 1, total)
    assert block["cells"].pop("mean_abs_relative") == pytest.approx(figures["cells"]["mean_abs"] / (total / key[1]),
                                                                     rel=1e-3)
    assert block == figures
    assert typical_errors("no-such-algorithm", (key[1],), total, 1.0) is None


def test_release_reports_workload_and_expected_errors_for_every_table(tmp_path):
    result = release(_frame(), "1", SCHEMA, seed=3, ledger=tmp_path / "l.sqlite",
                     tables=[{"name": "x", "columns": ["x"], "algorithm": "identity"},
                             {"name": "gh", "columns": ["g", "h"]},
                             {"name": "xa", "columns": ["x"], "workload": "cells"}])
    tables = {t["name"]: t for t in result.report["tables"]}
    assert tables["x"]["workload"] == "ranges" and tables["gh"]["workload"] == "cells"
    assert tables["xa"]["workload"] == "cells" and tables["xa"]["algorithm_choice"]["workload"] == "cells"
    for t in tables.values():
        errors = t["expected_error"]
        assert errors["unit"] == "records" and errors["cells"]["mean_abs"] > 0
    # ranges only where a column is ordered: over categorical columns alone a range is a single cell
    assert tables["x"]["expected_error"]["ranges"]["mean_abs"] > 0 and "ranges" not in tables["gh"]["expected_error"]
    assert "no ranges" in tables["gh"]["expected_error"]["basis"] and "per range" not in result.summary().split(
        "gh", 1)[1].splitlines()[0]
    # identity at ε = 1/3 per table (three equal shares): the cell RMS is the discrete Laplace sd at scale 3.
    sd = discrete_laplace_variance(Fraction(3)) ** 0.5
    assert abs(tables["x"]["expected_error"]["cells"]["rms"] / sd - 1) < 0.03


@pytest.mark.parametrize("repeats", [512, pytest.param(1024, marks=pytest.mark.slow)])
def test_the_simulation_refits_with_the_total_where_auto_does(repeats):
    """auto refits a tree with its N̂, so the report's figure simulates that too: ``noise_errors`` with
    ``total_amount`` matches the exact range error of the tree's levels plus the total (the trace oracle), within
    5 of its stated standard errors plus 1 % (false alarm below 1e-6).  The stated standard error is about 1.4 %
    at 512 repeats (1.0 % at 1,024): the band is about ±8 % (±6 %), and a range RMS off by 12 % (8.5 %), a
    variance off by 25 % (18 %), fails with probability above 0.99.  (Here the total moves the exact RMS by 3 %
    only, less than either band.)"""
    from scipy import sparse

    from dphist.evaluation import workloads
    from dphist.algorithms.strategies.trees import product_tree

    eps, eps_total = Fraction(19, 40), Fraction(1, 40)
    hb = get_algorithm("hb")
    figures = noise_errors(hb, (256,), None, eps, "pure", repeats=repeats, total_amount=eps_total, rounded=False)
    budget = PrivacyBudget(eps, bits=SeededBits(0))
    estimate = hb.run(np.zeros(256, dtype=np.int64), budget)
    tree = product_tree((256,), estimate.structure["branching"])
    rows, variances = [], []
    for record in budget.measurements:
        level = int(record.what.split()[2])
        rows.append(sparse.csr_matrix((np.ones(256), (tree.labels(level), np.arange(256))),
                                      shape=(tree.sizes[level], 256)))
        variances.append(np.full(tree.sizes[level], record.noise_variance))
    rows.append(sparse.csr_matrix(np.ones((1, 256))))
    variances.append([discrete_laplace_variance(1 / eps_total)])
    ranges = range_workload((256,), [True])
    exact = workloads.expected_squared_error(ranges, sparse.vstack(rows).tocsr(), np.concatenate(variances))
    bound = 5 * figures["ranges"]["rms_relative_se"] + 0.01
    assert abs(figures["ranges"]["rms"] / (exact / ranges.size) ** 0.5 - 1) < bound < 0.1
    # and the report's exact figure is the oracle's, to rounding
    closed = linear_errors(hb, (256,), None, eps, "pure", total_amount=eps_total, repeats=64)
    assert closed["ranges"]["rms"] == pytest.approx((exact / ranges.size) ** 0.5, abs=6e-5)


def test_an_auto_tree_release_reports_the_refitted_figure(tmp_path, monkeypatch):
    import dphist.algorithms.auto.choice as choice_module
    monkeypatch.setattr(choice_module, "_optimised_instead", lambda name, shape, columns: (None, ""))  # keep hb
    result = release(_frame(60_000), "1", SCHEMA, seed=3, ledger=tmp_path / "l.sqlite",
                     tables=[{"name": "x", "columns": ["x"]}])
    table, = result.report["tables"]
    choice = table["algorithm_choice"]
    assert choice["chosen"] in ("h", "hb", "quadtree") and "noisy_total_reused" in choice
    total = Fraction(choice["epsilon_for_total"])
    expected = linear_errors(get_algorithm(choice["chosen"]), (256,), None, 1 - total, "pure", total_amount=total)
    assert table["expected_error"]["ranges"] == expected["ranges"]
    assert "refitted with a noisy total" in table["expected_error"]["basis"]
    # the refitted estimate's own cell variances are the exact ones: the report's two figures agree
    assert table["expected_cell_sd"] == table["expected_error"]["cells"]["rms"]


def test_a_noisy_total_is_refitted_only_under_pure_epsilon():
    with pytest.raises(ValueError, match="pure"):
        noise_errors(get_algorithm("hb"), (16,), None, Fraction(1, 8), "zcdp", total_amount=Fraction(1, 100))


@pytest.mark.parametrize("definition, amount", [("pure", Fraction(1, 3)), ("pure", Fraction(1, 500)),
                                                ("zcdp", Fraction(1, 2)), ("zcdp", Fraction(8)),
                                                ("zcdp", Fraction(1, 2000))])
def test_identity_errors_are_exact(definition, amount):
    """Identity's figures in closed form against 1,500 simulated runs of identity on zeros (16 cells, 2,000
    ranges), for Laplace at small and large scales and the discrete Gaussian below and above σ² = 1: each
    simulated figure lies within 4 of its standard errors of the exact one (false alarm below 1e-4 per figure;
    a mean absolute error off by 15 % or an RMS off by 5 % fails at these sizes), and the cells' RMS is the noise's sd to 4 digits."""
    from dphist.evaluation.expected_error import identity_errors, noise_errors
    from dphist.privacy import ZCDPBudget, discrete_gaussian_variance
    algorithm = get_algorithm("identity")
    exact = expected_errors(algorithm, (16,), None, amount, definition, 1, 0.0)
    assert exact["basis"].startswith("exact, in closed form")
    probe = (PrivacyBudget if definition == "pure" else ZCDPBudget)(amount, bits=SeededBits(0))
    algorithm.run(np.zeros(1, dtype=np.int64), probe)
    record = probe.measurements[0]
    variance = discrete_laplace_variance(record.scale) if definition == "pure" else \
        discrete_gaussian_variance(record.sigma2)
    assert exact["cells"]["rms"] == pytest.approx(variance ** 0.5, abs=1e-4)
    assert identity_errors(record, (16,), None) == {k: v for k, v in exact.items()}
    simulated = noise_errors(algorithm, (16,), None, amount, definition, repeats=1_500, rounded=False)
    for part in ("cells", "ranges"):
        rms_se = simulated[part]["rms_relative_se"] * simulated[part]["rms"]
        assert abs(simulated[part]["rms"] - exact[part]["rms"]) < 4 * rms_se + 1e-9, part
        # mean |error| over runs: its se from the rms (sd of |e| <= rms), over 4,000 independent runs
        assert abs(simulated[part]["mean_abs"] - exact[part]["mean_abs"]) < 4 * exact[part]["rms"] / 1_500 ** 0.5, part


# --------------------------------------------------------------------------------------------------------------
# The linear data-independent algorithms: exact RMS, simulated mean absolute error with stable digits

LINEAR_CASES = [("h", (256,), None), ("h", (200,), Fraction(1, 40)), ("h", (12, 12), None), ("hb", (256,), None),
                ("hb", (300,), Fraction(1, 20)), ("quadtree", (16, 16), None), ("quadtree", (12, 20), Fraction(1, 40)),
                ("hb", (16, 16), Fraction(1, 40)), ("privelet", (256,), None), ("privelet", (16, 24), None)]


@pytest.mark.parametrize("name, shape, total", LINEAR_CASES)
def test_the_exact_rms_matches_a_long_simulation(name, shape, total):
    """h, Hb, the quadtree and Privelet in 1-D and 2-D, with and without auto's refit with a noisy total (ε₀ =
    1/40 or 1/20 of ε = 1): the exact RMS of cells and ranges against 768 plain simulated runs with another seed,
    each within 4 of the simulation's stated standard errors (two-sided false alarm 6e-5 per figure, 2.5e-3 over
    the 40 figures of these cases); and the controlled and plain simulations' mean absolute errors agree within
    4 of their combined standard errors.  A 10 % error in an exact variance (5 % in the RMS) fails: the stated
    relative standard errors here are 0.3-0.8 % for cells, 1-2 % for ranges."""
    algorithm = get_algorithm(name)
    eps = 1 - (total or 0)
    exact = linear_errors(algorithm, shape, None, eps, "pure", total_amount=total, repeats=256, rounded=False)
    plain = noise_errors(algorithm, shape, None, eps, "pure", total_amount=total, repeats=768, seed=99,
                         rounded=False)
    assert exact["basis"].startswith("the noise of the unbiased estimate") and "RMS exact for the cells and ranges" \
        in exact["basis"] and "rms_relative_se" not in exact["cells"]
    for part in ("cells", "ranges"):
        se = plain[part]["rms_relative_se"]
        assert 0 < se < 0.03
        assert abs(plain[part]["rms"] / exact[part]["rms"] - 1) < 4 * se, part
        combined = (plain[part]["mean_abs_se"] ** 2 + exact[part]["mean_abs_se"] ** 2) ** 0.5
        assert abs(plain[part]["mean_abs"] - exact[part]["mean_abs"]) < 4 * combined, part
        # the control variates take most of the spread out: the stated standard error is well below the plain one's
        assert exact[part]["mean_abs_se"] < plain[part]["mean_abs_se"] * (768 / 256) ** 0.5 * 0.8, part


@pytest.mark.parametrize("name, shape, definition, amount", [
    ("hb", (64,), "zcdp", Fraction(1, 8)), ("privelet", (40, 20), "zcdp", Fraction(1, 8)),
    ("quadtree", (16, 16), "zcdp", Fraction(1, 8))])
def test_the_exact_rms_under_zcdp(name, shape, definition, amount):
    algorithm = get_algorithm(name)
    exact = linear_errors(algorithm, shape, None, amount, definition, repeats=256, rounded=False)
    plain = noise_errors(algorithm, shape, None, amount, definition, repeats=512, seed=7, rounded=False)
    for part in ("cells", "ranges"):
        assert abs(plain[part]["rms"] / exact[part]["rms"] - 1) < 4 * plain[part]["rms_relative_se"], part


@pytest.mark.parametrize("name, shape, total", [("hb", (256,), Fraction(1, 40)), ("quadtree", (16, 16), None),
                                                ("privelet", (256,), None), ("h", (30,), None)])
def test_the_printed_figure_is_the_same_across_simulation_settings(name, shape, total):
    """Two simulations of one figure with different seeds and numbers of runs print the same digits
    (:func:`figure_text`), unless their estimates lie on either side of a rounding boundary and within 4 of their
    combined standard errors of it, when they print neighbours (one unit of the last digit apart).  A figure
    printed beyond its stable digits (one unit below ~20 standard errors) would fail the first check at about
    any setting; the second part fails with probability below 1e-4 per figure."""
    algorithm = get_algorithm(name)
    eps = 1 - (total or 0)
    runs = [linear_errors(algorithm, shape, None, eps, "pure", total_amount=total, repeats=reps, seed=seed,
                          rounded=False) for reps, seed in ((300, 1), (700, 2))]
    for part in ("cells", "ranges"):
        (a, sa), (b, sb) = ((r[part]["mean_abs"], r[part]["mean_abs_se"]) for r in runs)
        printed = [figure_text(stable_round(a, sa), sa), figure_text(stable_round(b, sb), sb)]
        decimals = min(stable_decimals(a, sa), stable_decimals(b, sb))
        unit = 10.0 ** -decimals
        if round(a, decimals) == round(b, decimals):
            same = [figure_text(round(v, decimals), unit / STABLE_UNITS) for v in (a, b)]
            assert same[0] == same[1]
            if stable_decimals(a, sa) == stable_decimals(b, sb):
                assert printed[0] == printed[1], (part, printed)
        else:
            boundary = (math.floor(max(a, b) / unit - 0.5) + 0.5) * unit
            assert abs(round(a, decimals) - round(b, decimals)) == pytest.approx(unit)
            assert abs(a - boundary) < 4 * (sa**2 + sb**2) ** 0.5 and abs(b - boundary) < 4 * (sa**2 + sb**2) ** 0.5
        assert sa < unit and sb < unit  # both keep only digits worth many standard errors


def test_stable_rounding_keeps_digits_worth_many_standard_errors():
    assert stable_decimals(27.44, 0.048) == 0 and stable_round(27.44, 0.048) == 27.0
    assert figure_text(27.0, 0.048) == "27" and figure_text(5.93, 0.0015) == "5.9"
    assert figure_text(5.93, 0.0004) == "5.93" and figure_text(8.1149) == "8.11"
    assert stable_round(1234.5, 3) == 1200.0 and figure_text(1200.0, 3) == "1200"
    # the leading digit is always kept (a figure rounded to 0 or to 100 would say less than its se does)
    assert stable_round(67.3, 0.8) == 70.0 and figure_text(70.0, 0.8) == "70"
    assert stable_round(0.0123, 0.002) == 0.01


@pytest.mark.parametrize("algorithm", ["h", "hb", "quadtree", "privelet"])
def test_a_release_reports_the_exact_cell_sd_twice_and_says_what_is_simulated(tmp_path, algorithm):
    """The report's expected_cell_sd (from the estimate's variances) and expected_error.cells.rms are one exact
    figure; the summary prints the simulated mean absolute errors with their standard errors and only their
    stable digits, and says which figures are exact."""
    result = release(_frame(), "1", SCHEMA, seed=3, ledger=tmp_path / "l.sqlite",
                     tables=[{"name": "x", "columns": ["x"], "algorithm": algorithm}])
    table, = result.report["tables"]
    errors = table["expected_error"]
    assert table["expected_cell_sd"] == errors["cells"]["rms"]
    line = next(l for l in result.summary().splitlines() if l.strip().startswith("x "))
    cells, ranges = errors["cells"], errors["ranges"]
    assert "for ranges, simulated: mean error per cell " + figure_text(cells["mean_abs"], cells["mean_abs_se"]) in line
    assert f"per range {figure_text(ranges['mean_abs'], ranges['mean_abs_se'])} (se " in line
    for part in (cells, ranges):
        assert part["mean_abs"] == stable_round(part["mean_abs"], part["mean_abs_se"])
    identity = release(_frame(), "1", SCHEMA, seed=3, ledger=tmp_path / "l.sqlite",
                       tables=[{"name": "x", "columns": ["x"], "algorithm": "identity"}]).summary()
    assert "for ranges, exact: mean error per cell" in identity and "(se " not in identity


# --------------------------------------------------------------------------------------------------------------
# Marginal sets: the consistent marginals of strategy separate, and the sums of strategy full

class _Column:
    """A column declaration as the marginal functions read it: name, size, kind."""

    def __init__(self, name, n, kind="numeric"):
        self.name, self.n_cells, self.kind, self.hierarchy = name, n, kind, ()


MARGINAL_SET = [("a", "b"), ("b", "c"), ("c",)]
MARGINAL_COLUMNS = {"a": _Column("a", 6), "b": _Column("b", 3, "categorical"), "c": _Column("c", 5)}


@pytest.mark.parametrize("definition, amounts", [("pure", [Fraction(1, 3)] * 3), ("zcdp", [Fraction(1, 6)] * 3)])
def test_consistent_marginal_errors_match_the_explicit_linear_map(definition, amounts):
    """Strategy separate: the closed-form variance of every cell and range of each reconciled marginal against the
    explicit linear map (each measured cell's unit noise through the least squares), the cells' against
    inference.marginals.expected_errors; and the simulated mean absolute error against a plain simulation of
    2,000 reconciliations, within 4 of their combined standard errors (false alarm 6e-5 per figure)."""
    from dphist.evaluation.expected_error import consistent_marginal_errors
    from dphist.evaluation.linear_error import box_sums
    from dphist.inference.marginals import consistent_marginals, expected_errors as squared_errors
    from dphist.algorithms.identity import Identity
    from dphist.privacy import ZCDPBudget
    columns = [[MARGINAL_COLUMNS[c] for c in m] for m in MARGINAL_SET]
    figures = consistent_marginal_errors(MARGINAL_SET, columns, amounts, definition, 1, [100.0] * 3, rounded=False)
    budget_type = PrivacyBudget if definition == "pure" else ZCDPBudget
    probe = budget_type(amounts[0], bits=SeededBits(0))
    Identity().run(np.zeros(1, dtype=np.int64), probe)
    v = probe.measurements[0].noise_variance
    shapes = [tuple(MARGINAL_COLUMNS[c].n_cells for c in m) for m in MARGINAL_SET]
    sizes = {c.name: c.n_cells for c in MARGINAL_COLUMNS.values()}
    total = sum(int(np.prod(s)) for s in shapes)
    starts = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
    basis = np.eye(total)
    rows = consistent_marginals([basis[:, a:b].reshape((total,) + s) for a, b, s in zip(starts, starts[1:], shapes)],
                                [("run",) + m for m in MARGINAL_SET], [v] * 3)
    noise = Identity()
    plain = []
    for r in range(2):  # a plain simulation: 2 x 1,000 reconciliations of fresh noise
        draws = []
        for k, s in enumerate(shapes):
            b = budget_type(amounts[k], bits=SeededBits(50 + 10 * r + k))
            b.repetitions = (1000,)
            draws.append(np.asarray(noise.run(np.zeros(s, dtype=np.int64), b).values, dtype=float))
        plain.append(consistent_marginals(draws, [("run",) + m for m in MARGINAL_SET], [v] * 3))
    for i, (m, shape, figure) in enumerate(zip(MARGINAL_SET, shapes, figures)):
        exact_cells = (rows[i] ** 2).sum(axis=0).ravel() * v  # every cell alike
        assert exact_cells == pytest.approx(np.full(exact_cells.size, exact_cells[0]), rel=1e-9)
        assert exact_cells.sum() == pytest.approx(squared_errors(MARGINAL_SET, sizes, [v] * 3)[i], rel=1e-9)
        assert figure["cells"]["rms"] == pytest.approx(exact_cells[0] ** 0.5, abs=6e-5)  # (rounded to 4 decimals)
        errors = np.concatenate([p[i] for p in plain]).reshape(2000, -1)
        absolute = np.abs(errors).mean(axis=1)
        se = (absolute.std(ddof=1) ** 2 / 2000 + figure["cells"]["mean_abs_se"] ** 2) ** 0.5
        assert abs(absolute.mean() - figure["cells"]["mean_abs"]) < 4 * se
        if "ranges" in figure:
            ranges = range_workload(shape, [c.kind != "categorical" for c in columns[i]])
            lo, hi = (np.asarray(a) for a in ranges.boxes())
            exact = ((box_sums(rows[i], lo, hi) ** 2).sum(axis=0) * v).mean()
            assert figure["ranges"]["rms"] == pytest.approx(exact ** 0.5, abs=6e-5)
            sums = np.abs(box_sums(np.concatenate([p[i] for p in plain]), lo, hi)).mean(axis=1)
            se = (sums.std(ddof=1) ** 2 / 2000 + figure["ranges"]["mean_abs_se"] ** 2) ** 0.5
            assert abs(sums.mean() - figure["ranges"]["mean_abs"]) < 4 * se
        else:
            assert m == ("b", "c") or all(MARGINAL_COLUMNS[c].kind == "categorical" for c in m)


@pytest.mark.parametrize("strategy", ["separate", "full"])
def test_a_marginal_release_reports_the_closed_form_figures(tmp_path, strategy):
    """Each released marginal's expected_error is its own (the reconciled estimate's, or the sum's of the full
    table's cells), its cells' RMS the expected_cell_sd and the marginal set's rmse_per_cell for the strategy."""
    result = release(SAMPLE / "census.csv", "1", SAMPLE / "census.schema.yaml", seed=2,
                     ledger=tmp_path / "l.sqlite", marginals="age,sex;sex,education", marginal_strategy=strategy)
    per_cell = result.report["marginals"]["expected_error"][strategy]["rmse_per_cell"]
    summary = result.summary()
    for table in result.report["tables"]:
        errors = table["expected_error"]
        assert errors["cells"]["rms"] == table["expected_cell_sd"]
        assert errors["cells"]["rms"] == pytest.approx(per_cell[table["name"]], rel=1e-3)
        assert ("ranges" in errors) == ("age" in table["columns"])
        line = next(l for l in summary.splitlines() if l.strip().startswith(table["name"] + " "))
        assert ("simulated" if strategy == "separate" else "exact") in line
    if strategy == "full":
        assert "each cell the sum of" in result.report["tables"][0]["expected_error"]["basis"]


def test_marginals_summed_from_a_tree_get_its_exact_figures(tmp_path):
    """Strategy full with hb: a marginal's cells and ranges are boxes of the full table, their RMS exact; a
    simulation of hb on zeros, summed down, agrees within 4 of its standard errors."""
    from dphist.evaluation.expected_error import derived_marginal_errors
    from dphist.evaluation.linear_error import box_sums
    hb = get_algorithm("hb")
    columns = [MARGINAL_COLUMNS["a"], MARGINAL_COLUMNS["b"], MARGINAL_COLUMNS["c"]]
    figures = derived_marginal_errors(hb, (6, 3, 5), columns, Fraction(1), "pure", 1, 90.0, [2, 0])
    assert "rms_relative_se" not in figures["cells"] and "each cell the sum of 3 cells" in figures["basis"]
    b = PrivacyBudget(Fraction(1), bits=SeededBits(9))
    b.repetitions = (3000,)
    runs = np.asarray(hb.run(np.zeros((6, 3, 5), dtype=np.int64), b, columns).values)
    summed = runs.sum(axis=2).transpose(0, 2, 1)  # (runs, c, a)
    mse = (summed.reshape(3000, -1) ** 2).mean(axis=1)
    se = mse.std(ddof=1) / 3000 ** 0.5 / (2 * mse.mean())  # relative, of the RMS
    assert abs(mse.mean() ** 0.5 / figures["cells"]["rms"] - 1) < 4 * se
    ranges = range_workload((5, 6), [True, True])
    lo, hi = (np.asarray(a) for a in ranges.boxes())
    range_mse = (box_sums(summed, lo, hi) ** 2).mean(axis=1)
    se = range_mse.std(ddof=1) / 3000 ** 0.5 / (2 * range_mse.mean())
    assert abs(range_mse.mean() ** 0.5 / figures["ranges"]["rms"] - 1) < 4 * se
