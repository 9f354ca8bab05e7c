"""The black-box ε audit (docs/privacy.md §2.3, layer 2) and its case list.

For each case, an algorithm, a claimed ε and a pair of neighbouring tables D, D′ (one record added or removed):

1. run the algorithm many times on each table (vectorised by a :class:`~.replication.ReplicatedBudget` where the
   algorithm is not data-adaptive, else once per run) and read each run's noisy answers from its budget's
   trace (the algorithm has no audit code); reduce each run's noisy answers to one number, the log-likelihood-ratio statistic under the algorithm's own stated
   scales, T = Σ_i (|y_i − a_i| − |y_i − a′_i|) / b_i, with a, a′ the answers on D and D′ (their sample medians:
   discrete Laplace noise has median 0);
2. on a *selection* sample, choose the event {T ≥ t} or {T ≤ t}, and the direction, whose probability ratio
   looks largest by a loose lower confidence bound;
3. on fresh *test* samples, bound ln(P[event | D] / P[event | D′]) from below with Clopper–Pearson at level
   α / (number of cases) (Bonferroni), and FAIL the case if that lower bound exceeds the claimed ε.

A correct algorithm fails a case with probability at most α/m; a mutant is caught when its bound exceeds ε.

ρ-zCDP cases (``Case.rho``; discrete Gaussian noise) run the same way on zCDP budgets, with two changes:

* the statistic is the log-likelihood ratio of each value under its own noise, T = Σ_i over Laplace values as
  above + Σ_i over Gaussian values ((y_i − a_i)² − (y_i − a′_i)²) / (2σ_i²), with σ_i the stated σ;
* the claim is not one ε but p <= e^ε p′ + δ_ρ(ε) for every ε (the tight CKS20 conversion): a case FAILS when
  for some ε on a grid the Clopper–Pearson lower bound on p minus e^ε times the upper bound on p′ exceeds
  δ_ρ(ε) (:func:`~.bounds.zcdp_lower_bound`; no correction for the grid is needed, every point follows from the
  same two bounds).  The result reports, at the grid point where the claim is contradicted most, the smallest ε
  the event allows at δ = δ_ρ(ε) (``lower_bound``) beside the claimed ε (``epsilon``) and that δ (``delta``).
  Events are threshold events on T of probability at least MIN_EVENT on the first table (far above the δ's
  where the claim would be vacuous).  The (ε, δ) curves of ρ and of 1.5625ρ (σ × 0.8) lie close together, so
  the σ × 0.8 mutant and the identity case of the same shape get SIGMA_RUNS runs per table (``Case.runs``) on
  a 2-cell table, where they are cheap; the other zCDP cases get the audit's usual numbers of runs.

The residual bases of a marginal set (residual_cases.py) release projections, whose values are correlated: their
case reduces each run to one value per basis (``Case.reduce``: the released residual projected on the direction
its mean moves between D and D′), and the log-likelihood ratio weighs those values by the standard deviation
each shows on the selection sample, not the one it states (:func:`_spread_of`), so that a basis with less noise
than it claims counts as much as it reveals.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dphist.algorithms import REGISTRY, Algorithm
from dphist.algorithms.partitioning import DPCube
from dphist.algorithms.structurefirst import StructureFirst
from dphist.errors import UsageError
from dphist.privacy import SeededBits, discrete_laplace_variance
from dphist.declare.schema import parse_schema
from .cases import Case
from .bounds import cp_lower, cp_upper, epsilon_lower_bound, zcdp_lower_bound, zcdp_margins
from .marginal_sets import OverspentMarginals, SeparateMarginals
from .discovery_steps import (ArgmaxBounds, CandidatesBeforeBounding, DiscoveredBounds, DiscoveredLowerBound,
                              DiscoveredQuantileBins, PartitionSelection, TrueCountSelection, UnitPartitionSelection,
                              UnthresholdedSelection, bounds_pair, labels_pair, tail_pair, unit_labels_pair)
from .units import BoundedUnits, CapDropped, UnboundedUnits, UnclippedDropped, cap_pair, unit_pairs
from .mutants import MUTANTS, ZCDP_MUTANTS, UnsquaredL2Tree
from . import ahp_cases, dawa_cases, efpa_cases, grid_cases, hdmm_cases, mwem_cases, privtree_cases, residual_cases
from .replication import NoisePool, PooledBudget, PooledZCDPBudget, ReplicatedBudget, ReplicatedZCDPBudget

__all__ = ["Case", "AuditResult", "AuditSize", "PlannedCase", "default_cases", "quick_cases", "zcdp_cases", "plan",
           "audit", "ALPHA", "FULL", "WIDE", "QUICK", "LARGE_EFFECT"]

#: Algorithms whose cases all come after the others' (:func:`default_cases`): added to the catalog later, they
#: leave the seeds of the cases before them as they were.
LATE_CASES = frozenset({"hdmm"})
#: Per algorithm, the module function giving its own audit cases (and mutants, when asked).
ALGORITHM_CASES = {"ahp": ahp_cases.cases, "dawa": dawa_cases.cases, "efpa": efpa_cases.cases,
                   "mwem": mwem_cases.cases, "privtree": privtree_cases.cases, "ugrid": grid_cases.ugrid_cases,
                   "agrid": grid_cases.agrid_cases}
ALPHA = 1e-6  # total false-alarm probability for a correct algorithm, over all cases of one audit
ADAPTIVE_SHARE = 1 / 20  # fraction of the samples for data-adaptive algorithms (one Python run per sample)
OUTCOME_SHARE = 1 / 60  # for discovery, whose outcome is a domain (events on it need fewer runs to show)
# The ρ of the zCDP cases.  A record moves one identity cell by 1, so the statistic lives on the lattice of the
# discrete Gaussian (σ² = 1 at ρ = 1/2): its best event for σ × 0.8 is {y >= a + 2}.  Measured at 4e6 runs
# (6 seeds): the σ × 0.8 mutant shows lower − ε = +0.50 ± 0.01, the real identity −0.39.
ZCDP_RHO = Fraction(1, 2)
SIGMA_RUNS = (200_000, 4_000_000)  # (selection, test) runs per table for σ × 0.8 and its real counterpart
ZCDP_CHUNK = 250_000  # test runs drawn at once (bounds the memory of a replicated run)
MIN_EVENT = 1e-3  # a zCDP case's events have at least this probability on the first table (selection sample)


@dataclass(frozen=True)
class AuditResult:
    """One case's outcome.  ``epsilon`` is the claimed ε and ``lower_bound`` the audit's lower confidence bound
    on the ε the mechanism shows; for a ρ-zCDP case (``rho`` set) both are taken at ``delta``, the δ_ρ(ε) of the
    grid point where the claim is contradicted most (``delta`` is 0 for pure-ε cases)."""

    case: str
    algorithm: str
    epsilon: Fraction
    lower_bound: float
    mutant: bool
    rho: Fraction | None = None
    delta: float = 0.0
    hits: tuple[int, int] = (0, 0)  # runs in the chosen event on (the first table, the second), of ``runs`` each
    runs: int = 0  # test runs per table
    seconds: float = 0.0  # wall time of the case (selection and test)

    @property
    def flagged(self) -> bool:
        return self.lower_bound > float(self.epsilon)

    @property
    def ok(self) -> bool:
        """A real algorithm must not be flagged; a mutant must be."""
        return self.flagged if self.mutant else not self.flagged

    @property
    def verdict(self) -> str:
        if self.mutant:
            return "caught" if self.flagged else "MISSED"
        return "FAIL" if self.flagged else "pass"


_BASE_1D = np.array([3, 0, 5, 1, 0, 2, 4, 1], dtype=np.int64)


def _pairs(shape: tuple[int, ...]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Worst-case neighbours on a tiny table: add a record to the first cell, remove one from the largest,
    add one to the last cell (a different root-to-leaf path from the first)."""
    base = np.resize(_BASE_1D, int(np.prod(shape))).reshape(shape)
    first, largest, last = base.copy(), base.copy(), base.copy()
    first.flat[0] += 1
    largest.flat[int(np.argmax(base))] -= 1
    last.flat[-1] += 1
    return [("add to first cell", base, first), ("remove from largest cell", base, largest),
            ("add to last cell", base, last)]


