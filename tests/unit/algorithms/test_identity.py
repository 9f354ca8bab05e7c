"""Identity release (dphist/algorithms/identity.py): the noise actually added to released counts has the discrete
Laplace law of scale Δ/ε, measured end to end through the public API in raw mode, and production releases use the
OS CSPRNG; under a zCDP budget the noise variance is 1/(2ρ).

False alarms: the variance checks use 20,000 cells; the sample variance then has a relative sd of about 1.6 %,
so a ±10 % band is more than 6 sd wide (false alarm < 1e-6 per check with fixed seeds).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dphist
from dphist.algorithms import get_algorithm
from dphist.privacy import PrivacyBudget, SeededBits, discrete_laplace_variance
from dphist.privacy.samplers import discrete_gaussian_variance, discrete_laplace

from replicated import Replicated

CELLS = 20_000


def exact_variance(epsilon: float, sensitivity: int = 1) -> float:
    a = math.exp(-epsilon / sensitivity)
    return 2 * a / (1 - a) ** 2


def skewed_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    # A skewed, sparse-ish table: many empty cells, some large ones.
    values = np.concatenate([rng.integers(0, CELLS, 30_000), rng.integers(0, 50, 20_000)])
    return pd.DataFrame({"x": values})


SCHEMA = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": CELLS, "bins": CELLS}}}


def within_ten_percent(noise_values: np.ndarray, epsilon: float) -> bool:
    return abs(noise_values.var() / exact_variance(epsilon) - 1) < 0.10


@pytest.mark.parametrize("epsilon", ["0.1", "1"])
def test_released_noise_variance_within_ten_percent(epsilon):
    frame = skewed_frame()
    truth = np.bincount(frame["x"], minlength=CELLS)
    result = dphist.release(frame, epsilon=epsilon, schema=SCHEMA, columns="x", seed=11, raw=True, algorithm="identity")
    table = result.tables["x"]
    assert len(table) == CELLS
    released = table["count"].to_numpy()
    assert np.array_equal(released, table["noisy_count"].to_numpy())
    diff = released - truth
    assert within_ten_percent(diff, float(epsilon))
    # The exact formula, not the continuous 2/ε², is what the sampler follows.
    assert math.isclose(exact_variance(float(epsilon)), discrete_laplace_variance(1 / Fraction(epsilon)))
    step = result.report["tables"][0]["steps"][0]
    assert step["sensitivity"] == 1 and Fraction(step["scale"]) == 1 / Fraction(epsilon)


def test_variance_check_can_fail_on_a_misscaled_mechanism():
    # Noise at scale x0.9 or x1.1 of the correct one must fall outside the band used above.
    for factor in (0.9, 1.1):
        wrong = discrete_laplace(Fraction(10) * Fraction(str(factor)), CELLS, SeededBits(3))
        assert not within_ten_percent(wrong.astype(float), 0.1)


def test_identity_noise_is_independent_across_cells_and_unbiased():
    counts = np.zeros((100, 200), dtype=np.int64)
    budget = PrivacyBudget(Fraction(1, 2), bits=SeededBits(8))
    est = get_algorithm("identity").run(counts, budget)
    z = est.values.ravel()
    var = exact_variance(0.5)
    assert abs(z.mean()) < 5 * math.sqrt(var / z.size)
    r = np.corrcoef(z[:-1], z[1:])[0, 1]
    assert abs(r) < 5 / math.sqrt(z.size)
    assert est.values.shape == counts.shape
    assert sum(m.epsilon for m in budget.measurements) == budget.spent == Fraction(1, 2)


def test_every_cell_gets_noise_including_empty_ones():
    frame = pd.DataFrame({"x": np.zeros(10, dtype=int)})
    result = dphist.release(frame, epsilon="1", schema={"columns": {"x": {"type": "numeric", "lower": 0,
                                                                            "upper": 2000, "bins": 2000}}},
                            columns="x", seed=2, raw=True)
    noisy = result.tables["x"]["noisy_count"].to_numpy()
    assert np.count_nonzero(noisy[1:]) > 0.4 * 1999  # P(Z != 0) = 2a/(1+a) ≈ 0.54 at ε = 1


def test_unseeded_release_uses_os_csprng_and_no_global_numpy_state(monkeypatch, urandom_calls):
    def forbidden(*args, **kwargs):
        raise AssertionError("the global numpy RNG must not be seeded")

    monkeypatch.setattr(np.random, "seed", forbidden)
    state_before = np.random.get_state()[1].copy()
    frame = skewed_frame(1)
    schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 100, "bins": 100}}}
    one = dphist.release(frame, epsilon="1", schema=schema, columns="x")
    two = dphist.release(frame, epsilon="1", schema=schema, columns="x")
    assert urandom_calls, "os.urandom was not used"
    assert np.array_equal(np.random.get_state()[1], state_before)
    assert not np.array_equal(one.tables["x"]["noisy_count"], two.tables["x"]["noisy_count"])
    assert one.report["test_mode"] is False and "warning" not in one.report


def test_seeded_release_is_deterministic_and_stamped_not_private():
    frame = skewed_frame(2)
    schema = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 100, "bins": 100}}}
    a = dphist.release(frame, epsilon="1", schema=schema, columns="x", seed=4)
    b = dphist.release(frame, epsilon="1", schema=schema, columns="x", seed=4)
    pd.testing.assert_frame_equal(a.tables["x"], b.tables["x"])
    assert a.report["test_mode"] is True
    assert "NOT differentially private" in a.report["warning"]
    assert "NOT differentially private" in a.summary()


# ---- under a zCDP budget --------------------------------------------------------------------------------------------


def test_identity_noise_variance_is_one_over_two_rho():
    rho = Fraction(1, 50)
    x = np.random.default_rng(0).integers(0, 100, 2000)
    budget = Replicated(rho, SeededBits(3), 50)
    est = get_algorithm("identity").run(x, budget)
    noise = (est.values - x).ravel()  # 100,000 draws
    target = 1 / (2 * float(rho))
    # relative SE of a sample variance is about sqrt(2/N) = 0.45 %: ±10 % is more than 20 SE
    assert abs(noise.var() - target) <= 0.10 * target
    assert abs(noise.var() - discrete_gaussian_variance(budget.measurements[0].sigma2)) <= 0.02 * target
    assert np.allclose(est.variance, discrete_gaussian_variance(Fraction(25)))
    assert budget.spent == rho
