"""Audit layer 0 for every registered algorithm: exact budgets, stated sensitivities hold on random neighbours,
and public structure (privacy-engineering.md §2.3).

Sensitivity is checked without looking inside an algorithm: the same seeded noise stream is used on a table
and on its neighbour, so for these noise-then-infer algorithms the difference of the noisy answers is exactly
the difference of the true answers, whose L1 norm must not exceed the stated sensitivity.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dphist.algorithms import REGISTRY, get_algorithm
from dphist.errors import UsageError
from dphist.noise import Replicated, SeededBits

SHAPES = [(1,), (7,), (33,), (3, 5), (8, 8), (2, 3, 4)]


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
    seed = data.draw(st.integers(0, 2**32 - 1))
    # Data-adaptive algorithms expose their chosen structure in the (one-repetition) audit view.
    bits = (lambda: Replicated(SeededBits(seed), 1)) if algo.data_adaptive else (lambda: SeededBits(seed))
    a = algo.run(table, eps, bits())
    b = algo.run(neighbour, eps, bits())

    # Exact budget: the measurements spend exactly (at most) epsilon.
    assert sum((m.epsilon for m in a.measurements), Fraction(0)) == eps
    # Public structure: the plan does not depend on the counts (data-adaptive algorithms may choose partitions
    # from noisy values, and so the number of values their later measurements have).
    assert a.structure == b.structure
    plan = (lambda m: (m.what, m.sensitivity, m.scale, m.epsilon)) if algo.data_adaptive else \
        (lambda m: (m.what, m.sensitivity, m.scale, m.epsilon, m.queries))
    assert [plan(m) for m in a.measurements] == [plan(m) for m in b.measurements]
    if a.choices != b.choices:
        return  # different noisy choices: the answers are not comparable value by value
    # Each measurement's scale is its sensitivity over its epsilon.
    for m in a.measurements:
        assert m.scale == Fraction(m.sensitivity) / m.epsilon
    # Stated sensitivity holds for this neighbour.
    assert len(a.noisy) == len(a.measurements)
    for m, ya, yb in zip(a.measurements, a.noisy, b.noisy):
        assert int(np.abs(np.asarray(ya) - np.asarray(yb)).sum()) <= m.sensitivity