_HIERARCHY = parse_schema({"columns": {"c": {
    "type": "categorical", "values": ["a", "b", "c", "d", "e", "f", "g"],
    "hierarchy": {"G1": {"G11": ["a", "b"], "G12": ["c"]}, "G2": ["d", "e", "f"], "G3": ["g"]}}}})["c"]


def _flip_pair(epsilon: Fraction, name: str = "dpcube") -> tuple[np.ndarray, np.ndarray]:
    """A 1-D pair (D, D + one record) on which the partition of the TRUE counts has a different number of parts
    for DPCube or the k-d tree: the worst case for a data-adaptive structure (docs/privacy.md §2.3)."""
    algo = _tiny(name)
    eps1 = epsilon * algo.params["alpha"]  # tiny: every cell measured, no total
    s1, s2 = discrete_laplace_variance(1 / eps1), discrete_laplace_variance(1 / (epsilon - eps1))
    for a in range(0, 12):
        for b in range(a, 16):
            data = np.array([0, 0, 0, 0, a, a, b, b], dtype=np.int64)
            neighbour = data.copy()
            neighbour[-1] += 1
            if len(algo.partition(data, s1, s2)) != len(algo.partition(neighbour, s1, s2)):
                return data, neighbour
    raise RuntimeError("no flipping pair found")


