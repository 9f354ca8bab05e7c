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
from dphist.algorithms.identity import Identity
from dphist_audit.mutants import MUTANTS
from dphist.errors import UsageError
from dphist.privacy import PrivacyBudget, SeededBits
from dphist.privacy.measurement import LAPLACE, SELECTION

SHAPES = [(1,), (7,), (33,), (3, 5), (8, 8), (2, 3, 4)]


def traced(algo, table, epsilon, seed):
    """One run on a budget with a trace; also every partition the algorithm chose, where it has a public
    ``partition`` step (DPCube, the k-d tree) or ``clusters`` step (AHP): their partition is not in the trace."""
    trace: list = []
    budget = PrivacyBudget(epsilon, bits=SeededBits(seed), trace=trace)
    partitions = []
    steps = {"partition": lambda result: result.tolist() if isinstance(result, np.ndarray) else result,
             "clusters": _cluster_sets}
    for step, key in steps.items():
        if hasattr(algo, step):
            chooser = getattr(type(algo), step)

            def recording(*args, _chooser=chooser, _key=key):
                result = _chooser(algo, *args)
                partitions.append(_key(result))
                return result
            setattr(algo, step, recording)
    try:
        estimate = algo.run(table, budget)
    finally:
        for step in steps:
            algo.__dict__.pop(step, None)
    return estimate, budget, trace, partitions


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
        assert float(np.sum(np.abs(ya.values - yb.values) / relative)) <= m.sensitivity + 1e-9


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
