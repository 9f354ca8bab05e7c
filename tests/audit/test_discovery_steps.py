"""The audit's discovery cases: the pairs sit where they must, and the mechanisms they wrap behave as a release's
do (each check states its false-alarm probability)."""

from __future__ import annotations

from fractions import Fraction

from dphist_audit.discovery_steps import UNIT_DELTA, CandidatesBeforeBounding, DiscoveredBounds, UnitPartitionSelection, bounds_pair, unit_labels_pair
from dphist.privacy import PrivacyBudget, SeededBits


def test_the_bounds_audit_pair_sits_at_the_placing_threshold():
    """The audit's pair for the bounds: the first look places the column in some runs and not in others (the
    coarse look is an outcome the neighbour can move), over 200 runs: each outcome has probability near 1/2, so seeing one in
    fewer than 40 runs has probability below 1e-15."""
    (_, base, more), _ = bounds_pair(Fraction(1))
    adapter, bits = DiscoveredBounds(), SeededBits(5)
    found = sum(not adapter.outcome(base, PrivacyBudget(1, bits=bits))[0] for _ in range(200))
    assert 40 <= found <= 160 and more.size == base.size + 1


def test_the_unit_case_catches_candidates_collected_before_bounding():
    """The audit case for candidates collected before contribution bounding (one unit owning 500 labels of its own, K = 1): the mechanism a
    release runs finds a whale label in at most a few of 600 runs (each run: probability at most δ = 1e-3 for the
    kept row's label, so P(more than 5 of 600) < 1e-4), the mutant that takes candidates from every row in
    about 12 % of them (500 zero-count labels, each passing with probability 2.5e-4 at ε = 1; P(fewer than 30
    of 600) < 1e-6).  Without the whale both find "common" alone."""
    (_, base, whale), = unit_labels_pair(Fraction(1))
    bits = SeededBits(11)

    def runs(adapter, rows, n=600):
        return [adapter.outcome(rows, PrivacyBudget(1, UNIT_DELTA, bits=bits, factor=adapter.factor))
                for _ in range(n)]
    correct, mutant = runs(UnitPartitionSelection(), whale), runs(CandidatesBeforeBounding(), whale)
    assert sum(found > 0 for _, found in correct) <= 5
    assert sum(found > 0 for _, found in mutant) >= 30
    assert {outcome for outcome in runs(UnitPartitionSelection(), base, 50)} == {(("common",), 0)}
    assert {outcome for outcome in runs(CandidatesBeforeBounding(), base, 50)} == {(("common",), 0)}