def _auto_flip_pair(epsilon: Fraction) -> tuple[str, np.ndarray, np.ndarray]:
    """A 1-D pair (D, D + one record) whose TRUE totals straddle a boundary of auto's rule table for ranges (the
    default workload of an ordered column), so that a choice read off the true total would differ between them:
    the worst case for the choice."""
    from dphist.algorithms.auto.choice import Auto, RULES

    auto = Auto()
    eps1 = epsilon * (1 - auto.params["total_share"])
    # A boundary between two data-independent algorithms first: their outputs differ in structure the audit's
    # events see at once (a data-adaptive one, such as DAWA, hides its noise in a data-dependent structure).
    for plain_only in (True, False):
        for (dims, cells), decades in sorted(RULES["ranges"].items()):
            if dims != 1:
                continue
            for dec in sorted(decades)[:-1]:
                pair = (decades[dec][0], decades[dec + 1][0])
                if pair[0] == pair[1] or (plain_only and any(REGISTRY[a].data_adaptive for a in pair)):
                    continue
                total = int(10 ** (dec + 0.5) / eps1)
                picks = [auto.choose((cells,), eps1, t)["chosen"] for t in (total, total + 1)]
                if picks[0] != picks[1]:
                    data = np.full(cells, total // cells, dtype=np.int64)
                    data[: total % cells] += 1
                    neighbour = data.copy()
                    neighbour[0] += 1
                    return f"the choice flips ({picks[0]} / {picks[1]})", data, neighbour
    raise AssertionError("no boundary in the 1-D rules")


def _structurefirst_flip_pair() -> tuple[np.ndarray, np.ndarray]:
    """A pair (D, D + one record) on which the best-scoring StructureFirst boundaries differ, for the tiny
    setting of :func:`_tiny`: a draw that ignored the exponential mechanism would give itself away there."""
    algo = _tiny("structurefirst")
    cuts, k, _ = algo.plan(8, Fraction(1))

    def best(table):
        scores = algo.scores(table, cuts, k)
        right = [8]
        for j in range(k - 1, 0, -1):
            candidates = np.arange(j, right[-1])
            right.append(int(candidates[np.argmin(scores(j, candidates, right[-1]))]))
        return right
    for a in range(0, 7):
        for b in range(0, 7):
            data = np.array([0, 0, a, a, b, b, 6, 6], dtype=np.int64)
            neighbour = data.copy()
            neighbour[3] += 1
            if best(data) != best(neighbour):
                return data, neighbour
    raise AssertionError("no flipping pair found")


def _tiny_options(cls: type[Algorithm]) -> dict:
    """Options for an algorithm (or its mutant) as it runs on tiny tables: options that would turn it into
    another one are switched off (Privelet leaves axes of up to 16 cells untransformed by default, which would
    make it identity here), DPCube and the k-d tree measure every cell, and StructureFirst gets a cap and one
    boundary draw over 8 cells."""
    tiny = dict(cls.example_options)
    if "small_axis" in cls.options:
        tiny["small_axis"] = 0
    if issubclass(cls, DPCube):
        tiny["block"] = 1  # every cell measured, so that the partition has cells to choose from
    if issubclass(cls, StructureFirst):
        tiny.update(cap=6, buckets=2, structure_share="1/5")
    return tiny


def _tiny(name: str) -> Algorithm:
    cls = REGISTRY[name]
    return cls(**_tiny_options(cls))


def default_cases(algorithms: list[str] | None = None, mutants: bool = True,
                  epsilon: Fraction = Fraction(1)) -> list[Case]:
    """Every registered algorithm on 1-D (8 cells) and 2-D (4x4) tables, each with its neighbour pairs, the
    marginal-set strategy "separate" (with all algorithms, or as ``marginals``) on a 2x2x2 table, contribution
    bounding per privacy unit (with all, or as ``units``) on row lists, plus every mutant on one 1-D pair."""
    names = sorted(REGISTRY) if algorithms is None else algorithms
    cases = []
    for name in (n for n in names if n in REGISTRY and n not in LATE_CASES):
        for shape in ((8,), (4, 4)):
            try:
                _tiny(name).check_shape(shape)
            except UsageError:
                continue
            # An algorithm with cases of its own (data-adaptive, a run at a time: slow) gets one generic pair.
            for label, data, neighbour in _pairs(shape)[:1 if name in ALGORITHM_CASES else None]:
                cases.append(Case(f"{name} {shape} {label}", _tiny(name), data, neighbour, epsilon))
    if "privelet" in names:
        # The nominal wavelet: a category hierarchy with uneven fan-outs.
        for label, data, neighbour in _pairs((7,)):
            cases.append(Case(f"privelet nominal (7,) {label}", _tiny("privelet"), data, neighbour, epsilon,
                              columns=(_HIERARCHY,)))
    if "dpcube" in names:
        data, neighbour = _flip_pair(epsilon)
        cases.append(Case("dpcube (8,) one record flips the partition", _tiny("dpcube"), data, neighbour, epsilon))
    if "dpcube" in names:
        # The block size chosen from a noisy total: a case with the default (auto) options.
        label, data, neighbour = _pairs((8,))[0]
        cases.append(Case(f"dpcube (8,) block size from a noisy total, {label}", REGISTRY["dpcube"](), data,
                          neighbour, epsilon))
    if "kdtree" in names:
        data, neighbour = _flip_pair(epsilon, "kdtree")
        cases.append(Case("kdtree (8,) one record flips the partition", _tiny("kdtree"), data, neighbour, epsilon))
    if "auto" in names:
        # At a boundary of the rule table: runs that chose differently measure different queries (the structure
        # events see that), runs that chose alike line up.
        label, data, neighbour = _auto_flip_pair(epsilon)
        cases.append(Case(f"auto {data.shape} {label}", REGISTRY["auto"](), data, neighbour, epsilon))
    # The low-signal algorithms' own cases (a pair where one record flips a data-dependent choice) and mutants.
    for name, own_cases in ALGORITHM_CASES.items():
        if name in names:
            cases.extend(own_cases(mutants))
    if "structurefirst" in names:
        data, neighbour = _structurefirst_flip_pair()
        cases.append(Case("structurefirst (8,) one record moves the best boundaries", _tiny("structurefirst"),
                          data, neighbour, epsilon))
    if algorithms is None or "marginals" in algorithms:
        for label, data, neighbour in _pairs((2, 2, 2)):
            cases.append(Case(f"marginals separate (2, 2, 2) {label}", SeparateMarginals(), data, neighbour,
                              epsilon))
        if mutants:
            label, data, neighbour = _pairs((2, 2, 2))[0]
            cases.append(Case(f"{OverspentMarginals.name} {label}", OverspentMarginals(), data, neighbour, epsilon,
                              mutant=True))
    if algorithms is None or "units" in algorithms:
        for label, data, neighbour in unit_pairs():
            cases.append(Case(f"units K=2 {label}", BoundedUnits(), data, neighbour, epsilon))
        if mutants:
            label, data, neighbour = unit_pairs()[0]
            cases.append(Case(f"{UnboundedUnits.name} {label}", UnboundedUnits(), data, neighbour, epsilon,
                              mutant=True))
        for label, data, neighbour in cap_pair():
            cases.append(Case(f"unit cap dropped K=2 {label}", CapDropped(), data, neighbour, epsilon))
            if mutants:
                cases.append(Case(f"{UnclippedDropped.name} {label}", UnclippedDropped(), data, neighbour, epsilon,
                                  mutant=True))
    if algorithms is None or "discovery" in algorithms:
        for label, data, neighbour in bounds_pair(epsilon):
            cases.append(Case(f"discovery bounds {label}", DiscoveredBounds(), data, neighbour, epsilon))
        for label, data, neighbour in tail_pair():
            cases.append(Case(f"discovery lower bound {label}", DiscoveredLowerBound(), data, neighbour, epsilon))
        if mutants:
            label, data, neighbour = tail_pair()[0]
            cases.append(Case(f"{ArgmaxBounds.name} {label}", ArgmaxBounds(), data, neighbour, epsilon, mutant=True))
        label, data, neighbour = bounds_pair(epsilon)[0]
        cases.append(Case(f"discovery quantile bins {label}", DiscoveredQuantileBins(), data, neighbour, epsilon))
        for label, data, neighbour in labels_pair(epsilon):
            cases.append(Case(f"discovery categories {label}", PartitionSelection(), data, neighbour, epsilon))
        for label, data, neighbour in unit_labels_pair(epsilon):
            cases.append(Case(f"discovery categories with a privacy unit {label}", UnitPartitionSelection(), data,
                              neighbour, epsilon))
        if mutants:
            label, data, neighbour = unit_labels_pair(epsilon)[0]
            cases.append(Case(f"{CandidatesBeforeBounding.name} {label}", CandidatesBeforeBounding(), data, neighbour,
                              epsilon, mutant=True))
            at_threshold, new_label = labels_pair(epsilon)
            cases.append(Case(f"{TrueCountSelection.name} {at_threshold[0]}", TrueCountSelection(),
                              *at_threshold[1:], epsilon, mutant=True))
            cases.append(Case(f"{UnthresholdedSelection.name} {new_label[0]}", UnthresholdedSelection(),
                              *new_label[1:], epsilon, mutant=True))
    if mutants:
        for cls in MUTANTS:
            label, data, neighbour = _pairs((8,))[0]
            if getattr(cls, "flip_pair", None) in ("dpcube", "kdtree"):
                label, (data, neighbour) = "one record flips the partition", _flip_pair(epsilon, cls.flip_pair)
            if getattr(cls, "flip_pair", None) == "auto":
                label, data, neighbour = _auto_flip_pair(epsilon)
            if getattr(cls, "flip_pair", None) == "structurefirst":
                label, (data, neighbour) = "one record moves the best boundaries", _structurefirst_flip_pair()
            columns = None
            if getattr(cls, "needs_hierarchy", False):
                label, data, neighbour = _pairs((7,))[0]
                columns = (_HIERARCHY,)
            algo = cls(**_tiny_options(cls))
            cases.append(Case(f"{cls.name} {label}", algo, data, neighbour, epsilon, mutant=True, columns=columns))
    # ρ-zCDP cases last (the cases above keep their seeds): for all, for "zcdp", or for an algorithm they cover.
    cases = cases + zcdp_cases(algorithms, mutants)
    # Then the algorithms added since, so that every case above keeps its seed.
    if "hdmm" in names:
        cases.extend(hdmm_cases.cases(mutants, epsilon))
    if algorithms is None or "marginals" in algorithms or "zcdp" in algorithms:
        # The marginal set at the optimum (residual bases, ρ-zCDP only), after hdmm for the same reason.
        cases.extend(residual_cases.cases(mutants, ZCDP_RHO))
    return cases


#: The mutants of large effect: on their most revealing event (as the wide audit chose it, seed 0) they show a
#: privacy loss ln(p/q) of at least twice the claim, with p large enough that the quick audit's runs (400 for a
#: data-adaptive one, 20,000 otherwise) catch them with probability 0.99 or more (:func:`~.bounds.runs_for_power`
#: at the quick audit's per-case α; the runs each needs are beside it).  Most are
#: a choice made on true values, whose event ("this structure was chosen") has p near 1 and q near 0.  The
#: others (a scale × 0.8, a 10 % overspent split, Privelet's forgotten total coefficient, σ × 0.8, ...) need more
#: runs than the quick audit gives; the test suite runs them at the size the power calculation asks for.
LARGE_EFFECT = frozenset({
    "mutant-ahp-clusters-on-true-counts",  # 59 runs
    "mutant-dawa-true-costs",  # 59
    "mutant-efpa-argmax",  # 59
    "mutant-privtree-splits-on-true-counts",  # 59
    "mutant-ugrid-true-total",  # 59
    "mutant-agrid-true-level1-counts",  # 59
    "mutant-marginals-no-composition",  # 669 (ln(p/q) = 3.0)
    "mutant-discovery-bounds-true-quantiles",  # 67
    "mutant-partition-selection-true-counts",  # 67
    "mutant-identity-half-scale",  # 467 (2.0)
    "mutant-tree-height-forgotten",  # 670 (3.0)
    "mutant-dpcube-partition-on-true-counts",  # 59
    "mutant-kdtree-partition-on-true-counts",  # 59
    "mutant-structurefirst-argmax",  # 360 (4.2)
    "mutant-auto-choice-on-true-total",  # 59
    "mutant-unit-cap-dropped-unclipped",  # ln(p/q) up to 5 (the sums move by 40 rows against 8)
    "mutant-hdmm-half-sensitivity",  # half the noise, as mutant-identity-half-scale
})


def quick_cases(algorithms: list[str] | None = None, mutants: bool = True) -> list[Case]:
    """The quick audit: of :func:`default_cases`, the first case of each algorithm (pure ε and ρ-zCDP apart) and
    each mutant of :data:`LARGE_EFFECT` once (on its smallest table, the cheapest to run).  With :data:`QUICK`
    runs it takes under a minute on two cores."""
    cases = default_cases(algorithms, mutants)
    smallest = {}
    for case in cases:
        if case.mutant and case.algorithm.name in LARGE_EFFECT:
            best = smallest.get(case.algorithm.name)
            if best is None or case.data.size < best.data.size:
                smallest[case.algorithm.name] = case
    seen, out = set(), []
    for case in cases:
        key = (case.algorithm.name, case.rho is not None)
        if (case is smallest.get(case.algorithm.name)) if case.mutant else key not in seen:
            seen.add(key)
            out.append(case)
    return out


def zcdp_cases(algorithms: list[str] | None = None, mutants: bool = True, rho: Fraction = ZCDP_RHO) -> list[Case]:
    """ρ-zCDP cases (discrete Gaussian noise): identity on 2, 8 and 4x4 cells, h, hb and privelet on 8 cells, the
    quadtree on 4x4, the marginal set "separate" on 2x2x2 (``marginals``), each on the pair that adds a record to
    the first cell (it changes one node on every level of a tree: the whole L2 sensitivity; identity on 8 cells
    removes one from the largest instead).  Mutants: identity with σ × 0.8 on 2 cells (it and the real identity
    case there get SIGMA_RUNS runs), and a tree on 16 cells whose levels get ρ/√h instead of ρ/h.
    ``algorithms`` selects by name ("zcdp" or None: all)."""
    def wanted(name):
        return algorithms is None or "zcdp" in algorithms or name in algorithms

    rho, cases = Fraction(rho), []
    if wanted("identity"):
        for shape, pair, runs in (((2,), 0, SIGMA_RUNS), ((8,), 1, None), ((4, 4), 0, None)):
            label, data, neighbour = _pairs(shape)[pair]
            cases.append(Case(f"identity {shape} {label}, zCDP rho={rho}", _tiny("identity"), data, neighbour, None,
                              rho=rho, runs=runs))
    for name, shape in (("h", (8,)), ("hb", (8,)), ("quadtree", (4, 4)), ("privelet", (8,))):
        if wanted(name):
            label, data, neighbour = _pairs(shape)[0]
            cases.append(Case(f"{name} {shape} {label}, zCDP rho={rho}", _tiny(name), data, neighbour, None, rho=rho))
    if wanted("marginals"):
        label, data, neighbour = _pairs((2, 2, 2))[0]
        cases.append(Case(f"marginals separate (2, 2, 2) {label}, zCDP rho={rho}", SeparateMarginals(), data,
                          neighbour, None, rho=rho))
    if mutants:
        for cls in ZCDP_MUTANTS:
            shape, runs = ((16,), None) if cls is UnsquaredL2Tree else ((2,), SIGMA_RUNS)
            label, data, neighbour = _pairs(shape)[0]
            cases.append(Case(f"{cls.name} {shape} {label}, zCDP rho={rho}", cls(**_tiny_options(cls)), data,
                              neighbour, None, mutant=True, rho=rho, runs=runs))
    return cases


def _statistic_samples(case: Case, table: np.ndarray, reps: int, bits) -> tuple[np.ndarray, np.ndarray, list | None]:
    """``reps`` runs of the case's mechanism on ``table``: each run's noisy answers as a row of ``values``
    (reps, M), each answer's noise scale in ``scales`` (reps, M), and for data-adaptive mechanisms each run's
    structure key (what it measured, how many values, what it selected), else None.  Runs of different
    structure are padded with zeros of scale 1 (a function of the output, so every event stays sound)."""
    algo, factor = case.algorithm, getattr(case.algorithm, "factor", 1)
    if hasattr(algo, "outcome"):  # discovery: the outcome is the domain, no noisy number is published
        delta, pool = getattr(algo, "delta", 0), NoisePool(bits)  # partition selection is (ε, δ)-DP
        keys = [algo.outcome(table, PooledBudget(case.epsilon, delta, pool=pool, factor=factor)) for _ in range(reps)]
        return np.zeros((reps, 1)), np.ones((reps, 1)), keys
    if not algo.data_adaptive:
        trace: list = []
        algo.run(table, ReplicatedBudget(case.epsilon, bits, reps, trace, factor), columns=case.columns)
        values = np.concatenate([d.values.reshape(reps, -1) for d in trace], axis=1)
        scales = np.concatenate([np.broadcast_to(d.scales, d.values.shape).reshape(reps, -1) for d in trace], axis=1)
        return values, scales, None
    runs, keys, pool = [], [], NoisePool(bits)
    for _ in range(reps):
        trace = []
        algo.run(table, PooledBudget(case.epsilon, pool=pool, trace=trace, factor=factor), columns=case.columns)
        drawn = [d for d in trace if d.values is not None]
        runs.append((np.concatenate([d.values.ravel() for d in drawn]) if drawn else np.zeros(0),
                     np.concatenate([np.broadcast_to(d.scales, d.values.shape).ravel() for d in drawn])
                     if drawn else np.zeros(0)))
        keys.append(tuple((d.what, None if d.values is None else d.values.size, d.choice) for d in trace))
    width = max(1, max(v.size for v, _ in runs))
    values, scales = np.zeros((reps, width)), np.ones((reps, width))
    for r, (v, b) in enumerate(runs):
        values[r, :v.size], scales[r, :b.size] = v, b
    return values, scales, keys


def _zcdp_samples(case: Case, table: np.ndarray, reps: int, bits) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                             list | None]:
    """As :func:`_statistic_samples` for a ρ-zCDP case, on zCDP budgets: (values, scales, gaussian, keys), with
    ``gaussian`` (reps, M) True where a value had discrete Gaussian noise (its scale is σ), False where it had
    discrete Laplace noise (scale b) or is padding."""
    algo, factor = case.algorithm, getattr(case.algorithm, "factor", 1)
    if not algo.data_adaptive:
        trace: list = []
        algo.run(table, ReplicatedZCDPBudget(case.rho, bits, reps, trace, factor), columns=case.columns)
        drawn = [d for d in trace if d.values is not None]
        if case.reduce is not None:
            return (*case.reduce(drawn, reps), None)
        values = np.concatenate([d.values.reshape(reps, -1) for d in drawn], axis=1)
        scales = np.concatenate([np.broadcast_to(d.scales, d.values.shape).reshape(reps, -1) for d in drawn], axis=1)
        gaussian = np.concatenate([np.full((reps, d.values[0].size), d.gaussian) for d in drawn], axis=1)
        return values, scales, gaussian, None
    runs, keys, pool = [], [], NoisePool(bits)
    for _ in range(reps):
        trace = []
        algo.run(table, PooledZCDPBudget(case.rho, pool=pool, trace=trace, factor=factor), columns=case.columns)
        drawn = [d for d in trace if d.values is not None]
        if drawn:
            runs.append((np.concatenate([d.values.ravel() for d in drawn]),
                         np.concatenate([np.broadcast_to(d.scales, d.values.shape).ravel() for d in drawn]),
                         np.concatenate([np.full(d.values.size, d.gaussian) for d in drawn])))
        else:
            runs.append((np.zeros(0), np.zeros(0), np.zeros(0, bool)))
        keys.append(tuple((d.what, None if d.values is None else d.values.size, d.choice) for d in trace))
    width = max(1, max(r[0].size for r in runs))
    values, scales, gaussian = np.zeros((reps, width)), np.ones((reps, width)), np.zeros((reps, width), bool)
    for r, (v, b, g) in enumerate(runs):
        values[r, :v.size], scales[r, :b.size], gaussian[r, :g.size] = v, b, g
    return values, scales, gaussian, keys


