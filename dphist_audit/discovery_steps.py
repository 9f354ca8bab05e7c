"""Private domain discovery as the audit sees it: rows in, a discovered domain out.

A case's tables are the values of one column, one per row (or ``(unit, label)`` pairs for the privacy-unit
case); each run discovers the column's domain with the code a release runs (``discovery.numeric_domain`` for
numbers: DP bounds, then bins; ``discovery.categorical_domain`` for text: partition selection, after
``contribution.bounded_rows`` with a privacy unit) on the budget the audit gives it, and its :meth:`outcome` is
the domain.  The audit's events are "this outcome was found"; neighbouring tables differ by one row (one unit),
placed where it moves the outcome most: in a bin or a label whose count sits at the threshold, or a unit that
owns many labels.

Each adapter runs once per repetition (``data_adaptive``) on a plain budget of the case's ε; partition selection
needs a δ as well, given by the adapter's ``delta`` (the budget the audit makes must carry it).  Partition
selection is (ε, δ)-DP.  The audit bounds ln(P[E | D] / P[E | D′]) for events E it has seen often, so
P[E | D] ≫ δ and the δ term changes the bound by a relative δ / P[E | D] at most (below 1e-3 here); rare events
(a label held by one row appearing) fall under δ and are never seen often by a correct mechanism.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dphist.algorithms.base import Algorithm, Estimate
from dphist.read.contribution import bounded_rows
from dphist.discovery.domains import BETA, DEFAULT_MAX_CATEGORIES, LOG_BINS, SHARES, DiscoveryPlan, categorical_domain, numeric_domain, tail_threshold, present_labels
from dphist.privacy import PrivacyBudget

__all__ = ["DiscoveredLowerBound", "ArgmaxBounds", "tail_pair", "DiscoveredBounds", "DiscoveredQuantileBins", "PartitionSelection", "TrueCountSelection",
           "UnthresholdedSelection", "UnitPartitionSelection", "CandidatesBeforeBounding", "bounds_pair",
           "labels_pair", "unit_labels_pair", "DELTA", "UNIT_DELTA"]

DELTA = Fraction(1, 10 ** 6)
LABELS = ["a", "b", "c"]


class _Discovery(Algorithm):
    """One discovery step per run; :meth:`outcome` is what the audit compares between neighbours."""

    #: Each run reads its own noisy counts: the audit runs it once per repetition (its smaller sample).
    data_adaptive = True
    #: Rows per protected unit (the budget's factor) and the δ the budget must hold.
    factor = 1
    delta = Fraction(0)

    def outcome(self, rows: np.ndarray, budget: PrivacyBudget):
        """The discovered domain (hashable), measured only through ``budget``."""
        raise NotImplementedError

    def run(self, rows: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        # The outcome is the domain: no noisy number reaches a release, so the estimate is a constant.
        self.outcome(rows, budget)
        return Estimate(values=np.zeros(1))


class DiscoveredBounds(_Discovery):
    """An integer column's discovered bins (placing histogram, median, histogram of distances, DP-quantile
    bounds, equal-width bins), pure ε."""

    name = "discovery-bounds"
    summary = "DP bounds and bins of a numeric column (audit adapter)"
    bins, binning = 4, "equal-width"

    def outcome(self, rows, budget):
        plan = DiscoveryPlan({"x": "integer"}, budget.epsilon, Fraction(0), bins=self.bins, binning=self.binning)
        column, report = numeric_domain("x", "integer", rows.astype(np.float64), plan, budget)
        # whether the first look placed the values (else the coarse look found the domain) is public too
        return None if column is None else (report["method"].startswith("coarse"), column.edges)


class DiscoveredLowerBound(DiscoveredBounds):
    """The same bounds, seen through one question: is the lower bound above the value :data:`LOW` that sits at
    the 1/400 quantile in :func:`tail_pair` (a function of the domain, so a valid event)."""

    name = "discovery-lower-bound"
    summary = "whether a numeric column's DP lower bound lies above a given value (audit adapter)"
    bins = 256  # bins of width 1: the first edge is the drawn bound itself, not rounded to a wider bin's multiple

    def outcome(self, rows, budget):
        found = super().outcome(rows, budget)
        return None if found is None else bool(found[1][0] > LOW)


class _Argmax(PrivacyBudget):
    """A budget whose selections keep the best-scoring candidate instead of drawing one (the bug)."""

    def _select(self, scores, epsilon, sensitivity) -> int:
        return int(np.argmax([float(q) for q in scores]))


class ArgmaxBounds(DiscoveredLowerBound):
    """Mutant: the median and the bounds taken as the best-scoring points (the true quantiles), not drawn."""

    name = "mutant-discovery-bounds-true-quantiles"

    def outcome(self, rows, budget):
        budget.__class__ = type(f"Argmax{type(budget).__name__}", (_Argmax, type(budget)), {})
        return super().outcome(rows, budget)


class DiscoveredQuantileBins(DiscoveredBounds):
    """The same bounds, then one cut at the DP median (permute-and-flip), pure ε."""

    name = "discovery-quantile-bins"
    summary = "DP bounds and a DP-median cut of a numeric column (audit adapter)"
    bins, binning = 2, "quantiles"


class PartitionSelection(_Discovery):
    """A text column's discovered categories (Laplace-threshold partition selection over the labels present),
    (ε, δ) with δ = DELTA."""

    name = "discovery-partition-selection"
    summary = "categories of a text column by partition selection (audit adapter)"
    delta = DELTA

    def outcome(self, rows, budget):
        codes, candidates = present_labels(rows, LABELS)
        column, _ = categorical_domain("c", codes, candidates, DEFAULT_MAX_CATEGORIES, budget)
        return None if column is None else column.values


class TrueCountSelection(PartitionSelection):
    """Mutant: categories kept by their true counts against the threshold (no noise)."""

    name = "mutant-partition-selection-true-counts"

    def outcome(self, rows, budget):
        counts = np.bincount(rows, minlength=len(LABELS))
        return tuple(LABELS[i] for i in np.flatnonzero(counts > selection_threshold(budget.epsilon)))


class UnthresholdedSelection(PartitionSelection):
    """Mutant: noisy counts kept above 1 record, the δ tail forgotten (a one-row label shows up often)."""

    name = "mutant-partition-selection-no-threshold"

    def outcome(self, rows, budget):
        counts = np.bincount(rows, minlength=len(LABELS))
        noisy, _ = budget.laplace(counts, 1, budget.epsilon, "count per label (no threshold)")
        # The candidates are the labels in the data (as in a release): without the δ threshold, a label held by
        # one row shows up often, and never when that row is absent.
        return tuple(LABELS[i] for i in np.flatnonzero((counts > 0) & (noisy > 1)))


def selection_threshold(epsilon: Fraction) -> int:
    """The partition-selection threshold a one-row-per-unit release uses at ``epsilon`` and δ = DELTA."""
    return 1 + tail_threshold(1 / Fraction(epsilon), 1 - (1 - float(DELTA)) ** (1 / 1))


def bounds_pair(epsilon: Fraction) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Integer columns and their neighbours by one row: the whole column in one log-scale bin holding exactly
    the count that places it (step 1's threshold, so the first look places it about half the time and the coarse
    look finds it otherwise), one row more in it; and one far outlier more."""
    s, big = LOG_BINS["integer"]
    placing = Fraction(epsilon) * SHARES[0] / sum(SHARES)  # step 1's share of an equal-width column
    threshold = tail_threshold(1 / placing, float(BETA) / 2 / (2 * big + 1))
    base = np.resize(np.arange(64, 128), threshold)  # the bin [64, 128), at its threshold
    return [("one row more in a bin at the threshold", base, np.append(base, 100)),
            ("one far outlier more", base, np.append(base, 10 ** 9))]


