"""The black-box ε audit (privacy-engineering.md §2.3, layer 2) and its case list.

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
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..algorithms import REGISTRY, Algorithm
from ..algorithms.partitioning import DPCube
from ..algorithms.structurefirst import StructureFirst
from ..errors import UsageError
from ..privacy import SeededBits, discrete_laplace_variance
from ..schema import parse_schema
from .bounds import cp_lower, cp_upper, epsilon_lower_bound
from .marginal_sets import OverspentMarginals, SeparateMarginals
from .discovery_steps import (ArgmaxBounds, CandidatesBeforeBounding, DiscoveredBounds, DiscoveredLowerBound,
                              DiscoveredQuantileBins, PartitionSelection, TrueCountSelection, UnitPartitionSelection,
                              UnthresholdedSelection, bounds_pair, labels_pair, tail_pair, unit_labels_pair)
from .units import BoundedUnits, UnboundedUnits, unit_pairs
from .mutants import MUTANTS
from .replication import NoisePool, PooledBudget, ReplicatedBudget

__all__ = ["Case", "AuditResult", "default_cases", "audit", "ALPHA"]

ALPHA = 1e-6  # total false-alarm probability for a correct algorithm, over all cases of one audit
ADAPTIVE_SHARE = 1 / 20  # fraction of the samples for data-adaptive algorithms (one Python run per sample)
OUTCOME_SHARE = 1 / 60  # for discovery, whose outcome is a domain (events on it need fewer runs to show)


@dataclass(frozen=True)
class Case:
    name: str
    algorithm: Algorithm
    data: np.ndarray
    neighbour: np.ndarray
    epsilon: Fraction
    mutant: bool = False
    columns: tuple | None = None  # public column declarations, for algorithms that use them (hierarchies)


@dataclass(frozen=True)
class AuditResult:
    case: str
    algorithm: str
    epsilon: Fraction
    lower_bound: float
    mutant: bool

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
    for DPCube or the k-d tree: the worst case for a data-adaptive structure (privacy-engineering.md §2.3)."""
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
    """A 1-D pair (D, D + one record) whose TRUE totals straddle a boundary of auto's rule table, so that a choice
    read off the true total would differ between them: the worst case for the choice."""
    from ..algorithms.auto import Auto, RULES

    auto = Auto()
    eps1 = epsilon * (1 - auto.params["total_share"])
    for (dims, cells), decades in sorted(RULES.items()):
        if dims != 1:
            continue
        for dec in sorted(decades)[:-1]:
            if decades[dec][0] == decades[dec + 1][0]:
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
    for name in (n for n in names if n in REGISTRY):
        for shape in ((8,), (4, 4)):
            try:
                _tiny(name).check_shape(shape)
            except UsageError:
                continue
            for label, data, neighbour in _pairs(shape):
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