_PADS = (0.0, 1.0, False)  # what a run is padded with: value 0, scale 1, Laplace (no noise: a function of the output)


def _fit(*arrays_and_width) -> tuple[np.ndarray, ...]:
    """Runs (values, scales[, gaussian]) cut or padded (zeros of scale 1, as Laplace) to ``width`` answers, to
    line up with the selection sample."""
    *arrays, width = arrays_and_width
    if arrays[0].shape[1] >= width:
        return tuple(a[:, :width] for a in arrays)
    pad = width - arrays[0].shape[1]
    return tuple(np.pad(a, ((0, 0), (0, pad)), constant_values=c) for a, c in zip(arrays, _PADS))


def _llr(values: np.ndarray, centre: np.ndarray, other: np.ndarray, scales: np.ndarray,
         gaussian: np.ndarray | None = None) -> np.ndarray:
    """ln P[y | other] − ln P[y | centre] per run, summed over its values: (|y − a| − |y − a′|)/b for discrete
    Laplace values, ((y − a)² − (y − a′)²)/(2σ²) for discrete Gaussian ones (``gaussian`` True)."""
    laplace = (np.abs(values - centre) - np.abs(values - other)) / scales
    if gaussian is None:
        return laplace.sum(axis=1)
    squares = ((values - centre) ** 2 - (values - other) ** 2) / (2 * scales ** 2)
    # Rounded so that runs on the same point of the statistic's lattice compare equal whatever the float order.
    return np.round(np.where(gaussian, squares, laplace).sum(axis=1), 9)


