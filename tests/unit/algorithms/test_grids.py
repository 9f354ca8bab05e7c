"""UGrid and AGrid (dphist/algorithms/grids.py): budget, sensitivities, noise, structure, the intervals (exact
variance, coverage of the blocks' shares), zCDP, bad input."""

from __future__ import annotations

from fractions import Fraction
import math

import numpy as np
import pytest

from dphist.algorithms.grids import (AGrid, UGrid, box_sums, grid_boxes, block_edges, equivalent_epsilon,
                                     grid_blocks)
from dphist.algorithms.identity import Identity
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits, ZCDPBudget, discrete_laplace_variance
from dphist.evaluation import workloads

from conftest import SHARED
from dphist_audit.replication import NoisePool, PooledBudget
from interval_checks import covered_share, dpbench_like, standardised

DPBENCH2 = SHARED / "data" / "dpbench" / "2D"


def _run(cls, counts, epsilon=Fraction(1), seed=0, trace=None, **options):
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    return cls(**options).run(np.asarray(counts, dtype=np.int64), budget), budget


@pytest.mark.parametrize("n, m", [(256, 10), (7, 3), (5, 5), (1, 1), (100, 31)])
def test_block_edges_cut_nearly_equal_blocks(n, m):
    edges = block_edges(n, m)
    sizes = np.diff(edges)
    assert edges[0] == 0 and edges[-1] == n and sizes.size == m
    assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1


def test_grid_blocks_are_m_by_m_on_a_square_table_and_clipped():
    assert grid_blocks((256, 256), 100) == (10, 10)
    assert grid_blocks((256, 256), 10) == (4, 4)  # ⌈√10⌉
    assert grid_blocks((256, 256), 0) == (1, 1)
    assert grid_blocks((4, 4), 1e6) == (4, 4)
    assert grid_blocks((100, 25), 100) == (20, 5)


@pytest.mark.parametrize("shape, per_axis", [((6, 5), (3, 2)), ((4, 4), (4, 4)), ((7, 3), (1, 3))])
def test_grid_boxes_tile_the_table_and_one_record_moves_one_block_by_one(shape, per_axis):
    """Δ₁ = Δ₂ = 1 for a grid's block counts: every unit vector moves exactly one block count, by 1."""
    lo, hi = grid_boxes((0, 0), shape, per_axis)
    for i in range(shape[0]):
        for j in range(shape[1]):
            unit = np.zeros(shape, dtype=np.int64)
            unit[i, j] = 1
            change = box_sums(unit, lo, hi)
            assert np.abs(change).sum() == 1 and np.square(change).sum() == 1


def test_ugrid_spends_the_budget_exactly_and_splits_as_documented():
    counts = np.random.default_rng(0).integers(0, 5, (16, 12))
    est, budget = _run(UGrid, counts, Fraction(1, 2), 1)
    assert budget.spent == budget.amount
    total, grid = budget.measurements
    assert (total.epsilon, grid.epsilon) == (Fraction(1, 20), Fraction(9, 20))
    assert total.queries == 1 and grid.queries == est.choices["grid"][0] * est.choices["grid"][1]
    assert grid.scale == Fraction(20, 9) and total.scale == 20


def test_agrid_spends_the_budget_exactly_and_splits_as_documented():
    counts = np.random.default_rng(0).integers(0, 50, (40, 40))
    est, budget = _run(AGrid, counts, Fraction(1), 1, alpha="1/4")
    assert budget.spent == budget.amount
    total, level1, level2 = budget.measurements
    assert (total.epsilon, level1.epsilon, level2.epsilon) == (Fraction(1, 20), Fraction(19, 80), Fraction(57, 80))
    m1 = est.choices["level1_grid"]
    assert m1[0] == m1[1] > 10  # N ≈ 40,000: ⌈√(N̂·(19/20)/5)/4⌉ = 22 > the floor of 10
    assert level1.queries == m1[0] * m1[1] and level2.queries == est.choices["level2_blocks"]


