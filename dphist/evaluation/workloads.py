"""Range-query workloads and error metrics, for the benchmark, the ``evaluate`` command and tests.

A workload W is a set of linear queries over a count table x (1-D of length n, or d-dimensional and flattened in
C order when a matrix view is needed).  Every query here is an axis-aligned box of cells, so a workload is stored
as half-open boxes [lo, hi) and answered with prefix sums or a summed-area table, never cell by cell.  The
explicit matrix exists only as a test oracle for small domains.

The error metrics measure W x − W x̂, computed as W (x − x̂) (the same numbers, by linearity, with less
cancellation).  ``all_ranges`` carries closed forms of its L1 and squared norms, so its n(n+1)/2 queries are
never enumerated when scoring.  ``expected_squared_error`` is the exact data-independent oracle of
docs/algorithms.md §0: trace(W (AᵀV⁻¹A)⁻¹ Wᵀ) for the GLS estimate from a linear strategy A.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse

__all__ = [
    "Workload",
    "from_boxes",
    "ranges",
    "prefix",
    "all_ranges",
    "random_ranges",
    "random_boxes",
    "identity",
    "marginals",
    "total",
    "l1_error",
    "squared_error",
    "scaled_average_l1",
    "rmse",
    "expected_squared_error",
]

# Explicit matrices are for tests: |W| * n above this many entries would mean an oracle run of minutes and GiB.
MAX_MATRIX_ENTRIES = 50_000_000
# Enumerating all_ranges query by query is refused above this many queries (n above ~10,000).
MAX_ENUMERATED_QUERIES = 50_000_000
# Dense n x n algebra (Gram matrix, expected error) is refused above this many cells: 8192^2 doubles = 512 MiB.
MAX_DENSE_CELLS = 8192


@dataclass(frozen=True, eq=False)
class Workload:
    """A set of ``size`` linear queries over count tables of shape ``shape``; each query sums one box of cells.

    ``answer(x)`` gives the float64 answers, shape (size,).  ``boxes()`` gives the queries as half-open boxes,
    ``matrix()`` the explicit |W| x n CSR matrix over the C-order flattened domain, ``gram()`` the dense n x n
    WᵀW.  ``l1_norm`` / ``squared_norm``, when set, are closed forms of ‖W e‖₁ and ‖W e‖₂² for a float array e
    of the domain's shape; the error metrics use them instead of answering every query.
    """

    name: str
    shape: tuple[int, ...]
    size: int
    _answer: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    _boxes: Callable[[], tuple[np.ndarray, np.ndarray]] = field(repr=False)
    _gram: Callable[[], np.ndarray] | None = field(default=None, repr=False)
    l1_norm: Callable[[np.ndarray], float] | None = field(default=None, repr=False)
    squared_norm: Callable[[np.ndarray], float] | None = field(default=None, repr=False)

    @property
    def cells(self) -> int:
        """n, the number of cells of the domain."""
        return int(np.prod(self.shape, dtype=np.int64))

    def answer(self, x: np.ndarray) -> np.ndarray:
        """The query answers W x for a table x of this workload's shape; float64 array of shape (size,)."""
        x = np.asarray(x)
        if x.shape != self.shape:
            raise ValueError(f"workload {self.name} is over shape {self.shape}, got an array of shape {x.shape}")
        return np.asarray(self._answer(x), dtype=np.float64)

    def boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """The queries as half-open boxes: (lo, hi), int64 arrays of shape (size, d), query q sums
        x[lo[q, 0]:hi[q, 0], ..., lo[q, d-1]:hi[q, d-1]]."""
        return self._boxes()

    def matrix(self, shape=None) -> scipy.sparse.csr_matrix:
        """The explicit 0/1 query matrix, |W| x n in CSR form, over the C-order flattening of the domain.

        ``shape``, if given, must be this workload's shape (it is accepted for symmetry with the strategy
        matrices, which do not know their domain).  Raises ValueError when |W| * n exceeds MAX_MATRIX_ENTRIES.
        """
        self._check_shape(shape)
        if self.size * self.cells > MAX_MATRIX_ENTRIES:
            raise ValueError(f"workload {self.name}: a {self.size} x {self.cells} matrix is too large to build")
        lo, hi = self.boxes()
        return _box_matrix(self.shape, lo, hi)

    def gram(self) -> np.ndarray:
        """WᵀW as a dense float64 n x n array (entry [a, b] = number of queries containing both cells a and b)."""
        if self.cells > MAX_DENSE_CELLS:
            raise ValueError(f"workload {self.name}: a dense {self.cells} x {self.cells} Gram matrix is too large")
        if self._gram is not None:
            return self._gram()
        w = self.matrix()
        return np.asarray((w.T @ w).toarray(), dtype=np.float64)

    def _check_shape(self, shape) -> None:
        if shape is not None and _as_shape(shape) != self.shape:
            raise ValueError(f"workload {self.name} is over shape {self.shape}, not {tuple(np.atleast_1d(shape))}")


