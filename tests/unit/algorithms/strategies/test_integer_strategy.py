"""Exact integer measurement of an optimised strategy through the privacy kernel: the record's sensitivity is the
integer matrix's true column norm, the estimate is unbiased and its empirical variance is the exact one."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dphist.algorithms.strategies.integer_strategy import (cell_variances, measure_strategy, quantise,
                                                           quantised_total_error, query_variance, reconstruct)
from dphist.algorithms.strategies.optimized import optimise_strategy
from dphist.algorithms.strategies.range_grams import RangeGram, rmse_per_sigma
from dphist.errors import DataError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget
from dphist.privacy.measurement import GAUSSIAN, LAPLACE


def strategy(shape, noise):
    return optimise_strategy("all_ranges", shape, noise, p_choices=[2], restarts=1, seed=0, max_iter=200)


def explicit(integer):
    """The whole integer strategy as one matrix, in Python integers (a Kronecker product for two axes)."""
    out = np.ones((1, 1), dtype=object)
    for a in integer.factors:
        out = np.kron(out, a.astype(object))
    return out


@pytest.mark.parametrize("shape", [(12,), (6, 5)])
def test_the_record_charges_the_amount_at_the_integer_strategys_true_norms(shape):
    counts = np.arange(np.prod(shape), dtype=np.int64).reshape(shape) % 7
    for noise, budget, amount in (("l2", ZCDPBudget(Fraction(1, 3), bits=SeededBits(1)), Fraction(1, 4)),
                                  ("l1", PrivacyBudget(Fraction(2), bits=SeededBits(2)), Fraction(3, 2))):
        integer = quantise(strategy(shape, noise))
        a = explicit(integer)
        l2_squared = max(sum(v * v for v in a[:, j]) for j in range(a.shape[1]))
        l1 = max(sum(abs(v) for v in a[:, j]) for j in range(a.shape[1]))
        noisy, record = measure_strategy(integer, counts, budget, amount)
        assert budget.spent == amount and len(budget.measurements) == 1
        if noise == "l2":
            assert record.mechanism == GAUSSIAN and record.rho == amount
            assert record.l2_squared == l2_squared and record.sigma2 == Fraction(l2_squared) / (2 * amount)
        else:  # pure ε: Laplace at the L1 norm
            assert record.mechanism == LAPLACE and record.epsilon == amount
            assert record.sensitivity == l1 and record.scale == Fraction(l1) / amount
        assert noisy.shape == tuple(f.shape[0] for f in integer.factors)
        assert record.queries == a.shape[0]


def test_answers_are_the_exact_integer_products():
    integer = quantise(strategy((6, 5), "l2"))
    counts = np.random.default_rng(0).integers(0, 1000, (6, 5))
    a = explicit(integer)
    exact = a.dot(counts.ravel().astype(object))
    trace = []
    budget = ZCDPBudget(Fraction(10**6), bits=SeededBits(3), trace=trace)
    noisy, record = measure_strategy(integer, counts, budget, budget.amount)
    # at ρ = 10⁶ the noise has sd √(Δ₂²/(2ρ)), a few units against answers of 10⁹: the noisy answers are the
    # exact integer products plus small integers
    assert noisy.dtype == np.int64
    assert np.max(np.abs(noisy.ravel().astype(object) - exact)) < 20 * float(record.sigma2) ** 0.5 + 1


def test_quantisation_costs_under_a_thousandth_of_the_rmse():
    for shape, noise in (((64,), "l2"), ((64,), "l1"), ((32, 32), "l2"), ((32, 32), "l1")):
        s = optimise_strategy("all_ranges", shape, noise, p_choices=[4], restarts=1, max_iter=300)
        grams = [RangeGram("all_ranges", n) for n in shape]
        ratio = (quantised_total_error(quantise(s), grams, noise) / s.total_error()) ** 0.5
        assert 1 - 1e-9 < ratio < 1.001


def test_estimate_is_unbiased_and_its_variance_is_the_exact_one():
    """400 seeded runs of a zCDP measurement of all ranges over 10 cells (ρ = 1/2) and 300 of a pure-ε one.

    Per cell, the mean error must lie within 4.5 of its exact standard errors (10 cells: false alarm about 7e-5
    per case); the mean of the squared error summed over cells, and of one range's squared error, within 4
    standard errors (estimated from the runs) of their exact expectations (false alarm 6e-5 each).  The sum's
    relative standard error is about 0.4 / √runs, so a variance off by 8 % (400 runs) or 10 % (300) is caught;
    a bias of 0.25 of a cell's sd (400 runs) is caught as well."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 50, 10)
    for noise, runs, make in (("l2", 400, lambda s: ZCDPBudget(Fraction(1, 2), bits=SeededBits(s))),
                              ("l1", 300, lambda s: PrivacyBudget(Fraction(1), bits=SeededBits(s)))):
        integer = quantise(strategy((10,), noise))
        errors, record = [], None
        for seed in range(runs):
            budget = make(1000 + seed)
            noisy, record = measure_strategy(integer, counts, budget, budget.amount)
            errors.append(reconstruct(integer, noisy) - counts)
        errors = np.array(errors)
        variances = cell_variances(integer, record)
        z = errors.mean(axis=0) / np.sqrt(variances / runs)
        assert np.max(np.abs(z)) < 4.5
        total = (errors**2).sum(axis=1)
        assert abs(total.mean() - variances.sum()) < 4 * total.std(ddof=1) / np.sqrt(runs)
        w = np.zeros(10)
        w[2:7] = 1
        squared = (errors @ w) ** 2
        assert abs(squared.mean() - query_variance(integer, record, w)) < 4 * squared.std(ddof=1) / np.sqrt(runs)
        # the exact variances are the formula's: v·diag((AᵀA)⁻¹), v the record's exact noise variance
        a = integer.factors[0].astype(np.float64)
        assert np.allclose(variances, record.noise_variance * np.diag(np.linalg.inv(a.T @ a)), rtol=1e-9)


def test_two_axes_reconstruct_per_axis_as_the_explicit_least_squares():
    integer = quantise(strategy((4, 6), "l2"))
    rng = np.random.default_rng(2)
    y = rng.normal(size=(2, 3) + tuple(f.shape[0] for f in integer.factors))  # leading axes carried along
    a = explicit(integer).astype(np.float64)
    expected = np.linalg.lstsq(a, y.reshape(6, -1).T, rcond=None)[0].T.reshape(2, 3, 4, 6)
    assert np.allclose(reconstruct(integer, y), expected, atol=1e-9)
    record = ZCDPBudget(1, bits=SeededBits(0)).measure(np.zeros(3, dtype=np.int64), 1, 1, 1, "unit")[1]
    covariance = record.noise_variance * np.linalg.inv(a.T @ a)
    assert np.allclose(cell_variances(integer, record).ravel(), np.diag(covariance), rtol=1e-9)
    w1, w2 = np.array([0, 1, 1, 0.0]), np.array([1, 1, 1, 0, 0, 0.0])
    w = np.kron(w1, w2)
    assert query_variance(integer, record, [w1, w2]) == pytest.approx(w @ covariance @ w, rel=1e-9)


@pytest.mark.parametrize("counts", [np.zeros((5,), dtype=np.int64), np.full(6, 1.5), np.full(6, -1),
                                    np.full(6, 2**50)])
def test_bad_tables_are_refused_before_paying(counts):
    integer = quantise(strategy((6,), "l2"))
    budget = ZCDPBudget(1, bits=SeededBits(0))
    with pytest.raises(DataError):
        measure_strategy(integer, counts, budget, 1)
    assert budget.spent == 0