def test_the_grid_depends_on_the_data_only_through_the_noisy_total():
    """Two tables of the same total, with the same noise stream: the same noisy total, hence the same grid, and
    the same public structure; the grid follows the documented rule from the traced noisy total."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 20, (32, 32))
    b = rng.permutation(a.ravel()).reshape(32, 32)
    trace = []
    ea, budget = _run(UGrid, a, Fraction(1), 7, trace)
    eb, _ = _run(UGrid, b, Fraction(1), 7)
    assert ea.structure == eb.structure and ea.choices == eb.choices
    n_hat = max(1, int(trace[0].values[0]))
    m = min(32, math.ceil(math.sqrt(n_hat * 0.9 / 5)))
    assert ea.choices["grid"] == [m, m]
    ea, _ = _run(AGrid, a, Fraction(1), 7)
    eb, _ = _run(AGrid, b, Fraction(1), 7)
    assert ea.structure == eb.structure and ea.choices["level1_grid"] == eb.choices["level1_grid"]


def test_agrid_level2_sides_follow_the_noisy_level1_counts():
    counts = np.zeros((40, 40), dtype=np.int64)
    counts[:4, :4] = 500  # all in level-1 block 0
    trace = []
    est, _ = _run(AGrid, counts, Fraction(1), 2, trace)
    y1 = trace[1].values
    algo = AGrid()
    eps = float(Fraction(19, 20))  # ε̃ of the grid part at ε = 1, total_share 1/20
    assert est.choices["level2_sides"] == [algo.level2_side(int(v), eps) for v in y1]
    assert est.choices["level2_sides"][0] > 1 and max(est.choices["level2_sides"][1:]) <= 2


def test_ugrid_block_noise_has_the_discrete_laplace_variance():
    """All 64 cells as blocks (ε = 10, c = 1/100: the grid is clipped to the cells), 300 runs: 19,200 noise values
    of scale 1/ε_g = 1/9.5.  Relative sd of the sample variance √(5/19200) = 1.6 %; 6 sd = 9.7 % (false alarm
    < 1e-8).  A scale off by 10 % moves the variance by about 20 %."""
    counts = np.random.default_rng(1).integers(0, 9, (8, 8))
    noise = []
    for seed in range(300):
        trace = []
        est, budget = _run(UGrid, counts, Fraction(10), seed, trace, c="1/100")
        assert est.choices["grid"] == [8, 8]
        noise.append(trace[1].values - counts.ravel())
    noise = np.concatenate(noise)
    expected = discrete_laplace_variance(Fraction(2, 19))
    assert abs(noise.var() / expected - 1) < 0.097
    assert abs(noise.mean()) < 6 * math.sqrt(expected / noise.size)


def test_agrid_noise_of_both_levels_has_the_discrete_laplace_variance():
    """20 × 20 at ε = 1 (α = 1/2): level 1 has 100 blocks at scale 40/19, level 2 the cells of each block at the
    same scale.  200 runs: ≥ 20,000 values per level; 6 sd of the relative variance error < 10 %."""
    counts = np.random.default_rng(4).integers(0, 3, (20, 20))
    lo1, hi1 = grid_boxes((0, 0), (20, 20), (10, 10))
    true1 = box_sums(counts, lo1, hi1)
    n1, n2 = [], []
    sums = {}  # the true counts of block j's sub-blocks for a side: the same few sides recur run after run
    for seed in range(200):
        trace = []
        est, budget = _run(AGrid, counts, Fraction(1), seed, trace)
        n1.append(trace[1].values - true1)
        true2 = []
        for j, side in enumerate(est.choices["level2_sides"]):
            if (j, side) not in sums:
                sub = grid_blocks((2, 2), side * side)
                lo, hi = grid_boxes(tuple(lo1[j]), tuple(hi1[j]), sub)
                sums[j, side] = box_sums(counts, lo, hi)
            true2.append(sums[j, side])
        n2.append(trace[2].values - np.concatenate(true2))
    expected = discrete_laplace_variance(Fraction(40, 19))
    for noise in (np.concatenate(n1), np.concatenate(n2)):
        assert noise.size >= 20_000
        assert abs(noise.var() / expected - 1) < 6 * math.sqrt(5 / noise.size)


def test_agrid_inference_is_the_inverse_variance_average_then_the_difference_spread():
    """Under Laplace with equal scales, k children: the parent weight is the paper's α²m₂²/((1 − α)² + α²m₂²)
    (α = 1/2, m₂² = k, the actual number of children); the children's fitted counts add up to the combined value."""
    counts = np.zeros((40, 40), dtype=np.int64)
    counts[:4, :4] = 300
    trace = []
    est, budget = _run(AGrid, counts, Fraction(1), 5, trace)
    _, level1, level2 = budget.measurements
    assert level1.scale == level2.scale
    side = est.choices["level2_sides"][0]
    k = math.prod(grid_blocks((4, 4), side * side))  # the actual children (m₂ = 22 clipped to 4 × 4 cells)
    assert side > 4 and k == 16
    y1 = trace[1].values[0]
    children = trace[2].values[:k]
    w = k / (1 + k)  # α = 1 − α: α²m₂²/((1 − α)² + α²m₂²) = k/(1 + k)
    combined = w * y1 + (1 - w) * children.sum()
    assert est.values[:4, :4].sum() == pytest.approx(combined, rel=1e-9)