# --------------------------------------------------------------------------------------------------------------
# Helpers


def _as_shape(shape) -> tuple[int, ...]:
    """A domain shape as a tuple of positive ints; an int n means (n,)."""
    dims = tuple(int(s) for s in np.atleast_1d(shape))
    if not dims or any(s < 1 for s in dims):
        raise ValueError(f"a domain shape needs at least one axis and every axis at least 1 cell, got {shape}")
    return dims


def _exact_dtype(x: np.ndarray) -> type:
    # Integer tables are summed in int64 so prefix and box differences are exact; anything else in float64.
    return np.int64 if (x.dtype.kind in "biu") else np.float64


def _padded_prefix(x: np.ndarray) -> np.ndarray:
    """P with P[0] = 0 and P[j] = x[0] + ... + x[j-1]; length n + 1."""
    out = np.zeros(x.size + 1, dtype=_exact_dtype(x))
    np.cumsum(x, out=out[1:])
    return out


def _summed_area(x: np.ndarray) -> np.ndarray:
    """S with a zero pad in front of every axis: S[i_1, ..., i_d] = sum of x[:i_1, ..., :i_d]."""
    s = np.zeros(tuple(k + 1 for k in x.shape), dtype=_exact_dtype(x))
    s[(slice(1, None),) * x.ndim] = x
    for axis in range(x.ndim):
        np.cumsum(s, axis=axis, out=s)
    return s


