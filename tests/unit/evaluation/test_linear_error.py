"""The exact noise of the linear data-independent estimates (dphist/evaluation/linear_error.py): every box's
variance and fourth cumulant against the explicit linear map x̂ = x + L z, built column by column by feeding each
measured value's unit noise through the algorithm's own inference (trees) or inverse transform (Privelet), with
the exact variance and fourth cumulant of each noise value."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dphist.algorithms import get_algorithm
from dphist.evaluation import workloads
from dphist.evaluation.expected_error import range_workload
from dphist.evaluation.linear_error import (box_indicators, box_sums, fourth_cumulant, identity_noise,
                                            privelet_noise, tree_noise)
from dphist.inference.measurements import Measurement, total_measurement
from dphist.privacy import (PrivacyBudget, SeededBits, ZCDPBudget, discrete_gaussian_pmf, discrete_gaussian_variance,
                            discrete_laplace_pmf, discrete_laplace_variance)


class _Hierarchy:
    """A categorical column with a declared hierarchy (what Privelet's nominal wavelet reads)."""

    kind = "categorical"

    def __init__(self, levels):
        self.hierarchy = levels


def _tree_map(algorithm, estimate) -> tuple[np.ndarray, np.ndarray]:
    """(rows, variances): row j is L e_j, the estimate's response to a unit noise on measured value j, from the
    algorithm's inference on basis vectors (a leading axis); variances[j] that value's noise variance."""
    rows, variances = [], []
    for i, m in enumerate(estimate.measurements):
        size = int(np.size(m.values))
        unit = np.eye(size) if np.ndim(m.values) else np.ones((1, 1))
        measured = tuple(Measurement(o.query, (unit if np.ndim(o.values) else 1.0) if j == i else
                                     (np.zeros((unit.shape[0], np.size(o.values))) if np.ndim(o.values) else 0.0),
                                     o.variance) for j, o in enumerate(estimate.measurements))
        if np.ndim(m.values) == 0:  # a total: the others at zero with one leading run
            measured = tuple(Measurement(o.query, np.zeros((1, np.size(o.values))) if np.ndim(o.values) else
                                         1.0, o.variance) for o in estimate.measurements)
        rows.append(np.asarray(algorithm.infer(estimate.plan, measured).values).reshape(unit.shape[0], -1))
        variances += [float(m.variance)] * unit.shape[0]
    return np.concatenate(rows), np.array(variances)


def _privelet_map(algorithm, shape, columns, record) -> tuple[np.ndarray, np.ndarray, str]:
    """(rows, variances, noise) for Privelet: row c the inverse transform of a unit coefficient c, variances[c]
    the exact variance of its noise at scale b·g_c (Laplace) or σ²·g_c² (Gaussian)."""
    gaussian = record.sigma2 is not None
    axes = algorithm.transforms(shape, columns, "gaussian" if gaussian else "laplace")
    relative = np.ones(())
    for axis in axes:
        relative = np.multiply.outer(relative, axis.relative_scales)
    rows = []
    for c in range(relative.size):
        x = np.zeros(relative.size)
        x[c] = 1.0
        x = x.reshape(relative.shape)
        for k, axis in enumerate(axes):
            x = axis.inverse(x, k)
        rows.append(np.asarray(x).ravel())
    variances = np.array([discrete_gaussian_variance(Fraction(record.sigma2) * Fraction(float(g)) ** 2) if gaussian
                          else discrete_laplace_variance(Fraction(record.scale) * int(round(g)))
                          for g in relative.ravel()])
    return np.array(rows), variances, "gaussian" if gaussian else "laplace"


def _check(noise, rows, variances, kind, shape, ranges=300):
    kappa = np.array([fourth_cumulant(kind, v) for v in variances])
    assert noise.cell_variances == pytest.approx((rows**2).T @ variances, rel=1e-12)
    w = range_workload(shape, [True] * len(shape), ranges)
    lo, hi = (np.asarray(a) for a in w.boxes())
    weights = box_indicators(shape, lo, hi).reshape(len(lo), -1) @ rows.T  # (boxes, measured values): (Lᵀq)_j
    second, fourth = noise.box_cumulants(lo, hi)
    assert second == pytest.approx((weights**2) @ variances, rel=1e-12)
    assert fourth == pytest.approx((weights**4) @ kappa, rel=1e-10, abs=1e-12 * float(np.max(second)) ** 2)


@pytest.mark.parametrize("name, shape, definition, total", [
    ("h", (50,), "pure", None), ("h", (50,), "pure", Fraction(1, 40)), ("hb", (64,), "zcdp", None),
    ("hb", (81,), "pure", Fraction(1, 20)), ("quadtree", (12, 10), "pure", None),
    ("quadtree", (8, 8), "pure", Fraction(1, 40)), ("hb", (9, 7), "zcdp", None)])
def test_tree_cumulants_match_the_explicit_linear_map(name, shape, definition, total):
    algorithm = get_algorithm(name)
    budget = (PrivacyBudget(Fraction(1, 2), bits=SeededBits(0)) if definition == "pure"
              else ZCDPBudget(Fraction(1, 20), bits=SeededBits(0)))
    estimate = algorithm.run(np.zeros(shape, dtype=np.int64), budget)
    if total is not None:  # auto's N̂: one more measurement of the root
        estimate = algorithm.refit(estimate, total_measurement(0.0, discrete_laplace_variance(1 / total)))
    kind = "laplace" if definition == "pure" else "gaussian"
    rows, variances = _tree_map(algorithm, estimate)
    _check(tree_noise(algorithm, estimate, kind), rows, variances, kind, shape)


@pytest.mark.parametrize("shape, columns, definition", [
    ((40,), None, "pure"), ((20, 24), None, "zcdp"), ((33,), None, "zcdp"),
    ((20, 6), [None, _Hierarchy(((0, 0, 0, 1, 1, 2),))], "pure"),
    ((33, 6), [None, _Hierarchy(((0, 0, 0, 1, 1, 2),))], "zcdp")])
def test_privelet_cumulants_match_the_explicit_inverse(shape, columns, definition):
    """Uniform and L2 level weights, a nominal axis (more coefficients than cells, its inverse a least-squares
    fit), and Privelet+'s untransformed small axes."""
    algorithm = get_algorithm("privelet", small_axis=4)
    budget = (PrivacyBudget(Fraction(1), bits=SeededBits(0)) if definition == "pure"
              else ZCDPBudget(Fraction(1, 50), bits=SeededBits(0)))
    algorithm.run(np.zeros(shape, dtype=np.int64), budget, columns)
    record = budget.measurements[0]
    rows, variances, kind = _privelet_map(algorithm, shape, columns, record)
    _check(privelet_noise(algorithm, shape, columns, record), rows, variances, kind, shape)


def test_the_tree_cells_variances_are_the_fits_own():
    algorithm = get_algorithm("hb")
    estimate = algorithm.run(np.zeros((30, 20), dtype=np.int64), PrivacyBudget(Fraction(1), bits=SeededBits(0)))
    noise = tree_noise(algorithm, estimate, "laplace")
    lo = np.indices((30, 20)).reshape(2, -1).T
    assert noise.box_variances(lo, lo + 1) == pytest.approx(noise.cell_variances, rel=1e-12)
    assert noise.cell_variances == pytest.approx(np.asarray(estimate.variance).ravel(), rel=1e-15)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(40)])
