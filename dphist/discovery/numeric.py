"""Bounds and bins of a numeric or date column, found privately (docs/algorithms.md §9.2).

:func:`numeric_domain` spends a column's budget ε_b in steps, each a measurement on the privacy kernel with its
sensitivity stated for one record (the kernel scales it by the protected unit's rows):

1. *place* (ε_b/8): a log-scale histogram of the values (Δ = 1).  If its largest bin is not occupied (a noisy
   count an empty bin passes with probability at most BETA over all bins), the rest of ε_b goes to one coarse
   histogram (:func:`coarse_domain`); otherwise that bin and its neighbours holding a real share place the values.
   Float columns then test, with ε_b/9, whether the values are whole numbers (one noisy count, Δ = 1).
2. *median* (ε_b/8): one permute-and-flip draw over public points spanning those bins (score sensitivity 1).
3. *spread* (ε_b/4): a log-scale histogram of the distances from the median (Δ = 1); each side reaches out over
   the bins holding a real share, across a bin no value can fall in, or further to a bin far above the noise.
4. *bounds* (ε_b/2): with few whole values, a noisy count of each (Δ = 1); otherwise DP quantiles at TAIL and
   1 − TAIL by permute-and-flip over points of the widened range and points beyond it at a public penalty per
   doubling (score sensitivity 1).  Values beyond the bounds are counted in the end bins, whose labels are open.
5. *bins*: equal widths of a round size (one per value for few whole values; days, months or years for dates),
   or cut points at DP quantiles.

Each step's points and ranges are post-processing of earlier noisy outputs; the steps compose sequentially to
ε_b (pure ε-DP).  The true values stay inside this module.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ..declare.schema import parse_schema, round_bins
from ..privacy import PrivacyBudget, format_fraction
from ..privacy import discrete_laplace_tail_threshold as tail_threshold
from .plan import DiscoveryPlan

__all__ = ["numeric_domain", "rank_scores", "tail_threshold", "BETA", "LOG_BINS", "SHARES", "TAIL"]

#: Probability that some empty bin of the first log-scale histogram is taken as occupied (over all its bins):
#: a column is then placed where it has no values.
BETA = Fraction(1, 1000)
#: The same for the later steps, where an empty bin taken as occupied only widens a range.
BETA_WIDEN = Fraction(1, 20)
LOG_BINS = {"integer": (1.0, 64), "date": (1.0, 32), "float": (2.0 ** -10, 74)}  # (s, B): 2B + 1 bins
#: The share of the rows the discovered bounds aim to leave out at each end (clamped into the end bins).
TAIL = Fraction(1, 400)
#: A bin next to the range joins it when its noisy count is above what an empty bin exceeds this often.
EXTEND_TAIL = 1 / 5
#: The bounds' candidates reach past the range by this many rank resolutions (as a share of the rows).
PAD = 32
#: A range grows across at most this many bins holding no real share, to the next that holds one, when that
#: one's noisy count is above what an empty bin passes with probability ACROSS_TAIL.
GAP, ACROSS_TAIL = 1, 1 / 50
#: Float columns: the share of the budget (beside SHARES) that tests whether the values are whole numbers; they
#: are taken as whole when at most WHOLE_MOST of the rows are not, by a noisy count whose noise is small beside
#: the rows (the noisy total over the count's noise scale at least WHOLE_EVIDENCE).
WHOLE_SHARE, WHOLE_MOST, WHOLE_EVIDENCE = 1, Fraction(1, 20), 10
#: Whole-number columns whose range holds at most this many values get their bounds from a noisy count of each.
FEW_VALUES = 64
#: Whole-number bounds at most this many values apart give one bin per value (more when ``bins`` is larger).
ONE_PER_VALUE = 32
#: Bins to a doubling in the histogram of distances from the median (the range overshoots the data by < 42 %).
SPREAD_FINE = 2
#: The shares of a numeric column's budget: placing the values, their median, the distances, the bounds.
SHARES = (1, 1, 2, 4)
#: The coarse look's histogram: this many doublings to a bin (more rows to a bin where the values are few; four
#: place more columns of 1,000 rows but in ranges too wide for use, docs/algorithms.md §9.2).
COARSE_GROUP = 2
#: Candidate points for the bounds (equally spaced over the padded range; fewer for narrow integer ranges), and
#: beyond each end of it, at 1, 2, 4, ... times its span (each doubling further less likely).
QUANTILE_POINTS, BEYOND = 1024, 64
#: Candidate cut points for quantile bins: this many equally spaced points inside the bounds.
QUANTILE_CANDIDATES = 256
_EPOCH = _dt.date(1970, 1, 1)
_FIRST_DAY, _LAST_DAY = (_dt.date.min - _EPOCH).days, (_dt.date.max - _EPOCH).days  # the calendar dates can name


def _log_bin(v: np.ndarray, s: float, big: int, fine: int = 1) -> np.ndarray:
    """Index in [0, 2·B·fine] of each finite value's log-scale bin, ``fine`` bins to a doubling: B·fine for
    |v| < s, B·fine ± k for s·2^((k−1)/fine) ≤ |v| < s·2^(k/fine) (the last bin on each side also holds
    everything beyond, infinities too).  Each value is in exactly one bin."""
    # |v| is capped at s·2**big, already in the last bin: |v|/s of float64's largest values (1.7e308) would
    # overflow to inf, and inf has no bin index.
    size = np.minimum(np.abs(v), s * 2.0 ** big) / s
    if fine == 1:
        _, k = np.frexp(size)  # |v|/s = f·2^e with f in [0.5, 1), so k = e for |v| ≥ s (exact)
    else:
        with np.errstate(divide="ignore"):
            k = np.floor(np.log2(np.maximum(size, 1.0)) * fine).astype(np.int64) + 1
    k = np.where(size < 1, 0, np.minimum(k, big * fine))
    return big * fine + np.sign(v).astype(np.int64) * k


def _log_edges(j: int, s: float, big: int, integer: bool, fine: int = 1) -> tuple[float, float]:
    """An interval [low, high) holding every value of bin ``j`` of :func:`_log_bin` (for integer columns every
    whole value in it)."""
    k = j - big * fine
    if k == 0:
        return (0.0, 1.0) if integer else (-s, s)
    lo, hi = s * 2.0 ** ((abs(k) - 1) / fine), s * 2.0 ** (abs(k) / fine)
    if k > 0:
        return lo, hi
    # −|v| in (−hi, −lo]: the upper end must lie above −lo
    return -hi, (math.floor(-lo) + 1.0) if integer else float(np.nextafter(-lo, math.inf))


def _extended(noisy: np.ndarray, first: int, last: int, low: int, high: int,
              thresholds: tuple[float, float, float]) -> tuple[int, int]:
    """Bins ``first..last`` extended outward, down to ``low`` and up to ``high`` at most, bin by bin while the
    next one's noisy count exceeds ``step``, across GAP bins to one exceeding ``across``, and further out to the
    nearest exceeding ``far`` (``thresholds`` = (step, across, far), each at least the one before, so that empty
    bins pass each the more rarely the further it reaches).  The gap lets a range cross a bin no value can fall
    in (distances 1.41 to 2 for whole numbers, between the multiples of 5 of rounded data); ``far`` reaches a
    share of the rows set apart (the non-zero values of a column that is mostly 0, a top code).
    Post-processing of the noisy counts."""
    step, across, far = thresholds

    def outward(edge: int, direction: int, limit: int) -> int:
        while edge != limit:
            near = edge + direction
            if noisy[near] > step:
                edge = near
                continue
            gap = [j for j in range(near + direction, _clip(near + direction * GAP, low, high) + direction,
                                    direction) if noisy[j] > across][:1]
            ahead = gap or [j for j in range(near, limit + direction, direction) if noisy[j] > far][:1]
            if not ahead:
                break
            edge = ahead[0]
        return edge
    return outward(first, -1, low), outward(last, 1, high)


def _thresholds(step: float, scale, bins: int, gaps: bool = True) -> tuple[float, float, float]:
    """(step, across, far) for :func:`_extended` over a histogram of ``bins`` bins with noise of ``scale``:
    ``across`` is what an empty bin passes with probability ACROSS_TAIL (no crossing without ``gaps``: a
    histogram of doublings of the values has no bins that values skip), ``far`` what some one of the bins passes
    with probability at most BETA/2."""
    far = max(step, tail_threshold(scale, float(BETA) / 2 / bins))
    return step, max(step, tail_threshold(scale, ACROSS_TAIL)) if gaps else far, far


def _clip(j: int, low: int, high: int) -> int:
    return min(max(j, low), high)


def _reach(side: np.ndarray, occupied: float, thresholds: tuple[float, float, float]) -> int | None:
    """How many bins out from the centre one side of a histogram of distances reaches (``side`` is ordered
    nearest first): from its largest bin, if that is above ``occupied``, outward over the bins that pass
    ``thresholds`` (:func:`_extended`); None if no bin is occupied.  Post-processing of the noisy counts."""
    largest = int(np.argmax(side))
    if side[largest] <= occupied:
        return None
    return _extended(side, largest, largest, largest, side.size - 1, thresholds)[1] + 1


def _extension_step(total: int, scale: Fraction) -> float:
    """The noisy count above which a bin holds a real share of the rows: what an empty bin exceeds with
    probability EXTEND_TAIL, and TAIL of ``total`` (a noisy count of the rows).  A bin holding less stays out of
    a range: the bound there cuts about as much as the quantile would, without widening the range."""
    return max(tail_threshold(scale, EXTEND_TAIL), float(TAIL) * int(total))


def _points(lower: float, upper: float, count: int, integer: bool) -> np.ndarray:
    """``count`` equally spaced points from ``lower`` to ``upper`` (whole and distinct for integer columns)."""
    points = np.linspace(lower, upper, count)
    return np.unique(np.round(points) + 0.0) if integer else np.unique(points)  # + 0.0: no −0


def _below(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """#{x < c} for each of the sorted, distinct ``points`` c, in O(n log k)."""
    at_or_below = np.searchsorted(points, values, side="right")  # #{c ≤ x}: x < c_k iff it is ≤ k
    return np.cumsum(np.bincount(at_or_below, minlength=points.size + 1))[: points.size]