def _loose_score(k1, k2, n):
    with np.errstate(divide="ignore"):
        return np.log(cp_lower(k1, n, 0.01)) - np.log(cp_upper(k2, n, 0.01))


def _zcdp_score(rho):
    """The selection score of an event under a ρ-zCDP claim: the largest ln((p_L − δ_ρ(ε))/q_U) − ε over the
    grid with loose bounds (positive: the event contradicts the claim), −inf for events rarer than MIN_EVENT."""
    def score(k1, k2, n):
        k1, k2 = np.asarray(k1), np.asarray(k2)
        eps, _, lower = zcdp_margins(cp_lower(k1, n, 0.01), cp_upper(k2, n, 0.01), rho)
        return np.where(k1 >= MIN_EVENT * n, (lower - eps).max(axis=-1), -np.inf)
    return score


def _centre(values: np.ndarray) -> np.ndarray:
    """Per-value medians of runs (rows): rounded to the nearest integer where every run's value is one (integer
    answers with integer noise, whose statistic lives on that lattice), left as they are where a value is real (a
    released projection, or a case's reduced statistic)."""
    median = np.median(values, axis=0)
    integral = np.all(values == np.round(values), axis=0)
    return np.where(integral, np.rint(median), median)


def _llr_candidates(sel_d, sel_n, in_d, in_n, n_select, key, score=_loose_score) -> list:
    """The best LLR threshold events (both tails, both directions) among the runs marked in ``in_d``/``in_n``,
    with centres (per-value medians) taken from those runs; events count only marked runs.  ``sel_d`` and
    ``sel_n`` are (values, scales) pairs, or (values, scales, gaussian) for zCDP cases."""
    (v_d, *rest_d), (v_n, *rest_n) = sel_d, sel_n
    centres = _centre(v_d[in_d]), _centre(v_n[in_n])
    t_d = _llr(v_d[in_d], *centres, *(a[in_d] for a in rest_d))
    t_n = _llr(v_n[in_n], *centres, *(a[in_n] for a in rest_n))
    # Thresholds at quantiles of the pooled values.
    thresholds = np.unique(np.quantile(np.concatenate([t_d, t_n]), np.linspace(0.005, 0.995, 199)))
    sd, sn = np.sort(t_d), np.sort(t_n)
    ge_d, ge_n = sd.size - np.searchsorted(sd, thresholds, "left"), sn.size - np.searchsorted(sn, thresholds, "left")
    le_d, le_n = np.searchsorted(sd, thresholds, "right"), np.searchsorted(sn, thresholds, "right")
    out = []
    for upper, kd, kn in ((True, ge_d, ge_n), (False, le_d, le_n)):
        for d_first, k1, k2 in ((True, kd, kn), (False, kn, kd)):
            scores = score(k1, k2, n_select)
            best = int(np.argmax(scores))
            out.append((float(scores[best]), ("llr", float(thresholds[best]), upper, centres, key), d_first))
    return out


