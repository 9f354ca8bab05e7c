"""Frozen measurement records (dphist/inference/measurements.py): the totals among them pooled into one."""

from __future__ import annotations

import dataclasses

import pytest

from dphist.inference.measurements import Measurement, by_query, pooled_total, total_measurement


def test_a_measurement_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        total_measurement(3.0, 1.0).values = 4.0  # type: ignore[misc]


def test_totals_pool_by_inverse_variance_and_one_total_is_itself():
    level = Measurement(("tree level", 1), [1.0, 2.0], 2.0)
    one = total_measurement(10.0, 4.0)
    assert pooled_total([level]) is None
    assert pooled_total([level, one]) is one  # passed on as measured: no arithmetic on a single total
    pooled = pooled_total([one, level, total_measurement(16.0, 2.0)])
    assert pooled.values == pytest.approx((10 / 4 + 16 / 2) / (1 / 4 + 1 / 2)) and pooled.variance == pytest.approx(4 / 3)
    assert by_query([one, level]) == {("tree level", 1): level}
