"""Closed-form Gram matrices of range workloads, their fast products and the SVD bound, checked against
dphist.evaluation.workloads and the published identity and SVD-bound figures."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from dphist.algorithms.strategies.range_grams import KINDS, KroneckerGram, RangeGram, range_gram, rmse_per_sigma
from dphist.evaluation import workloads


def one_thread():
    """Dense eigenvalues on one BLAS thread: on a shared machine many threads are far slower, not faster."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - the limit is only for speed
        return contextlib.nullcontext()
    return threadpool_limits(1)


@pytest.mark.parametrize("n", [1, 2, 7, 33])
def test_grams_equal_the_evaluation_workloads(n):
    assert np.array_equal(RangeGram("all_ranges", n).dense(), workloads.all_ranges(n).gram())
    assert np.array_equal(RangeGram("prefix", n).dense(), workloads.prefix(n).gram())
    assert RangeGram("all_ranges", n).queries == workloads.all_ranges(n).size
    assert RangeGram("prefix", n).queries == workloads.prefix(n).size


@pytest.mark.parametrize("kind", KINDS)
def test_fast_product_and_diagonal_equal_the_dense_ones(kind):
    rng = np.random.default_rng(3)
    g = RangeGram(kind, 41)
    v = rng.normal(size=(41, 5))
    assert np.allclose(g.times(v), g.dense() @ v, rtol=1e-12, atol=1e-9)
    assert np.allclose(g.times(v[:, 2]), g.dense() @ v[:, 2], rtol=1e-12, atol=1e-9)
    assert np.array_equal(g.diagonal(), np.diag(g.dense()))


# The figures at n = 1024, RMSE per query per unit σ (L2 sensitivity 1).
PUBLISHED = {"all_ranges": (18.49, 3.49), "prefix": (22.64, 2.91)}


@pytest.mark.parametrize("kind", KINDS)
def test_identity_and_svd_bound_reproduce_the_published_figures(kind):
    g = RangeGram(kind, 1024)
    identity, bound = PUBLISHED[kind]
    assert rmse_per_sigma(g.trace(), g.queries) == pytest.approx(identity, abs=0.01)
    with one_thread():
        assert rmse_per_sigma(g.svd_bound(), g.queries) == pytest.approx(bound, abs=0.01)


def test_kronecker_gram_factorises_trace_queries_and_bound():
    g = range_gram("all_ranges", (5, 7))
    assert isinstance(g, KroneckerGram) and g.shape == (5, 7) and g.n == 35
    dense = g.dense()
    assert np.array_equal(dense, np.kron(RangeGram("all_ranges", 5).dense(), RangeGram("all_ranges", 7).dense()))
    assert g.queries == 15 * 28 and g.trace() == pytest.approx(np.trace(dense))
    roots = np.sqrt(np.clip(np.linalg.eigvalsh(dense), 0, None)).sum()
    assert g.svd_bound() == pytest.approx(roots**2 / 35, rel=1e-10)


@pytest.mark.parametrize("bad", [("ranges", 4), ("prefix", 0), ("prefix", 2.5), ("prefix", True)])
def test_bad_workloads_are_refused(bad):
    with pytest.raises(ValueError):
        RangeGram(*bad)
