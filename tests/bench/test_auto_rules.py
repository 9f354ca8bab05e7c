"""The rule-table fit of bench/auto_rules.py: auto's promise (no harm against identity and hb) is made there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bench_scripts


@pytest.fixture(scope="module")
def rules():
    return bench_scripts.load("auto_rules.py")


def errors(rules, table: dict[str, list[float]], decade: int = 3) -> pd.DataFrame:
    """A per-setting error frame as ``per_setting`` makes it: one row per data set (each its own table) of a 1-D
    setting of 256 cells, one column per algorithm, no reference."""
    names = [f"set{i}" for i in range(len(next(iter(table.values()))))]
    index = pd.MultiIndex.from_tuples([(1, 256, decade, n, n) for n in names],
                                      names=["dims", "cells", "decade", "table", "dataset"])
    frame = pd.DataFrame(table, index=index)
    for name in rules.CANDIDATES[1]:
        if name not in frame:
            frame[name] = 10.0  # far behind: never the choice
    frame["reference"] = np.nan
    return frame


def test_an_algorithm_worse_than_both_baselines_on_one_table_is_not_chosen(rules):
    """DAWA is best by far on average but 1.3 times the better baseline on one data set: the fit keeps to the
    baselines (the better of them on average); without that data set (leave-one-out) DAWA is safe and chosen."""
    frame = errors(rules, {"identity": [1.0, 1.0, 1.0, 1.0], "hb": [0.9, 0.95, 1.0, 1.0],
                           "dawa": [0.3, 0.4, 0.5, 1.3 * 0.95]})
    assert rules.fit(frame)[(1, 256)][3][0] == "hb"
    table = rules.fit(frame, leave_out="set3")
    assert table[(1, 256)][3][0] == "dawa" and table[(1, 256)][3][2] == 3


def test_an_algorithm_never_worse_than_a_baseline_is_chosen_when_it_wins(rules):
    frame = errors(rules, {"identity": [1.0, 1.0, 1.0], "hb": [1.2, 1.1, 1.3], "dpcube": [0.5, 1.0, 0.8]})
    algorithm, regret, datasets, several, baseline = rules.fit(frame)[(1, 256)][3]
    assert algorithm == several == "dpcube" and datasets == 3 and baseline == "identity"
    assert regret == pytest.approx(1.0)


def test_the_baseline_is_kept_when_nothing_else_is_safe(rules):
    frame = errors(rules, {"identity": [1.0, 2.0], "hb": [1.5, 1.0], "privtree": [0.5, 1.01]})
    algorithm = rules.fit(frame)[(1, 256)][3][0]
    assert algorithm in rules.BASELINES


def test_the_baseline_that_loses_twice_over_on_a_data_set_gives_way_to_the_other(rules):
    """hb has the lower mean regret but is twice identity on one data set, where identity is never more than
    1.05 times hb: identity is the baseline (the choice cannot tell the data sets apart)."""
    frame = errors(rules, {"identity": [1.05, 1.05, 1.05, 1.0], "hb": [1.0, 1.0, 1.0, 2.0]})
    entry = rules.fit(frame)[(1, 256)][3]
    assert entry[0] == entry[4] == "identity"
    frame = errors(rules, {"identity": [1.2, 1.2, 1.2, 1.0], "hb": [1.0, 1.0, 1.0, 1.05]})
    assert rules.fit(frame)[(1, 256)][3][4] == "hb"  # within the promise everywhere: the lower mean regret
