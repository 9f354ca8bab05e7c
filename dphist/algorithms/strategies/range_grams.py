"""Gram matrices WᵀW of range workloads on ordered columns, in closed form, with the SVD lower bound
(docs/algorithms.md §12).

A workload W of m linear queries over n cells enters every error formula of a linear strategy only through its
Gram matrix G = WᵀW: the GLS estimate from a strategy A with unit noise errs on W by tr(G (AᵀA)⁻¹) in total.  For
the two workloads of one ordered column the Gram matrix has a closed form (cell indices from 0):

* all ranges [i, j), 0 <= i < j <= n (m = n(n+1)/2, as ``dphist.evaluation.workloads.all_ranges``): cells a <= b
  are both in [i, j) exactly when i <= a and j > b, so G[a, b] = (a + 1)(n − b);
* prefixes [0, i] (m = n, as ``dphist.evaluation.workloads.prefix``): both cells are in [0, i] exactly when
  i >= max(a, b), so G[a, b] = n − max(a, b).

Both are semiseparable (every entry a product of a function of min(a, b) and one of max(a, b)), so G·v costs
O(n) by running sums (:meth:`RangeGram.times`) and the dense matrix is needed only for its eigenvalues.

A product workload W₁ ⊗ W₂ (all 2-D boxes are the product of the per-axis all-ranges, flattened in C order) has
Gram G₁ ⊗ G₂ and m₁m₂ queries.  Its eigenvalues are the products λᵢμⱼ, so the SVD bound factorises too
(:class:`KroneckerGram`), and the n₁n₂ × n₁n₂ matrix is never formed.

The SVD bound (Li and Miklau, PVLDB 2012): every strategy whose columns have L2 norm at most 1 errs on W by at
least (Σᵢ √λᵢ(G))² / n in total, per unit noise variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["KINDS", "RangeGram", "KroneckerGram", "range_gram", "rmse_per_sigma"]

#: The range workloads of one ordered column this module knows.
KINDS = ("all_ranges", "prefix")
#: Dense eigenvalues are refused above this many cells (8192² doubles is 512 MiB).
MAX_DENSE_CELLS = 8192


@dataclass(frozen=True)
class RangeGram:
    """The Gram matrix WᵀW of the workload ``kind`` (one of :data:`KINDS`) over ``n`` cells of one ordered column."""

    kind: str
    n: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"range workload must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 1:
            raise ValueError(f"a range workload needs n >= 1 cells, got {self.n!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def queries(self) -> int:
        """m, the number of queries: n(n+1)/2 ranges, or n prefixes."""
        return self.n * (self.n + 1) // 2 if self.kind == "all_ranges" else self.n

    def diagonal(self) -> np.ndarray:
        """G[a, a]: the number of queries holding cell a."""
        a = np.arange(self.n, dtype=np.float64)
        return (a + 1) * (self.n - a) if self.kind == "all_ranges" else self.n - a

    def trace(self) -> float:
        """tr G, the total squared error of measuring every cell once with unit noise (the identity strategy)."""
        return float(self.diagonal().sum())

    def dense(self) -> np.ndarray:
        """G as a dense float64 n × n array."""
        if self.n > MAX_DENSE_CELLS:
            raise ValueError(f"a dense {self.n} x {self.n} Gram matrix is too large")
        a = np.arange(self.n)
        low, high = np.minimum.outer(a, a), np.maximum.outer(a, a)
        g = (low + 1) * (self.n - high) if self.kind == "all_ranges" else self.n - high
        return g.astype(np.float64)

    def times(self, v: np.ndarray) -> np.ndarray:
        """G·v for v of shape (n,) or (n, k), in O(n k) by running sums along the cells (axis 0).

        all ranges: (Gv)_a = (a + 1)·Σ_{b>=a} (n − b) v_b + (n − a)·Σ_{b<a} (b + 1) v_b;
        prefixes:   (Gv)_a = (n − a)·Σ_{b<=a} v_b + Σ_{b>a} (n − b) v_b."""
        v = np.asarray(v, dtype=np.float64)
        n = self.n
        if v.shape[0] != n:
            raise ValueError(f"need {n} rows, got {v.shape[0]}")
        a = np.arange(n, dtype=np.float64).reshape((n,) + (1,) * (v.ndim - 1))
        upper = (n - a) * v  # (n − b) v_b
        from_here = np.cumsum(upper[::-1], axis=0)[::-1]  # Σ_{b>=a} (n − b) v_b
        if self.kind == "all_ranges":
            below = np.cumsum((a + 1) * v, axis=0) - (a + 1) * v  # Σ_{b<a} (b + 1) v_b
            return (a + 1) * from_here + (n - a) * below
        return (n - a) * np.cumsum(v, axis=0) + (from_here - upper)

    @cached_property
    def _root_eigenvalues(self) -> float:
        eigenvalues = np.linalg.eigvalsh(self.dense())
        return float(np.sqrt(np.clip(eigenvalues, 0, None)).sum())

    def root_eigenvalue_sum(self) -> float:
        """Σᵢ √λᵢ(G) (dense eigenvalues, O(n³), cached)."""
        return self._root_eigenvalues

    def svd_bound(self) -> float:
        """The SVD lower bound on the total squared error of any strategy with L2 column norms <= 1, per unit
        noise variance: (Σᵢ √λᵢ(G))² / n (Li and Miklau 2012)."""
        return self.root_eigenvalue_sum() ** 2 / self.n


@dataclass(frozen=True)
class KroneckerGram:
    """The Gram matrix G₁ ⊗ G₂ ⊗ … of a product workload W₁ ⊗ W₂ ⊗ … over a table of shape (n₁, n₂, …), C order;
    never formed beyond its factors (:meth:`dense` is a test oracle for small shapes)."""

    factors: tuple[RangeGram, ...]

    def __post_init__(self) -> None:
        if not self.factors or not all(isinstance(f, RangeGram) for f in self.factors):
            raise ValueError("a product workload needs one RangeGram per axis")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(f.n for f in self.factors)

    @property
    def n(self) -> int:
        return math.prod(self.shape)

    @property
    def queries(self) -> int:
        return math.prod(f.queries for f in self.factors)

    def trace(self) -> float:
        """tr(G₁ ⊗ G₂ …) = Π_k tr G_k."""
        return math.prod(f.trace() for f in self.factors)

    def dense(self) -> np.ndarray:
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f.dense())
        if out.shape[0] > MAX_DENSE_CELLS:
            raise ValueError(f"a dense {out.shape[0]} x {out.shape[0]} Gram matrix is too large")
        return out

    def svd_bound(self) -> float:
        """(Σ √λ(G₁ ⊗ G₂ …))² / n = Π_k (Σ √λ(G_k))² / n_k: the eigenvalues of a Kronecker product are the
        products of the factors' eigenvalues."""
        return math.prod(f.svd_bound() for f in self.factors)


def range_gram(kind: str, shape) -> RangeGram | KroneckerGram:
    """The Gram matrix of ``kind`` over ``shape``: one column (an int or a 1-tuple) gives a :class:`RangeGram`,
    several the product workload of ``kind`` on every axis (:class:`KroneckerGram`)."""
    dims = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if len(dims) == 1:
        return RangeGram(kind, dims[0])
    return KroneckerGram(tuple(RangeGram(kind, n) for n in dims))


def rmse_per_sigma(total_squared_error: float, queries: int) -> float:
    """The root mean squared error per query, √(total / m), for a total squared error per unit noise variance."""
    return math.sqrt(total_squared_error / queries)
