"""Planning refuses, before any row is read, every release whose execution would fail on its budget: a split with
no positive share, a step whose noise is past the samplers' range, an ε that a ρ cannot buy, a δ with nothing to
pay for.  For every algorithm, across extreme values of its share options, budgets of each definition at their
edges and a protected unit of several rows, a plan is either refused (UsageError or DataError, nothing read) or
runs to the end in test mode without an error of any kind."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dphist.algorithms import REGISTRY
from dphist.api import plan_release, run_plan
from dphist.errors import DataError, UsageError
from dphist.publishing.planning import table_budget

ROWS = 200
FRAME = pd.DataFrame({"a": np.arange(ROWS) % 16, "b": (np.arange(ROWS) * 7) % 4, "p": np.arange(ROWS) // 2})
SCHEMA = {"columns": {"a": {"type": "numeric", "lower": 0, "upper": 16, "bins": 16},
                      "b": {"type": "numeric", "lower": 0, "upper": 4, "bins": 4}}}
#: Each definition at the edge the samplers feel first: the smallest ε per row, a large ε, a small ρ, and an
#: (ε, δ) run as ρ; with a privacy unit of 2 rows the noise doubles (and the tables get 49/50 of ε, a fiftieth
#: measuring what the cap dropped: 2.05e-6 leaves them 1.0045e-6 per row, just above the minimum).
BUDGETS = [{"epsilon": "2.05e-6", "privacy_unit": "p", "max_rows_per_unit": 2}, {"epsilon": "1000"},
           {"rho": "1e-3"}, {"epsilon": "1", "delta": "1e-9", "noise": "gaussian"}]
EXTREMES = ("1e-30", "0.999999999999")  # the farthest a share option's validator lets a value go


def share_options(name: str) -> list[dict]:
    """The algorithm's options at their defaults, then each share option at either extreme."""
    cls = REGISTRY[name]
    shares = [k for k, (default, _) in cls.options.items() if isinstance(default, Fraction) and 0 < default < 1]
    return [{}] + [{key: value} for key in shares for value in EXTREMES]


def outcome(name: str, options: dict, budget: dict, columns: str) -> str:
    """'refused' when planning refuses; 'ran' when the plan ran to the end; any other error fails the test."""
    try:
        plan = plan_release(FRAME, schema=SCHEMA, columns=columns, algorithm=name, seed=1,
                            algorithm_options={**REGISTRY[name].example_options, **options}, **budget)
    except (UsageError, DataError):
        return "refused"
    run_plan(plan)  # test mode: the same budget arithmetic as a charged run
    return "ran"


@pytest.mark.parametrize("name, budget", [
    # (auto plans and runs every candidate's steps: about 3.5 s alone, so more than 5 s beside another worker)
    pytest.param(name, budget, id=f"{name}-{'-'.join(map(str, budget.values()))}",
                 marks=[pytest.mark.time_limit(15)] if name == "auto" else [])
    for name in sorted(REGISTRY) for budget in BUDGETS])
def test_a_plan_is_refused_or_its_run_cannot_fail_on_the_budget(name, budget):
    seen = set()
    for options, columns in itertools.product(share_options(name), ["a", "a,b"]):
        seen.add(outcome(name, options, budget, columns))
    assert "ran" in seen  # the grid reaches plans that run (and refusals: the next test)


#: A share option at an extreme that starves one step past the samplers' range (under pure ε a selection can
#: take any ε, so the options that share out a selection starve the step on the other side).
STARVING = [("agrid", "alpha", "1e-30"), ("agrid", "total_share", "1e-30"), ("ahp", "ratio", "1e-30"),
            ("ahp", "ratio", "0.999999999999"), ("auto", "total_share", "1e-30"), ("dawa", "ratio", "1e-30"),
            ("dpcube", "alpha", "1e-30"), ("dpcube", "total_share", "1e-30"),
            ("efpa", "select_share", "0.999999999999"), ("kdtree", "alpha", "0.999999999999"),
            ("mwem", "selection_share", "0.999999999999"),
            ("mwem", "total_share", "1e-30"), ("privtree", "structure_share", "1e-30"),
            ("structurefirst", "structure_share", "0.999999999999"), ("ugrid", "total_share", "1e-30")]


@pytest.mark.parametrize("name, option, value", STARVING)
def test_a_share_option_that_starves_a_step_is_refused_before_reading(name, option, value):
    assert outcome(name, {option: value}, {"epsilon": "0.5"}, "a,b" if name in ("agrid", "ugrid") else "a") == "refused"


def test_a_starved_step_is_refused_in_one_line_naming_the_table_the_step_and_the_option():
    with pytest.raises(UsageError) as refused:
        plan_release(FRAME, "1", SCHEMA, columns="a", algorithm="mwem", algorithm_options={"total_share": "1e-30"})
    message = str(refused.value)
    assert message.startswith("table 'a': algorithm 'mwem': its step 'the grand total' would get epsilon 1e-30")
    assert "total_share=" in message and "\n" not in message and len(message) < 400


@pytest.mark.parametrize("definition, amount", [("pure", Fraction(1, 10**6)), ("zcdp", Fraction(1, 2 * 10**12))])
def test_the_default_plans_fit_the_smallest_budget_a_table_may_get(definition, amount):
    """At the table minimum (ε 1e-6, ρ 5e-13 per row) every algorithm's default steps fit the samplers: the check
    refuses only what option values starve."""
    for name, cls in REGISTRY.items():
        algorithm = cls(**cls.example_options)
        shape = (64,) if name in ("mwem", "efpa", "noisefirst", "structurefirst", "dawa") else (16, 16)
        if name == "efpa":
            continue  # its coefficients need ε well above the minimum on 64 cells (checked by its own rule)
        algorithm.check_budget(shape, table_budget(amount, definition, 1))
