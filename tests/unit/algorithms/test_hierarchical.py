"""H, Hb and quadtree (dphist/algorithms/hierarchical.py): privacy structure (public trees, exact budgets,
sensitivity 1 per level; under zCDP L2 sensitivity 1 per level and ρ split over the levels) and accuracy checked
against the exact trace-formula oracle (docs/algorithms.md §0, §3, §8).

Monte-Carlo checks use fixed seeds and a 5-standard-error band (false alarm below 1e-6 per check).  The trees are
not data-adaptive, so the runs are drawn at once on a replicated budget (a leading axis of runs, as the audit draws
them); a plain run on the same noise (one repetition draws the same values) gives the same estimate, so the
replicated runs stand for plain ones.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import sparse

from dphist.evaluation import workloads
from dphist.algorithms import get_algorithm
from dphist.algorithms.hierarchical import best_branching, level_weights, released_branching, with_root_measurement
from dphist_audit.replication import ReplicatedBudget
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.algorithms.strategies.trees import product_tree, range_tree
from dphist.inference.measurements import total_measurement


def run(algo, counts, epsilon, bits):
    """One run of ``algo`` on a fresh budget of ``epsilon``: the estimate and the budget (its measurements)."""
    budget = PrivacyBudget(epsilon, bits=bits)
    return algo.run(counts, budget), budget


def runs(algo, counts, epsilon, bits, reps):
    """``reps`` independent runs of ``algo`` at once (values with a leading axis of runs) and their budget."""
    budget = ReplicatedBudget(epsilon, bits, reps, [])
    return algo.run(counts, budget), budget


def squared_errors(W, x, values) -> np.ndarray:
    """‖W x − W x̂_r‖₂² for each run r of ``values`` (a leading axis of runs), through W's matrix."""
    e = (values - x).reshape(values.shape[0], -1)
    answers = np.asarray(W.matrix() @ e.T)
    errors = np.einsum("ij,ij->j", answers, answers)
    assert errors[0] == pytest.approx(workloads.squared_error(W, x, values[0]), rel=1e-9)
    return errors


def same_as_a_plain_run(algo, counts, epsilon, seed, total=None) -> None:
    """A plain run and one replicated run on the same seed draw the same noise and give the same estimate (and,
    with ``total`` = (value, variance), the same refit): what the replicated runs show holds for plain ones."""
    plain = algo.run(counts, PrivacyBudget(epsilon, bits=SeededBits(seed)))
    one, _ = runs(algo, counts, epsilon, SeededBits(seed), 1)
    if total is not None:
        plain, one = algo.refit(plain, total_measurement(*total)), algo.refit(one, total_measurement(*total))
    assert np.allclose(plain.values, one.values[0], rtol=1e-12, atol=1e-9)
    assert np.allclose(plain.variance, one.variance, rtol=1e-12)


def strategy_of(tree, measured, variances):
    """The measurement matrix of a tree's measured levels (rows: nodes) and the noise variance of each row."""
    rows, var = [], []
    n = tree.n_cells
    for level, v in zip(measured, variances):
        size = tree.sizes[level]
        rows.append(sparse.csr_matrix((np.ones(n), (tree.labels(level), np.arange(n))), shape=(size, n)))
        var.append(np.full(size, v))
    return sparse.vstack(rows).tocsr(), np.concatenate(var)


@pytest.mark.parametrize("b, expected", [(2, 220), (4, 111), (16, 79)])
def test_average_range_variance_matches_the_published_table(b, expected):
    # docs/algorithms.md §8, n = 256, all ranges, ε = 1, continuous-Laplace variance 2(h/ε)², no root, GLS.
    tree = range_tree(256, b)
    h = tree.levels - 1
    A, v = strategy_of(tree, range(1, tree.levels), [2.0 * h**2] * h)
    W = workloads.all_ranges(256)
    assert workloads.expected_squared_error(W, A, v) / W.size == pytest.approx(expected, rel=0.01)


CASES = [("h", (16,), {}), ("hb", (27,), {}), ("hb", (40,), {"branching": 3, "root": "keep"}),
         ("quadtree", (8, 8), {}), ("hb", (6, 9), {}), ("h", (30,), {"budget_split": "geometric"})]