#: The value at the lower tail of :func:`tail_pair`'s column.
LOW = 64


def tail_pair() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """An integer column whose 1/400 quantile's best point flips with one row: 20 rows of each of 65 … 190 and
    13 rows of 64 (more values than the few-values path counts one by one, so the bounds are drawn).  With N
    rows, a point c ≤ 64 scores −N/400 and c = 65 scores −|13 − N/400|; at N = 2533 the former wins (13 > N/200), one row of 64 fewer and c = 65 wins.  A draw moves little; taking the best point
    moves the lower bound from ≤ 64 to 65 every time."""
    base = np.concatenate([np.repeat(np.arange(LOW + 1, LOW + 127), 20), np.full(13, LOW)])
    return [("one row fewer at the lower tail", base, base[:-1])]


def labels_pair(epsilon: Fraction) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Label columns (codes into LABELS) and their neighbours by one row: a label at the threshold and one row
    more of it; a label absent and one row of it."""
    t = selection_threshold(epsilon)
    base = np.concatenate([np.zeros(200, np.int64), np.ones(t, np.int64)])
    return [("one row more of a label at the threshold", base, np.append(base, 1)),
            ("one row of a new label", base, np.append(base, 2))]


# --------------------------------------------------------------------------------------------------------------
# Partition selection with a privacy unit (candidates must come from the rows kept by contribution bounding)

#: Rows per unit kept by contribution bounding, and the labels the whale unit owns alone.
UNIT_ROWS = 1
WHALE_LABELS = 500
UNIT_LABELS = ["common"] + [f"whale-{i}" for i in range(WHALE_LABELS)]
#: A δ large enough that the mutant's leak (about WHALE_LABELS times the chance of a zero count passing) is seen
#: in a few thousand runs, small enough that a correct run's δ events (one kept whale row's label, probability
#: below δ) stay too rare to move the audit's bound (module docstring).
UNIT_DELTA = Fraction(1, 1000)


class UnitPartitionSelection(_Discovery):
    """Partition selection behind a privacy unit of UNIT_ROWS rows, as a release with ``--privacy-unit`` runs it:
    rows are ``(unit, label code)`` pairs; contribution bounding keeps UNIT_ROWS rows per unit (a random choice
    per run, from the budget's bits), and the candidates are the labels of the kept rows only.

    Outcome: the public labels found and how many of the whale's labels were found (a function of the domain;
    the whale's labels are each too rare to be an event, but together they move this count)."""

    name = "discovery-unit-partition-selection"
    summary = "categories by partition selection behind a privacy unit (audit adapter)"
    factor = UNIT_ROWS
    delta = UNIT_DELTA

    def candidates(self, codes: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """The kept rows' codes renumbered to the candidates, and the candidates: labels of kept rows only."""
        return present_labels(np.where(keep, codes, -1), UNIT_LABELS)

    def outcome(self, rows, budget):
        keep = bounded_rows(rows[:, 0], UNIT_ROWS, budget.bits)
        codes, candidates = self.candidates(rows[:, 1], keep)
        column, _ = categorical_domain("c", codes, candidates, len(UNIT_LABELS), budget)
        found = () if column is None else column.values
        return tuple(v for v in found if not v.startswith("whale-")), sum(v.startswith("whale-") for v in found)


class CandidatesBeforeBounding(UnitPartitionSelection):
    """Mutant: candidates collected from every row before contribution bounding, so
    the labels of a unit's dropped rows are zero-count candidates, each with its own chance to pass."""

    name = "mutant-discovery-candidates-before-bounding"

    def candidates(self, codes, keep):
        renumbered, candidates = present_labels(codes, UNIT_LABELS)
        return np.where(keep, renumbered, -1), candidates


def unit_labels_pair(epsilon: Fraction) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(unit, label)`` rows and their neighbour by one unit: 60 units of one row of "common", and the same
    plus a whale unit with one row of each of its WHALE_LABELS own labels (bounding keeps one of them)."""
    base = np.column_stack([np.arange(60), np.zeros(60, np.int64)])
    whale = np.column_stack([np.full(WHALE_LABELS, 1000), np.arange(1, WHALE_LABELS + 1)])
    return [(f"one unit with {WHALE_LABELS} new labels of its own", base,
             np.vstack([base, whale]).astype(np.int64))]
