"""Marginal sets at the optimum under pure ε: residual bases estimated from Laplace measurements
(docs/algorithms.md §11.1).

Under pure ε the Gaussian residual plan (:mod:`.residual_planner`) does not apply: a residual's L1 sensitivity
∏ 2(n_i − 1)/n_i is above a marginal's.  Here every measurement is an integer table of L1 sensitivity 1, measured
by the kernel's discrete Laplace at its share ε_T of the set's ε (Σ ε_T = ε, sequential composition), and every
marginal is rebuilt from the same residual bases as under zCDP (``ResidualPlan.bases``), so the reconstruction,
the per-cell variances and the rounding are the zCDP plan's.

A measured table T is the marginal over a set of attributes A_T with the axes D_T ⊆ A_T (binary attributes only)
replaced by the difference of their two values.  One record is in one cell of m_{A_T}, and differencing maps a
cell to one entry with a sign, so Δ₁ = 1.  Measured with iid noise of variance V_T, it gives an unbiased estimate of
every residual B with D_T ⊆ B ⊆ A_T: sum over A_T∖B, expand each differenced axis d → (d/2, −d/2), subtract the
mean along the others.  That estimate's noise has covariance (V_T·N_{A_T∖B}/2^{|D_T|})·P_B, and the estimates of
different residuals from one table are uncorrelated (orthogonal projections of iid noise).  So the generalised
least-squares estimate of residual B is the inverse-variance weighted mean over the tables that give one, with
per-coordinate variance v_B = 1/Σ_T g_{T,B}/V_T, g_{T,B} = 2^{|D_T|}/N_{A_T∖B}, and marginal S's cells each have
variance Σ_{B⊆S} v_B·p_B/∏_{S∖B} n_i².  Three plans, all data-independent:

* **marginals** (plan A): T = each workload marginal, D_T = ∅.  At equal shares this is strategy "separate"
  followed by its least squares; the shares are optimised for the sum of all cells' variances.
* **bases** (plan B, the Fourier approach of Barak et al. 2007 with optimal weights): T = each basis A, D_T = its
  binary attributes (the ±1 row), the other attributes kept whole (for n ≥ 3 the whole axis, projected, has a
  lower variance per unit of L1 norm than any of the integer bases of 1⊥ tried: differences, Helmert or Hadamard
  rows; :func:`attribute_factor`).  Estimated from its own table alone, each basis's optimum share is in closed
  form, ε_A ∝ (c_A/2^{|D_A|})^{1/3}; the tables with an attribute kept whole give the residuals without it too, and
  the least squares uses them, which only lowers the variances.
* **combined**: the tables of A and B together, shares optimised jointly (tables whose share goes to 0 dropped).

The sum of variances is not convex in the shares once a residual has two sources (plans A and combined), so their
shares come from a seeded local search (:func:`_optimised_shares`); the figures of whatever it finds are exact.
:func:`best_plan` builds them all and keeps the one of lower exact expected error at the given ε (discrete Laplace
variances of the exact shares), with equal shares of plan A among the candidates, so it is never above strategy
"separate" with its least squares.  :func:`measure_laplace` measures a plan through
the kernel from the counted workload marginals, and returns one :class:`~.residual_planner.ResidualMeasurement` per
basis (its GLS estimate and v_B), which :func:`~.residual_planner.reconstruct` and
:func:`~.residual_planner.exact_variances` take as they take the Gaussian plan's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
import itertools
import math

import numpy as np

from ..privacy import PrivacyBudget, discrete_laplace_variance, split_shares
from ..privacy.samplers import checked_scale
from .residual_planner import (ResidualMeasurement, ResidualPlan, counted_tables, plan_residuals, source_marginals,
                               variances_from)

__all__ = ["METHODS", "LaplacePlan", "plan_laplace", "best_plan", "measure_laplace", "check_scales",
           "attribute_factor", "describe_table"]

METHODS = ("marginals", "bases", "combined")
#: The largest discrete Laplace scale the kernel's sampler takes (samplers.checked_scale).
MAX_SCALE = Fraction(2**40)
#: The largest share is SHARE_UNITS units, every other a whole number of them (at least 1).
SHARE_UNITS = 10**6
#: The most L-BFGS steps of the share optimiser from one start.
ITERATIONS = 500
#: Seeded random starts of the share optimiser (log-normal shares), besides the given ones: the objective has many
#: local minima, and the best ones found break the workload's symmetry.
STARTS = 4
#: Above this many tables in plan "combined" (workload marginals and bases together) the local search is not run
#: (its pairs are listed in Python and each start is an L-BFGS run over every table): plans "marginals" (from
#: equal shares only) and "bases" are the candidates.
LOCAL_SEARCH_TABLES = 20_000
#: A table whose optimised share is below this fraction of the largest is dropped when every residual it gives is
#: given by another table: its measurement would carry next to no weight.
NEGLIGIBLE = 1e-6


@dataclass(frozen=True, eq=False)
class LaplacePlan:
    """What a pure-ε marginal set measures and with what share of ε.

    ``structure``: the residual plan whose bases and reconstruction are used (its own shares are not);
    ``method``: "marginals", "bases" or "combined"; ``tables``: the attribute sets measured (sorted tuples);
    ``differenced``: for each, its attributes taken as the difference of their two values; ``shares``: exact
    positive fractions summing to 1.  Figures are for one record as the protected unit at ``epsilon`` (ε/K for a unit of K rows)."""

    structure: ResidualPlan
    method: str
    tables: tuple[tuple[int, ...], ...]
    differenced: tuple[tuple[int, ...], ...]
    shares: tuple[Fraction, ...]
    pair_table: np.ndarray = field(repr=False)   # (P,) position in tables
    pair_basis: np.ndarray = field(repr=False)   # (P,) position in structure.bases
    pair_gain: np.ndarray = field(repr=False)    # (P,) g_{T,B} = 2^{|D_T|}/N_{A_T∖B}
    coefficient: np.ndarray = field(repr=False)  # c_B = Σ_{S⊇B} N_S·p_B/∏_{S∖B} n_i², per basis

    def scales(self, epsilon) -> list[Fraction]:
        """The exact discrete Laplace scale of each measured table at ``epsilon``: 1/ε_T, ε_T its part of ε as
        the kernel splits it (Δ₁ = 1)."""
        return [1 / part for part in split_shares(Fraction(epsilon), self.shares)]

    def table_variances(self, epsilon) -> np.ndarray:
        """V_T, the exact discrete Laplace variance per cell of each measured table at ``epsilon``."""
        return np.array([discrete_laplace_variance(s) for s in self.scales(epsilon)])

    def basis_variances(self, epsilon=None, table_variances=None) -> np.ndarray:
        """v_B = 1/Σ_T g_{T,B}/V_T per basis: the per-coordinate variance of the GLS estimate of residual B (its
        noise has covariance v_B·P_B), from the exact ``table_variances`` or those at ``epsilon``."""
        if table_variances is None:
            table_variances = self.table_variances(epsilon)
        precision = np.bincount(self.pair_basis, weights=self.pair_gain / _floored(table_variances)[self.pair_table],
                                minlength=len(self.structure.bases))
        return 1 / precision

    def variance_per_cell(self, epsilon) -> dict[tuple[int, ...], float]:
        """{marginal S (sorted attribute indices): the exact variance of each of its cells} at ``epsilon``, with the
        discrete Laplace variances of the exact shares: what the release's measurements will state."""
        return variances_from(self.structure, self.basis_variances(epsilon))

    def total(self, epsilon) -> float:
        """The exact expected squared error summed over all the workload's cells at ``epsilon``: Σ_B c_B·v_B."""
        return float(self.coefficient @ self.basis_variances(epsilon))

    def continuous_total(self, epsilon) -> float:
        """:meth:`total` with the continuous Laplace variance 2/ε_T² in place of the discrete one (slightly
        larger; the figure the shares were optimised for)."""
        return float(self.coefficient @ self.basis_variances(table_variances=np.array(
            [2 * float(s) ** 2 for s in self.scales(epsilon)])))

    def rmse(self, epsilon) -> float:
        """√(total / all the workload's cells): the root mean squared error per cell, exact."""
        return math.sqrt(self.total(epsilon) / float(self.structure.marginal_cells().sum()))

    def describe(self) -> str:
        """One line: what is measured."""
        if self.method == "marginals":
            return (f"{_count(len(self.tables), 'workload marginal')} measured with discrete Laplace at optimised "
                    "shares of epsilon, every residual basis estimated from them by generalised least squares")
        if self.method == "bases":
            return (f"{_count(len(self.tables), 'residual basis', 'residual bases')} each measured with discrete "
                    "Laplace (binary attributes as the difference of their two values), shares in closed form")
        return (f"{_count(len(self.tables), 'table')}, workload marginals and residual bases (binary attributes as the "
                "difference of their two values), measured with discrete Laplace at optimised shares of epsilon, "
                "every residual basis estimated from them by generalised least squares")