def _box_sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sums of x over the boxes [lo, hi) by inclusion-exclusion on the 2^d corners of each box."""
    s = _summed_area(x)
    d = x.ndim
    out = np.zeros(lo.shape[0], dtype=s.dtype)
    for corner in itertools.product((False, True), repeat=d):
        index = tuple(hi[:, k] if upper else lo[:, k] for k, upper in enumerate(corner))
        if (d - sum(corner)) % 2:  # an odd number of lower bounds: this corner is subtracted
            out -= s[index]
        else:
            out += s[index]
    return out.astype(np.float64)


def _box_matrix(shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray) -> scipy.sparse.csr_matrix:
    """The 0/1 CSR matrix whose row q is the indicator of box q over the C-order flattened domain."""
    import scipy.sparse  # (scipy loads only where a matrix is built: a release's error estimate needs none)

    side = hi - lo
    volume = np.prod(side, axis=1)
    indptr = np.zeros(lo.shape[0] + 1, dtype=np.int64)
    np.cumsum(volume, out=indptr[1:])
    row = np.repeat(np.arange(lo.shape[0]), volume)
    # Offset of each entry inside its box, decoded as a mixed-radix number over the box's sides, last axis
    # fastest: this walks each box in C order, so column indices come out sorted within each row.
    rest = np.arange(indptr[-1], dtype=np.int64) - indptr[row]
    coords = [None] * len(shape)
    for k in reversed(range(len(shape))):
        coords[k] = lo[row, k] + rest % side[row, k]
        rest //= side[row, k]
    columns = np.ravel_multi_index(tuple(coords), shape) if coords[0].size else np.zeros(0, dtype=np.int64)
    data = np.ones(columns.size, dtype=np.float64)
    n = int(np.prod(shape, dtype=np.int64))
    return scipy.sparse.csr_matrix((data, columns, indptr), shape=(lo.shape[0], n))


def _frozen(*arrays: np.ndarray):
    """A boxes() callable that hands out read-only views, so a workload cannot be changed after construction."""
    for a in arrays:
        a.setflags(write=False)
    return lambda: arrays


def _cell_boxes(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """One unit box per cell in C order; a 0-dimensional shape () has exactly one (empty-coordinate) cell."""
    lo = np.indices(shape).reshape(len(shape), -1).T.astype(np.int64) if shape else np.zeros((1, 0), np.int64)
    return lo, lo + 1


# --------------------------------------------------------------------------------------------------------------
# Constructors


def from_boxes(shape, lo, hi, name: str = "boxes") -> Workload:
    """An explicit workload of half-open boxes over ``shape``: query q sums the cells with lo[q] <= i < hi[q].

    ``lo`` and ``hi`` are integer arrays of shape (count, d); for a 1-D domain shape (count,) is accepted.  Every
    box must be non-empty and inside the domain.  Answers use a summed-area table: O(n + 2^d * count).
    """
    shape = _as_shape(shape)
    d = len(shape)
    lo = np.array(lo, dtype=np.int64, ndmin=1)
    hi = np.array(hi, dtype=np.int64, ndmin=1)
    if d == 1 and lo.ndim == 1:
        lo, hi = lo[:, None], hi[:, None]
    if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] != d:
        raise ValueError(f"lo and hi must both have shape (count, {d}), got {lo.shape} and {hi.shape}")
    if lo.shape[0] == 0:
        raise ValueError("a workload needs at least one query")
    if np.any(lo < 0) or np.any(hi > np.array(shape)) or np.any(lo >= hi):
        raise ValueError("every box needs 0 <= lo < hi <= shape on every axis")
    return Workload(name, shape, lo.shape[0], lambda x: _box_sums(x, lo, hi), _frozen(lo, hi))


def ranges(n: int, lo, hi) -> Workload:
    """Explicit 1-D ranges [lo[q], hi[q]) over n cells, answered from one prefix-sum vector."""
    work = from_boxes(n, lo, hi, name="ranges")
    lo_, hi_ = (b[:, 0] for b in work.boxes())
    return Workload(work.name, work.shape, work.size, lambda x: _range_sums(x, lo_, hi_), work._boxes)


def _range_sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    p = _padded_prefix(x)
    return (p[hi] - p[lo]).astype(np.float64)


def prefix(n: int) -> Workload:
    """The n prefix queries [0, i] (inclusive) for i = 0, ..., n-1 over a 1-D domain of n cells."""
    (n,) = _as_shape(n)
    lo = np.zeros((n, 1), dtype=np.int64)
    hi = np.arange(1, n + 1, dtype=np.int64)[:, None]

    def gram() -> np.ndarray:
        # Cells a and b are both in [0, i] exactly when i >= max(a, b): n - max(a, b) queries.
        cells = np.arange(n)
        return (n - np.maximum.outer(cells, cells)).astype(np.float64)

    return Workload(f"prefix({n})", (n,), n, lambda x: np.cumsum(x, dtype=_exact_dtype(x)), _frozen(lo, hi), gram)


def all_ranges(n: int) -> Workload:
    """All n(n+1)/2 ranges [i, j), 0 <= i < j <= n, ordered by i then j.

    ``answer`` and ``boxes`` enumerate and refuse more than MAX_ENUMERATED_QUERIES queries; the error metrics
    never enumerate.  With D the prefix sums of an error vector e (leading 0, length m = n + 1), the range errors
    are the pairwise differences D_j − D_i, so ‖W e‖₂² = m·ΣD² − (ΣD)² and ‖W e‖₁ = Σ_{i<j} |D_j − D_i| is a
    weighted sum of sorted D: O(n log n).
    """
    (n,) = _as_shape(n)
    size = n * (n + 1) // 2

    def enumerated() -> tuple[np.ndarray, np.ndarray]:
        if size > MAX_ENUMERATED_QUERIES:
            raise ValueError(f"all_ranges({n}) has {size} queries, too many to enumerate")
        i, j = np.triu_indices(n + 1, k=1)
        return i.astype(np.int64)[:, None], j.astype(np.int64)[:, None]

    def answer(x: np.ndarray) -> np.ndarray:
        lo, hi = enumerated()
        return _range_sums(x, lo[:, 0], hi[:, 0])

    def gram() -> np.ndarray:
        # [i, j) holds cells a <= b exactly when i <= a and j > b: (a + 1)(n - b) ranges.
        cells = np.arange(n)
        return ((np.minimum.outer(cells, cells) + 1) * (n - np.maximum.outer(cells, cells))).astype(np.float64)

    return Workload(f"all_ranges({n})", (n,), size, answer, enumerated, gram,
                    l1_norm=_all_ranges_l1, squared_norm=_all_ranges_squared)


def _all_ranges_squared(e: np.ndarray) -> float:
    d = _padded_prefix(e.astype(np.float64))
    # m·ΣD² − (ΣD)² equals m·Σ(D − mean D)²; the centred form avoids cancelling two large numbers.
    centred = d - d.mean()
    return float(d.size * np.dot(centred, centred))


def _all_ranges_l1(e: np.ndarray) -> float:
    d = np.sort(_padded_prefix(e.astype(np.float64)))
    m = d.size
    # The k-th smallest value is the larger of a pair k times and the smaller m-1-k times.  The weights sum to
    # zero, so centring first changes nothing but the rounding.
    weights = 2.0 * np.arange(m) - (m - 1)
    return float(np.dot(weights, d - d.mean()))


def random_ranges(n: int, count: int, seed) -> Workload:
    """``count`` ranges [lo, hi) drawn independently and uniformly from all n(n+1)/2 ranges of n cells.

    Each range is a uniformly random pair of distinct endpoints of {0, ..., n}, drawn with
    ``np.random.default_rng(seed)``: first endpoints, then second endpoints, both as vectors.  (Uniform over
    ranges, so short ranges are more likely than in ``random_boxes``, which draws the length uniformly.)
    """
    (n,) = _as_shape(n)
    count = _positive_count(count)
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n + 1, size=count)
    second = rng.integers(0, n, size=count)
    second = second + (second >= first)  # uniform over the n endpoints that differ from `first`
    lo, hi = np.minimum(first, second), np.maximum(first, second)
    work = ranges(n, lo, hi)
    return Workload(f"random_ranges({n}, count={count}, seed={seed})", work.shape, work.size, work._answer,
                    work._boxes)


def random_boxes(shape, count: int, seed, max_side: int | None = None) -> Workload:
    """``count`` random boxes over ``shape``, drawn independently with ``np.random.default_rng(seed)``.

    On each axis k (in order) the side lengths of all boxes are drawn uniformly from [1, min(max_side, n_k)]
    (max_side defaults to n_k), then the lower corners uniformly from the n_k − side + 1 placements that fit.
    This is the DPBench range protocol; ``random_boxes((256, 256), 2000, seed=0)`` is its 2-D workload.
    Answered with a summed-area table.
    """
    shape = _as_shape(shape)
    count = _positive_count(count)
    if max_side is not None and int(max_side) < 1:
        raise ValueError(f"max_side must be at least 1, got {max_side}")
    rng = np.random.default_rng(seed)
    lo = np.empty((count, len(shape)), dtype=np.int64)
    side = np.empty_like(lo)
    for k, n_k in enumerate(shape):
        longest = n_k if max_side is None else min(int(max_side), n_k)
        side[:, k] = rng.integers(1, longest, size=count, endpoint=True)
        lo[:, k] = rng.integers(0, n_k - side[:, k], endpoint=True)
    work = from_boxes(shape, lo, lo + side)
    label = "x".join(map(str, shape))
    return Workload(f"random_boxes({label}, count={count}, seed={seed}, max_side={max_side})", shape, count,
                    work._answer, work._boxes)


def _positive_count(count) -> int:
    if int(count) != count or count < 1:
        raise ValueError(f"count must be a positive integer, got {count}")
    return int(count)


def identity(shape) -> Workload:
    """One query per cell, in C order: W = I."""
    shape = _as_shape(shape)
    n = int(np.prod(shape))
    return Workload(f"identity({'x'.join(map(str, shape))})", shape, n, lambda x: x.ravel(),
                    lambda: _cell_boxes(shape), lambda: np.eye(n))


def marginals(shape, axes_sets) -> Workload:
    """The marginal tables of x over each tuple of axes in ``axes_sets``, every cell a query, concatenated.

    Each marginal is x summed over the other axes and flattened in C order, with its axes in increasing order
    whatever order they are listed in; negative axes count from the end; () gives the total.
    """
    shape = _as_shape(shape)
    d = len(shape)
    kept_sets = []
    for axes in axes_sets:
        axes = tuple(int(a) for a in np.atleast_1d(np.asarray(axes, dtype=np.int64)))
        if any(not -d <= a < d for a in axes):
            raise ValueError(f"axes {axes} out of range for a {d}-dimensional domain")
        normal = tuple(sorted(a % d for a in axes))
        if len(set(normal)) != len(normal):
            raise ValueError(f"repeated axis in {axes}")
        kept_sets.append(normal)
    if not kept_sets:
        raise ValueError("marginals needs at least one set of axes")

    def answer(x: np.ndarray) -> np.ndarray:
        parts = [x.sum(axis=tuple(a for a in range(d) if a not in kept), dtype=_exact_dtype(x)).ravel()
                 for kept in kept_sets]
        return np.concatenate(parts)

    def boxes() -> tuple[np.ndarray, np.ndarray]:
        los, his = [], []
        for kept in kept_sets:
            cells = _cell_boxes(tuple(shape[a] for a in kept))[0]
            lo = np.zeros((cells.shape[0], d), dtype=np.int64)
            hi = np.tile(np.array(shape, dtype=np.int64), (cells.shape[0], 1))
            lo[:, list(kept)] = cells
            hi[:, list(kept)] = cells + 1
            los.append(lo)
            his.append(hi)
        return np.concatenate(los), np.concatenate(his)

    size = sum(int(np.prod([shape[a] for a in kept], dtype=np.int64)) for kept in kept_sets)
    return Workload(f"marginals({'x'.join(map(str, shape))}, {kept_sets})", shape, size, answer, boxes)


def total(shape) -> Workload:
    """One query: the sum of all cells."""
    shape = _as_shape(shape)
    n = int(np.prod(shape))
    lo = np.zeros((1, len(shape)), dtype=np.int64)
    hi = np.array([shape], dtype=np.int64)
    return Workload(f"total({'x'.join(map(str, shape))})", shape, 1,
                    lambda x: np.array([x.sum(dtype=_exact_dtype(x))]), _frozen(lo, hi),
                    lambda: np.ones((n, n)))


# --------------------------------------------------------------------------------------------------------------
# Error metrics


def _difference(workload: Workload, x, x_hat) -> np.ndarray:
    x = np.asarray(x)
    x_hat = np.asarray(x_hat)
    if x.shape != workload.shape or x_hat.shape != workload.shape:
        raise ValueError(f"workload {workload.name} is over shape {workload.shape}; "
                         f"got x {x.shape} and x_hat {x_hat.shape}")
    return x.astype(np.float64) - x_hat.astype(np.float64)


def l1_error(workload: Workload, x, x_hat) -> float:
    """‖W x − W x̂‖₁, the summed absolute error of the workload's answers."""
    e = _difference(workload, x, x_hat)
    if workload.l1_norm is not None:
        return float(workload.l1_norm(e))
    return float(np.abs(workload.answer(e)).sum())


