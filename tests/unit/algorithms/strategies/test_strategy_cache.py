"""The on-disk cache of optimised strategies: a second call reads the file, a damaged file is ignored and
rewritten whole."""

from __future__ import annotations

import numpy as np

from dphist.algorithms.strategies.optimized import KroneckerStrategy, optimise_p_identity
from dphist.algorithms.strategies.strategy_cache import cached_strategy


def counting():
    calls = []

    def optimise(gram, noise, **options):
        calls.append((gram.kind, gram.n, noise))
        return optimise_p_identity(gram, noise, **options)
    return optimise, calls


OPTIONS = {"p_choices": [2], "restarts": 1, "max_iter": 50}


def test_a_second_call_reads_the_cache(tmp_path):
    optimise, calls = counting()
    first = cached_strategy("prefix", 24, "l2", tmp_path, optimise=optimise, **OPTIONS)
    second = cached_strategy("prefix", 24, "l2", tmp_path, optimise=optimise, **OPTIONS)
    assert calls == [("prefix", 24, "l2")]
    assert np.array_equal(first.theta, second.theta) and first.objective == second.objective
    cached_strategy("prefix", 24, "l1", tmp_path, optimise=optimise, **OPTIONS)  # another noise: another key
    cached_strategy("all_ranges", 24, "l2", tmp_path, optimise=optimise, **OPTIONS)
    assert len(calls) == 3 and len(list(tmp_path.glob("*.npz"))) == 3
    assert not list(tmp_path.glob("*.tmp"))


def test_two_axes_share_one_cached_strategy_per_size(tmp_path):
    optimise, calls = counting()
    s = cached_strategy("all_ranges", (16, 16), "l2", tmp_path, optimise=optimise, **OPTIONS)
    assert isinstance(s, KroneckerStrategy) and s.shape == (16, 16)
    assert calls == [("all_ranges", 16, "l2")]  # the second axis read the first one's file


def test_a_corrupt_or_mismatched_file_is_ignored_and_rewritten(tmp_path):
    optimise, calls = counting()
    good = cached_strategy("prefix", 20, "l2", tmp_path, optimise=optimise, **OPTIONS)
    (path,) = tmp_path.glob("*.npz")
    whole = path.read_bytes()
    for damaged in (whole[: len(whole) // 2], b"", b"not a zip file"):
        path.write_bytes(damaged)
        again = cached_strategy("prefix", 20, "l2", tmp_path, optimise=optimise, **OPTIONS)
        assert np.array_equal(again.theta, good.theta)
    assert len(calls) == 4
    # a readable file whose Θ is negative is not trusted either
    np.savez(path, theta=-np.ones((2, 20)), workload=np.array("prefix"), n=np.array(20), noise=np.array("l2"),
             objective=np.array(1.0), seed=np.array(0), iterations=np.array(1), format=np.array(1))
    cached_strategy("prefix", 20, "l2", tmp_path, optimise=optimise, **OPTIONS)
    assert len(calls) == 5
    cached_strategy("prefix", 20, "l2", tmp_path, optimise=optimise, **OPTIONS)  # rewritten: read now
    assert len(calls) == 5