#: The smallest variance the least squares weighs by: a discrete Laplace of scale below about 1/745 (ε_T above
#: 745) has a variance 2e^{-1/b}/(1 − e^{-1/b})² that underflows to 0 in floats; it is then noise-free to any
#: precision a float holds, and this floor keeps its weight finite.
VARIANCE_FLOOR = 1e-300


def _floored(variances) -> np.ndarray:
    return np.maximum(np.asarray(variances, dtype=np.float64), VARIANCE_FLOOR)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def attribute_factor(n: int, kind: str) -> tuple[int, float]:
    """(s, g) of one attribute of n values measured by the integer matrix ``kind`` before projecting onto its
    residual: s its largest column L1 norm, g·P the noise covariance of the residual estimate it gives from iid
    unit noise (for kinds whose covariance is a multiple of P; otherwise g is the average over the residual's
    n − 1 dimensions, tr/(n − 1)).  The variance per coordinate per unit of ε² is then s²·g: "identity" (the whole
    axis, 1·1), "difference" of the two values (n = 2: 1·½), "helmert" (row k: 1 on the first k values, −k on the
    next: (n−1)²·1/n), "hadamard" (n a power of two: a Hadamard matrix without its row of ones, (n−1)²·1/n),
    "steps" (e_j − e_{j+1}: 2²·(n + 1)/6).  docs/algorithms.md §11.1 tabulates them."""
    if kind == "identity":
        return 1, 1.0
    if kind == "difference":
        if n != 2:
            raise ValueError("the difference of two values needs n = 2")
        return 1, 0.5
    if kind == "helmert":
        matrix = np.zeros((n - 1, n))
        for k in range(1, n):
            matrix[k - 1, :k], matrix[k - 1, k] = 1, -k
    elif kind == "hadamard":
        if n < 2 or n & (n - 1):
            raise ValueError("a Hadamard basis needs n a power of two")
        h = np.ones((1, 1))
        while h.shape[0] < n:
            h = np.block([[h, h], [h, -h]])
        matrix = h[1:]
    elif kind == "steps":
        matrix = np.eye(n - 1, n) - np.eye(n - 1, n, 1)
    else:
        raise ValueError(f"unknown attribute matrix {kind!r}")
    s = int(np.abs(matrix).sum(axis=0).max())
    g = float(np.trace(np.linalg.inv(matrix @ matrix.T))) / (n - 1)
    return s, g


