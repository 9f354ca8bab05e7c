"""Strategies under a zCDP budget (issue 21): identity, H, Hb, quadtree and Privelet with discrete Gaussian noise,
marginal sets, auto, and the data-adaptive algorithms.

Monte-Carlo checks use fixed seeds.  Range-variance checks: the per-run average squared error over all ranges is
averaged over R runs drawn at once (a leading axis of repetitions); each check asserts that its ±5 % band is at
least 4 standard errors wide (measured from the runs), so a correct implementation fails it with probability
below about 6e-5, and the same band rejects a strategy whose noise variance is 10 % off.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import sparse

from dphist import workloads
from dphist.algorithms import get_algorithm
from dphist.algorithms.auto import choose_gaussian
from dphist.algorithms.hierarchical import l2_range_error
from dphist.algorithms.privelet import HaarAxis
from dphist.marginal_consistency import consistent_marginals, expected_errors
from dphist.marginals import derive_marginal, plan_marginals
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget
from dphist.privacy.samplers import discrete_gaussian_variance
from dphist.trees import range_tree

RHO = Fraction(1, 200)  # σ² per unit Δ₂² = 1/(2ρ) = 100: far from the small-σ regime


class Replicated(ZCDPBudget):
    """A zCDP budget drawing every measurement ``reps`` times (a leading axis), like the audit's."""

    def __init__(self, rho, bits, reps):
        super().__init__(rho, bits=bits)
        self.repetitions = (int(reps),)


def range_variance_per_unit(values: np.ndarray, x: np.ndarray, rho=RHO) -> tuple[float, float]:
    """Mean over runs of the average squared error over all ranges, per unit σ² = 1/(2ρ), and its standard error."""
    err = values - x
    n = x.size
    prefix = np.zeros((err.shape[0], n + 1))
    np.cumsum(err, axis=1, out=prefix[:, 1:])
    prefix -= prefix.mean(axis=1, keepdims=True)
    per_run = (n + 1) * np.einsum("ij,ij->i", prefix, prefix) / (n * (n + 1) / 2) * float(2 * rho)
    return float(per_run.mean()), float(per_run.std(ddof=1) / np.sqrt(per_run.size))


def monte_carlo(name, n, reps, seed, rho=RHO, **options):
    x = np.random.default_rng(seed).integers(0, 50, n)
    budget = Replicated(rho, SeededBits(seed), reps)
    est = get_algorithm(name, **options).run(x, budget)
    return (*range_variance_per_unit(est.values, x, rho), est, budget)


def exact_per_unit(name, n, budget, est) -> float:
    """tr(W (AᵀV⁻¹A)⁻¹ Wᵀ)/|W| per unit σ², densely, from the algorithm's own measurements (their exact variances)."""
    W = workloads.all_ranges(n)
    if name == "identity":
        (m,) = budget.measurements
        return float(discrete_gaussian_variance(m.sigma2)) * (n + 2) / 3 * float(2 * RHO)
    if name == "privelet":
        (m,) = budget.measurements
        axis = HaarAxis(n)
        axis.use_weights(est.structure["level_scales"][0])
        A = axis.forward(np.eye(n, dtype=np.int64), 1).T
        v = [discrete_gaussian_variance(m.sigma2 * Fraction(float(g)) ** 2) for g in axis.relative_scales]
        return workloads.expected_squared_error(W, A, np.array(v)) / W.size * float(2 * RHO)
    tree = range_tree(n, est.structure["branching"])
    rows, v = [], []
    for m in budget.measurements:
        level = int(m.what.split()[2])
        size = tree.sizes[level]
        rows.append(sparse.csr_matrix((np.ones(n), (tree.labels(level), np.arange(n))), shape=(size, n)))
        v.append(np.full(size, discrete_gaussian_variance(m.sigma2)))
    A = sparse.vstack(rows).tocsr()
    return workloads.expected_squared_error(W, A, np.concatenate(v)) / W.size * float(2 * RHO)


CASES = [("identity", {}), ("h", {}), ("hb", {}), ("privelet", {"weights": "uniform"}), ("privelet", {"weights": "l2"})]


@pytest.mark.parametrize("n", [64, 128])
@pytest.mark.parametrize("name, options", CASES)
def test_range_variance_matches_the_dense_formula(name, options, n):
    mean, se, est, budget = monte_carlo(name, n, 6000, seed=n + len(name), **options)
    exact = exact_per_unit(name, n, budget, est)
    assert 0.05 * exact >= 4 * se  # the band is wide enough to be meaningful and narrow enough to fail
    assert abs(mean - exact) <= 0.05 * exact, (mean, exact, se)
    # ... and rejects a noise variance 10 % off
    assert abs(mean - 0.9 * exact) > 0.05 * 0.9 * exact or abs(mean - 1.1 * exact) > 0.05 * 1.1 * exact


# algorithms.md §8, L2 column at n = 1024 (per unit σ², GLS, no root).
PUBLISHED_1024 = [("identity", {}, 342), ("h", {}, 20.5), ("privelet", {"weights": "uniform"}, 18.7)]


@pytest.mark.parametrize("name, options, published", PUBLISHED_1024)
def test_range_variance_matches_the_published_l2_column(name, options, published):
    mean, se, est, budget = monte_carlo(name, 1024, 5000, seed=7, **options)
    assert 0.05 * published >= 4 * se
    assert abs(mean - published) <= 0.05 * published, (mean, published, se)


