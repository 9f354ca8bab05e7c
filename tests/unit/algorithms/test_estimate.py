"""What a run returns (dphist/algorithms/base.py): a frozen Estimate whose plan and measurements the algorithm's
inference step turns into it again, a total measured elsewhere being one more measurement (Algorithm.refit); and
runs that keep nothing on the algorithm."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from dphist.algorithms import REGISTRY, get_algorithm
from dphist.errors import UsageError
from dphist.inference.measurements import TOTAL, total_measurement
from dphist.privacy import PrivacyBudget, SeededBits

COUNTS = np.random.default_rng(8).integers(0, 40, 64)
GRID = np.random.default_rng(9).integers(0, 40, (12, 10))
REFITTED = [("h", {}, COUNTS), ("hb", {}, COUNTS), ("quadtree", {}, GRID), ("dawa", {}, COUNTS),
            ("dawa", {"fit": "nnls"}, COUNTS), ("dawa", {}, GRID), ("dpcube", {"block": 1}, COUNTS),
            ("dpcube", {"block": 1}, GRID), ("kdtree", {"block": 1}, COUNTS)]  # the 2-D dpcube: its refined release


def _run(name: str, options: dict, counts=COUNTS, seed: int = 3):
    algorithm = get_algorithm(name, **options)
    return algorithm, algorithm.run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(seed)))


@pytest.mark.parametrize("name, options, counts", REFITTED)
def test_a_refit_is_a_new_estimate_and_the_run_is_its_own_inference(name, options, counts):
    """The Estimate cannot be changed; inferring again from its own plan and measurements gives the same values,
    and a refit with a total gives a new Estimate that moves its total towards the measured one, leaving the
    first as it was."""
    algorithm, estimate = _run(name, options, counts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        estimate.values = np.zeros(counts.shape)  # type: ignore[misc]
    before = estimate.values.copy()
    assert np.array_equal(algorithm.infer(estimate.plan, estimate.measurements).values, before)
    target = float(estimate.values.sum()) + 500.0
    refit = algorithm.refit(estimate, total_measurement(target, 1.0))
    assert refit is not estimate and np.array_equal(estimate.values, before)
    assert [m.query for m in refit.measurements] == [m.query for m in estimate.measurements] + [TOTAL]
    assert abs(refit.values.sum() - target) < abs(estimate.values.sum() - target) / 2
    assert refit.structure != estimate.structure  # the report says where the total went


@pytest.mark.parametrize("name, options, counts", REFITTED)
def test_two_totals_refit_as_their_inverse_variance_combination(name, options, counts):
    """Two independent totals, folded in one after the other, give the least squares of both: the same estimate
    as their inverse-variance combination folded in once (``fit=nnls`` clips, which is not linear, so only the
    least-squares fits are compared exactly)."""
    algorithm, estimate = _run(name, options, counts)
    (t1, v1), (t2, v2) = (float(counts.sum()) + 90.0, 40.0), (float(counts.sum()) - 30.0, 25.0)
    both = algorithm.refit(estimate, total_measurement(t1, v1), total_measurement(t2, v2))
    pooled = (t1 / v1 + t2 / v2) / (1 / v1 + 1 / v2), 1 / (1 / v1 + 1 / v2)
    once = algorithm.refit(estimate, total_measurement(*pooled))
    if options.get("fit") != "nnls":
        assert np.allclose(both.values, once.values, rtol=1e-9, atol=1e-9)
    assert not np.allclose(both.values, algorithm.refit(estimate, total_measurement(t1, v1)).values)


def test_an_algorithm_without_an_inference_step_refits_nothing():
    algorithm, estimate = _run("identity", {})
    assert estimate.plan is None and algorithm.refit(estimate, total_measurement(1.0, 1.0)) is None
    with pytest.raises(NotImplementedError):
        algorithm.infer(None, ())


def test_auto_reports_its_choice_on_a_new_estimate_of_the_chosen_algorithm():
    """Auto's estimate is the chosen algorithm's refitted one with the choice in front of the report entries."""
    _, estimate = _run("auto", {})
    assert list(estimate.choices)[0] == "algorithm_choice" and list(estimate.structure)[0] == "algorithm"
    chosen = estimate.structure["algorithm"]
    if estimate.plan is not None:  # a least-squares choice: N̂ is its last measurement
        assert estimate.measurements[-1].query == TOTAL
        assert estimate.choices["algorithm_choice"]["noisy_total_reused"] == f"as {REGISTRY[chosen].total_refit}"


def _state(algorithm) -> dict:
    return copy.deepcopy(vars(algorithm))


def _takes(name: str, shape: tuple[int, ...]) -> bool:
    try:
        get_algorithm(name, **REGISTRY[name].example_options).check(shape)
    except UsageError:
        return False
    return True


@pytest.mark.parametrize("name, shape", [(name, shape) for name in sorted(REGISTRY) for shape in [(16,), (8, 8)]
                                         if _takes(name, shape)])
def test_a_run_keeps_nothing_on_the_algorithm(name, shape):
    """Every attribute of the algorithm is the same after a run as before (a 2-D run then a 1-D one give what a
    fresh instance gives on the 1-D table: nothing of the first run carries over).  Pairs an algorithm refuses
    (a 1-D algorithm on a 2-D table) are not listed."""
    algorithm = get_algorithm(name, **REGISTRY[name].example_options)
    counts = np.random.default_rng(2).integers(0, 30, shape)
    before = _state(algorithm)
    algorithm.run(counts, PrivacyBudget(Fraction(1), bits=SeededBits(5)))
    assert _state(algorithm).keys() == before.keys()
    assert all(_state(algorithm)[k] == v for k, v in before.items())
    if len(shape) == 2:
        line = np.random.default_rng(3).integers(0, 30, 16)
        try:
            algorithm.check(line.shape)
        except UsageError:
            return
        after_grid = algorithm.run(line, PrivacyBudget(Fraction(1), bits=SeededBits(6)))
        fresh = get_algorithm(name, **REGISTRY[name].example_options).run(
            line, PrivacyBudget(Fraction(1), bits=SeededBits(6)))
        assert np.array_equal(after_grid.values, fresh.values)
        assert after_grid.structure == fresh.structure and after_grid.choices == fresh.choices