def plan_laplace(marginals: Sequence[Sequence[int]], sizes: Sequence[int], method: str = "marginals",
                 structure: ResidualPlan | None = None, equal_shares: bool = False,
                 starting: tuple[LaplacePlan, LaplacePlan] | None = None) -> LaplacePlan:
    """The pure-ε plan ``method`` (module docstring) for the workload ``marginals`` (attribute-index tuples, unit
    weights: the sum of all cells' variances is minimised) over attributes of ``sizes``: "marginals" (plan A),
    "bases" (plan B) or "combined" (the tables of both, shares optimised together from A's and B's optima).
    ``structure``: the workload's residual plan, if already built; ``starting``: plans "marginals" and "bases" of
    it, if already built (plan "combined" starts from them).  ``equal_shares`` (plan "marginals" only):
    every marginal at ε/k, which is strategy "separate" with its least squares.  Deterministic; reads no data.
    Raises ValueError on a bad workload."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if equal_shares and method != "marginals":
        raise ValueError("equal shares are a plan of the measured marginals")
    if structure is None:
        structure = plan_residuals(marginals, sizes)
    coefficient = _coefficients(structure)
    if method == "marginals":
        tables = structure.marginals
        differenced = tuple(() for _ in tables)
        pairs = _marginal_pairs(structure)
        small = len(tables) + len(structure.bases) <= LOCAL_SEARCH_TABLES
        shares = (np.ones(len(tables)) if equal_shares else
                  _optimised_shares(*pairs, coefficient, len(tables), [np.ones(len(tables))],
                                    random_starts=STARTS if small else 0))
    elif method == "bases":
        tables = structure.bases
        differenced = tuple(tuple(i for i in a if structure.sizes[i] == 2) for a in tables)
        # min Σ_A c_A·2/(2^{b_A} ε_A²) at Σ ε_A = ε: ε_A ∝ (c_A/2^{b_A})^{1/3} (Lagrange), the optimum when each
        # basis is estimated from its own table alone.  A table with an attribute kept whole also gives the
        # residuals without it (summed out), so the least squares below uses every pair and can only do better.
        shares = np.cbrt(coefficient / np.array([2.0 ** len(d) for d in differenced]))
        pairs = _general_pairs(structure, tables, differenced)
    else:
        first, second = starting or (plan_laplace(marginals, sizes, "marginals", structure),
                                     plan_laplace(marginals, sizes, "bases", structure))
        found = {(t, ()): float(s) for t, s in zip(first.tables, first.shares)}
        b_shares = {}
        for t, d, s in zip(second.tables, second.differenced, second.shares):
            found.setdefault((t, d), 0.0)
            b_shares[t, d] = float(s)
        keys = sorted(found, key=lambda key: (len(key[0]), key[0], len(key[1]), key[1]))
        tables, differenced = tuple(k[0] for k in keys), tuple(k[1] for k in keys)
        pairs = _general_pairs(structure, tables, differenced)
        # starts: A's optimum and B's (every other table at a small share), and the two mixed half and half
        a = np.array([found[k] if k[1] == () and k[0] in structure.marginals else 0.0 for k in keys])
        b = np.array([b_shares.get(k, 0.0) for k in keys])
        starts = [np.maximum(x / x.sum(), 1e-3 / len(keys)) for x in (a, b, a / a.sum() + b / b.sum())]
        starts.append(np.ones(len(keys)))
        shares = _optimised_shares(*pairs, coefficient, len(tables), starts)
    pair_table, pair_basis, pair_gain = pairs
    keep = _negligible_dropped(shares, pair_table, pair_basis, len(structure.bases))
    if not keep.all():
        where = np.flatnonzero(keep)
        renumber = np.full(len(tables), -1)
        renumber[where] = np.arange(where.size)
        inside = keep[pair_table]
        tables = tuple(tables[i] for i in where)
        differenced = tuple(differenced[i] for i in where)
        pair_table, pair_basis, pair_gain = renumber[pair_table[inside]], pair_basis[inside], pair_gain[inside]
        shares = shares[where]
    return LaplacePlan(structure, method, tuple(tables), differenced, _exact_shares(shares), pair_table, pair_basis,
                       pair_gain, coefficient)


def _exact_shares(shares: np.ndarray) -> tuple[Fraction, ...]:
    """Float shares as exact fractions of small integers: w_T = max(1, round(SHARE_UNITS·s_T/max s)), share_T =
    w_T/Σ w (positive, summing to 1 exactly), so the parts and scales the kernel records stay readable.  The
    plan's figures are computed from these fractions, so the rounding changes accuracy only, by a relative
    1/(2·SHARE_UNITS) on the largest share."""
    units = np.maximum(1, np.rint(SHARE_UNITS * shares / shares.max())).astype(np.int64).tolist()
    whole = sum(units)
    return tuple(Fraction(u, whole) for u in units)


def _coefficients(plan: ResidualPlan) -> np.ndarray:
    """c_B = Σ_{S⊇B} N_S·p_B/∏_{S∖B} n_i² per basis (unit weights): the total variance is Σ_B c_B·v_B."""
    cells = plan.marginal_cells()
    coefficient = np.zeros(len(plan.bases))
    for group in plan.groups:
        valid = group.basis >= 0
        values = cells[group.rows][:, None] / group.rest ** 2
        coefficient += np.bincount(group.basis[valid], weights=values[valid], minlength=len(plan.bases))
    return coefficient * plan.kept


def _marginal_pairs(plan: ResidualPlan):
    """(table, basis, gain) arrays of plan "marginals": every (workload marginal S, basis B ⊆ S), g = 1/N_{S∖B}."""
    table_parts, basis_parts, gain_parts = [], [], []
    for group in plan.groups:
        valid = group.basis >= 0
        table_parts.append(np.broadcast_to(group.rows[:, None], group.basis.shape)[valid])
        basis_parts.append(group.basis[valid])
        gain_parts.append(1 / group.rest[valid])
    return tuple(np.concatenate(p) for p in (table_parts, basis_parts, gain_parts))


def _general_pairs(plan: ResidualPlan, tables, differenced):
    """(table, basis, gain) arrays for any measured tables: every basis B with D_T ⊆ B ⊆ A_T,
    g = 2^{|D_T|}/N_{A_T∖B}."""
    index = {b: i for i, b in enumerate(plan.bases)}
    out_t, out_b, out_g = [], [], []
    for t, (attrs, d) in enumerate(zip(tables, differenced)):
        free = [i for i in attrs if i not in d]
        for r in range(len(free) + 1):
            for sub in itertools.combinations(free, r):
                b = tuple(sorted(d + sub))
                if b in index:
                    out_t.append(t)
                    out_b.append(index[b])
                    out_g.append(2.0 ** len(d) / math.prod(plan.sizes[i] for i in attrs if i not in b))
    return np.array(out_t, dtype=np.int64), np.array(out_b, dtype=np.int64), np.array(out_g)


def _total(pair_table, pair_basis, pair_gain, coefficient, shares) -> float:
    """Σ_B c_B/Λ_B at ε = 1 for ``shares`` (summing to 1), Λ_B = Σ_T g_{T,B}·e_T²/2: the continuous Laplace
    variance of scale 1/e_T is 2/e_T² (inf when some basis has no measured source)."""
    lam = np.bincount(pair_basis, weights=pair_gain * shares[pair_table] ** 2 / 2, minlength=len(coefficient))
    with np.errstate(divide="ignore"):
        return float(coefficient @ (1 / lam)) if np.all(lam > 0) else math.inf


def _optimised_shares(pair_table, pair_basis, pair_gain, coefficient, count, starts,
                      iterations: int = ITERATIONS, random_starts: int = STARTS) -> np.ndarray:
    """Shares of the measured tables that minimise F(e) = Σ_B c_B/Λ_B(e) on the simplex (Λ_B = Σ_T g_{T,B}e_T²/2),
    from each of ``starts`` (positive share vectors) and ``random_starts`` seeded random ones; the best point
    found, the starts included, wins.

    F is not convex on the simplex (along e_1 + e_2 = 1, 1/(e_1² + e_2²) is largest in the middle), so this is a
    local search: L-BFGS on log-shares x (e = exp(x)/Σ exp(x)) of the scale-free (Σe)²·F(e), whose gradient is
    closed form: ∂F/∂e_T = −e_T·Σ_B c_B g_{T,B}/Λ_B²."""
    from scipy import optimize  # noqa: PLC0415  (loaded only when planning a pure-ε marginal set)
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    if count == 1:
        return np.ones(1)

    def f(x):
        e = np.exp(x - x.max())
        lam = np.bincount(pair_basis, weights=pair_gain * e[pair_table] ** 2 / 2, minlength=len(coefficient))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            total, value = e.sum(), float(coefficient @ (1 / lam))
            pulled = np.bincount(pair_table, weights=(coefficient / lam ** 2)[pair_basis] * pair_gain,
                                 minlength=count)
            gradient = (2 * total * value - total ** 2 * pulled * e) * e
        if not (math.isfinite(value) and np.all(np.isfinite(gradient))):  # a basis left (nearly) unmeasured
            return math.inf, np.zeros_like(x)
        return total ** 2 * value, gradient

    best_x, best = None, math.inf
    rng = np.random.default_rng(count)  # deterministic: a plan depends on the workload alone
    starts = list(starts) + [np.exp(rng.normal(0, 1, count)) for _ in range(random_starts)]
    with threadpool_limits(limits=1, user_api="blas"):  # small vectors: threads only add overhead
        for start in starts:
            x0 = np.log(np.asarray(start, dtype=np.float64))
            for x in (x0, optimize.minimize(f, x0, jac=True, method="L-BFGS-B",
                                            options={"maxiter": iterations, "gtol": 1e-12}).x):
                value = f(x)[0]
                if value < best:
                    best, best_x = value, x
    shares = np.exp(best_x - best_x.max())
    return shares / shares.sum()


def _negligible_dropped(shares, pair_table, pair_basis, bases: int) -> np.ndarray:
    """Which tables to keep: all but those of share below NEGLIGIBLE × the largest whose every residual another
    kept table gives."""
    keep = np.ones(shares.size, dtype=bool)
    for t in np.flatnonzero(shares < NEGLIGIBLE * shares.max()).tolist():
        trial = keep.copy()
        trial[t] = False
        if np.all(np.bincount(pair_basis[trial[pair_table]], minlength=bases) > 0):
            keep = trial
    return keep


def best_plan(marginals: Sequence[Sequence[int]], sizes: Sequence[int], epsilon) -> tuple[LaplacePlan, dict]:
    """Every plan of the workload, and the one of lowest exact expected error (:meth:`LaplacePlan.total`) at
    ``epsilon`` (ε per record); ties go to "marginals" (then "bases").  Plan "combined" is only built up to
    ``LOCAL_SEARCH_TABLES`` tables; a plan whose scales the sampler cannot take at ``epsilon`` is left out (ValueError,
    one line, when none fits).  Plan "marginals" is the optimised shares or equal shares, whichever is lower there,
    so it is never above strategy "separate" with its least squares.  Returns (plan, {method: total})."""
    structure = plan_residuals(marginals, sizes)
    plans = {m: plan_laplace(marginals, sizes, m, structure) for m in METHODS[:2]}
    if len(structure.marginals) + len(structure.bases) <= LOCAL_SEARCH_TABLES:
        plans["combined"] = plan_laplace(marginals, sizes, "combined", structure,
                                         starting=(plans["marginals"], plans["bases"]))
    equal = plan_laplace(marginals, sizes, "marginals", structure, equal_shares=True)
    plans = {m: p for m, p in plans.items() if _fits(p, epsilon)}
    if _fits(equal, epsilon) and ("marginals" not in plans
                                  or equal.total(epsilon) <= plans["marginals"].total(epsilon)):
        plans["marginals"] = equal  # (the optimiser works on continuous variances)
    if not plans:
        check_scales(equal, epsilon)  # raises: the reason, on the plan of strategy separate
    totals = {m: p.total(epsilon) for m, p in plans.items()}
    chosen = min(plans, key=lambda m: (totals[m], METHODS.index(m)))
    return plans[chosen], totals


def _fits(plan: LaplacePlan, epsilon) -> bool:
    try:
        check_scales(plan, epsilon)
    except ValueError:
        return False
    return True


def check_scales(plan: LaplacePlan, epsilon) -> None:
    """ValueError (one line) if some table's discrete Laplace scale at ``epsilon`` per record is above the
    sampler's 2^40: the kernel would refuse it, so a release checks this before anything is charged."""
    scales = plan.scales(epsilon)
    worst = max(range(len(scales)), key=scales.__getitem__)
    if scales[worst] > MAX_SCALE:
        raise ValueError(f"table {plan.tables[worst]} would need a Laplace scale of {float(scales[worst]):.3g}, "
                         "above the sampler's 2^40")


