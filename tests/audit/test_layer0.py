"""Audit layer 0 for every registered algorithm: exact budgets, stated sensitivities hold on random neighbours,
and public structure (docs/privacy.md §2.3).

Sensitivity is checked without looking inside an algorithm: the same seeded noise stream is used on a table
and on its neighbour, each run on its own budget with a trace, so for these noise-then-infer algorithms the
difference of the noisy answers is exactly the difference of the true answers, whose L1 norm (weighted by each
value's relative noise scale) must not exceed the stated sensitivity.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.algorithms import REGISTRY, Estimate, get_algorithm
from dphist.algorithms.auto import Auto
from dphist.algorithms.identity import Identity
from dphist_audit.mutants import MUTANTS, _with_bug
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits
from dphist.privacy.measurement import LAPLACE, SELECTION

SHAPES = [(1,), (7,), (33,), (3, 5), (8, 8), (2, 3, 4)]


def traced(algo, table, epsilon, seed):
    """One run on a budget with a trace; also every partition chosen in it, where an algorithm has a public
    ``partition`` step (DPCube, the k-d tree, DAWA) or ``clusters`` step (AHP): their partition is not in the
    trace.  The steps are recorded on their classes, so a partition chosen by an algorithm that another one runs
    (auto's choice) is recorded too; an override that calls its parent's step (a mutant's) is recorded once."""
    trace: list = []
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    partitions: list = []
    keys = {"partition": lambda result: result.tolist() if isinstance(result, np.ndarray) else result,
            "clusters": _cluster_sets}
    patched = []
    for step, key in keys.items():
        for cls in _choosers(type(algo), step):
            patched.append((cls, step, vars(cls)[step]))
            setattr(cls, step, _recording(vars(cls)[step], key, partitions))
    try:
        estimate = algo.run(table, budget)
    finally:
        for cls, step, chooser in reversed(patched):
            setattr(cls, step, chooser)
    return estimate, budget, trace, partitions


def _choosers(top: type, step: str) -> set[type]:
    """The classes whose ``step`` an instance of ``top`` or of a registered algorithm calls first: the first
    definition along each one's method resolution order."""
    found = set()
    for cls in {top, *REGISTRY.values()}:
        owner = next((c for c in cls.__mro__ if step in vars(c)), None)
        if owner is not None:
            found.add(owner)
    return found


_depth = [0]  # calls of recorded steps under way: an override calling super() is one choice, not two


def _recording(chooser, key, partitions: list):
    """``chooser`` (a plain function of the class), recording the outermost call's result by ``key``."""
    def recording(self, *args, **kwargs):
        _depth[0] += 1
        try:
            result = chooser(self, *args, **kwargs)
        finally:
            _depth[0] -= 1
        if _depth[0] == 0:
            partitions.append(key(result))
        return result
    return recording


def _cluster_sets(result) -> list[tuple[int, ...]]:
    """AHP's clusters as the cells of each, in cluster order (the sorted order itself may differ between runs
    that chose the same clusters)."""
    order, edges = result
    return [tuple(sorted(order[a:b].tolist())) for a, b in zip(edges[:-1], edges[1:])]


def decisions(estimate) -> dict:
    """What a run chose from noisy values (auto's choice by the algorithm chosen: its noisy total is a measured
    value, compared with the others below)."""
    choices = dict(estimate.choices)
    if "algorithm_choice" in choices:
        choices["algorithm_choice"] = choices["algorithm_choice"]["chosen"]
    return choices


@pytest.mark.parametrize("name", sorted(REGISTRY))
@given(shape=st.sampled_from(SHAPES), data=st.data(),
       eps=st.fractions(min_value=Fraction(1, 100), max_value=10, max_denominator=1000))
@settings(max_examples=40, deadline=None)
def test_budget_sensitivity_and_structure(name, shape, data, eps):
    algo = get_algorithm(name, **REGISTRY[name].example_options)
    try:
        algo.check_shape(shape)
        algo.steps(shape)  # where the column kinds matter (hdmm: at most two ordered columns), refused here
    except UsageError:
        return  # e.g. a one-column algorithm on a two-way table: refused before any data is read
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    table = rng.integers(0, 20, shape)
    neighbour = table.copy()
    cell = data.draw(st.integers(0, table.size - 1))
    if table.flat[cell] > 0 and data.draw(st.booleans()):
        neighbour.flat[cell] -= 1  # remove one record
    else:
        neighbour.flat[cell] += 1  # add one record
    check_layer0(algo, table, neighbour, eps, data.draw(st.integers(0, 2**32 - 1)))


def check_layer0(algo, table, neighbour, eps, seed) -> None:
    """The layer-0 checks on one pair of neighbouring tables, both run on the same seeded noise stream."""
    a, spent_a, trace_a, parts_a = traced(algo, table, eps, seed)
    b, spent_b, trace_b, parts_b = traced(algo, neighbour, eps, seed)

    # Exact budget: the measurements spend exactly epsilon.
    assert spent_a.spent == sum((m.epsilon for m in spent_a.measurements), Fraction(0)) == eps
    assert spent_b.spent == eps
    # Public structure: the plan does not depend on the counts (data-adaptive algorithms may choose partitions
    # from noisy values, and so the number of values their later measurements have).
    assert a.structure == b.structure
    # (A data-adaptive measurement may name what its noisy choice picked, as MWEM's rounds name their range:
    # names are compared only between runs that chose alike.  A noisy partition may also shape the measurements
    # that follow it, as DAWA's bucket tree has as many levels as its buckets need: between runs that chose
    # different partitions or other choices only the first measurement, made before any noisy choice, is compared.)
    chose_alike = [d.choice for d in trace_a] == [d.choice for d in trace_b]
    plan = (lambda m: (m.what if chose_alike else None, m.sensitivity, m.scale, m.epsilon)) if algo.data_adaptive \
        else (lambda m: (m.what, m.sensitivity, m.scale, m.epsilon, m.queries))
    if algo.data_adaptive and (parts_a != parts_b or decisions(a) != decisions(b)):
        assert plan(spent_a.measurements[0]) == plan(spent_b.measurements[0])
    else:
        assert [plan(m) for m in spent_a.measurements] == [plan(m) for m in spent_b.measurements]
    # Each measurement's scale is its sensitivity over its epsilon; a selection's is that of each draw's
    # exponential weights: 2Δ over the draw's ε, ε/draws.
    for m in spent_a.measurements:
        assert m.mechanism in (LAPLACE, SELECTION)
        per_draw = m.epsilon if m.mechanism == LAPLACE else m.epsilon / m.queries
        assert m.scale == (1 if m.mechanism == LAPLACE else 2) * Fraction(m.sensitivity) / per_draw
    # The trace holds one set of noisy values per Laplace measurement and one choice per paid selection draw.
    laplace = [m for m in spent_a.measurements if m.mechanism == LAPLACE]
    values_a = [d for d in trace_a if d.values is not None]
    assert len(values_a) == len(laplace)
    assert sum(d.choice is not None for d in trace_a) == sum(m.queries for m in spent_a.measurements
                                                             if m.mechanism == SELECTION)
    if (decisions(a) != decisions(b) or parts_a != parts_b
            or [d.choice for d in trace_a] != [d.choice for d in trace_b]):
        return  # different noisy choices: the answers are not comparable value by value
    # Stated sensitivity holds for this neighbour: Σ |Δy_i| / (relative scale of y_i) <= Δ.  Only the values drawn
    # before the first selection are compared: a permute-and-flip draw reads a number of random words that depends
    # on the scores, so after one the two runs no longer share their noise stream.
    values_b = [d for d in trace_b if d.values is not None]
    first_choice = next((i for i, d in enumerate(trace_a) if d.choice is not None), len(trace_a))
    comparable = sum(d.values is not None for d in trace_a[:first_choice])
    for m, ya, yb in list(zip(laplace, values_a, values_b))[:comparable]:
        assert ya.values.shape == yb.values.shape
        relative = np.broadcast_to(ya.scales, ya.values.shape) / float(m.scale)
        moved = float(np.sum(np.abs(ya.values - yb.values) / relative))
        assert moved <= m.sensitivity + 1e-9, f"{m.what}: moved {moved:g} by one record, stated Δ {m.sensitivity}"


class UnderstatedIdentity(Identity):
    """Identity that states sensitivity 1/2 for its cells: scale and record agree, the stated Δ is false."""

    name = "understated-identity"

    def run(self, counts, budget, columns=None):
        noisy, _ = budget.laplace(counts, Fraction(1, 2), budget.epsilon, "every cell")
        return Estimate(values=noisy.astype(np.float64))


@pytest.mark.parametrize("cls", [m for m in MUTANTS if m.name in {
    "mutant-identity-half-scale", "mutant-identity-scale-0.8", "mutant-tree-height-forgotten",
    "mutant-tree-overspent-10pct", "mutant-privelet-total-forgotten"}] + [UnderstatedIdentity])
def test_layer0_can_fail(cls):
    """Layer 0 rejects a noise scale smaller than the stated sensitivity allows (the scale mutants) and a
    stated sensitivity smaller than a neighbour's real change."""
    table = np.arange(40, dtype=np.int64)
    neighbour = table.copy()
    # Cell 4 lies on a worst-case path of every mutant's transform (of Privelet's uneven 40-cell Haar transform
    # too, where cell 5 changes only 6 of the 7 weighted coefficients the stated sensitivity counts).
    neighbour[4] += 1
    with pytest.raises(AssertionError):
        check_layer0(cls(), table, neighbour, Fraction(1), 3)


@pytest.fixture
def auto_runs_dpcube(monkeypatch):
    """auto's rules for 2-D tables of 64 cells set to DPCube at every signal (the rules learned from the data keep
    to hb there; these tests are about checking the algorithm auto runs, whichever it is)."""
    import dphist.algorithms.auto.choice as auto_module
    monkeypatch.setattr(auto_module, "RULES", {"ranges": {(2, 64): {d: ("dpcube", 1.0, 5, "dpcube", "hb")
                                                                    for d in range(1, 8)}}})


def test_layer0_sees_the_partition_of_the_algorithm_auto_runs(auto_runs_dpcube):
    """Auto runs DPCube on both tables of this pair (the example hypothesis found), and DPCube's k-d splits of
    the noisy phase-1 cells part ways where their one noisy count differs by 1: rows 0-3 are cut at column 7 in
    one run and at row 1 in the other.  Both end in the same 63 one-cell boxes, in another order, so phase 2
    measures the same sub-blocks in another order: a partition chosen from paid noisy values, which the check
    must see (inside the algorithm auto runs) instead of comparing the two value vectors position by position."""
    table = np.random.default_rng(0).integers(0, 20, (8, 8))
    neighbour = table.copy()
    neighbour[0, 0] -= 1
    algo, eps = get_algorithm("auto", **REGISTRY["auto"].example_options), Fraction(8793, 934)
    a, _, _, parts_a = traced(algo, table, eps, 1)
    b, _, _, parts_b = traced(algo, neighbour, eps, 1)
    assert decisions(a) == decisions(b) and decisions(a)["algorithm_choice"] == "dpcube"
    assert parts_a != parts_b and sorted(parts_a[0]) == sorted(parts_b[0])
    check_layer0(algo, table, neighbour, eps, 1)


class _OverlappingSubblocks:
    """Mixed into a budget: DPCube's refined phase 2 measures each sub-block with the next one (a labelling slip
    that puts every record in two answers, Δ = 2) while stating Δ = 1."""

    def laplace(self, answers, sensitivity, amount, what, *args, **kwargs):
        if what == "phase 2: sub-blocks of every partition":
            answers = answers + np.roll(answers, -1)
        return super().laplace(answers, sensitivity, amount, what, *args, **kwargs)


class OverlappingSubblocksAuto(Auto):
    """Auto whose DPCube runs on a budget with :class:`_OverlappingSubblocks`."""

    name = "mutant-auto-dpcube-overlapping-subblocks"

    def run(self, counts, budget, columns=None):
        return super().run(counts, _with_bug(budget, _OverlappingSubblocks), columns)


def test_layer0_catches_a_sensitivity_bug_in_the_algorithm_auto_runs(auto_runs_dpcube):
    """On a pair where auto runs DPCube's refined release with the same partition (4 boxes, 37 sub-blocks) on
    both tables, the honest auto passes and the overlapping sub-blocks are caught by the sensitivity check."""
    table = np.kron(np.array([[50, 5], [0, 120]]), np.ones((4, 4), dtype=np.int64))
    neighbour = table.copy()
    neighbour.flat[27] += 1
    honest = get_algorithm("auto")
    a, _, _, parts_a = traced(honest, table, Fraction(2), 3)
    b, _, _, parts_b = traced(honest, neighbour, Fraction(2), 3)
    assert decisions(a) == decisions(b) and parts_a == parts_b and len(parts_a[0]) == 4
    assert decisions(a)["algorithm_choice"] == "dpcube" and decisions(a)["subblocks"] == 37
    check_layer0(honest, table, neighbour, Fraction(2), 3)
    with pytest.raises(AssertionError, match="phase 2: sub-blocks of every partition: moved 2 by one record"):
        check_layer0(OverlappingSubblocksAuto(), table, neighbour, Fraction(2), 3)
