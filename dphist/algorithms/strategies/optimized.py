"""Measurement strategies optimised for a range workload: HDMM's p-Identity (OPT₀) on one ordered column and its
Kronecker product (OPT_⊗) on several (McKenna, Miklau, Hay, Machanavajjhala, PVLDB 2018; docs/algorithms.md §12).

    strategy:  A(Θ) = [I; Θ]·D⁻¹ over n cells, Θ >= 0 of shape p × n, D = diag(d) the column norms of [I; Θ]:
               d_j = √(1 + Σ_k Θ_kj²) under L2 noise, d_j = 1 + Σ_k Θ_kj under L1 noise, so every column of A
               has norm 1 and the sensitivity is 1
    objective: f(Θ) = tr(G (AᵀA)⁻¹), G = WᵀW (:mod:`.range_grams`): the total squared error of the GLS estimate
               per unit noise variance (× 2 under Laplace noise, whose variance is 2b²)
    optimise:  L-BFGS-B on Θ >= 0 with the exact gradient, from ``restarts`` seeded uniform starts for each p in
               a small set; the least objective wins

The objective in O(p²n) (the n × n matrices are never formed).  AᵀA = D⁻¹MD⁻¹ with M = I + ΘᵀΘ, so
(AᵀA)⁻¹ = D M⁻¹ D, and by Woodbury M⁻¹ = I − ΘᵀP⁻¹Θ with the p × p matrix P = I + ΘΘᵀ.  With U = ΘD, V = G Uᵀ
(O(np) by :meth:`RangeGram.times`), Q = P⁻¹Θ and Y = UV:

    f = Σ_a d_a² G_aa − tr(P⁻¹Y) = Σ_a d_a² G_aa − Σ_{k,a} Q_ka d_a V_ak.

The gradient.  Holding d fixed, f = tr(X M⁻¹) with X = DGD, so df = −tr(M⁻¹XM⁻¹ dM), dM = dΘᵀΘ + ΘᵀdΘ, and
∂f/∂Θ = −2 ΘM⁻¹XM⁻¹; with ΘM⁻¹ = P⁻¹Θ = Q (push-through), QX = P⁻¹VᵀD and QXΘᵀ = P⁻¹Y this is

    ∂f/∂Θ |_d = −2 P⁻¹ (VᵀD − Y Q).

Holding M fixed, f = Σ_ab d_a G_ab d_b (M⁻¹)_ba, so ∂f/∂d_a = 2 (G D M⁻¹)_aa = 2 (d_a G_aa − Σ_k V_ak Q_ka); and
∂d_j/∂Θ_kj = Θ_kj / d_j (L2) or 1 (L1, on Θ >= 0).  The tests check the sum against finite differences.

A product workload W₁ ⊗ W₂ measured by A₁ ⊗ A₂ errs by tr(G₁(A₁ᵀA₁)⁻¹)·tr(G₂(A₂ᵀA₂)⁻¹) (the inverse and the
trace of a Kronecker product factorise), and the column norms of A₁ ⊗ A₂ are the products of the factors', so
its sensitivity is 1 again: OPT_⊗ optimises each axis for its own factor, which minimises the product.

Everything here is public: it reads the workload's shape and kind only, never the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .range_grams import KroneckerGram, RangeGram, range_gram

__all__ = ["NOISES", "column_scales", "PIdentityStrategy", "KroneckerStrategy", "p_identity_objective", "default_p_choices",
           "optimise_p_identity", "optimise_strategy", "noise_kind"]

#: The sensitivities a strategy is normalised for: "l2" (Gaussian noise, zCDP) or "l1" (Laplace noise, pure ε).
NOISES = ("l2", "l1")
#: The per-value noise variance per unit of scale: σ² for the Gaussian, 2b² for the (continuous) Laplace.
NOISE_VARIANCE_FACTOR = {"l2": 1.0, "l1": 2.0}


def noise_kind(budget_noise: str) -> str:
    """The strategy's normalisation for a budget's ``noise`` ("gaussian" -> "l2", "laplace" -> "l1")."""
    kinds = {"gaussian": "l2", "laplace": "l1"}
    if budget_noise not in kinds:
        raise ValueError(f"unknown budget noise {budget_noise!r}")
    return kinds[budget_noise]


def _check_noise(noise: str) -> None:
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}")


def column_scales(theta: np.ndarray, noise: str) -> np.ndarray:
    """d, the column norms of [I; Θ] (L2 or L1; Θ >= 0)."""
    return np.sqrt(1 + np.einsum("kj,kj->j", theta, theta)) if noise == "l2" else 1 + theta.sum(axis=0)


def p_identity_objective(theta: np.ndarray, gram: RangeGram, noise: str = "l2",
                         gradient: bool = True) -> tuple[float, np.ndarray | None]:
    """f(Θ) = tr(G (AᵀA)⁻¹) for A = [I; Θ]D⁻¹ (module docstring) and, with ``gradient``, ∂f/∂Θ (shape p × n).

    The total squared error of the GLS estimate on the workload per unit noise variance (times 2 for Laplace
    noise of scale 1 is its variance in records at ε = 1, sensitivity 1).  O(p²n + p³)."""
    _check_noise(noise)
    theta = np.asarray(theta, dtype=np.float64)
    p, n = theta.shape
    d = column_scales(theta, noise)
    diag = gram.diagonal()
    u = theta * d  # U = ΘD
    v = gram.times(u.T)  # V = G Uᵀ, n × p
    factor = scipy.linalg.cho_factor(np.eye(p) + theta @ theta.T, lower=True, check_finite=False)
    q = scipy.linalg.cho_solve(factor, theta, check_finite=False)  # Q = P⁻¹Θ
    dv = v * d[:, None]  # DV
    value = float(np.dot(d * d, diag) - np.einsum("ka,ak->", q, dv))
    if not gradient:
        return value, None
    y = u @ v  # Y = U G Uᵀ, p × p (symmetric)
    grad = -2 * scipy.linalg.cho_solve(factor, dv.T - y @ q, check_finite=False)
    by_scale = 2 * (d * diag - np.einsum("ak,ka->a", v, q))  # ∂f/∂d
    grad += by_scale * (theta / d if noise == "l2" else 1.0)
    return value, grad


@dataclass(frozen=True, eq=False)
class PIdentityStrategy:
    """An optimised p-Identity strategy A = [I; Θ]D⁻¹ for the workload ``workload`` over ``n`` cells, normalised
    for ``noise`` (columns of norm 1): Θ (p × n, read-only), its ``objective`` tr(G(AᵀA)⁻¹), the ``seed`` it was
    optimised from and the optimiser's ``iterations`` (summed over the restarts)."""

    workload: str
    n: int
    noise: str
    theta: np.ndarray
    objective: float
    seed: int
    iterations: int = 0

    @property
    def p(self) -> int:
        return int(self.theta.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def factors(self) -> tuple[PIdentityStrategy, ...]:
        return (self,)

    def matrix(self) -> np.ndarray:
        """A as a dense float64 (n + p) × n array; every column has norm 1 in the strategy's noise."""
        d = column_scales(self.theta, self.noise)
        return np.vstack([np.eye(self.n), self.theta]) / d

    def total_error(self) -> float:
        """The total squared error on the workload per unit noise scale (σ, or b for Laplace: × 2)."""
        return NOISE_VARIANCE_FACTOR[self.noise] * self.objective


@dataclass(frozen=True, eq=False)
class KroneckerStrategy:
    """OPT_⊗: one optimised strategy per axis; the strategy is their Kronecker product (C order), of sensitivity
    1 (the products of per-axis column norms of 1), erring on the product workload by the product of the axes'
    objectives."""

    factors: tuple[PIdentityStrategy, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(f.n for f in self.factors)

    @property
    def noise(self) -> str:
        return self.factors[0].noise

    @property
    def workload(self) -> str:
        return self.factors[0].workload

    @property
    def objective(self) -> float:
        return math.prod(f.objective for f in self.factors)

    def total_error(self) -> float:
        return NOISE_VARIANCE_FACTOR[self.noise] * self.objective

    def matrix(self) -> np.ndarray:
        """The explicit Kronecker product (a test oracle for small shapes)."""
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f.matrix())
        return out


def default_p_choices(n: int, noise: str = "l2") -> tuple[int, ...]:
    """The numbers of extra rows tried, at least 1, without repeats: n/32 and n/16 (HDMM's default) under L1
    noise; n/8 and n/4 under L2, where more rows keep paying (all ranges, n = 256: 1.14, 1.06, 1.02 and 1.01
    times the SVD bound at p = n/16, n/8, n/4, n/2)."""
    fractions = (32, 16) if noise == "l1" else (8, 4)
    return tuple(sorted({max(1, n // f) for f in fractions}))


def _fit(gram: RangeGram, noise: str, p: int, rng: np.random.Generator, max_iter: int):
    n = gram.n
    start = rng.random((p, n))

    def fun(flat):
        value, grad = p_identity_objective(flat.reshape(p, n), gram, noise)
        return value, grad.ravel()

    import scipy.optimize  # noqa: PLC0415  (only when optimising: a release from a cached strategy never loads it)

    result = scipy.optimize.minimize(fun, start.ravel(), jac=True, method="L-BFGS-B",
                                     bounds=scipy.optimize.Bounds(0.0, np.inf),
                                     options={"maxiter": max_iter, "maxcor": 10})
    theta = np.clip(result.x.reshape(p, n), 0.0, None)
    value, _ = p_identity_objective(theta, gram, noise, gradient=False)
    return value, theta, int(result.nit)


def optimise_p_identity(gram: RangeGram, noise: str = "l2", p_choices=None, restarts: int = 2, seed: int = 0,
                        max_iter: int = 1500) -> PIdentityStrategy:
    """The p-Identity strategy of least objective for ``gram`` over every p of ``p_choices`` (default
    :func:`default_p_choices`) and ``restarts`` seeded uniform [0, 1) starts each (L-BFGS-B, at most
    ``max_iter`` iterations a run).  Deterministic given ``seed`` (and the machine's floating point)."""
    _check_noise(noise)
    if not isinstance(gram, RangeGram):
        raise TypeError("optimise_p_identity needs the RangeGram of one column")
    if restarts < 1:
        raise ValueError("at least one start")
    choices = default_p_choices(gram.n, noise) if p_choices is None else tuple(int(p) for p in p_choices)
    if not choices or any(p < 1 for p in choices):
        raise ValueError(f"p must be >= 1, got {choices}")
    from threadpoolctl import threadpool_limits  # noqa: PLC0415  (only when optimising)

    rng = np.random.default_rng(seed)
    best, iterations = None, 0
    # One BLAS thread: the matrices are at most a few thousand wide, where threads cost far more than they give
    # (measured: 64 cells took 0.6 s on one thread and 21 s with the threads of two busy cores).
    with threadpool_limits(limits=1, user_api="blas"):
        for p in choices:
            for _ in range(restarts):
                value, theta, nit = _fit(gram, noise, p, rng, max_iter)
                iterations += nit
                if best is None or value < best[0]:
                    best = (value, theta)
    value, theta = best
    theta.setflags(write=False)
    return PIdentityStrategy(gram.kind, gram.n, noise, theta, value, int(seed), iterations)


def optimise_strategy(kind: str, shape, noise: str = "l2", **options) -> PIdentityStrategy | KroneckerStrategy:
    """The optimised strategy for the range workload ``kind`` over ``shape``: p-Identity on one column, OPT_⊗
    (one p-Identity per axis, for that axis's factor) on several.  ``options`` go to :func:`optimise_p_identity`
    (each axis gets the same seed: axes of equal size and kind get the same strategy)."""
    gram = range_gram(kind, shape)
    if isinstance(gram, KroneckerGram):
        return KroneckerStrategy(tuple(optimise_p_identity(g, noise, **options) for g in gram.factors))
    return optimise_p_identity(gram, noise, **options)