def _hits(event, sample, keys) -> int:
    """How many runs of a test sample (values, scales[, gaussian]) fall in the chosen event."""
    if event[0] != "llr":
        return sum(k == event[1] for k in keys)
    _, threshold, upper, (centre_d, centre_n), key = event
    t = _llr(sample[0], centre_d, centre_n, *sample[1:])
    hit = t >= threshold if upper else t <= threshold
    if key is not None:
        hit &= np.array([k == key for k in keys])
    return int(hit.sum())


def _spread_of(sel_d, sel_n) -> Callable:
    """For a case whose statistic is reduced (``Case.reduce``): a function that gives a sample (values, scales,
    gaussian) the scales measured on the selection sample, the pooled standard deviation of each value about each
    table's mean, in place of the stated ones.  The log-likelihood ratio then weighs each value by the noise it
    shows, not the noise it claims: a value with less noise than stated (the bug to catch) gets its true, larger
    weight.  The scales are fixed before the test sample is drawn, so the statistic stays one fixed function."""
    spread = np.sqrt((sel_d[0].var(axis=0) + sel_n[0].var(axis=0)) / 2)
    spread = np.where(spread > 0, spread, 1.0)  # a constant value (no information): any positive scale will do

    def restate(sample):
        values, _, *rest = sample
        return (values, np.broadcast_to(spread, values.shape), *rest)
    return restate


