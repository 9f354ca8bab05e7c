"""Marginal sets at the optimum: residual bases (ResidualPlanner; Xiao, He, Zhang, Kifer, NeurIPS 2023).

docs/algorithms.md §11.  Attributes i have sizes n_i; a workload is a list of marginals S (sorted tuples of
attribute indices) with weights w_S.  Every marginal table decomposes into orthogonal *residuals*, one per subset
A ⊆ S (a *basis*; A = ∅ is the grand total):

    m_S = Σ_{A⊆S} expand_S(P_A m_A) / ∏_{i∈S∖A} n_i,      P_A = ⊗_{i∈A} (I − J/n_i),

with m_A the marginal over A, P_A the orthogonal projector onto A's residual subspace and expand_S the broadcast
along the axes S∖A.  A basis containing an attribute with n_i = 1 has a zero residual and is skipped.  With
N_A = ∏_{i∈A} n_i and p_A = ∏_{i∈A} (n_i − 1)/n_i:

* measuring basis A with Gaussian noise of variance σ_A² per coordinate (then projected) costs ρ_A = p_A/(2σ_A²)
  for one record (its residual moves by ‖P_A e_j‖² = p_A), and ρ-zCDP is Σ_A ρ_A;
* the reconstruction m̂_S = Σ_{A⊆S} expand_S(P_A ŷ_A)/∏_{S∖A} n_i has the same variance in every cell,
  Σ_{A⊆S} v_A·p_A / ∏_{i∈S∖A} n_i², v_A the per-coordinate noise variance of ŷ_A (σ_A² for continuous noise);
* minimising the weighted sum of variances Σ_A c_A σ_A², c_A = Σ_{S⊇A} w_S·N_S·p_A/∏_{S∖A} n_i², at Σ_A ρ_A = ρ
  gives ρ_A ∝ √(c_A p_A) and a total of (Σ_A √(c_A p_A))²/(2ρ) (Lagrange);
* minimising the largest per-cell variance over the marginals is the same problem with weights λ_S/N_S, λ the
  maximiser of the concave dual Σ_A √(p_A Σ_S λ_S a_{S,A}) over the simplex (a_{S,A} = p_A/∏_{S∖A} n_i²).

All planning works on arrays of (marginal, subset) pairs, so work and memory grow with the workload's marginals
and their subsets, never with the product of all domains.  Measurement goes through the budget kernel
(:meth:`~dphist.privacy.budget.ZCDPBudget.gaussian_residual`, exact discrete Gaussian noise on the scaled marginal,
docs/privacy.md §1.6); everything after it is post-processing.  Non-negativity and integers are not done here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
import math

import numpy as np

from ..errors import DataError
from ..privacy import PrivacyBudget, discrete_gaussian_variance, split_shares
from ..privacy.budget import MAX_SIGMA2

__all__ = ["ResidualPlan", "ResidualMeasurement", "plan_residuals", "measure_residuals", "measure_from_marginals",
           "reconstruct", "exact_variances", "discrete_variance_per_cell", "check_sampler", "source_marginals",
           "counted_tables", "variances_from"]

OBJECTIVES = ("sum", "max")


@dataclass(frozen=True)
class _Group:
    """The workload marginals of one length r: their positions in the plan's ``marginals``, and for each of the
    2^r subsets (bit j of the subset number: the marginal's j-th attribute is in A) the basis index (−1: skipped,
    an attribute of one value) and ∏_{i∈S∖A} n_i."""

    length: int
    rows: np.ndarray       # (k,) positions in ResidualPlan.marginals
    basis: np.ndarray      # (k, 2^r) int64 basis indices, -1 where skipped
    rest: np.ndarray       # (k, 2^r) float64 ∏_{i∈S∖A} n_i


@dataclass(frozen=True, eq=False)
class ResidualPlan:
    """Which residual bases to measure and what share of ρ each gets.

    ``sizes``: the attribute sizes n_i; ``marginals``: the workload (sorted tuples, duplicates merged, weights
    added); ``weights``: w_S; ``bases``: every subset of a workload marginal without an attribute of one value,
    sorted (as tuples); ``shares``: each basis's share of ρ (floats, positive, summing to 1);
    ``objective``: "sum" (weighted sum of all cells' variances) or "max" (the largest per-cell variance).
    Variances are for one record as the protected unit (a unit of K rows: use ρ/K²)."""

    sizes: tuple[int, ...]
    marginals: tuple[tuple[int, ...], ...]
    weights: tuple[float, ...]
    bases: tuple[tuple[int, ...], ...]
    shares: np.ndarray
    objective: str
    kept: np.ndarray = field(repr=False)        # p_A per basis
    cells: np.ndarray = field(repr=False)       # N_A per basis (float)
    groups: tuple[_Group, ...] = field(repr=False)

    def sigma2(self, rho) -> np.ndarray:
        """σ_A² per basis at ρ (continuous Gaussian): ρ_A = share_A·ρ = p_A/(2σ_A²)."""
        return self.kept / (2 * self.shares * float(rho))

    def variance_per_cell(self, rho) -> dict[tuple[int, ...], float]:
        """{marginal S: the variance of each cell of m̂_S} at ρ with continuous Gaussian noise of σ_A²:
        Σ_{A⊆S} σ_A²·p_A/∏_{S∖A} n_i² (exact; the discrete Gaussian's is at most this, docs/algorithms.md §11)."""
        values = _cell_variances(self, self.sigma2(rho) * self.kept)
        return dict(zip(self.marginals, values.tolist()))

    def marginal_cells(self) -> np.ndarray:
        """N_S, the number of cells of each workload marginal, in the order of ``marginals``."""
        sizes = np.asarray(self.sizes, dtype=np.float64)
        return np.array([math.prod(sizes[list(s)].tolist()) for s in self.marginals], dtype=np.float64)

    def rmse(self, rho) -> float:
        """The root mean squared error per cell over all the workload's cells (unweighted) at ρ, continuous
        Gaussian noise: √(Σ_S N_S·Var_S / Σ_S N_S)."""
        variances = _cell_variances(self, self.sigma2(rho) * self.kept)
        cells = self.marginal_cells()
        return math.sqrt(float(cells @ variances / cells.sum()))


@dataclass(frozen=True, eq=False)
class ResidualMeasurement:
    """One measured basis: ``basis`` (attribute indices), ``residual`` (float array over its axes, summing to 0
    along each), ``noise_variance`` (the per-coordinate variance of the un-projected noise in marginal units; each
    residual cell carries p_A times it) and the kernel's ``record``."""

    basis: tuple[int, ...]
    residual: np.ndarray
    noise_variance: float
    record: object


def plan_residuals(marginals: Sequence[Sequence[int]], sizes: Sequence[int], objective: str = "sum",
                   weights: Sequence[float] | None = None) -> ResidualPlan:
    """The residual plan of a marginal workload (docs/algorithms.md §11).

    ``marginals``: attribute-index tuples (any order; duplicates merge, adding their weights); ``sizes``: n_i >= 1;
    ``weights``: positive, default 1.  ``objective`` "sum" minimises Σ_S w_S·(sum of the variances of S's cells),
    in closed form; "max" minimises the largest per-cell variance over the marginals (weights are then ignored),
    by the dual ascent described in :func:`_max_shares`.  Raises ValueError on a bad workload."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    sizes = tuple(int(n) for n in sizes)
    if any(n < 1 for n in sizes):
        raise ValueError("attribute sizes must be at least 1")
    if weights is None:
        weights = [1.0] * len(marginals)
    if len(weights) != len(marginals) or not marginals:
        raise ValueError("a workload needs at least one marginal and one weight per marginal")
    merged: dict[tuple[int, ...], float] = {}
    for s, w in zip(marginals, weights):
        key = tuple(sorted(int(i) for i in s))
        if len(set(key)) != len(key) or any(not 0 <= i < len(sizes) for i in key):
            raise ValueError(f"marginal {tuple(s)} must name distinct attributes among 0..{len(sizes) - 1}")
        if not (float(w) > 0 and math.isfinite(float(w))):
            raise ValueError(f"weights must be positive and finite, got {w}")
        merged[key] = merged.get(key, 0.0) + float(w)
    order = sorted(merged)
    workload = np.array([merged[s] for s in order], dtype=np.float64)
    n = np.asarray(sizes, dtype=np.int64)
    width = max((len(s) for s in order), default=0)

    # Every (marginal, subset) pair, as rows of attribute indices padded with -1 at the end: lexicographic order
    # of padded rows is Python's tuple order, so the unique rows come out as the sorted bases.
    lengths = np.array([len(s) for s in order])
    padded_parts, pair_parts, rest_parts, meta = [], [], [], []
    offset = 0
    for r in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == r)
        attrs = np.array([order[i] for i in rows], dtype=np.int64).reshape(rows.size, r)
        attr_sizes = n[attrs]
        for mask in range(1 << r):
            inside = [j for j in range(r) if mask >> j & 1]
            outside = [j for j in range(r) if not mask >> j & 1]
            sub = np.full((rows.size, width), -1, dtype=np.int64)
            sub[:, :len(inside)] = attrs[:, inside]
            valid = np.all(attr_sizes[:, inside] >= 2, axis=1)
            rest = attr_sizes[:, outside].astype(np.float64).prod(axis=1)
            padded_parts.append(sub[valid])
            pair_parts.append((rows[valid], np.flatnonzero(valid), mask))
            rest_parts.append(rest)
        meta.append((r, rows, offset))
        offset += rows.size
    padded = np.concatenate(padded_parts) if padded_parts else np.zeros((0, width), dtype=np.int64)
    if width:
        sort = np.lexsort(padded.T[::-1])
        ordered = padded[sort]
        first = np.ones(len(ordered), dtype=bool)
        first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
        unique = ordered[first]
        inverse = np.empty(len(padded), dtype=np.int64)
        inverse[sort] = np.cumsum(first) - 1
    else:
        unique, inverse = np.zeros((1, 0), dtype=np.int64), np.zeros(len(padded), dtype=np.int64)

    # Per-group basis and rest matrices, from the inverse of each (subset mask, valid rows) part.
    groups, cursor, part = [], 0, 0
    for r, rows, _ in meta:
        basis = np.full((rows.size, 1 << r), -1, dtype=np.int64)
        rest = np.empty((rows.size, 1 << r), dtype=np.float64)
        for mask in range(1 << r):
            _, where, _ = pair_parts[part]
            basis[where, mask] = inverse[cursor:cursor + where.size]
            rest[:, mask] = rest_parts[part]
            cursor += where.size
            part += 1
        groups.append(_Group(r, rows, basis, rest))

    member = unique >= 0
    safe = np.where(member, unique, 0)
    cells = np.where(member, n[safe], 1).astype(np.float64).prod(axis=1)
    kept = np.where(member, (n[safe] - 1) / n[safe], 1.0).prod(axis=1)
    bases = _tuples(unique)

    plan = ResidualPlan(sizes, tuple(order), tuple(workload.tolist()), bases, np.ones(len(bases)) / len(bases),
                        objective, kept, cells, tuple(groups))
    if objective == "sum":
        # c_A = p_A·N_A·Σ_{S⊇A} w_S/∏_{S∖A} n_i  (= Σ w_S·N_S·p_A/∏_{S∖A} n_i², as N_S = N_A·∏_{S∖A} n_i)
        coefficient = _per_basis(plan, [workload[g.rows][:, None] / g.rest for g in plan.groups]) * kept * cells
        shares = _closed_form(coefficient, kept)
    else:
        shares = _max_shares(plan)
    object.__setattr__(plan, "shares", shares)
    return plan


def _tuples(unique: np.ndarray) -> tuple[tuple[int, ...], ...]:
    lengths = (unique >= 0).sum(axis=1)
    out: list[tuple[int, ...] | None] = [None] * len(unique)
    for length in np.unique(lengths).tolist():
        where = np.flatnonzero(lengths == length)
        for i, row in zip(where.tolist(), unique[where, :length].tolist()):
            out[i] = tuple(row)
    return tuple(out)


def _rests(plan: ResidualPlan) -> list[np.ndarray]:
    return [g.rest for g in plan.groups]


def _per_basis(plan: ResidualPlan, per_marginal) -> np.ndarray:
    """Σ over the (marginal S, subset A) pairs of a value per pair, per basis A.  ``per_marginal``: one (k, 2^r)
    array per group of the plan, its values in the group's (marginal, subset) layout."""
    total = np.zeros(len(plan.bases))
    for group, values in zip(plan.groups, per_marginal):
        valid = group.basis >= 0
        total += np.bincount(group.basis[valid], weights=values[valid], minlength=len(plan.bases))
    return total


def _closed_form(coefficient: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Shares ρ_A/ρ ∝ √(c_A p_A): the minimiser of Σ c_A σ_A² at Σ p_A/(2σ_A²) = ρ (Lagrange)."""
    root = np.sqrt(coefficient * kept)
    return root / root.sum()


def _cell_variances(plan: ResidualPlan, per_basis: np.ndarray) -> np.ndarray:
    """Var of each cell of every workload marginal: Σ_{A⊆S} u_A/∏_{S∖A} n_i², with u_A = ``per_basis``
    (v_A·p_A), in the order of ``plan.marginals``."""
    out = np.zeros(len(plan.marginals))
    for group in plan.groups:
        valid = group.basis >= 0
        terms = np.where(valid, per_basis[np.where(valid, group.basis, 0)], 0.0) / group.rest ** 2
        out[group.rows] = terms.sum(axis=1)
    return out


def _max_shares(plan: ResidualPlan, tolerance: float = 1e-9, iterations: int = 20000) -> np.ndarray:
    """Shares minimising max_S Var_S at a fixed ρ.

    With x_A = 1/σ_A², Var_S = Σ_A a_{S,A}/x_A is convex and the cost Σ p_A x_A/2 linear, so by minimax duality
    min_x max_S Var_S = max_λ min_x Σ_S λ_S Var_S over distributions λ on the marginals; the inner minimum is the
    closed form with c_A(λ) = Σ_S λ_S a_{S,A}, of value H(λ)²/(2ρ), H(λ) = Σ_A √(p_A c_A(λ)) concave.  H's
    gradient in λ_S is proportional to Var_S under the inner minimiser, so entropic mirror ascent (λ_S ∝
    λ_S·exp(η·Var_S/max Var)) climbs it; every iterate's shares are a valid plan, and the duality gap
    max_S Var_S − H(λ)²/(2ρ) >= 0 bounds its distance from the optimum.  Stops when the relative gap is below
    ``tolerance`` and returns the best plan seen."""
    count = len(plan.marginals)
    rests = _rests(plan)
    kept = plan.kept

    def evaluate(lam):
        c = _per_basis(plan, [lam[g.rows][:, None] / r ** 2 for g, r in zip(plan.groups, rests)]) * kept
        shares = _closed_form(c, kept)
        variances = _cell_variances(plan, kept * kept / (2 * shares))  # at ρ = 1
        lower = np.sqrt(c * kept).sum() ** 2 / 2
        return shares, variances, lower

    lam = np.full(count, 1.0 / count)
    shares, variances, lower = evaluate(lam)
    best, best_max, best_lower = shares, variances.max(), lower
    step = 1.0
    for _ in range(iterations):
        if best_max - best_lower <= tolerance * best_max:
            break
        proposal = lam * np.exp(step * (variances / variances.max() - 1))
        proposal /= proposal.sum()
        new_shares, new_variances, new_lower = evaluate(proposal)
        if new_lower >= lower:
            lam, shares, variances, lower = proposal, new_shares, new_variances, new_lower
            step *= 1.5
            if variances.max() < best_max:
                best, best_max = shares, variances.max()
            best_lower = max(best_lower, lower)
        else:
            step /= 2
            if step < 1e-12:
                break
    return best


def measure_residuals(plan: ResidualPlan, codes, budget: PrivacyBudget) -> list[ResidualMeasurement]:
    """Every basis of ``plan`` measured through the kernel: ``budget`` (a zCDP budget) is split by the plan's
    shares, and basis A's marginal counts (``np.bincount`` of the codes' ``np.ravel_multi_index`` over A's
    columns, never the full table) go to :meth:`~dphist.privacy.budget.ZCDPBudget.gaussian_residual` with its
    part.  ``codes``: an integer array rows × attributes, column i holding codes 0..n_i − 1.  Privacy: each
    basis costs its part (docs/privacy.md §1.6), the parts add up to the budget (sequential composition).
    Raises DataError for codes that do not fit the plan and ValueError for a pure-ε budget, before any draw."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(plan.sizes) or not np.issubdtype(codes.dtype, np.integer):
        raise DataError(f"codes must be an integer array of rows x {len(plan.sizes)} attributes")
    if codes.shape[0] and (np.any(codes.min(axis=0) < 0) or np.any(codes.max(axis=0) >= np.asarray(plan.sizes))):
        raise DataError("codes must lie in 0..n_i - 1 for every attribute i")
    if budget.definition != "zcdp":
        raise ValueError("residual bases need a zCDP budget (discrete Gaussian noise)")
    columns = [codes[:, i].astype(np.intp) for i in range(codes.shape[1])]

    def table_of(basis, dims):
        if not basis:
            return np.array(codes.shape[0], dtype=np.int64)
        flat = np.ravel_multi_index([columns[i] for i in basis], dims)
        return np.bincount(flat, minlength=math.prod(dims)).reshape(dims)
    return _measure(plan, table_of, budget)


def measure_from_marginals(plan: ResidualPlan, tables, budget: PrivacyBudget) -> list[ResidualMeasurement]:
    """Every basis of ``plan`` measured through the kernel, as :func:`measure_residuals` does, from the counted
    workload marginals instead of row codes: ``tables`` holds one integer array per marginal of
    ``plan.marginals`` (in that order, or a mapping from those tuples), with one axis per attribute in the
    marginal's sorted order.  Basis A's counts are the smallest workload marginal S ⊇ A (:func:`source_marginals`)
    summed over S∖A; they are A's true marginal because every table counts the same records, so the privacy
    argument (and the noise) is that of :func:`measure_residuals`.  Raises DataError for a missing table, a wrong
    shape or negative or fractional counts, and ValueError for a pure-ε budget, before any draw."""
    checked = counted_tables(plan, tables)
    if budget.definition != "zcdp":
        raise ValueError("residual bases need a zCDP budget (discrete Gaussian noise)")
    source = source_marginals(plan)

    def table_of(basis, dims):
        s = plan.marginals[source[basis]]
        summed = tuple(k for k, i in enumerate(s) if i not in basis)
        return checked[source[basis]].sum(axis=summed) if summed else checked[source[basis]]
    return _measure(plan, table_of, budget)


def counted_tables(plan: ResidualPlan, tables) -> list[np.ndarray]:
    """The counted workload marginals checked and as int64 arrays in the order of ``plan.marginals``: ``tables``
    holds one integer array per marginal (in that order, or a mapping from those tuples), with one axis per
    attribute in the marginal's sorted order.  Raises DataError for a missing table, a wrong shape or negative or
    fractional counts."""
    if isinstance(tables, dict):
        missing = [s for s in plan.marginals if s not in tables]
        if missing:
            raise DataError(f"no counted table for marginal {missing[0]}")
        tables = [tables[s] for s in plan.marginals]
    if len(tables) != len(plan.marginals):
        raise DataError(f"{len(tables)} counted tables for {len(plan.marginals)} marginals")
    checked = []
    for s, table in zip(plan.marginals, tables):
        table = np.asarray(table)
        shape = tuple(plan.sizes[i] for i in s)
        if table.shape != shape:
            raise DataError(f"marginal {s}: counted table of shape {table.shape}, expected {shape}")
        whole = np.issubdtype(table.dtype, np.integer) or (
            np.issubdtype(table.dtype, np.floating) and bool(np.all(np.isfinite(table) & (table == np.round(table)))))
        if not whole or (table.size and table.min() < 0):
            raise DataError(f"marginal {s}: counts must be non-negative whole numbers")
        checked.append(table.astype(np.int64))
    return checked


def source_marginals(plan: ResidualPlan) -> dict[tuple[int, ...], int]:
    """{basis A: the position in ``plan.marginals`` of the workload marginal S ⊇ A with the fewest cells} (ties:
    the first), the table A's counts are summed from."""
    cells = plan.marginal_cells()
    out: dict[tuple[int, ...], int] = {}
    for group in plan.groups:
        for row, bases in zip(group.rows.tolist(), group.basis.tolist()):
            for b in bases:
                if b < 0:
                    continue
                a = plan.bases[b]
                if a not in out or cells[row] < cells[out[a]] or (cells[row] == cells[out[a]] and row < out[a]):
                    out[a] = row
    return out


def _share_fractions(plan: ResidualPlan) -> list[Fraction]:
    """The plan's shares as the exact fractions the budget is split by (each float share, exactly)."""
    return [Fraction(float(s)) for s in plan.shares]


def _measure(plan: ResidualPlan, table_of, budget: PrivacyBudget) -> list[ResidualMeasurement]:
    parts = budget.split(_share_fractions(plan))
    out = []
    for basis, part in zip(plan.bases, parts):
        dims = tuple(plan.sizes[i] for i in basis)
        residual, record = part.gaussian_residual(table_of(basis, dims), part.amount, f"residual basis {basis}")
        out.append(ResidualMeasurement(basis, residual, float(record.noise_variance), record))
    return out


def _scaled_variances(plan: ResidualPlan, rho) -> list[Fraction]:
    """s_A² = N_A²·p_A/(2ρ_A) per basis, exactly: the variance parameter the kernel draws basis A's noise with on
    the scaled table, for a budget of ``rho`` per record (ρ/K² for a protected unit of K rows), split as
    :func:`measure_from_marginals` splits it."""
    parts = split_shares(Fraction(rho), _share_fractions(plan))
    out = []
    for basis, part in zip(plan.bases, parts):
        sizes = [plan.sizes[i] for i in basis]
        out.append(Fraction(math.prod(sizes) * math.prod(n - 1 for n in sizes)) / (2 * part))
    return out


def discrete_variance_per_cell(plan: ResidualPlan, rho) -> dict[tuple[int, ...], float]:
    """{marginal S: the exact variance of each cell of m̂_S} when the bases are measured by the kernel (discrete
    Gaussian noise on the scaled tables) with a budget of ``rho`` per record: Σ_{A⊆S} v_A·p_A/∏_{S∖A} n_i², with
    v_A = discrete_gaussian_variance(s_A²)/N_A², the figure every record's ``noise_variance`` will state
    (:func:`exact_variances` computes the same from the records).  At most :meth:`ResidualPlan.variance_per_cell`."""
    v = np.array([discrete_gaussian_variance(s2) for s2 in _scaled_variances(plan, rho)]) / plan.cells ** 2
    return dict(zip(plan.marginals, _cell_variances(plan, v * plan.kept).tolist()))


def check_sampler(plan: ResidualPlan, rho) -> None:
    """ValueError (one line) if some basis would need a noise variance above the sampler's limit at ``rho`` per
    record: the kernel would refuse that basis, so a release checks this before anything is charged."""
    scaled = _scaled_variances(plan, rho)
    worst = max(range(len(scaled)), key=scaled.__getitem__)
    if scaled[worst] > MAX_SIGMA2:
        raise ValueError(f"residual basis {plan.bases[worst]} would need a noise variance of "
                         f"{float(scaled[worst]):.3g} on its scaled table, above the sampler's 2^60")


def _by_basis(plan: ResidualPlan, measurements: Sequence[ResidualMeasurement]) -> dict:
    found = {m.basis: m for m in measurements}
    missing = [b for b in plan.bases if b not in found]
    if missing:
        raise ValueError(f"no measurement of basis {missing[0]} (and {len(missing) - 1} more)")
    return found


def reconstruct(plan: ResidualPlan, measurements: Sequence[ResidualMeasurement]) -> dict[tuple[int, ...], np.ndarray]:
    """{marginal S: m̂_S = Σ_{A⊆S} expand_S(ŷ_A)/∏_{i∈S∖A} n_i} (float arrays over S's axes).  The marginals share
    their residual pieces, so for T ⊆ S both in the workload m̂_S summed over S∖T is m̂_T exactly (up to
    rounding); with noiseless residuals it is the true marginal.  Post-processing only.  Residuals with leading
    axes (a replicated budget's runs, all drawn at once) give marginals with the same leading axes."""
    found = _by_basis(plan, measurements)
    lead: tuple[int, ...] = ()
    for m in found.values():
        residual = np.asarray(m.residual)
        lead = residual.shape[:residual.ndim - len(m.basis)]
        break
    out = {}
    for s in plan.marginals:
        estimate = np.zeros(lead + tuple(plan.sizes[i] for i in s))
        for mask in range(1 << len(s)):
            a = tuple(s[j] for j in range(len(s)) if mask >> j & 1)
            if a not in found:  # an attribute of one value: a zero residual
                continue
            rest = math.prod(plan.sizes[s[j]] for j in range(len(s)) if not mask >> j & 1)
            view = lead + tuple(plan.sizes[s[j]] if mask >> j & 1 else 1 for j in range(len(s)))
            estimate += np.reshape(found[a].residual, view) / rest
        out[s] = estimate
    return out


def variances_from(plan: ResidualPlan, noise_variances) -> dict[tuple[int, ...], float]:
    """{marginal S: the variance of each cell of m̂_S} when basis A's estimate carries noise of covariance
    v_A·P_A, v_A = ``noise_variances[A's position in plan.bases]``: Σ_{A⊆S} v_A·p_A/∏_{S∖A} n_i² (the residual
    estimates are uncorrelated across bases, whatever measured them)."""
    per_basis = np.asarray(noise_variances, dtype=np.float64) * plan.kept
    return dict(zip(plan.marginals, _cell_variances(plan, per_basis).tolist()))


def exact_variances(plan: ResidualPlan, measurements: Sequence[ResidualMeasurement]) -> dict[tuple[int, ...], float]:
    """{marginal S: the variance of each cell of m̂_S} from the records' exact noise variances: Σ_{A⊆S}
    v_A·p_A/∏_{S∖A} n_i², v_A = the discrete Gaussian's variance per coordinate (``noise_variance``).  Every cell
    of one marginal has the same variance."""
    found = _by_basis(plan, measurements)
    per_basis = np.array([found[b].noise_variance for b in plan.bases]) * plan.kept
    return dict(zip(plan.marginals, _cell_variances(plan, per_basis).tolist()))
