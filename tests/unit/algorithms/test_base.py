"""The checks every algorithm runs before any row is read (dphist/algorithms/base.py): the ceilings on the work its
cost-driving options ask for (Algorithm.check) and its noisy steps tried on the table's budget
(Algorithm.check_budget; the planning grid over every algorithm is tests/unit/test_planning_steps.py)."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from dphist.algorithms import REGISTRY, get_algorithm
from dphist.algorithms.auto.choice import Auto, _takes
from dphist.algorithms.mwem import WORK
from dphist.errors import UsageError
from dphist.publishing.planning import table_budget
from dphist.privacy import PrivacyBudget, SeededBits


@pytest.mark.parametrize("name, options, shape, named", [
    ("mwem", {"replay": 100_000_000}, (25,), "replay=100000000"),
    ("mwem", {"rounds": 400}, (4096,), "rounds=400"),
    ("noisefirst", {"grid": 10_000, "max_buckets": 1}, (10_000,), "grid=10000"),  # the g × g table: 800 MB
    ("noisefirst", {"grid": 4096, "max_buckets": 4096}, (4096,), "max_buckets=4096"),
    ("structurefirst", {"cap": 1, "grid": 20_000}, (20_000,), "grid=20000"),
    ("dpcube", {"max_depth": 2**53}, (200_000,), "max_depth="),
    ("kdtree", {"max_depth": 10**6}, (2048, 2048), "max_depth=1000000"),
])
def test_an_option_past_its_ceiling_is_refused_naming_it_the_ceiling_and_why(name, options, shape, named):
    algorithm = get_algorithm(name, **options)
    started = time.perf_counter()
    with pytest.raises(UsageError) as refused:
        algorithm.check(shape)
    message = str(refused.value)
    assert time.perf_counter() - started < 1  # an estimate, not the work
    assert message.startswith(f"algorithm '{name}': ") and named in message and "ceiling of" in message
    assert ("minute" in message or "MiB" in message) and "lower " in message and "\n" not in message


@pytest.mark.parametrize("name, shape", [("mwem", (4096,)), ("noisefirst", (4096,)), ("structurefirst", (4096,)),
                                         ("dpcube", (1 << 24,)), ("kdtree", (4096, 4096))])
def test_the_defaults_fit_their_ceilings_on_the_tables_they_were_measured_on(name, shape):
    algorithm = REGISTRY[name](**REGISTRY[name].example_options)
    algorithm.check(shape)
    assert all(amount <= ceiling.limit for ceiling, amount in zip(algorithm.ceilings, algorithm.work(shape)))


def test_mwem_work_counts_the_largest_number_of_rounds_under_auto():
    auto, fixed = get_algorithm("mwem"), get_algorithm("mwem", rounds=10)
    assert auto.work((4096,)) == (100 * 140 * 141 // 2 * (20_000 + 4096),)
    assert fixed.work((4096,)) == (100 * 10 * 11 // 2 * (20_000 + 4096),)
    assert get_algorithm("mwem").work((16,)) == (100 * 16 * 17 // 2 * (20_000 + 16),)  # T is capped by the ranges
    assert WORK.limit == 60 * 10**9


def test_auto_passes_over_a_choice_past_its_ceiling():
    """mwem at its defaults on a million cells of one column would take hours: auto's choice falls back."""
    assert _takes("mwem", (4096,)) and not _takes("mwem", (1 << 20,))


def test_a_probe_spends_nothing_and_raises_as_the_real_step_would():
    budget = PrivacyBudget(Fraction(1, 2), bits=SeededBits(1))
    probe = budget.probe(Fraction(1, 10**30))
    assert probe.amount == Fraction(1, 2 * 10**30) and budget.remaining == Fraction(1, 2)
    with pytest.raises(ValueError, match="2\\^40"):
        probe.laplace(np.zeros(1, dtype=np.int64), 1, probe.amount, "a step")
    assert budget.remaining == Fraction(1, 2) and budget.measurements == []


def test_check_budget_refuses_a_starved_step_before_any_data():
    ahp = get_algorithm("ahp", ratio="1e-30")
    with pytest.raises(UsageError, match=r"algorithm 'ahp': its step 'every cell' would get epsilon .* ratio="):
        ahp.check_budget((64,), table_budget(Fraction(1), "pure", 1))
    get_algorithm("ahp").check_budget((64,), table_budget(Fraction(1), "pure", 1))  # the default fits


def test_auto_steps_cover_every_algorithm_its_rules_may_choose():
    steps = Auto().steps((4096,))
    chosen = {s.what.split(":")[0] for s in steps[1:]}
    assert steps[0].what == "the table's total" and {"hb", "identity", "dawa"} <= chosen
    assert all(s.share <= Fraction(19, 20) for s in steps[1:])  # on what the total leaves