def audit_case(case: Case, alpha: float, n_select: int, n_test: int, seed: int) -> AuditResult:
    """Select the most revealing event on one sample, then bound its privacy loss on fresh samples."""
    start_time = time.perf_counter()
    bits = SeededBits(seed)
    zcdp = case.rho is not None
    samples = _zcdp_samples if zcdp else _statistic_samples
    score = _zcdp_score(case.rho) if zcdp else _loose_score
    *sel_d, keys_d = samples(case, case.data, n_select, bits)
    *sel_n, keys_n = samples(case, case.neighbour, n_select, bits)
    width = max(sel_d[0].shape[1], sel_n[0].shape[1])
    sel_d, sel_n = _fit(*sel_d, width), _fit(*sel_n, width)
    restate = _spread_of(sel_d, sel_n) if case.reduce is not None else (lambda sample: sample)
    sel_d, sel_n = restate(sel_d), restate(sel_n)
    all_d, all_n = np.ones(n_select, bool), np.ones(n_select, bool)
    # (score, event, d_first); event = ("llr", threshold, upper, centres, key) or ("structure", key).  An LLR
    # event with a key is the joint event {that structure was chosen and T beyond the threshold}.
    candidates = _llr_candidates(sel_d, sel_n, all_d, all_n, n_select, None, score)
    # Data-adaptive algorithms: also the event "this structure was chosen", for every structure seen, and the
    # LLR events within each structure chosen in at least a tenth of the runs on both tables (there the later
    # measurements' values line up; rarer structures would only invite over-fitting the selection sample).
    if keys_d is not None:
        count_d, count_n = Counter(keys_d), Counter(keys_n)
        for key in sorted(set(count_d) | set(count_n), key=repr):
            for d_first, k1, k2 in ((True, count_d[key], count_n[key]), (False, count_n[key], count_d[key])):
                candidates.append((float(score(k1, k2, n_select)), ("structure", key), d_first))
        for key in sorted(set(count_d) & set(count_n), key=repr):
            if min(count_d[key], count_n[key]) >= n_select // 10:
                in_d = np.array([k == key for k in keys_d])
                in_n = np.array([k == key for k in keys_n])
                candidates += _llr_candidates(sel_d, sel_n, in_d, in_n, n_select, key, score)
    _, event, d_first = max(candidates, key=lambda c: c[0])

    # Fresh test samples, in chunks for zCDP cases (their many runs would not fit in memory at once); a pure-ε
    # case draws each table's runs at once, as it always did.
    chunk = min(n_test, ZCDP_CHUNK) if zcdp else n_test
    k_d = k_n = 0
    for start in range(0, n_test, chunk):
        reps = min(chunk, n_test - start)
        *test_d, tkeys_d = samples(case, case.data, reps, bits)
        *test_n, tkeys_n = samples(case, case.neighbour, reps, bits)
        k_d += _hits(event, restate(_fit(*test_d, width)), tkeys_d)
        k_n += _hits(event, restate(_fit(*test_n, width)), tkeys_n)
    k1, k2 = (k_d, k_n) if d_first else (k_n, k_d)
    if zcdp:
        bound, epsilon, delta = zcdp_lower_bound(k1, k2, n_test, case.rho, alpha)
        # ε is a grid point j/100: str gives it back exactly.
        return AuditResult(case.name, case.algorithm.name, Fraction(str(epsilon)), bound, case.mutant, case.rho, delta,
                           (k1, k2), n_test, time.perf_counter() - start_time)
    bound = epsilon_lower_bound(k1, k2, n_test, alpha)
    return AuditResult(case.name, case.algorithm.name, case.epsilon, bound, case.mutant, hits=(k1, k2), runs=n_test,
                       seconds=time.perf_counter() - start_time)