@pytest.mark.parametrize("name, shape, options", CASES)
def test_monte_carlo_error_matches_trace_oracle(name, shape, options):
    """1,500 runs: the mean squared error on the workload within 5 standard errors of the trace oracle built from
    the algorithm's own plan (the levels measured and their exact noise variances); the per-cell variances the
    estimate states are the oracle's diagonal."""
    eps = Fraction(1, 2)
    algo = get_algorithm(name, **options)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 30, shape)
    W = workloads.all_ranges(shape[0]) if len(shape) == 1 else workloads.random_boxes(shape, 300, seed=1)
    est, budget = runs(algo, x, eps, SeededBits(42), 1500)
    errors = squared_errors(W, x, est.values)
    same_as_a_plain_run(algo, x, eps, 42)
    # The oracle from the algorithm's own public plan: levels measured and their exact noise variances.
    tree = product_tree(shape, est.structure["branching"])
    assert tree.sizes == tuple(est.structure["nodes_per_level"])
    measured = [int(m.what.split()[2]) for m in budget.measurements]
    variances = [discrete_laplace_variance(m.scale) for m in budget.measurements]
    A, v = strategy_of(tree, measured, variances)
    oracle = workloads.expected_squared_error(W, A, v)
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(errors.mean() - oracle) < 5 * se, (errors.mean(), oracle, se)
    # Per-cell variances reported by the estimate are the oracle's diagonal.
    cov = np.linalg.inv((A.T @ sparse.diags(1 / v) @ A).toarray())
    assert np.allclose(est.variance.ravel(), np.diag(cov), rtol=1e-9)


def test_monte_carlo_check_can_fail():
    # The same comparison against a strategy whose noise is 10 % smaller must be rejected.
    eps = Fraction(1, 2)
    algo = get_algorithm("h")
    x = np.zeros(16, dtype=np.int64)
    W = workloads.all_ranges(16)
    est, budget = runs(algo, x, eps, SeededBits(43), 1500)
    errors = squared_errors(W, x, est.values)
    tree = range_tree(16, 2)
    measured = [int(m.what.split()[2]) for m in budget.measurements]
    A, v = strategy_of(tree, measured, [0.81 * discrete_laplace_variance(m.scale) for m in budget.measurements])
    wrong = workloads.expected_squared_error(W, A, v)
    se = errors.std(ddof=1) / np.sqrt(errors.size)
    assert abs(errors.mean() - wrong) > 5 * se


@pytest.mark.parametrize("name, shape", [("h", (100,)), ("hb", (4096,)), ("quadtree", (32, 32)), ("hb", (20, 30)),
                                         ("hb", (4, 5, 6))])
def test_structure_is_public(name, shape):
    # Same shape, very different data: identical tree, levels, scales and budgets.
    algo = get_algorithm(name)
    eps = Fraction(3, 10)
    a, spent_a = run(algo, np.zeros(shape, dtype=np.int64), eps, SeededBits(1))
    b, spent_b = run(algo, np.random.default_rng(2).integers(0, 10**6, shape), eps, SeededBits(2))
    assert a.structure == b.structure
    assert [(m.what, m.scale, m.epsilon, m.sensitivity, m.queries) for m in spent_a.measurements] == \
           [(m.what, m.scale, m.epsilon, m.sensitivity, m.queries) for m in spent_b.measurements]
    assert sum(m.epsilon for m in spent_a.measurements) == eps  # the parts add up exactly


@pytest.mark.parametrize("shape, b", [((37,), 3), ((16, 16), 2), ((5, 7), 4), ((3, 4, 5), 2)])
def test_every_level_has_sensitivity_one(shape, b):
    tree = product_tree(shape, b)
    n = tree.n_cells
    for cell in range(n):
        unit = np.zeros(n, dtype=np.int64)
        unit[cell] = 1
        # One added record changes exactly one node per level, by 1: L1 sensitivity 1 per measured level.
        assert [int(np.abs(s).sum()) for s in tree.level_sums(unit.reshape(shape))] == [1] * tree.levels