def _bound_candidates(lower: float, upper: float, integer: bool, step: Fraction) -> tuple[np.ndarray, list[Fraction]]:
    """The bounds' candidates: QUANTILE_POINTS + 1 equally spaced points over [lower, upper], and beyond each end
    BEYOND points at 1, 2, 4, ... times the span past it, the k-th less likely by a penalty of k·``step`` rows
    of score (a public function of the candidate and of earlier noisy outputs, so the scores keep sensitivity 1).
    A share of the rows the range missed (the non-zero values of a column that is mostly 0, a thin tail spread
    over many doublings) outweighs the penalty of the points that reach it; past the data, where every point
    scores alike, the penalty keeps the draw near the range.  Returns the sorted points and their penalties."""
    inner = _points(lower, upper, QUANTILE_POINTS + 1, integer)
    span = max(upper - lower, 1.0 if integer else float(np.finfo(float).tiny))
    reach = span * 2.0 ** np.arange(BEYOND)
    with np.errstate(over="ignore"):
        outer = [p for p in np.concatenate([lower - reach, upper + reach]) if np.isfinite(p) and abs(p) < 2 ** 1000]
    points = np.array([*inner, *outer])
    points = np.round(points) + 0.0 if integer else points
    order = np.unique(points)
    distance = np.maximum(np.maximum(lower - order, order - upper), 0.0)
    rank = np.where(distance > 0, np.floor(np.log2(np.maximum(distance, span) / span)) + 1, 0)
    return order, [int(k) * step for k in rank]