@dataclass(frozen=True)
class AuditSize:
    """How many runs an audit gives each case, per table: ``n_select`` to choose the event, ``n_test`` fresh ones
    to bound it.  Data-adaptive algorithms run once per repetition (their later measurements depend on earlier
    noise), so they get ``adaptive_share`` of both, discovery steps (whose outcome is a domain: events on it need
    fewer runs to show) ``outcome_share``; never fewer than ``min_select`` and ``min_test``.  A case with its own
    ``runs`` gets at least those (times the share)."""

    name: str
    n_select: int
    n_test: int
    adaptive_share: float = ADAPTIVE_SHARE
    outcome_share: float = OUTCOME_SHARE
    min_select: int = 1000
    min_test: int = 2000
    case_runs: bool = True  # whether a case's own ``runs`` count (they size the small-effect σ × 0.8 mutant)

    def runs(self, case: Case) -> tuple[int, int]:
        share = self.outcome_share if hasattr(case.algorithm, "outcome") else (
            self.adaptive_share if case.algorithm.data_adaptive else 1)
        select, test = self.n_select, self.n_test
        if case.runs is not None and self.case_runs:
            select, test = max(select, case.runs[0]), max(test, case.runs[1])
        return max(self.min_select, int(select * share)), max(self.min_test, int(test * share))


    def runs_note(self) -> str:
        """How the data-adaptive and discovery cases are sized, in words."""
        return (f"data-adaptive algorithms {round(1 / self.adaptive_share)}x fewer, discovery "
                f"{round(1 / self.outcome_share)}x fewer, at least {self.min_test:,}")


#: The full audit (``dphist audit``): 2e6 test runs per table.
FULL = AuditSize("full", 20_000, 2_000_000)
#: Every case at 3e5 test runs per table: the test suite's full tier.
WIDE = AuditSize("wide", 20_000, 300_000)
#: ``dphist audit --quick`` (:func:`quick_cases`): 2e4 test runs per table, 400 for data-adaptive algorithms and
#: discovery (a run at a time: up to 30 ms each).
QUICK = AuditSize("quick", 2_000, 20_000, adaptive_share=1 / 50, outcome_share=1 / 50, min_select=100, min_test=400,
                  case_runs=False)


@dataclass(frozen=True)
class PlannedCase:
    """One case of an audit as :func:`audit` runs it: its runs per table, its Bonferroni share of the audit's
    false-alarm probability, and its seed (so that a test can run the cases of one audit one at a time, in
    parallel, and get exactly the audit's results)."""

    case: Case
    n_select: int
    n_test: int
    alpha: float
    seed: int

    def run(self) -> AuditResult:
        return audit_case(self.case, self.alpha, self.n_select, self.n_test, self.seed)


def plan(cases: list[Case], size: AuditSize = WIDE, seed: int = 0, alpha: float = ALPHA) -> list[PlannedCase]:
    """The audit of ``cases`` at ``size``, case by case: each gets alpha / len(cases) (Bonferroni) and its own seed."""
    return [PlannedCase(case, *size.runs(case), alpha / len(cases), seed * 1_000_003 + i)
            for i, case in enumerate(cases)]


def audit(cases: list[Case] | Callable[[], list[Case]], n_select: int = 20_000, n_test: int = 300_000,
          seed: int = 0, alpha: float = ALPHA, size: AuditSize | None = None,
          progress: Callable[[int, int, AuditResult], None] | None = None, jobs: int = 1) -> list[AuditResult]:
    """Audit every case with a Bonferroni share alpha / len(cases) of the false-alarm budget.

    The runs per case come from ``size`` (by default ``n_select`` and ``n_test`` with the usual shares for
    data-adaptive algorithms and discovery; see :class:`AuditSize`).  ``progress(k, m, result)`` is called as
    each of the m cases finishes (k of them done before it).  With ``jobs`` > 1 the cases run in that many
    processes; ``cases`` must then be a picklable function that builds the list (such as
    ``functools.partial(quick_cases, names)``), since some mutants are local classes that cannot be sent to
    another process.  Every case keeps its seed, so the results are the same whatever ``jobs``.
    """
    recipe = cases if callable(cases) else None
    cases = recipe() if recipe is not None else cases
    size = size or AuditSize("custom", n_select, n_test)
    planned = plan(cases, size, seed, alpha)
    results: list[AuditResult | None] = [None] * len(planned)
    if jobs > 1 and recipe is None:
        raise ValueError("a parallel audit needs a function that builds its cases")
    if jobs <= 1 or len(planned) <= 1:
        for i, item in enumerate(planned):
            results[i] = item.run()
            if progress is not None:
                progress(i, len(planned), results[i])
        return results
    context = multiprocessing.get_context("spawn")  # no fork: the parent may hold threads (BLAS, Arrow)
    with ProcessPoolExecutor(min(jobs, len(planned)), mp_context=context, initializer=_worker_setup,
                             initargs=(recipe, size, seed, alpha)) as pool:
        # Slow cases first, so that the last ones to finish are short.
        order = sorted(range(len(planned)), key=lambda i: -_expected_cost(planned[i]))
        futures = {pool.submit(_worker_run, i): i for i in order}
        for done, future in enumerate(as_completed(futures)):
            i = futures[future]
            results[i] = future.result()
            if progress is not None:
                progress(done, len(planned), results[i])
    return results


_WORKER_PLAN: list[PlannedCase] = []


def _worker_setup(recipe, size, seed, alpha) -> None:
    _WORKER_PLAN[:] = plan(recipe(), size, seed, alpha)


def _worker_run(i: int) -> AuditResult:
    return _WORKER_PLAN[i].run()


def _expected_cost(item: PlannedCase) -> float:
    """A rough cost of a case, for ordering: Python runs of data-adaptive algorithms dominate."""
    runs = 2 * (item.n_select + item.n_test)
    return runs * (1.0 if item.case.algorithm.data_adaptive or hasattr(item.case.algorithm, "outcome") else 0.01)