def test_hb_and_l2_privelet_at_1024_match_their_exact_errors():
    mean, se, est, _ = monte_carlo("hb", 1024, 4000, seed=11)
    b = est.structure["branching"]
    assert b == 3 and est.structure["noise"] == "gaussian"
    exact = l2_range_error(1024, b)
    assert exact < 20.5  # below H₂'s 20.5 (§8)
    assert abs(mean - exact) <= 0.05 * exact and 0.05 * exact >= 4 * se
    mean, se, est, _ = monte_carlo("privelet", 1024, 4000, seed=12)
    assert est.structure["weights"] == "l2"  # the default under Gaussian noise
    axis = HaarAxis(1024)
    axis.use_weights(axis.l2_weights())
    exact = float(axis.l2_squared) * float(np.dot(axis.level_costs(), axis.level_scales**2))
    assert exact < 18.7  # better than uniform weights
    assert abs(mean - exact) <= 0.05 * exact and 0.05 * exact >= 4 * se


def test_identity_noise_variance_is_one_over_two_rho():
    rho = Fraction(1, 50)
    x = np.random.default_rng(0).integers(0, 100, 2000)
    budget = Replicated(rho, SeededBits(3), 50)
    est = get_algorithm("identity").run(x, budget)
    noise = (est.values - x).ravel()  # 100,000 draws
    target = 1 / (2 * float(rho))
    # relative SE of a sample variance is about sqrt(2/N) = 0.45 %: ±10 % is more than 20 SE
    assert abs(noise.var() - target) <= 0.10 * target
    assert abs(noise.var() - discrete_gaussian_variance(budget.measurements[0].sigma2)) <= 0.02 * target
    assert np.allclose(est.variance, discrete_gaussian_variance(Fraction(25)))
    assert budget.spent == rho


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


@pytest.mark.parametrize("shape", [(40,), (20, 33), (17, 5, 18)])
@pytest.mark.parametrize("weights", ["uniform", "l2"])
def test_privelet_l2_sensitivity_is_the_formula_and_reached(shape, weights):
    budget = ZCDPBudget(Fraction(1, 2), bits=SeededBits(2))
    algo = get_algorithm("privelet", weights=weights)
    est = algo.run(np.zeros(shape, dtype=np.int64), budget)
    (m,) = budget.measurements
    axes = algo.axes_for(shape)
    if weights == "uniform":
        assert m.l2_squared == np.prod([a.sensitivity for a in axes])  # Π(L_k + 1)
    # brute force: the weighted squared change of the coefficients for every cell that gains a record
    scales = [np.asarray(s) if s is not None else None for s in est.structure["level_scales"]]
    for axis, s in zip(axes, scales):
        if s is not None:
            axis.use_weights(s)
    relative = np.ones(())
    for a in axes:
        relative = np.multiply.outer(relative, a.relative_scales)
    worst = Fraction(0)
    n = int(np.prod(shape))
    for cell in range(n):
        unit = np.zeros(n, dtype=np.int64)
        unit[cell] = 1
        c = unit.reshape(shape)
        for k, a in enumerate(axes):
            c = a.forward(c, k)
        nz = np.flatnonzero(c)
        worst = max(worst, sum((Fraction(int(c.flat[i])) / Fraction(float(relative.flat[i]))) ** 2 for i in nz))
    assert worst == m.l2_squared


def test_privelet_cell_variances_are_exact():
    rho = Fraction(1, 8)  # σ² small enough that the discrete Gaussian's variance differs from σ²g²
    x = np.random.default_rng(1).integers(0, 9, (20, 24))
    budget = Replicated(rho, SeededBits(5), 20000)
    est = get_algorithm("privelet", small_axis=0).run(x, budget)
    emp = ((est.values - x) ** 2).mean(axis=0)
    # per cell: relative SE sqrt(2/20000) = 1 %; a ±6 % band is 6 SE (false alarm ~2e-9 per cell, 480 cells)
    assert np.all(np.abs(emp / est.variance - 1) < 0.06)
    assert abs(emp.mean() / est.variance.mean() - 1) < 0.01


def test_privelet_laplace_path_refuses_l2_weights():
    from dphist.errors import UsageError
    with pytest.raises(UsageError):
        get_algorithm("privelet", weights="l2").run(np.zeros(64, dtype=np.int64), PrivacyBudget(1, bits=SeededBits(0)))


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
    assert plan.strategy == ("separate" if sep < 3 * full else "full")
    pure = plan_marginals(marginals, sizes, rho, "identity", "auto")
    assert pure.expected["separate"]["total"] > plan.expected["separate"]["total"]  # Laplace: k² not k


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


@pytest.mark.parametrize("name", ["dpcube", "structurefirst", "noisefirst", "kdtree"])
def test_data_adaptive_algorithms_run_on_a_zcdp_budget(name):
    rho = Fraction(1, 2)
    shape = (64,) if name in ("structurefirst", "noisefirst") else (16, 16)
    x = np.random.default_rng(6).integers(0, 30, shape)
    budget = ZCDPBudget(rho, bits=SeededBits(8))
    est = get_algorithm(name, **({"cap": 30} if name == "structurefirst" else {})).run(x, budget)
    assert est.values.shape == shape and np.all(np.isfinite(est.values))
    assert budget.spent == rho
    assert all(m.rho is not None for m in budget.measurements)
