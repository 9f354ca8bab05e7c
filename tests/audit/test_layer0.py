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
from dphist.noise import SeededBits

SHAPES = [(1,), (7,), (33,), (3, 5), (8, 8), (2, 3, 4)]


@pytest.mark.parametrize("name", sorted(REGISTRY))
@given(shape=st.sampled_from(SHAPES), data=st.data(),
       eps=st.fractions(min_value=Fraction(1, 100), max_value=10, max_denominator=1000))
@settings(max_examples=40, deadline=None)
def test_budget_sensitivity_and_structure(name, shape, data, eps):
    algo = get_algorithm(name)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    table = rng.integers(0, 20, shape)
    neighbour = table.copy()
    cell = data.draw(st.integers(0, table.size - 1))
    if table.flat[cell] > 0 and data.draw(st.booleans()):
        neighbour.flat[cell] -= 1  # remove one record
    else:
        neighbour.flat[cell] += 1  # add one record
    seed = data.draw(st.integers(0, 2**32 - 1))
    a = algo.run(table, eps, SeededBits(seed))
    b = algo.run(neighbour, eps, SeededBits(seed))

    # Exact budget: the measurements spend exactly (at most) epsilon.
    assert sum((m.epsilon for m in a.measurements), Fraction(0)) == eps
    # Public structure: the plan does not depend on the counts.
    assert a.structure == b.structure
    assert [(m.what, m.sensitivity, m.scale, m.epsilon, m.queries) for m in a.measurements] == \
           [(m.what, m.sensitivity, m.scale, m.epsilon, m.queries) for m in b.measurements]
    # Each measurement's scale is its sensitivity over its epsilon.
    for m in a.measurements:
        assert m.scale == Fraction(m.sensitivity) / m.epsilon
    # Stated sensitivity holds for this neighbour.
    assert len(a.noisy) == len(a.measurements)
    for m, ya, yb in zip(a.measurements, a.noisy, b.noisy):
        assert int(np.abs(np.asarray(ya) - np.asarray(yb)).sum()) <= m.sensitivity
