"""The text on a release's pictures (dphist/products/plots/labels.py): bin edges as the short decimals they are
(not 0.16999999999999998), ranges, open end bins as "< a" / "≥ b", date bins in their unit, long categories cut
with an ellipsis, counts with thousands separators."""

from __future__ import annotations

import numpy as np
import pytest

from dphist.products.plots.labels import MAX_LABEL, axis_labels, count_text, edge_texts
from dphist.products.synth import ReleasedBins


def numeric(edges, null: bool = False, kind: str = "numeric") -> ReleasedBins:
    lower, upper = np.array(edges[:-1], dtype=float), np.array(edges[1:], dtype=float)
    flags = np.zeros(lower.size, dtype=bool)
    if null:
        lower, upper, flags = np.append(lower, 0.0), np.append(upper, 0.0), np.append(flags, True)
    return ReleasedBins("x", kind, lower.astype(object), lower, upper, flags)


def test_float_noise_in_edges_reads_as_the_short_decimal():
    edges = [0.1, 0.16999999999999998, 0.24000000000000002, 0.31000000000000005]  # as float steps leave them
    assert edges[1] != 0.17
    assert edge_texts(edges, 0.07) == ["0.1", "0.17", "0.24", "0.31"]
    assert axis_labels(numeric(edges)) == ["[0.1, 0.17)", "[0.17, 0.24)", "[0.24, 0.31)"]


def test_edges_without_a_short_decimal_are_rounded_to_tell_bins_apart():
    texts = edge_texts([0, 1 / 6, 1 / 3, 0.5], 1 / 6)
    assert texts == ["0", "0.167", "0.333", "0.5"]
    thin = edge_texts([1 / 3, 1 / 3 + 1e-4, 1 / 3 + 2e-4], 1e-4)  # narrow bins keep more places
    assert len(set(thin)) == 3 and all(len(t) <= 10 for t in thin)


@pytest.mark.parametrize("edges, expected", [
    ([0, 10000, 250000], ["0", "10,000", "250,000"]),
    ([-77.2, -77.0, -76.8], ["-77.2", "-77", "-76.8"]),
    ([15, 20, 95], ["15", "20", "95"]),
    ([-0.0, 0.5], ["0", "0.5"]),
])
def test_edge_texts(edges, expected):
    assert edge_texts(edges, float(np.min(np.diff(edges)))) == expected


def test_open_ends_read_below_and_at_or_above():
    axis = numeric([0.0, 0.17, 0.5, 9.0, 12.0], null=True)
    assert axis_labels(axis, {"open_ends": True}) == ["< 0.17", "[0.17, 0.5)", "[0.5, 9)", "≥ 9", "missing"]
    assert axis_labels(axis, {}) == ["[0, 0.17)", "[0.17, 0.5)", "[0.5, 9)", "[9, 12)", "missing"]
    # a declared domain that clamps values outside it into its end bins has open ends too; one that drops them not
    assert axis_labels(axis, {"out_of_domain": "clamp"}) == axis_labels(axis, {"open_ends": True})
    assert axis_labels(axis, {"out_of_domain": "drop"}) == axis_labels(axis, {})


def test_bins_of_one_whole_number_read_as_it():
    assert axis_labels(numeric([3, 4, 5, 7])) == ["3", "4", "[5, 7)"]


def test_date_bins_read_in_their_unit():
    def days(*isos):
        return [float((np.datetime64(d) - np.datetime64("1970-01-01")).astype(int)) for d in isos]

    months = numeric(days("2023-01-01", "2023-02-01", "2023-03-01", "2023-04-01"), kind="date")
    assert axis_labels(months, {"unit": "month"}) == ["2023-01", "2023-02", "2023-03"]
    assert axis_labels(months, {"unit": "month", "open_ends": True}) == ["< 2023-02", "2023-02", "≥ 2023-03"]
    assert axis_labels(months, {"unit": "quarter"})[0] == "2023 Q1"
    odd = numeric(days("2023-01-15", "2023-02-15", "2023-03-15"), kind="date")
    assert axis_labels(odd, {"unit": "month"}) == ["2023-01-15", "2023-02-15"]


def test_long_categories_end_in_an_ellipsis():
    values = np.array(["F", "a very long category label number one", None], dtype=object)
    axis = ReleasedBins("c", "categorical", values, np.zeros(3), np.zeros(3), np.array([False, False, True]))
    short, long, missing = axis_labels(axis)
    assert short == "F" and missing == "missing"
    assert len(long) == MAX_LABEL and long.endswith("…") and long.startswith("a very long")


@pytest.mark.parametrize("value, text", [(0, "0"), (1000, "1,000"), (1234567.0, "1,234,567"), (0.25, "0.25"),
                                         (-12.5, "-12.5")])
def test_count_text(value, text):
    assert count_text(value) == text