def test_branching_choice():
    assert best_branching((4096,)) == 16  # docs/algorithms.md §3.3
    assert best_branching((256, 256)) == 7
    assert best_branching((1,)) == 2


def test_hb_branching_in_2d_is_the_released_tables_choice():
    # 2-D under pure ε: b = 4 per axis (the released table's error, released_branching's docstring), not the closed
    # form's 7; 1-D and zCDP keep their own rules.
    assert released_branching((256, 256)) == 4 and released_branching((128, 40)) == 4
    assert released_branching((4096,)) == best_branching((4096,)) == 16
    assert released_branching((256, 256), "gaussian") == best_branching((256, 256), "gaussian")
    estimate, _ = run(get_algorithm("hb"), np.zeros((64, 64), dtype=np.int64), Fraction(1), SeededBits(0))
    assert estimate.structure["branching"] == 4
    # 64 = 4^3: the root, 4 × 4, 16 × 16 and the leaves, every level whole.
    assert estimate.structure["nodes_per_level"] == [1, 16, 256, 4096]


def test_level_budgets_exact_and_geometric_order():
    eps = Fraction(1, 3)
    weights = level_weights([1, 2, 3, 4], 4, "geometric", 2)
    assert weights == sorted(weights)  # leaves (level 4) get the most
    assert weights[-1] / weights[-2] == pytest.approx(2 ** (1 / 3), rel=1e-5)
    assert level_weights([1, 2, 3], 3, "uniform", 1) == [Fraction(1)] * 3
    # The budget splits in proportion to the weights, exactly: what each level spends, as a quadtree runs it.
    _, budget = run(get_algorithm("quadtree"), np.zeros((16, 16), dtype=np.int64), eps, SeededBits(0))
    parts = [m.epsilon for m in budget.measurements]
    assert [int(m.what.split()[2]) for m in budget.measurements] == [1, 2, 3, 4]
    assert sum(parts) == eps and parts == sorted(parts)
    assert all(p * weights[0] == parts[0] * w for p, w in zip(parts, weights))
    _, uniform = run(get_algorithm("h"), np.zeros(8, dtype=np.int64), eps, SeededBits(0))
    assert [m.epsilon for m in uniform.measurements] == [Fraction(1, 9)] * 3


def test_release_through_the_pipeline_is_consistent():
    import dphist
    import pandas as pd
    frame = pd.DataFrame({"a": np.random.default_rng(3).integers(0, 64, 5000)})
    schema = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 64, "bins": 64}}}
    result = dphist.release(frame, epsilon="0.5", schema=schema, columns="a", algorithm="hb", seed=5)
    table = result.tables["a"]
    assert (table["count"] >= 0).all() and table["count"].dtype == np.int64
    step_eps = [Fraction(s["epsilon"]) for s in result.report["tables"][0]["steps"]]
    assert sum(step_eps) == Fraction(1, 2) and all(s["sensitivity"] == 1 for s in result.report["tables"][0]["steps"])
    assert result.report["tables"][0]["structure"]["branching"] == best_branching((64,))
    assert abs(table["count"].sum() - 5000) < 200


def test_with_root_measurement_sets_or_combines_the_root():
    """An unmeasured root takes the new measurement; a measured one is combined with it by inverse variance."""
    levels = [None, np.array([3.0, 5.0])]
    noisy, var = with_root_measurement(levels, [np.inf, 2.0], 10.0, 8.0)
    assert noisy[0].tolist() == [10.0] and var[0] == 8.0 and levels[0] is None  # the inputs are not changed
    noisy, var = with_root_measurement([np.array([6.0]), np.array([3.0, 5.0])], [4.0, 2.0], 12.0, 12.0)
    assert noisy[0].tolist() == pytest.approx([(6 / 4 + 12 / 12) / (1 / 4 + 1 / 12)]) and var[0] == pytest.approx(3.0)
    replicated, _ = with_root_measurement([None, np.zeros((7, 2))], [np.inf, 2.0], 1.0, 1.0)
    assert replicated[0].shape == (7, 1)


@pytest.mark.parametrize("name, shape, options", [("hb", (64,), {}), ("quadtree", (8, 8), {}),
                                                  ("hb", (40,), {"branching": 3, "root": "keep"})])