def describe_table(attrs: tuple[int, ...], differenced: tuple[int, ...], names: Sequence[str] | None = None) -> str:
    """What a measured table is, in words: "table age × income (income as the difference of its two values)"."""
    label = (lambda i: str(names[i])) if names is not None else (lambda i: f"attribute {i}")
    what = "table " + (" × ".join(label(i) for i in attrs) if attrs else "grand total")
    if differenced:
        what += f" ({', '.join(label(i) for i in differenced)} as the difference of the two values)"
    return what


def _table_counts(plan: LaplacePlan, checked: list[np.ndarray]) -> list[np.ndarray]:
    """Each measured table's integer counts: the smallest workload marginal containing its attributes summed
    down to them, then the difference of the two values along each differenced axis."""
    structure = plan.structure
    if plan.method == "marginals":
        position = {s: i for i, s in enumerate(structure.marginals)}
        sources = [position[t] for t in plan.tables]
    else:
        smallest = source_marginals(structure)
        sources = [smallest[t] for t in plan.tables]
    out = []
    for attrs, differenced, source in zip(plan.tables, plan.differenced, sources):
        s = structure.marginals[source]
        summed = tuple(k for k, i in enumerate(s) if i not in attrs)
        table = checked[source].sum(axis=summed) if summed else checked[source]
        for k, i in enumerate(attrs):
            if i in differenced:
                table = np.take(table, [0], axis=k) - np.take(table, [1], axis=k)
        out.append(np.asarray(table, dtype=np.int64))
    return out