@pytest.mark.parametrize("cls", [UGrid, AGrid])
def test_runs_under_zcdp_with_gaussian_grid_noise(cls):
    counts = np.random.default_rng(2).integers(0, 30, (32, 32))
    budget = ZCDPBudget(Fraction(1, 50), bits=SeededBits(5))
    estimate = cls().run(counts, budget)
    assert budget.spent == budget.amount
    assert all(m.sigma2 is not None and m.rho > 0 for m in budget.measurements)  # discrete Gaussian
    assert estimate.values.shape == counts.shape


def test_equivalent_epsilon_matches_the_noise_standard_deviation():
    """Pure: ε̃ = 1/b for Laplace scale b = factor/ε.  zCDP: the Laplace of the same sd as σ = factor/√(2ρ),
    i.e. √2·b = σ, so ε̃ = √2/σ = 2√ρ/factor."""
    pure = PrivacyBudget(Fraction(1, 2), bits=SeededBits(0), factor=2)
    assert equivalent_epsilon(pure, pure.amount) == pytest.approx(0.25)
    z = ZCDPBudget(Fraction(1, 8), bits=SeededBits(0))
    assert equivalent_epsilon(z, z.amount) == pytest.approx(2 * math.sqrt(1 / 8))


@pytest.mark.parametrize("cls, options", [(UGrid, {"c": 0}), (UGrid, {"c": "x"}), (UGrid, {"total_share": 1}),
                                          (UGrid, {"alpha": "1/2"}), (AGrid, {"alpha": 0}),
                                          (AGrid, {"c2": -1}), (AGrid, {"total_share": "nan"})])
def test_bad_options_are_refused(cls, options):
    with pytest.raises(UsageError, match=cls.name):
        cls(**options)


@pytest.mark.parametrize("cls", [UGrid, AGrid])
@pytest.mark.parametrize("shape", [(8,), (2, 2, 2), (), (0, 4)])
def test_unsupported_shapes_are_refused(cls, shape):
    with pytest.raises(UsageError, match=cls.name):
        cls().check_shape(shape)


@pytest.mark.parametrize("cls", [UGrid, AGrid])
def test_odd_shapes_run(cls):
    for shape in [(1, 1), (1, 30), (3, 200), (17, 5)]:
        counts = np.random.default_rng(0).integers(0, 4, shape)
        est, budget = _run(cls, counts, Fraction(1, 3), 0)
        assert est.values.shape == shape and budget.spent == budget.amount


@pytest.mark.skipif(not DPBENCH2.exists(), reason="../shared/data/dpbench is absent")
def test_accuracy_beats_identity_at_low_signal():
    """Adult 2-D at scale 1000, ε = 0.1 (3 samples): both grids' range error on 2000 random boxes is well below
    identity's raw error (the reference's UGrid/AGrid are 8x / 30x below Identity there)."""
    shape = np.load(DPBENCH2 / "Adult_2D_256_256.npy").astype(np.float64)
    boxes = workloads.random_boxes(shape.shape, 2000, seed=0)
    for cls in (UGrid, AGrid):
        ours, base = [], []
        for seed in range(3):
            truth = np.random.default_rng(seed).multinomial(1000, (shape / shape.sum()).ravel()).reshape(shape.shape)
            est = cls().run(truth, PrivacyBudget(Fraction(1, 10), bits=SeededBits(seed)))
            plain = Identity().run(truth, PrivacyBudget(Fraction(1, 10), bits=SeededBits(seed)))
            ours.append(workloads.scaled_average_l1(boxes, truth, est.values))
            base.append(workloads.scaled_average_l1(boxes, truth, plain.values))
        assert np.mean(ours) < 0.3 * np.mean(base), (cls.name, ours, base)


def test_grids_in_boxes_equal_the_box_by_box_grids():
    from dphist.algorithms.grids import _grids_in_boxes
    rng = np.random.default_rng(5)
    lo1, hi1 = grid_boxes((0, 0), (97, 61), (7, 5))
    subs = np.stack([rng.integers(1, hi1[:, 0] - lo1[:, 0] + 1), rng.integers(1, hi1[:, 1] - lo1[:, 1] + 1)], axis=1)
    lo2, hi2, owner = _grids_in_boxes(lo1, hi1, subs)
    parts = [grid_boxes(tuple(lo1[j]), tuple(hi1[j]), tuple(subs[j])) for j in range(lo1.shape[0])]
    assert np.array_equal(lo2, np.concatenate([p[0] for p in parts]))
    assert np.array_equal(hi2, np.concatenate([p[1] for p in parts]))
    assert np.array_equal(owner, np.repeat(np.arange(lo1.shape[0]), [p[0].shape[0] for p in parts]))
    assert subs.max() > 1 and lo2.shape[0] > lo1.shape[0]