def test_a_total_measured_elsewhere_joins_the_least_squares_fit(name, shape, options):
    """``Algorithm.refit`` with a total (what auto does with its N̂): the refitted estimate's error on ranges matches the
    trace oracle of the tree's levels plus one more row, the total, at its own variance, and the per-cell
    variances it states are that strategy's exact ones.  The same runs are rejected against the oracle without the
    extra row, so the check can tell the two apart.

    A refit here takes one total, so the 3,000 runs are 150 batches of 20 replicated runs, each batch refitted
    with a total of its own: the batch means are independent (the runs within a batch are not: they share a
    total), and the band is 5 standard errors of their mean, a false alarm about 1.6e-6 (t, 149 degrees of
    freedom).  The closest pair of oracles (Hb at 40 cells, root kept) differs by 7.7 %, about 10 standard errors
    (a standard error of 0.8 % of the oracle)."""
    eps, total_scale = Fraction(1, 2), Fraction(4)
    algo = get_algorithm(name, **options)
    x = np.random.default_rng(5).integers(0, 30, shape)
    W = workloads.all_ranges(shape[0]) if len(shape) == 1 else workloads.random_boxes(shape, 300, seed=1)
    bits, batch_means = SeededBits(44), []
    total_variance = discrete_laplace_variance(total_scale)
    for _ in range(150):
        est, budget = runs(algo, x, eps, bits, 20)
        other = PrivacyBudget(1 / total_scale, bits=bits)
        total, record = other.laplace(np.asarray(x.sum()), 1, other.amount, "the total", composition="one query")
        assert record.noise_variance == total_variance
        refit = algo.refit(est, total_measurement(float(total), record.noise_variance))
        batch_means.append(squared_errors(W, x, refit.values).mean())
    same_as_a_plain_run(algo, x, eps, 45, (float(x.sum()) + 3, total_variance))
    tree = product_tree(shape, est.structure["branching"])
    measured = [int(m.what.split()[2]) for m in budget.measurements]
    A, v = strategy_of(tree, measured, [discrete_laplace_variance(m.scale) for m in budget.measurements])
    A_total = sparse.vstack([A, sparse.csr_matrix(np.ones((1, x.size)))]).tocsr()
    v_total = np.append(v, total_variance)
    batch_means = np.array(batch_means)
    se = batch_means.std(ddof=1) / np.sqrt(batch_means.size)
    assert abs(batch_means.mean() - workloads.expected_squared_error(W, A_total, v_total)) < 5 * se
    assert abs(batch_means.mean() - workloads.expected_squared_error(W, A, v)) > 5 * se
    cov = np.linalg.inv((A_total.T @ sparse.diags(1 / v_total) @ A_total).toarray())
    assert np.allclose(refit.variance.ravel(), np.diag(cov), rtol=1e-9)
    assert refit.structure["root_measured"] and "earlier noisy total" in refit.structure["root_also_from"]


# ---- under a zCDP budget --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, shape", [("h", (100,)), ("hb", (1024,)), ("quadtree", (32, 32)), ("h", (7, 9))])
def test_tree_levels_have_l2_sensitivity_one_and_split_rho(name, shape):
    rho = Fraction(3, 10)
    budget = ZCDPBudget(rho, bits=SeededBits(1))
    est = get_algorithm(name).run(np.zeros(shape, dtype=np.int64), budget)
    records = budget.measurements
    h = len(records)
    assert all(m.l2_squared == 1 and m.mechanism == "discrete Gaussian" for m in records)
    assert all(m.sigma2 == 1 / (2 * m.rho) for m in records)
    assert budget.spent == rho and sum(m.rho for m in records) == rho
    if name != "quadtree":
        assert [m.rho for m in records] == [rho / h] * h  # uniform: total Δ₂² = h at ρ
    else:
        parts = [m.rho for m in records]  # geometric for L2: ρ_l ∝ 2^(-(d-1)i/2), leaves the most
        assert parts == sorted(parts)
        assert float(parts[-1] / parts[-2]) == pytest.approx(2 ** 0.5, rel=1e-5)
    assert est.structure["noise"] == "gaussian"
