"""Tree structures and tree inference: exact least squares in two passes, checked against dense solvers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.inference.nonnegative import grouped_rounding, grouped_simplex_projection, tree_least_squares, tree_nonnegative_integers
from dphist.algorithms.strategies.trees import LabelTree, SiblingGroups, Tree, height_for, product_tree, range_boundaries, range_tree


def random_tree(rng, n_cells: int) -> LabelTree:
    """A random hierarchy of nested partitions (not contiguous, uneven fan-out, chains allowed)."""
    labels = [np.arange(n_cells)]
    while labels[0].max() > 0:
        nodes = labels[0].max() + 1
        groups = rng.integers(0, max(1, nodes // rng.integers(1, 4)), nodes)  # fan-out 1..many
        _, groups = np.unique(groups, return_inverse=True)
        labels.insert(0, groups[labels[0]])
    return LabelTree.from_labels((n_cells,), labels)


def dense_system(tree: Tree, measured_levels, variances):
    """Rows: one per measured node (indicator of its cells); the matching noise variances."""
    rows, var = [], []
    for level in measured_levels:
        for node in range(tree.sizes[level]):
            if np.isinf(variances[level][node]):
                continue
            rows.append((tree.labels(level) == node).astype(float))
            var.append(variances[level][node])
    return np.array(rows), np.array(var)


@pytest.mark.parametrize("seed", range(25))
def test_tree_inference_equals_dense_least_squares(seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, int(rng.integers(2, 40))) if seed % 2 else product_tree(
        tuple(int(s) for s in rng.integers(1, 7, size=rng.integers(1, 3))), int(rng.integers(2, 4)))
    L = tree.levels
    variances = [rng.uniform(0.1, 10, tree.sizes[l]) for l in range(L)]
    # Some nodes unmeasured (variance inf), never the leaves, sometimes the root.
    for l in range(L - 1):
        variances[l][rng.random(tree.sizes[l]) < 0.3] = np.inf
    truth = rng.integers(0, 50, tree.n_cells).astype(float)
    noisy = [s + rng.normal(0, np.sqrt(np.where(np.isinf(v), 1, v))) for s, v in
             zip(tree.level_sums(truth), variances)]
    fit = tree_least_squares(tree, noisy, variances)

    A, v = dense_system(tree, range(L), variances)
    y = np.concatenate([noisy[l][np.isfinite(variances[l])] for l in range(L)])
    W = 1 / np.sqrt(v)
    x_hat = np.linalg.lstsq(A * W[:, None], y * W, rcond=None)[0]
    assert np.allclose(fit.values[-1], x_hat, atol=1e-9, rtol=0)
    cov = np.linalg.inv(A.T @ (A / v[:, None]))
    assert np.allclose(fit.variances[-1], np.diag(cov), atol=1e-9, rtol=1e-9)
    for l in range(L):  # every level is the tree-sum of the leaves, and its variance matches
        Q = np.stack([(tree.labels(l) == k).astype(float) for k in range(tree.sizes[l])])
        assert np.allclose(fit.values[l], Q @ x_hat, atol=1e-9)
        assert np.allclose(fit.variances[l], np.einsum("ij,jk,ik->i", Q, cov, Q), atol=1e-8)


def test_small_oracles_from_algorithms_md():
    tree = range_tree(2, 2)
    fit = tree_least_squares(tree, [np.array([0.0]), np.array([0.5, 0.5])], [1.0, 1.0])
    assert np.allclose(fit.values[1], [1 / 6, 1 / 6])
    fit = tree_least_squares(tree, [np.array([0.0]), np.array([1.0, 0.0])], [1.0, 1.0])
    assert np.allclose(fit.values[1], [2 / 3, -1 / 3])


def test_range_variances_match_the_tree_oracle():
    # docs/algorithms.md §3.5: n = 16, b = 2, root kept, ε = 1, h = 5 levels -> each node Lap(5), variance 50.
    tree = range_tree(16, 2)
    A, v = dense_system(tree, range(tree.levels), [np.full(s, 50.0) for s in tree.sizes])
    cov = np.linalg.inv(A.T @ (A / v[:, None]))
    for (lo, hi), expected in {(0, 1): 30.369, (0, 8): 19.785, (3, 11): 81.690, (0, 16): 25.806}.items():
        q = np.zeros(16)
        q[lo:hi] = 1
        assert q @ cov @ q == pytest.approx(expected, abs=1e-3)


def test_range_tree_shapes():
    assert [len(c) - 1 for c in range_boundaries(4096, 16)] == [1, 16, 256, 4096]
    cuts = range_boundaries(10, 3)
    assert [c.tolist() for c in cuts[:2]] == [[0, 10], [0, 3, 6, 10]]
    for cut in cuts:
        assert cut[0] == 0 and cut[-1] == 10 and np.all(np.diff(cut) > 0)
    assert height_for(125, 5) == 3 and height_for(1000, 10) == 3 and height_for(1001, 10) == 4
    assert height_for(1, 2) == 0
    t = range_tree(1000, 10)
    assert t.levels == 4 and t.sizes == (1, 10, 100, 1000)


@given(st.integers(1, 300), st.integers(2, 20))
@settings(max_examples=80, deadline=None)
def test_range_tree_nodes_are_contiguous_and_balanced(n, b):
    for cuts in range_boundaries(n, b):
        assert cuts[0] == 0 and cuts[-1] == n and np.all(np.diff(cuts) >= 1)
    t = range_tree(n, b)
    assert t.levels == height_for(n, b) + 1
    x = np.arange(n)
    for level, sums in enumerate(t.level_sums(x)):
        assert sums.sum() == x.sum()


def test_quadtree_levels():
    t = product_tree((8, 8), 2)
    assert t.sizes == (1, 4, 16, 64)
    x = np.arange(64).reshape(8, 8)
    assert t.level_sums(x)[1].tolist() == [x[:4, :4].sum(), x[:4, 4:].sum(), x[4:, :4].sum(), x[4:, 4:].sum()]
    t = product_tree((16, 2), 2)  # the short axis stops splitting early
    assert t.sizes == (1, 4, 8, 16, 32)


def test_grouped_projection_matches_per_group_projection():
    """All groups at once give what each group projected alone gives (one group is checked against the KKT
    conditions and a generic solver in test_inference.py)."""
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 7, 60)
    values = rng.normal(0, 5, 60)
    totals = rng.uniform(0, 20, 7)
    totals[2] = 0.0
    out = grouped_simplex_projection(values, groups, totals)
    for g in range(7):
        if (groups == g).any():
            alone = values[groups == g]
            assert np.allclose(out[groups == g], grouped_simplex_projection(alone, np.zeros(alone.size, np.int64),
                                                                            totals[g:g + 1]))


def test_grouped_rounding_hits_integer_totals():
    rng = np.random.default_rng(4)
    groups = rng.integers(0, 5, 40)
    values = rng.uniform(0, 10, 40)
    sums = np.bincount(groups, weights=values, minlength=5)
    totals = np.where(rng.random(5) < 0.5, np.floor(sums), np.ceil(sums)).astype(np.int64)
    out = grouped_rounding(values, groups, totals)
    assert np.array_equal(np.bincount(groups, weights=out, minlength=5).astype(np.int64), totals)
    assert np.all(np.abs(out - values) < 1)


def test_tree_post_processing_is_nonnegative_integer_and_additive():
    rng = np.random.default_rng(5)
    tree = range_tree(50, 4)
    noisy = [s + rng.laplace(0, 5, s.size) for s in tree.level_sums(rng.poisson(1.0, 50))]
    fit = tree_least_squares(tree, noisy, [50.0] * tree.levels)
    cells = tree_nonnegative_integers(tree, fit.values)
    assert cells.dtype == np.int64 and np.all(cells >= 0)
    assert cells.sum() == max(round(fit.values[0][0]), 0)
    # Exactly additive on every level: the released cells' level sums are non-negative integers.
    for sums in tree.level_sums(cells):
        assert np.all(sums >= 0)


@pytest.mark.parametrize("shape, b", [((37,), 3), ((16, 16), 2), ((5, 7), 4), ((3, 4, 5), 2), ((1, 9), 3)])
def test_grid_tree_parents_and_sums_agree_with_its_labels(shape, b):
    grid = product_tree(shape, b)
    explicit = LabelTree.from_labels(shape, [grid.labels(l) for l in range(grid.levels)])
    assert grid.sizes == explicit.sizes
    for l in range(1, grid.levels):
        assert np.array_equal(grid.parents[l], explicit.parents[l])
    x = np.random.default_rng(0).integers(0, 100, shape)
    for a, e in zip(grid.level_sums(x), [np.bincount(explicit.labels(l), weights=x.ravel(),
                                                      minlength=explicit.sizes[l]) for l in range(grid.levels)]):
        assert np.array_equal(a, e)


def _projection_by_one_sort(values, groups, totals):
    """The former O(n log n) projection (one sort of every entry by group and value), kept as an oracle."""
    order = np.lexsort((-values, groups))
    u, g = values[order], groups[order]
    counts = np.bincount(g, minlength=totals.size)
    first = np.cumsum(counts) - counts
    k = np.arange(u.size) - first[g] + 1
    within = np.cumsum(u) - np.concatenate([[0.0], np.cumsum(u)])[first][g]
    rho = np.bincount(g, weights=u - (within - totals[g]) / k > 0, minlength=totals.size).astype(int)
    last = first + np.maximum(rho, 1) - 1
    theta = np.where(rho > 0, (within[np.minimum(last, u.size - 1)] - totals) / np.maximum(rho, 1), np.inf)
    return np.maximum(values - np.where(counts == 0, 0.0, theta)[groups], 0.0)


def _rounding_by_one_sort(values, groups, totals):
    """The former largest-remainder rounding (one sort by group, remainder and position), kept as an oracle."""
    floor = np.floor(values)
    counts = np.bincount(groups, minlength=totals.size)
    need = np.clip(totals - np.bincount(groups, weights=floor, minlength=totals.size).round().astype(int), 0, counts)
    order = np.lexsort((np.arange(values.size), -(values - floor), groups))
    first = np.cumsum(counts) - counts
    rank = np.empty(values.size, dtype=np.int64)
    rank[order] = np.arange(values.size) - first[groups[order]]
    return floor.astype(np.int64) + (rank < need[groups])


@pytest.mark.parametrize("sizes", ["equal", "unequal", "with_empty", "one"])
@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_grouped_post_processing_matches_the_one_sort_oracle(sizes, chunk, monkeypatch):
    """Per-group sorting (in blocks of equal-size groups, small chunks too) gives the one-sort answer: the
    projection to float dust, the rounding exactly (ties in remainder broken by position: values on a
    quarter grid make many)."""
    from dphist.inference.nonnegative import SiblingGroups

    monkeypatch.setattr(SiblingGroups, "CHUNK_ENTRIES", chunk)
    rng = np.random.default_rng(11)
    n_groups = {"equal": 50, "unequal": 40, "with_empty": 30, "one": 1}[sizes]
    if sizes == "equal":
        groups = np.tile(np.arange(n_groups), 16)
    elif sizes == "one":
        groups = np.zeros(300, dtype=np.int64)
    else:
        groups = rng.integers(0, n_groups if sizes == "unequal" else n_groups // 2, 400) * (1 if sizes == "unequal" else 2)
    values = np.round(rng.normal(0.5, 3, groups.size) * 4) / 4
    totals = np.round(rng.uniform(0, 30, n_groups))
    totals[::5] = 0.0
    real = grouped_simplex_projection(values, groups, totals)
    assert np.allclose(real, _projection_by_one_sort(values, groups, totals), atol=1e-9)
    assert np.all(real >= 0)
    occupied = np.bincount(groups, minlength=n_groups) > 0
    assert np.allclose(np.bincount(groups, weights=real, minlength=n_groups)[occupied], totals[occupied])
    whole = totals.astype(np.int64)
    rounded = grouped_rounding(real, groups, whole)
    assert np.array_equal(rounded, _rounding_by_one_sort(real, groups, whole))
    assert np.array_equal(np.bincount(groups, weights=rounded, minlength=n_groups)[occupied].astype(int),
                          whole[occupied])


@pytest.mark.parametrize("shape, b, sorted_levels", [((64,), 4, 0), ((16, 16), 4, 0), ((8, 32), 2, 0),
                                                     ((4, 8, 16), 2, 0), ((37,), 3, 1), ((16, 12), 4, 0),
                                                     ((5, 7), 4, 1), ((1000,), 4, 1)])
def test_grid_sibling_groups_list_each_parents_children_in_order(shape, b, sorted_levels, monkeypatch):
    """The transposed-grid order of a uniform level (and the sorted order of the rest) lists, group by group,
    exactly the nodes whose parent is that group, in increasing order.  Domains of a power of b need no sort."""
    grid = product_tree(shape, b)
    sorts = []
    monkeypatch.setattr(Tree, "sibling_groups", lambda self, level: sorts.append(level) or SiblingGroups.of(
        self.parents[level], self.sizes[level - 1]))
    for level in range(1, grid.levels):
        siblings = grid.sibling_groups(level)
        parent = grid.parents[level]
        assert np.array_equal(siblings.order, np.argsort(parent, kind="stable"))
        assert np.array_equal(siblings.counts, np.bincount(parent, minlength=grid.sizes[level - 1]))
    assert len(sorts) == sorted_levels


@pytest.mark.parametrize("reps", [(), (3,)])
@pytest.mark.parametrize("shape, b, root", [((64,), 4, False), ((16, 16), 2, True), ((8, 8), 4, False),
                                            ((37,), 3, True)])
def test_least_squares_on_uniform_levels_matches_the_general_computation(shape, b, root, reps):
    """A grid over a power of its branching with one variance per level takes the scalar path (by sibling
    groups, without repetitions); given the same variances as per-node arrays, the general path must give the
    same estimates and variances.  (37 cells in threes: not uniform, the general path both times.)"""
    tree = product_tree(shape, b)
    rng = np.random.default_rng(8)
    counts = rng.poisson(3.0, shape)
    noise_variance = [2.0 * (l + 1) for l in range(tree.levels)]
    noisy = [s + rng.laplace(0, 1 + l, reps + (s.size,)) for l, s in enumerate(tree.level_sums(counts))]
    if not root:
        noisy[0] = None
    fast = tree_least_squares(tree, noisy, noise_variance)
    general = tree_least_squares(tree, noisy, [np.full(size, v) for v, size in zip(noise_variance, tree.sizes)])
    for l in range(tree.levels):
        assert np.allclose(fast.values[l], general.values[l], rtol=1e-12, atol=1e-9)
        assert np.allclose(fast.variances[l], general.variances[l], rtol=1e-12, equal_nan=True)
    if shape != (37,):
        assert fast.variances[-1].strides == (0,)  # one number per level, not an array per node
        assert np.all(np.diff(general.variances[-1]) == 0) and np.isfinite(general.variances[-1][0])


@pytest.mark.parametrize("shape, b", [((64,), 4), ((16, 16), 4), ((8, 32), 2), ((4, 8, 16), 2)])
def test_grid_groups_act_like_the_general_grouping(shape, b, monkeypatch):
    """On every level of a grid over a power of b: the same rows (block by block), member positions, sums,
    per-group shifts and scattered additions as the grouping made from the parent array."""
    from dphist.algorithms.strategies.trees import GridGroups

    monkeypatch.setattr(SiblingGroups, "CHUNK_ENTRIES", 40)  # several blocks per level
    tree = product_tree(shape, b)
    rng = np.random.default_rng(4)
    for level in range(1, tree.levels):
        grid = tree.sibling_groups(level)
        assert isinstance(grid, GridGroups)
        general = SiblingGroups.of(tree.parents[level], tree.sizes[level - 1])
        values = rng.normal(size=tree.sizes[level])
        per_group = rng.normal(size=tree.sizes[level - 1])
        assert np.allclose(grid.sums(values), general.sums(values))
        assert np.array_equal(grid.subtract(values, per_group), values - per_group[tree.parents[level]])
        out_grid, out_general = np.zeros(values.size), np.zeros(values.size)
        seen = []
        for ids, key in grid.blocks():
            rows = grid.take(values, key)
            assert np.array_equal(rows, values[general.order.reshape(-1, rows.shape[1])[ids]])
            r, c = rows.shape[0] - 1, rows.shape[1] - 1
            assert rows[r, c] == values[grid.member(key, r, c)]
            grid.add(out_grid, key, rows * 2)
            seen.append(ids)
        for ids, key in general.blocks():
            general.add(out_general, key, general.take(values, key) * 2)
        assert np.array_equal(np.concatenate(seen), np.arange(tree.sizes[level - 1]))
        assert np.array_equal(out_grid, 2 * values) and np.array_equal(out_general, 2 * values)