def rank_scores(below: np.ndarray, n: int, q: Fraction) -> list[Fraction]:
    """Each candidate's score for the q-quantile: −|(1 − q)·#{x < c} − q·#{x ≥ c}| = −|#{x < c} − q·n|, zero at
    the quantile; one record more or less changes it by at most max(q, 1 − q) ≤ 1 (sensitivity 1)."""
    # −|(1 − q)·B − q·(n − B)| = −|B − q·n|, computed exactly as −|den·B − num·n| / den: whole numbers, in
    # int64 where den·n leaves room, else as Python integers.
    den, n = q.denominator, int(n)
    counts = below.astype(np.int64) if den * n < 2 ** 62 else below.astype(object)
    return [Fraction(int(v), den) for v in -np.abs(den * counts - q.numerator * n)]


def numeric_domain(name: str, kind: str, data: np.ndarray, plan: DiscoveryPlan, budget: PrivacyBudget):
    """Bounds and bins of a numeric or date column (``data``: float64 values, days for dates, NaN missing), spending
    all of ``budget`` (module docstring, steps 1–5).  Returns the column (open end bins; None if there are too
    few records) and its report entry."""
    s, big = LOG_BINS[kind]
    integer = kind in ("integer", "date")
    finite = data[np.isfinite(data)]
    quantiles = plan.binning == "quantiles" and kind != "date" and plan.bins > 1
    # 1/8 to place the values, 1/8 to the median, 1/4 to the distances, 1/2 to the bounds (float columns: a
    # ninth share more, to test for whole numbers); with quantile bins these take half of the column's budget
    # and the cut points the other half.
    shares = SHARES + ((WHOLE_SHARE,) if kind == "float" else ())
    shares += (sum(shares),) if quantiles else ()
    place, rest = budget.split([shares[0], sum(shares) - shares[0]])
    bounds_what = f"{name}: lower and upper bounds at the {TAIL} and {1 - TAIL} quantiles, by permute-and-flip"
    cuts_what = f"{name}: {plan.bins - 1} bin cuts at quantiles, by permute-and-flip"
    # 1. Where the values are: the log-scale bin with the largest noisy count and its neighbours that hold a
    #    real share of the rows.
    noisy, _ = place.laplace(np.bincount(_log_bin(finite, s, big), minlength=2 * big + 1), 1, place.epsilon,
                             f"{name}: log-scale histogram, to place the values",
                             composition="parallel over disjoint bins")
    scale = place.scale(1, place.epsilon)
    anchor = int(np.argmax(noisy))
    placing = tail_threshold(scale, float(BETA) / 2 / noisy.size)
    report = {"column": name, "kind": kind, "epsilon": format_fraction(budget.epsilon), "delta": "0"}
    if noisy[anchor] <= placing:  # too few values to place with this share: all the rest on one coarse look
        return coarse_domain(name, kind, finite, plan, rest, report)
    step = _extension_step(noisy[anchor], scale)
    first, last = _extended(noisy, anchor, anchor, 0, noisy.size - 1, _thresholds(step, scale, noisy.size, gaps=False))
    total = max(int(noisy[first:last + 1].sum()), 1)  # the noisy number of rows, for the steps below
    placed_range = (_log_edges(first, s, big, integer)[0], _log_edges(last, s, big, integer)[1])
    parts = rest.split(shares[1:])
    middle, spread, bounds = parts[:3]
    # 1b. Float columns: whether the values are whole numbers (a float column of counts or codes with missing
    #     values), from one noisy count of those that are not (sensitivity 1).  Whole columns get whole bounds
    #     and bins, one bin per value where there are few; a float column is taken as whole only when the count
    #     is small beside a total the budget resolves.
    if kind == "float":
        fractional = np.count_nonzero(finite != np.floor(finite))
        whole = parts[3]
        noisy_fractional, _ = whole.laplace(np.array([fractional]), 1, whole.epsilon,
                                            f"{name}: how many values are not whole numbers", composition="one count")
        evidence = total * whole.inverse_scale(1, whole.epsilon)  # the total in units of the count's noise scale
        integer = bool(evidence >= WHOLE_EVIDENCE and noisy_fractional[0] < float(WHOLE_MOST) * total)
        report["whole numbers"] = "yes (a noisy count of the values that are not)" if integer else "no"
        if integer:
            s, big = LOG_BINS["integer"]
            placed_range = (float(np.floor(placed_range[0])), float(np.ceil(placed_range[1])))
    # 2. The median, among public points over those bins (its score has a margin of half the rows: rarely off).
    candidates = _points(*placed_range, QUANTILE_POINTS + 1, integer)
    median = float(candidates[middle.choose(rank_scores(_below(finite, candidates), finite.size, Fraction(1, 2)),
                                            middle.epsilon, 1,
                                            f"{name}: the median, by permute-and-flip over {candidates.size} points")])
    # 3. How far the values reach on each side of it: a log-scale histogram of the signed distances.
    noisy, _ = spread.laplace(np.bincount(_log_bin(finite - median, s, big, SPREAD_FINE),
                                          minlength=2 * big * SPREAD_FINE + 1), 1, spread.epsilon,
                              f"{name}: log-scale histogram of the distances from that median, {SPREAD_FINE} bins "
                              "to a doubling", composition="parallel over disjoint bins")
    scale = spread.scale(1, spread.epsilon)
    occupied = tail_threshold(scale, float(BETA_WIDEN) / 2 / noisy.size)
    binning = "bins cut at DP quantiles" if quantiles else "equal-width bins"
    report.update({"method": f"DP bounds (a median, a log-scale histogram of the distances from it, then the {TAIL} "
                             f"and {1 - TAIL} quantiles, or with few whole values a noisy count of each), {binning}",
                   "thresholds": [placing, occupied]})
    centre = big * SPREAD_FINE
    sides = noisy[:centre][::-1], noisy[centre + 1:]  # distances below and above the median, nearest first
    # Each side reaches from its largest bin, if occupied, outward while the bins hold a real share of the
    # rows; a side with no occupied bin reaches as far as the other (its rows are too spread to place), and
    # with none on either side the range is that of step 1 (most rows at the median, the rest spread thin).
    reach = [_reach(side, occupied, _thresholds(_extension_step(total, scale), scale, noisy.size)) for side in sides]
    if reach == [None, None]:
        lower, upper = placed_range
    else:
        reach = [r if r is not None else max(x for x in reach if x is not None) for r in reach]
        lower = median + _log_edges(centre - reach[0], s, big, integer, SPREAD_FINE)[0]
        upper = median + _log_edges(centre + reach[1], s, big, integer, SPREAD_FINE)[1]
    # 4. The bounds.  Room past the range, so that a draw that misses its quantile falls outward (wider bins)
    #    rather than inward (cut rows): PAD rank resolutions of the draws (2·Δ·m/ε rows) as a share of the rows.
    # (the scale is linear in Δ: the scale at Δ = 2·PAD/total is PAD resolutions of a draw over the rows)
    pad = float(min(Fraction(1, 4), bounds.scale(Fraction(2 * PAD, total), bounds.part(Fraction(1, 2))))) * \
        (upper - lower)
    if integer and math.ceil(upper + pad) - math.floor(lower - pad) <= FEW_VALUES:
        lower, upper = _whole_bounds(name, finite, math.floor(lower - pad), math.ceil(upper + pad), total, bounds)
    else:
        # each doubling beyond costs TAIL of the rows, and at least two rank resolutions of a draw (so that past
        # the data, where every point scores alike, they are unlikely however small the budget)
        doubling = max(Fraction(int(total)) * TAIL, bounds.scale(2, bounds.part(Fraction(1, 2))))
        candidates, penalty = _bound_candidates(lower - pad, upper + pad, integer, doubling)
        below = _below(finite, candidates)
        draws = bounds.selection(2, bounds.epsilon, 1, f"{bounds_what} over {candidates.size} points (those "
                                 "beyond the range less likely by a public penalty)")
        chosen = sorted([draws.choose([r - p for r, p in zip(rank_scores(below, finite.size, q), penalty)])
                         for q in (TAIL, 1 - TAIL)])
        if chosen[0] == chosen[1]:  # both draws on one point: the bounds are it and its neighbour
            chosen = [chosen[0], chosen[0] + 1] if chosen[0] + 1 < candidates.size else [chosen[0] - 1, chosen[0]]
        lower, upper = float(candidates[chosen[0]]), float(candidates[chosen[1]])
    if lower < 0 < upper and placed_range[0] + LOG_BINS["float"][0] >= 0:
        lower = 0.0  # no negative values held a real share in step 1: negatives are clamped into the first bin
    # 5. The bins.
    shape = "integer" if integer and kind == "float" else kind
    if quantiles:
        declaration = _quantile_bins(name, shape, finite, lower, upper, plan.bins, parts[-1], cuts_what)
    else:
        declaration = _bins(shape, lower, upper, plan.bins)
    column = parse_schema({"columns": {name: declaration}}, "discovered domain")[name]
    if column.bins > 1:  # values beyond the bounds are clamped into the end bins: their labels are open
        column = dataclasses.replace(column, open_ends=True)
    shown = (_EPOCH + _dt.timedelta(days=min(max(int(median), _FIRST_DAY), _LAST_DAY))).isoformat() \
        if kind == "date" else _tidy(median)
    return column, {**report, "median": shown, "domain": column.describe(),
                    "tails": f"about {TAIL} of the values at each end are below or above the bounds, counted in the "
                             "first or last bin (its outer label is empty)"}