def _fit(values: np.ndarray, scales: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs cut or padded (zeros of scale 1) to ``width`` answers, to line up with the selection sample."""
    if values.shape[1] >= width:
        return values[:, :width], scales[:, :width]
    pad = width - values.shape[1]
    return (np.pad(values, ((0, 0), (0, pad))), np.pad(scales, ((0, 0), (0, pad)), constant_values=1.0))


def _llr(values: np.ndarray, centre: np.ndarray, other: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return ((np.abs(values - centre) - np.abs(values - other)) / scales).sum(axis=1)


def _loose_score(k1, k2, n):
    with np.errstate(divide="ignore"):
        return np.log(cp_lower(k1, n, 0.01)) - np.log(cp_upper(k2, n, 0.01))


def _llr_candidates(sel_d, sel_n, in_d, in_n, n_select, key) -> list:
    """The best LLR threshold events (both tails, both directions) among the runs marked in ``in_d``/``in_n``,
    with centres (per-value medians) taken from those runs; events count only marked runs.  ``sel_d`` and
    ``sel_n`` are (values, scales) pairs."""
    (v_d, b_d), (v_n, b_n) = sel_d, sel_n
    centres = np.rint(np.median(v_d[in_d], axis=0)), np.rint(np.median(v_n[in_n], axis=0))
    t_d, t_n = _llr(v_d[in_d], *centres, b_d[in_d]), _llr(v_n[in_n], *centres, b_n[in_n])
    # Thresholds at quantiles of the pooled values.
    thresholds = np.unique(np.quantile(np.concatenate([t_d, t_n]), np.linspace(0.005, 0.995, 199)))
    sd, sn = np.sort(t_d), np.sort(t_n)
    ge_d, ge_n = sd.size - np.searchsorted(sd, thresholds, "left"), sn.size - np.searchsorted(sn, thresholds, "left")
    le_d, le_n = np.searchsorted(sd, thresholds, "right"), np.searchsorted(sn, thresholds, "right")
    out = []
    for upper, kd, kn in ((True, ge_d, ge_n), (False, le_d, le_n)):
        for d_first, k1, k2 in ((True, kd, kn), (False, kn, kd)):
            score = _loose_score(k1, k2, n_select)
            best = int(np.argmax(score))
            out.append((float(score[best]), ("llr", float(thresholds[best]), upper, centres, key), d_first))
    return out


def audit_case(case: Case, alpha: float, n_select: int, n_test: int, seed: int) -> AuditResult:
    """Select the most revealing event on one sample, then bound its privacy loss on fresh samples."""
    bits = SeededBits(seed)
    *sel_d, keys_d = _statistic_samples(case, case.data, n_select, bits)
    *sel_n, keys_n = _statistic_samples(case, case.neighbour, n_select, bits)
    width = max(sel_d[0].shape[1], sel_n[0].shape[1])
    sel_d, sel_n = _fit(*sel_d, width), _fit(*sel_n, width)
    all_d, all_n = np.ones(n_select, bool), np.ones(n_select, bool)
    # (score, event, d_first); event = ("llr", threshold, upper, centres, key) or ("structure", key).  An LLR
    # event with a key is the joint event {that structure was chosen and T beyond the threshold}.
    candidates = _llr_candidates(sel_d, sel_n, all_d, all_n, n_select, None)
    # Data-adaptive algorithms: also the event "this structure was chosen", for every structure seen, and the
    # LLR events within each structure chosen in at least a tenth of the runs on both tables (there the later
    # measurements' values line up; rarer structures would only invite over-fitting the selection sample).
    if keys_d is not None:
        count_d, count_n = Counter(keys_d), Counter(keys_n)
        for key in sorted(set(count_d) | set(count_n), key=repr):
            for d_first, k1, k2 in ((True, count_d[key], count_n[key]), (False, count_n[key], count_d[key])):
                candidates.append((float(_loose_score(k1, k2, n_select)), ("structure", key), d_first))
        for key in sorted(set(count_d) & set(count_n), key=repr):
            if min(count_d[key], count_n[key]) >= n_select // 10:
                in_d = np.array([k == key for k in keys_d])
                in_n = np.array([k == key for k in keys_n])
                candidates += _llr_candidates(sel_d, sel_n, in_d, in_n, n_select, key)
    _, event, d_first = max(candidates, key=lambda c: c[0])

    *test_d, tkeys_d = _statistic_samples(case, case.data, n_test, bits)
    *test_n, tkeys_n = _statistic_samples(case, case.neighbour, n_test, bits)
    test_d, test_n = _fit(*test_d, width), _fit(*test_n, width)
    if event[0] == "llr":
        _, threshold, upper, (centre_d, centre_n), key = event
        t_d = _llr(test_d[0], centre_d, centre_n, test_d[1])
        t_n = _llr(test_n[0], centre_d, centre_n, test_n[1])
        hit = (lambda t: t >= threshold) if upper else (lambda t: t <= threshold)
        hit_d, hit_n = hit(t_d), hit(t_n)
        if key is not None:
            hit_d &= np.array([k == key for k in tkeys_d])
            hit_n &= np.array([k == key for k in tkeys_n])
        k_d, k_n = int(hit_d.sum()), int(hit_n.sum())
    else:
        k_d, k_n = sum(k == event[1] for k in tkeys_d), sum(k == event[1] for k in tkeys_n)
    k1, k2 = (k_d, k_n) if d_first else (k_n, k_d)
    bound = epsilon_lower_bound(k1, k2, n_test, alpha)
    return AuditResult(case.name, case.algorithm.name, case.epsilon, bound, case.mutant)


def audit(cases: list[Case], n_select: int = 20_000, n_test: int = 300_000, seed: int = 0,
          alpha: float = ALPHA) -> list[AuditResult]:
    """Audit every case with a Bonferroni share alpha / len(cases) of the false-alarm budget.

    Data-adaptive algorithms run once per repetition (their later measurements depend on earlier noise), so
    they get ADAPTIVE_SHARE of the samples (discovery, OUTCOME_SHARE); events on the chosen structure keep the
    audit sharp there.
    """
    results = []
    for i, case in enumerate(cases):
        share = OUTCOME_SHARE if hasattr(case.algorithm, "outcome") else (
            ADAPTIVE_SHARE if case.algorithm.data_adaptive else 1)
        results.append(audit_case(case, alpha / len(cases), max(1000, int(n_select * share)),
                                  max(2000, int(n_test * share)), seed * 1_000_003 + i))
    return results