def test_fourth_cumulant_of_the_discrete_laplace(scale):
    k = np.arange(-60 * int(scale) - 60, 60 * int(scale) + 61, dtype=np.float64)
    p = discrete_laplace_pmf(k, scale)
    variance = float(np.dot(k * k, p))
    assert fourth_cumulant("laplace", discrete_laplace_variance(scale)) == pytest.approx(
        float(np.dot(k**4, p)) - 3 * variance**2, rel=1e-9)


@pytest.mark.parametrize("sigma2", [Fraction(1, 10), Fraction(1, 2), Fraction(3, 2), Fraction(9)])
def test_fourth_cumulant_of_the_discrete_gaussian(sigma2):
    """Far from the continuous Gaussian's 0 at small σ² (mostly 0, now and then ±1: heavy-tailed for its
    variance), 0 to double precision at large σ²."""
    k = np.arange(-200, 201, dtype=np.float64)
    p = discrete_gaussian_pmf(k, sigma2)
    p = p / p.sum()
    variance = float(np.dot(k * k, p))
    exact = float(np.dot(k**4, p)) - 3 * variance**2
    assert fourth_cumulant("gaussian", discrete_gaussian_variance(sigma2)) == pytest.approx(exact, abs=1e-12)
    if sigma2 < 1:
        assert exact > 1e-3 * variance**2


def test_identity_noise_adds_up_over_the_box():
    noise = identity_noise((10, 4), 2.5, "laplace")
    second, fourth = noise.box_cumulants(np.array([[0, 0], [2, 1]]), np.array([[10, 4], [5, 2]]))
    assert second.tolist() == [100.0, 7.5] and fourth[1] == pytest.approx(3 * fourth_cumulant("laplace", 2.5))


def test_box_sums_carry_leading_axes():
    rng = np.random.default_rng(1)
    tables = rng.normal(size=(3, 7, 5))
    w = workloads.random_boxes((7, 5), 40, 2)
    lo, hi = (np.asarray(a) for a in w.boxes())
    for r in range(3):
        assert box_sums(tables, lo, hi)[r] == pytest.approx(w.answer(tables[r]), abs=1e-12)
    assert box_indicators((7, 5), lo, hi).reshape(40, -1) @ tables[0].ravel() == pytest.approx(
        w.answer(tables[0]), abs=1e-12)
    assert math.prod(box_indicators((7, 5), lo, hi).shape) == 40 * 35


def test_fourth_cumulant_of_vanishing_noise():
    """At ε = 1000 the noise's variance underflows to 0 (or nearly): κ₄ is 0, or the tiny value of the
    distribution (for a small variance v the discrete Laplace is ±1 with probability ≈ v/2 each, κ₄ ≈ v)."""
    assert fourth_cumulant("laplace", 0.0) == 0.0 and fourth_cumulant("gaussian", 0.0) == 0.0
    assert fourth_cumulant("laplace", 1e-300) == pytest.approx(1e-300, rel=1e-6)
