"""Checks of an Estimate's intervals against the truth they claim to cover, for the algorithms' tests.

What a cell's interval covers (Estimate's docstring): with ``groups`` None the cell's true count; else the true total
of the cell's bucket ÷ the bucket's cells (a bucket of one cell: its count).  The half-width is ``halfwidth`` where
the Estimate gives one, else 1.96 × √``variance`` (what the publishing layer draws).
"""

from __future__ import annotations

import numpy as np

Z_95 = 1.959963984540054


def targets(counts: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    """Per cell (flat), what its interval claims to cover."""
    x = np.asarray(counts, dtype=np.float64).ravel()
    if groups is None:
        return x
    g = np.asarray(groups).ravel()
    _, bucket = np.unique(g, return_inverse=True)
    return (np.bincount(bucket, weights=x) / np.bincount(bucket))[bucket]


def halfwidths(estimate) -> np.ndarray:
    """Per cell (flat), the interval's half-width."""
    if estimate.halfwidth is not None:
        return np.broadcast_to(np.asarray(estimate.halfwidth, dtype=np.float64), estimate.values.shape).ravel()
    return Z_95 * np.sqrt(np.broadcast_to(np.asarray(estimate.variance, dtype=np.float64),
                                          estimate.values.shape)).ravel()


def covered_share(estimate, counts: np.ndarray) -> float:
    """The share of the cells whose interval holds what it claims to cover (unrounded, not cut at 0: the cut
    never removes a non-negative target)."""
    miss = np.abs(estimate.values.ravel() - targets(counts, estimate.groups)) - halfwidths(estimate)
    return float(np.mean(miss <= 1e-9))


def standardised(estimate, counts: np.ndarray) -> np.ndarray:
    """(value − target) / stated sd, one per bucket (its cells share one noisy value), flat."""
    z = (estimate.values.ravel() - targets(counts, estimate.groups)) / np.sqrt(
        np.broadcast_to(np.asarray(estimate.variance, dtype=np.float64), estimate.values.shape).ravel())
    if estimate.groups is None:
        return z
    _, first = np.unique(np.asarray(estimate.groups).ravel(), return_index=True)
    return z[first]


def dpbench_like(cells: int, records: int, seed: int) -> np.ndarray:
    """A skewed histogram like DPBench's 1-D tables: log-normal cell weights (σ = 1.5), about 30 % of the cells
    empty, ``records`` records drawn from them (int64)."""
    rng = np.random.default_rng(seed)
    weights = np.exp(rng.normal(0.0, 1.5, cells))
    weights[rng.random(cells) < 0.3] = 0.0
    return rng.multinomial(records, weights / weights.sum()).astype(np.int64)


def spiky_histogram(cells: int, records: int, seed: int) -> np.ndarray:
    """A table shaped as DPBench's 1-D ones are: most cells empty, a few spikes, smooth stretches between, with
    ``records`` records drawn by the DPBench protocol (a multinomial on the shape)."""
    from dphist.evaluation.benchmark import sample_from_shape

    rng = np.random.default_rng(seed)
    shape = np.zeros(cells)
    for _ in range(4):  # smooth stretches
        a = int(rng.integers(0, cells - cells // 8))
        shape[a:a + cells // 8] += rng.uniform(0.5, 2) * np.hanning(cells // 8)
    shape[rng.choice(cells, 6, replace=False)] += rng.uniform(2, 20, 6)  # spikes
    return sample_from_shape(shape, records, seed)