# -- intervals: a cell's covers its block's share ---------------------------------------------------------------------

def test_ugrid_interval_is_the_block_counts_noise_spread_over_the_block():
    counts = dpbench_like(256, 3_000, 2).reshape(16, 16)
    est, budget = _run(UGrid, counts, Fraction(1), 3)
    record = budget.measurements[1]
    blocks = np.unique(est.groups)
    assert blocks.size == math.prod(est.choices["grid"]) and est.no_interval is None
    for b in blocks:
        cells = est.groups == b
        k = int(cells.sum())
        assert np.unique(est.values[cells]).size == 1
        assert est.variance[cells] == pytest.approx(record.noise_variance / k ** 2)
        assert est.halfwidth[cells] == pytest.approx(record.halfwidth() / k)


def test_agrid_variance_is_the_dense_least_squares_variance():
    """Given the grids of a run: the level-2 block counts' least-squares estimate from y₁ (variance v₁, each a sum
    of its children) and y₂ (v₂ each) has covariance (AᵀWA)⁻¹; its diagonal, over each block's cells squared, is
    the stated per-cell variance."""
    counts = dpbench_like(400, 20_000, 3).reshape(20, 20)
    trace: list = []
    est, budget = _run(AGrid, counts, Fraction(1), 4, trace)
    _, level1, level2 = budget.measurements
    v1, v2 = level1.noise_variance, level2.noise_variance
    blocks = np.unique(est.groups)
    n1, n2 = trace[1].values.size, trace[2].values.size
    assert blocks.size == n2
    # each level-2 block's owner: the level-1 block holding its cells (level-1 blocks tile the table)
    lo1, hi1 = grid_boxes((0, 0), (20, 20), est.choices["level1_grid"])
    owner_of_cell = np.zeros((20, 20), dtype=np.int64)
    for j, (a, b) in enumerate(zip(lo1, hi1)):
        owner_of_cell[a[0]:b[0], a[1]:b[1]] = j
    A = np.zeros((n1 + n2, n2))
    for block in blocks:
        cells = est.groups == block
        A[n1 + block, block] = 1.0
        A[np.unique(owner_of_cell[cells]), block] = 1.0
    weights = np.concatenate([np.full(n1, 1 / v1), np.full(n2, 1 / v2)])
    covariance = np.linalg.inv(A.T @ (weights[:, None] * A))
    k = np.bincount(est.groups.ravel())
    assert np.allclose(est.variance, (np.diag(covariance) / k ** 2)[est.groups], rtol=1e-9)


@pytest.mark.parametrize("cls, records, expected", [(UGrid, 1_000, "exact"), (AGrid, 4_000, "normal")])
def test_grid_intervals_cover_the_block_shares(cls, records, expected):
    """300 runs on a DPBench-like 16 × 16 table (ε = 1/2, pooled noise; UGrid 1,000 records: about 100 blocks a
    run, AGrid 4,000: about 210): the stated variance fits (mean of z² over (run, block) within 4.5 standard errors
    of 1, a false alarm below 1e-5; 30,000 and 63,000 values, standard errors 1.3 % and 0.8 %: it rejects a variance
    off by 6 % and 4 %), and the share of the cells whose interval holds their block's share is in 93-97.5 %
    (measured: UGrid 96.7 %, AGrid 94.3 %, standard errors over runs 0.11 %: the band is 7 standard errors away or
    more, no false alarm in practice).  AGrid's level-1 noise both sized its level-2 grids and enters its
    estimate; the variance and the coverage hold there too."""
    x = dpbench_like(256, records, 6).reshape(16, 16)
    pool = NoisePool(SeededBits(12))
    runs = [cls().run(x, PooledBudget(Fraction(1, 2), pool=pool, trace=None)) for _ in range(300)]
    z2 = np.concatenate([standardised(e, x) for e in runs]) ** 2
    assert z2.size > 20_000
    assert abs(z2.mean() - 1) < 4.5 * z2.std() / math.sqrt(z2.size)
    per_run = np.array([covered_share(e, x) for e in runs])
    assert per_run.std() / math.sqrt(per_run.size) < 0.003
    assert 0.93 <= per_run.mean() <= 0.975
    assert (runs[0].halfwidth is not None) == (expected == "exact")
    assert np.mean([np.unique(e.groups).size for e in runs]) < 256 * 0.9  # buckets of several cells