def _residual_estimate(noisy: np.ndarray, attrs: tuple[int, ...], differenced: tuple[int, ...],
                       basis: tuple[int, ...]) -> np.ndarray:
    """The unbiased estimate of P_B m_B from one noisy measured table over ``attrs`` (differenced axes of length
    1; any leading axes are carried through): summed over attrs∖B, each differenced axis expanded
    d → (d/2, −d/2), the mean taken out along the others."""
    lead = noisy.ndim - len(attrs)
    summed = tuple(lead + k for k, i in enumerate(attrs) if i not in basis)
    table = np.asarray(noisy.sum(axis=summed) if summed else noisy, dtype=np.float64)
    for k, i in enumerate(basis):
        if i in differenced:
            half = table / 2
            table = np.concatenate([half, -half], axis=lead + k)
        else:
            table = table - table.mean(axis=lead + k, keepdims=True)
    return table


def measure_laplace(plan: LaplacePlan, tables, budget: PrivacyBudget,
                    names: Sequence[str] | None = None) -> list[ResidualMeasurement]:
    """Every table of ``plan`` measured through the kernel from the counted workload marginals, and every basis
    estimated from them (module docstring).

    ``tables``: one integer array per marginal of ``plan.structure.marginals`` (in that order, or a mapping from
    those tuples), axes in the marginal's sorted attribute order.  ``budget`` (pure ε) is split by the plan's
    shares; table T goes to :meth:`~dphist.privacy.PrivacyBudget.laplace` with L1 sensitivity 1 on its part
    (docs/algorithms.md §11.1: one record is in one cell of a marginal; a differenced axis maps a cell to one
    entry with a sign), so the parts compose sequentially to the budget.  Returns one ResidualMeasurement per
    basis of ``plan.structure``: its GLS estimate, ``noise_variance`` = v_B from the records' exact discrete
    Laplace scales, and ``record`` the tuple of the records it was estimated from.  Post-processing after the
    draws.  ``names``: the attributes' names, for the records' descriptions.  A budget that draws every
    measurement many times at once (a leading axis of repetitions) gives estimates with that leading axis.
    Raises DataError for tables that do not fit, ValueError for a zCDP budget or a scale beyond the sampler,
    before any draw."""
    checked = counted_tables(plan.structure, tables)
    if budget.definition != "pure":
        raise ValueError("the Laplace residual plan needs a pure-epsilon budget")
    counts = _table_counts(plan, checked)
    parts = budget.split(list(plan.shares))
    for part in parts:  # every scale checked before the first draw
        checked_scale(part.scale(1, part.amount))
    noisy, records = [], []
    for attrs, differenced, part, table in zip(plan.tables, plan.differenced, parts, counts):
        values, record = part.laplace(table, 1, part.amount, describe_table(attrs, differenced, names),
                                      composition="one table of the marginal set (sequential over its tables)")
        noisy.append(values)
        records.append(record)
    variances = _floored([discrete_laplace_variance(r.scale) for r in records])
    basis_variance = plan.basis_variances(table_variances=variances)
    sources: dict[int, list[int]] = {}
    for t, b in zip(plan.pair_table.tolist(), plan.pair_basis.tolist()):
        sources.setdefault(b, []).append(t)
    gain = {(t, b): g for t, b, g in zip(plan.pair_table.tolist(), plan.pair_basis.tolist(), plan.pair_gain.tolist())}
    out = []
    for b, basis in enumerate(plan.structure.bases):
        estimate = 0.0
        for t in sources[b]:
            weight = gain[t, b] / variances[t] * basis_variance[b]
            estimate = estimate + weight * _residual_estimate(noisy[t], plan.tables[t], plan.differenced[t], basis)
        out.append(ResidualMeasurement(basis, np.asarray(estimate, dtype=np.float64), float(basis_variance[b]),
                                       tuple(records[t] for t in sources[b])))
    return out
