"""Private domain discovery as the audit sees it: rows in, a discovered domain out.

A case's tables are the values of one column, one per row; each run discovers the column's domain with the code
a release runs (``discovery._numeric`` for numbers: DP bounds, then bins; ``discovery._categories`` for text:
partition selection) and reports the domain as its outcome.  The audit's events are "this domain was found";
neighbouring columns differ by one row, placed where it moves the outcome most: in a bin or a label whose
count sits at the threshold.

Partition selection is (ε, δ)-DP.  The audit bounds ln(P[E | D] / P[E | D′]) for events E it has seen often, so
P[E | D] ≫ δ and the δ term changes the bound by a relative δ / P[E | D] at most (below 1e-3 here); rare events
(a label held by one row appearing) fall under δ and are never seen by a correct mechanism.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..algorithms.base import Algorithm, Estimate, Measurement
from ..discovery import BETA, DiscoveryPlan, LOG_BINS, _categories, _numeric, _threshold
from ..noise import BitSource, Replicated

__all__ = ["DiscoveredBounds", "DiscoveredQuantileBins", "PartitionSelection", "TrueCountSelection", "UnthresholdedSelection",
           "bounds_pair", "labels_pair", "DELTA"]

DELTA = Fraction(1, 10 ** 6)
LABELS = ["a", "b", "c"]


class _Discovery(Algorithm):
    """Runs one discovery step per repetition (Python; the audit's smaller sample for slow runs)."""

    slow_runs = True

    def outcome(self, rows: np.ndarray, epsilon: Fraction, bits: BitSource):
        raise NotImplementedError

    def run(self, rows: np.ndarray, epsilon: Fraction, bits: BitSource, columns=None) -> Estimate:
        source = bits.bits if isinstance(bits, Replicated) else bits
        reps = bits.reps if isinstance(bits, Replicated) else 1
        keys = [self.outcome(rows, Fraction(epsilon), source) for _ in range(reps)]
        # The outcome is the domain: no noisy numbers reach the release, so the audit's statistic is constant
        # and its events are the outcomes themselves.
        dummy = Measurement(what="outcome only", mechanism="none", sensitivity=1, scale=Fraction(1),
                            epsilon=Fraction(epsilon))
        return Estimate(values=np.zeros((reps, 1)), measurements=[dummy], noisy=[np.zeros((reps, 1))],
                        choices={"structure": keys})


class DiscoveredBounds(_Discovery):
    """An integer column's discovered bins (log-scale bounds, 64-cell refinement, equal-width bins), pure ε."""

    name = "discovery-bounds"
    summary = "DP bounds and bins of a numeric column (audit adapter)"
    bins, binning = 4, "equal-width"

    def outcome(self, rows, epsilon, bits):
        plan = DiscoveryPlan({"x": "integer"}, epsilon, Fraction(0), bins=self.bins, binning=self.binning)
        column, _, _ = _numeric("x", "integer", rows.astype(np.float64), plan, epsilon, 1, bits)
        return None if column is None else column.edges


class DiscoveredQuantileBins(DiscoveredBounds):
    """The same bounds, then one cut at the DP median (permute-and-flip), pure ε."""

    name = "discovery-quantile-bins"
    summary = "DP bounds and a DP-median cut of a numeric column (audit adapter)"
    bins, binning = 2, "quantiles"


class PartitionSelection(_Discovery):
    """A text column's discovered categories (Laplace-threshold partition selection), (ε, δ) with δ = DELTA."""

    name = "discovery-partition-selection"
    summary = "categories of a text column by partition selection (audit adapter)"

    def outcome(self, rows, epsilon, bits):
        plan = DiscoveryPlan({"c": "categorical"}, epsilon, DELTA)
        column, _, _ = _categories("c", rows, LABELS, plan, epsilon, 1, bits)
        return None if column is None else column.values


class TrueCountSelection(PartitionSelection):
    """Mutant: categories kept by their true counts against the threshold (no noise)."""

    name = "mutant-partition-selection-true-counts"

    def outcome(self, rows, epsilon, bits):
        counts = np.bincount(rows, minlength=len(LABELS))
        return tuple(LABELS[i] for i in np.flatnonzero(counts > selection_threshold(epsilon)))


class UnthresholdedSelection(PartitionSelection):
    """Mutant: noisy counts kept above 1 record, the δ tail forgotten (a one-row label shows up often)."""

    name = "mutant-partition-selection-no-threshold"

    def outcome(self, rows, epsilon, bits):
        from ..noise import discrete_laplace
        counts = np.bincount(rows, minlength=len(LABELS))
        noisy = counts + discrete_laplace(1 / epsilon, counts.size, bits)
        # The candidates are the labels in the data (as in a release): without the δ threshold, a label held by
        # one row shows up often, and never when that row is absent.
        return tuple(LABELS[i] for i in np.flatnonzero((counts > 0) & (noisy > 1)))


def selection_threshold(epsilon: Fraction) -> int:
    """The partition-selection threshold a one-row-per-unit release uses at ``epsilon`` and δ = DELTA."""
    return 1 + _threshold(1 / Fraction(epsilon), 1 - (1 - float(DELTA)) ** (1 / 1))


def bounds_pair(epsilon: Fraction) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Integer columns and their neighbours by one row: a log-scale bin holding exactly the first step's
    threshold of rows (so it is found about half the time), one row more in it; and one far outlier more."""
    s, big = LOG_BINS["integer"]
    threshold = _threshold(2 / Fraction(epsilon), float(BETA) / 2 / (2 * big + 1))
    body = np.repeat(np.arange(64, 128), 40)  # one clearly occupied bin, [64, 128)
    edge = np.full(threshold, 1000)  # the bin [512, 1024) at its threshold
    base = np.concatenate([body, edge])
    return [("one row more in a bin at the threshold", base, np.append(base, 1000)),
            ("one far outlier more", base, np.append(base, 10 ** 9))]


def labels_pair(epsilon: Fraction) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Label columns (codes into LABELS) and their neighbours by one row: a label at the threshold and one row
    more of it; a label absent and one row of it."""
    t = selection_threshold(epsilon)
    base = np.concatenate([np.zeros(200, np.int64), np.ones(t, np.int64)])
    return [("one row more of a label at the threshold", base, np.append(base, 1)),
            ("one row of a new label", base, np.append(base, 2))]