def coarse_domain(name: str, kind: str, finite: np.ndarray, plan: DiscoveryPlan, budget: PrivacyBudget,
                   report: dict):
    """The domain of a column whose first look placed nothing (too few values for the steps' shares), from one
    more log-scale histogram of the values, COARSE_GROUP doublings to a bin (Δ = 1), spending all of ``budget``:
    the bins from the largest, if a noisy count an empty bin passes with probability at most BETA/2 over all of
    them, out over the neighbours holding a real share (:func:`_extended`), cut into equal bins (one per value
    for few whole numbers).  Coarser than the quantile bounds: the range is whole bins of that histogram (from 0
    for most columns), and nothing past it is kept apart.  Returns (None, the reason) when that histogram places
    nothing either."""
    # Floats on the whole numbers' scale: a coarse range starts at a doubling of 1 or at 0, never inside (−1, 1).
    s, big = LOG_BINS["integer" if kind == "float" else kind]
    integer = kind in ("integer", "date")
    groups = big // COARSE_GROUP  # bins of COARSE_GROUP doublings each side of the centre
    k = _log_bin(finite, s, big) - big
    grouped = np.sign(k) * ((np.abs(k) + COARSE_GROUP - 1) // COARSE_GROUP) + groups
    noisy, _ = budget.laplace(np.bincount(grouped, minlength=2 * groups + 1), 1, budget.epsilon,
                              f"{name}: log-scale histogram, {COARSE_GROUP} doublings to a bin, with the rest of its "
                              "budget (too few values to place with a share)", composition="parallel over disjoint bins")
    scale = budget.scale(1, budget.epsilon)
    anchor = int(np.argmax(noisy))
    placing = tail_threshold(scale, float(BETA) / 2 / noisy.size)
    report = {**report, "method": f"coarse: the bins of {COARSE_GROUP} doublings of a log-scale histogram that hold a "
                                  "real share (too few values for DP quantiles), equal-width bins",
              "thresholds": [placing]}
    if noisy[anchor] <= placing:
        return None, {**report, "failed": f"too few records to find its range privately with epsilon "
                      f"{report['epsilon']}: its most common {2 ** COARSE_GROUP}-fold range holds a noisy "
                      f"{int(noisy[anchor])} values, where noise alone reaches {placing}; declare its bounds in a "
                      "schema"}
    step = _extension_step(noisy[anchor], scale)
    first, last = _extended(noisy, anchor, anchor, 0, noisy.size - 1, _thresholds(step, scale, noisy.size, gaps=False))

    def doublings(g: int) -> tuple[int, int]:  # the first-look bins (innermost, outermost) of group g
        inner, outer = (abs(g - groups) - 1) * COARSE_GROUP + 1, abs(g - groups) * COARSE_GROUP
        return (big + inner, big + outer) if g > groups else (big - inner, big - outer)
    lower = 0.0 if first == groups else _log_edges(doublings(first)[1 if first < groups else 0], s, big, integer)[0]
    upper = _log_edges(big, s, big, integer)[1] if last == groups else \
        _log_edges(doublings(last)[0 if last < groups else 1], s, big, integer)[1]
    column = parse_schema({"columns": {name: _bins(kind, lower, upper, plan.bins)}}, "discovered domain")[name]
    if column.bins > 1:
        column = dataclasses.replace(column, open_ends=True)
    return column, {**report, "domain": column.describe(),
                    "tails": "values beyond the doublings that hold a real share of the rows are counted in the "
                             "first or last bin (its outer label is empty)"}


def _whole_bounds(name: str, values: np.ndarray, low: int, high: int, total: int,
                  budget: PrivacyBudget) -> tuple[int, int]:
    """Bounds [lower, upper) of a column of whole numbers that lie, by the steps before, among the few values
    ``low .. high − 1``: one noisy count of each (values counted by their whole part; each record is in at most
    one count, sensitivity 1), spending all of ``budget``.  The bounds hold the value with the largest count
    and reach out from it (:func:`_extended`) to the values holding a real share of the ``total`` (noisy) rows,
    across at most GAP values, or further where a count passes what absent values pass with probability at most
    BETA/2 over all of them; values beyond are cut (clamped into an end bin)."""
    size = high - low
    inside = values[(values >= low) & (values < high)]
    counts = np.bincount((np.floor(inside) - low).astype(np.int64), minlength=size)
    noisy, _ = budget.laplace(counts, 1, budget.epsilon, f"{name}: a count of each whole value from {low} to "
                              f"{high - 1}, for the bounds", composition="parallel over disjoint values")
    scale = budget.scale(1, budget.epsilon)
    anchor = int(np.argmax(noisy))
    step = _extension_step(total, scale)
    first, last = _extended(noisy, anchor, anchor, 0, size - 1, _thresholds(step, scale, size))
    return low + first, low + last + 1


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2 ** 53 else float(value)


def _quantile_bins(name: str, kind: str, values: np.ndarray, lower: float, upper: float, bins: int,
                   budget: PrivacyBudget, what: str) -> dict:
    """Bins over [lower, upper) cut at the j/bins quantiles (j = 1..bins−1), each cut one permute-and-flip draw
    (``budget`` shared equally) among QUANTILE_CANDIDATES public points inside the bounds (whole numbers for
    integer columns).  Values are clamped into the bounds first; cut j's score is :func:`rank_scores` at
    q = j/bins (sensitivity 1).  Cuts that coincide are merged, so there may be fewer bins."""
    if kind == "float":  # readable bounds, as for equal widths
        lower = 0.0 if -LOG_BINS["float"][0] <= lower < 0 else lower
        lower, upper = _rounded_outward(lower, upper)
    candidates = np.linspace(lower, upper, QUANTILE_CANDIDATES + 2)[1:-1]
    if kind == "integer":
        candidates = np.unique(np.round(candidates))
        candidates = candidates[(candidates > lower) & (candidates < upper)]
    else:
        candidates = np.unique(np.array([_round_to(c, (upper - lower) / 1000) for c in candidates]))
    draws = budget.selection(bins - 1, budget.epsilon, 1, f"{what} over {candidates.size} points",
                             composition="sequential over the cuts")
    cuts = set()
    if candidates.size:
        below = _below(np.clip(values, lower, upper), candidates)
        for j in range(1, bins):
            cuts.add(float(candidates[draws.choose(rank_scores(below, values.size, Fraction(j, bins)))]))
    edges = [lower, *sorted(cuts), upper]
    if kind == "integer":
        edges = [int(e) for e in edges]
    return {"type": "numeric", "edges": edges, "nulls": "category"}


def _round_to(value: float, step: float) -> float:
    """``value`` rounded to a power of ten at most ``step`` (readable cut points)."""
    unit = 10.0 ** math.floor(math.log10(step)) if step > 0 else 1.0
    return round(round(value / unit) * unit, 12)


def _bins(kind: str, lower: float, upper: float, bins: int) -> dict:
    if kind == "date":
        # Bounds past the calendar's range (years 1 to 9999: far-off sentinels, timestamps out of range) are
        # cut to it; the values beyond are clamped into the first or last bin like any value out of range.
        low = min(max(int(lower), _FIRST_DAY), _LAST_DAY - 1)
        first = _EPOCH + _dt.timedelta(days=low)
        last = _EPOCH + _dt.timedelta(days=min(max(int(upper), low + 1), _LAST_DAY))  # exclusive
        span = (last - first).days
        unit = "day" if span <= 92 else "month" if span <= 6 * 366 else "year"
        if unit == "month":
            first = first.replace(day=1)
            if last.day != 1:
                last = _next_start(last, 1)
        elif unit == "year":
            first = _dt.date(first.year, 1, 1)
            if (last.month, last.day) != (1, 1):
                last = _next_start(last, 12)
        return {"type": "date", "lower": first.isoformat(), "upper": last.isoformat(), "unit": unit,
                "nulls": "category"}
    if kind == "integer":
        if upper - lower <= max(bins, ONE_PER_VALUE):
            return {"type": "numeric", "lower": int(lower), "upper": int(upper), "width": 1, "nulls": "category"}
        rounded = round_bins(lower, upper, bins, whole=True)
        if rounded is None:  # equal whole widths from the lower bound
            width = math.ceil((upper - lower) / bins)
            return {"type": "numeric", "lower": int(lower), "upper": int(lower) + width * bins, "width": width,
                    "nulls": "category"}
        width, start, end = int(rounded[0]), rounded[1], rounded[2]  # 1, 2 or 5 times a power of ten, at least 1
        return {"type": "numeric", "lower": start * width, "upper": end * width, "width": width, "nulls": "category"}
    if -LOG_BINS["float"][0] <= lower < 0:
        lower = 0.0  # the centre bin (−s, s) found: start at 0 rather than at −s (tiny negatives are clamped)
    rounded = round_bins(lower, upper, bins)
    if rounded is None:  # equal bins over bounds rounded outward
        lower, upper = _rounded_outward(lower, upper)
        return {"type": "numeric", "lower": lower, "upper": upper, "bins": bins, "nulls": "category"}
    width, start, end = rounded
    # each edge the float nearest its decimal k·width, so that labels print as decimals
    return {"type": "numeric", "lower": float(Decimal(repr(width)) * start),
            "upper": float(Decimal(repr(width)) * max(end, start + 1)), "width": width, "nulls": "category"}


def _next_start(day: _dt.date, months: int) -> _dt.date:
    """The first day of the month (``months`` = 1) or year (12) after ``day``'s, or the calendar's last day."""
    index = day.year * 12 + day.month - 1
    index = index + 1 if months == 1 else (day.year + 1) * 12
    return _dt.date(index // 12, index % 12 + 1, 1) if index // 12 <= _dt.MAXYEAR else _dt.date.max


def _rounded_outward(lower: float, upper: float) -> tuple[float, float]:
    """The bounds widened to multiples of a power of ten about 1/100 of their span (readable bin edges), each the
    float nearest its decimal value k·10^e, so it prints as that decimal (k·step in floats may not: 7 × 0.1 is
    0.7000000000000001)."""
    exponent = math.floor(math.log10(upper - lower) - 2)
    step = 10.0 ** exponent
    return float(f"{math.floor(lower / step)}e{exponent}"), float(f"{math.ceil(upper / step)}e{exponent}")