def squared_error(workload: Workload, x, x_hat) -> float:
    """‖W x − W x̂‖₂², the summed squared error of the workload's answers."""
    e = _difference(workload, x, x_hat)
    if workload.squared_norm is not None:
        return float(workload.squared_norm(e))
    a = workload.answer(e)
    return float(np.dot(a, a))


def scaled_average_l1(workload: Workload, x, x_hat) -> float:
    """The DPBench error: ‖W x − W x̂‖₁ / (|W| · N), with N = x.sum() the true number of records.

    It is the mean absolute query error as a fraction of the data size.  An empty table (N = 0) is scaled by
    N = 1 instead, i.e. the plain mean absolute error.
    """
    records = float(np.asarray(x).sum())
    return l1_error(workload, x, x_hat) / (workload.size * (records if records != 0 else 1.0))


def rmse(workload: Workload, x, x_hat) -> float:
    """The root mean squared query error, sqrt(‖W x − W x̂‖₂² / |W|), in records."""
    return float(np.sqrt(squared_error(workload, x, x_hat) / workload.size))


# --------------------------------------------------------------------------------------------------------------
# Oracle and data protocol


def expected_squared_error(workload: Workload, strategy, variances, shape=None) -> float:
    """The exact expected total squared error Σ_q Var(q x̂) = trace(W (AᵀV⁻¹A)⁻¹ Wᵀ) of the GLS estimate.

    The strategy A (dense array or scipy.sparse, m x n, over the C-order flattened domain) is measured as
    y = A x + z with independent noise, Var z_j = ``variances[j]`` (length m, or a scalar for all rows).  A
    variance of ``np.inf`` marks an unmeasured row, which contributes nothing; every variance must be positive.
    x̂ = (AᵀV⁻¹A)⁻¹AᵀV⁻¹y, so the result is in squared records and is data-independent.  ``shape``, if given,
    must be the workload's shape.  Dense O(n³) algebra, for n up to MAX_DENSE_CELLS.

    Raises ValueError when AᵀV⁻¹A is singular to working precision: then x̂ is not defined (even if some
    workloads, such as the total alone, would still be estimable).
    """
    import scipy.linalg
    import scipy.sparse

    workload._check_shape(shape)
    n = workload.cells
    if n > MAX_DENSE_CELLS:
        raise ValueError(f"expected_squared_error is dense; {n} cells is above {MAX_DENSE_CELLS}")
    sparse = scipy.sparse.issparse(strategy)
    a = scipy.sparse.csr_matrix(strategy, dtype=np.float64) if sparse else np.asarray(strategy, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != n:
        raise ValueError(f"the strategy must have {n} columns (one per cell), got shape {a.shape}")
    v = np.asarray(variances, dtype=np.float64)
    try:
        v = np.broadcast_to(v, (a.shape[0],))
    except ValueError:
        raise ValueError(f"need one variance per strategy row ({a.shape[0]}), got shape {v.shape}") from None
    if np.any(np.isnan(v)) or np.any(v <= 0):
        raise ValueError("noise variances must be positive (np.inf for an unmeasured row)")

    measured = np.isfinite(v)
    weight = 1.0 / v[measured]
    a = a[measured]
    if sparse:
        info = np.asarray((a.T @ scipy.sparse.diags(weight) @ a).toarray())
    else:
        info = (a.T * weight) @ a

    # Cholesky fails outright on most singular matrices; rounding can let a singular one through with a tiny
    # pivot, which the LAPACK condition estimate then catches.
    singular = ValueError("AᵀV⁻¹A is singular: the strategy does not determine every cell, so x̂ is undefined")
    try:
        upper = scipy.linalg.cholesky(info, lower=False, check_finite=True)
    except np.linalg.LinAlgError:
        raise singular from None
    rcond, status = scipy.linalg.lapack.dpocon(upper, np.abs(info).sum(axis=0).max(), uplo="U")
    if status != 0 or not rcond > n * np.finfo(np.float64).eps:
        raise singular

    # trace(W M⁻¹ Wᵀ) = trace(M⁻¹ WᵀW): an n x n solve whatever the number of queries.
    solved = scipy.linalg.cho_solve((upper, False), workload.gram(), check_finite=False)
    return float(np.trace(solved))
