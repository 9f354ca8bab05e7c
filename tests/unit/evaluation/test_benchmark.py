"""The benchmark's data protocol (dphist/evaluation/benchmark.py): DPBench's sampling of a table of records from a
histogram's shape, and the samples every caller of the protocol draws alike."""

from __future__ import annotations

import numpy as np
import pytest

from dphist.evaluation.benchmark import benchmark_sample, derived_seed, sample_from_shape


def test_sample_from_shape():
    x = np.array([[0, 3, 0, 1], [5, 0, 0, 2], [0, 0, 9, 0]])
    a = sample_from_shape(x, 100_000, seed=1)
    assert a.dtype == np.int64 and a.shape == x.shape
    assert a.sum() == 100_000
    assert np.all(a[x == 0] == 0) and np.all(a[x > 0] > 0)
    np.testing.assert_allclose(a / a.sum(), x / x.sum(), atol=0.01)
    np.testing.assert_array_equal(a, sample_from_shape(x, 100_000, seed=1))
    assert not np.array_equal(a, sample_from_shape(x, 100_000, seed=2))
    assert sample_from_shape(x, 0, seed=1).sum() == 0
    with pytest.raises(ValueError):
        sample_from_shape(np.zeros(4), 10, seed=1)
    with pytest.raises(ValueError):
        sample_from_shape(np.array([1, -1, 2]), 10, seed=1)


def test_a_benchmark_sample_is_the_protocols_draw_at_its_derived_seed():
    x = np.arange(1, 33)
    sample = benchmark_sample(x, 1000, seed=7, dataset_index=2, sample=3)
    np.testing.assert_array_equal(sample, sample_from_shape(x, 1000, seed=derived_seed(7, 2, 1000, 3)))
    assert not np.array_equal(sample, benchmark_sample(x, 1000, seed=7, dataset_index=2, sample=4))
    assert derived_seed(7, 2, 1000, 3) == derived_seed(7, 2, 1000, 3) != derived_seed(7, 2, 1000, 4)
