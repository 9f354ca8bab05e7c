"""MWEM: the multiplicative weights exponential mechanism (Hardt, Ligett, McSherry; NIPS 2012), for range queries
over one column (docs/algorithms.md §7, §7.1).

The candidate queries W are public and built from the number of cells n only: the n prefix ranges [0, i)
(``queries=prefix``, the DPBench 1-D workload the reference runs MWEM on) or the 2n − 1 dyadic ranges
(``queries=dyadic``).  (Not called ``workload``: that is the release's setting, the questions the table will
answer, which the report states.)  The plan, with ε the budget (ρ under zCDP: every step below then pays its
share of ρ):

    measure:  N̂ = N + DLap(1/ε₀), ε₀ = total_share·ε                 (Δ = 1: one record moves N by 1)
    init:     x̂ = (N̂/n, …, N̂/n)  with N̂ clamped to at least 1        (the reference reads the true N here)
    rounds:   T from N̂ and ε (or the ``rounds`` option), see below
    for t = 1 … T  (ε₁ = σ·(ε − ε₀), ε₂ = (1 − σ)·(ε − ε₀), σ = selection_share, 1/2 by default):
      select:  q_t ∈ W \\ {q_1 … q_{t−1}} by permute-and-flip on the score s(q) = |q(x) − round(q(x̂))|
               at ε₁/T per draw                                         (Δ = 1, see below)
      measure: m_t = q_t(x) + DLap(T/ε₂)  (under zCDP: a discrete Gaussian, σ² = T/(2ρ₂))    (Δ₁ = Δ₂ = 1)
      infer:   `replay` passes over the measurements so far, each applying the multiplicative-weights update
               x̂ ← x̂ · exp(q_j · (m_j − q_j(x̂)) / (2N̂)) followed by x̂ ← x̂ · N̂ / Σx̂ (post-processing)
    rescale (``scale_fit=lsq``, the default; post-processing):  with f = x̂ / Σx̂ the fitted shape and v₀, v_j
             the noise variances of N̂ and m_j (public: they follow from the scales),
             s = (N̂/v₀ + Σ_j q_j(f)·m_j/v_j) / (1/v₀ + Σ_j q_j(f)²/v_j),   x̂ ← max(s, 1) · f
    release:  x̂

The rescale is the weighted least-squares scale of the fitted shape given every noisy answer that bears on the
total: N̂ ≈ s and m_j ≈ s·q_j(f).  The multiplicative weights hold the total at N̂, so without it the released
total's error is the noisy total's (E|DLap(1/ε₀)| = 40 records at ε = 0.1), and on data sets whose mass sits at
the left of the domain almost every prefix's error is that error; a selected near-full prefix (q_j(f) ≈ 1) is a
second measurement of the total.  Measured (DPBench 1-D, 18 data sets, ε = 0.1, 4 samples × 4 runs, seed 7): the
geometric mean of ours ÷ the reference MWEM went from 1.235 to 1.148 at scale 1e3 and 1.005 to 1.003 at 1e5.
Tried and not kept (same measurement): total_share 1/3 (1e3: 1.209, 1e5: 1.073) or 1/6, the selection's share
1/3 or 2/3, and refitting the scale after every round (1.159, 1.006).

T (``rounds``): a whole number from the options, or ``auto``: read off the signal r = N̂·ε (ε per record: the
budget's ε divided by the protected unit's rows) by the reference's MWEM* table (dpcomp_core's
mwemND_adaptive_engine, 1-D: r = 1e3, 1e4, 1e5, 1e6, 1e7 → T = 8, 12, 60, 80, 140, linear in between), except
T = 2 up to r = 100 where the reference has 2 to 4: measured on 8 DPBench data sets at scale 1000, ε = 0.1 (8
runs each), T = 2 gave 1.23× the reference MWEM's prefix error (geometric mean), T = 4 1.55×, T = 10 (the
plain reference's default) 2.9×, the noisy total costing more at low signal than the reference's true N.
T is capped at |W|.  N̂ is already released, so the rule is post-processing; the selection's whole share is
paid whatever T is.  ``replay`` (100 by default, as the reference) is the number of passes over the past
measurements after each round.

Privacy.  Every query in W has 0/1 coefficients, so adding or removing one record moves q(x) by at most 1:
the measurements have Δ₁ = Δ₂ = 1.  In round t, x̂ is a function of N̂ and of (q_j, m_j) for j < t only, all
already released, so round(q(x̂)) is a public constant c_q and the score |q(x) − c_q| moves by at most
|q(x) − q(x′)| <= 1 (the reverse triangle inequality): the selection has score sensitivity 1, and the scores
are exact integers (the rounding is what keeps them exact: no float rounding can inflate the sensitivity).
The candidate set shrinks only by what was selected before (public).  By sequential composition the run costs
ε₀ + T·(ε₁/T) + T·(ε₂/T) = ε₀ + (ε − ε₀) = ε (pure); under zCDP each step is charged its share of ρ and the
shares add up to ρ.  Everything after the measurements (updates, replay, the rescale, release) is
post-processing: the rescale reads only N̂, the m_j, the public ranges, the public noise variances and the
estimate built from them.  The selection pays from the budget because the score reads the true counts.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Ceiling, Estimate, Step

__all__ = ["MWEM", "candidate_ranges", "candidate_count"]

# T by the signal N̂·ε (module docstring): the reference's MWEM* 1-D table with T = 2 up to 100.
ROUNDS_SIGNAL = (0.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7)
ROUNDS_TABLE = (2, 2, 8, 12, 60, 80, 140)
MAX_STEP = 20.0  # largest |exponent| of one multiplicative-weights step
#: The cost of a run, in nanoseconds of one core: the updates dominate, replay × T(T + 1)/2 steps (round t
#: replays the t measurements so far), each about 20 µs of Python plus about 1 ns per cell of the range it scales
#: (measured on 2 cores: 17-19 µs a step at 256-4096 cells, 50-70 µs at 65,536).  The defaults at their most
#: (T = 140, replay 100) are about 2.4·10^10 at 4096 cells; the ceiling is a minute.
#: Why a release of MWEM has no per-cell intervals (the report and the plot say it).
NO_INTERVAL = ("MWEM's estimate is a multiplicative-weights fit, non-linear in its noisy answers and pulled "
               "towards the few ranges it measured, so no noise variance per cell describes its error")
STEP_NS = 20_000
WORK = Ceiling(("rounds", "replay"), "ns of work",
               f"replay × T(T + 1)/2 update steps × ({STEP_NS:,} + cells) ns, T = rounds (with rounds=auto up to "
               f"{max(ROUNDS_TABLE)})", 60 * 10**9, "about a minute of one core")


def candidate_ranges(n: int, queries: str) -> tuple[np.ndarray, np.ndarray]:
    """The public candidate queries over ``n`` cells as half-open ranges [lo, hi) (two int64 arrays):
    ``prefix``: [0, i) for i = 1 … n (n ranges); ``dyadic``: the nodes of a binary tree over the cells, from the
    single cells up to the whole domain (cells first, left to right; 2n − 1 ranges when n is a power of two).
    Depends on n and the name only."""
    if queries == "prefix":
        hi = np.arange(1, n + 1, dtype=np.int64)
        return np.zeros(n, dtype=np.int64), hi
    lo_parts, hi_parts, width = [], [], 1
    while True:
        starts = np.arange(0, n, width, dtype=np.int64)
        lo_parts.append(starts)
        hi_parts.append(np.minimum(starts + width, n))
        if width >= n:
            break
        width *= 2
    return np.concatenate(lo_parts), np.concatenate(hi_parts)


def candidate_count(n: int, queries: str) -> int:
    """How many ranges :func:`candidate_ranges` gives for ``n`` cells, without making them."""
    if queries == "prefix":
        return n
    count, width = 0, 1
    while True:
        count += -(-n // width)
        if width >= n:
            return count
        width *= 2


def _rounds(value):
    return "auto" if value in (None, "auto") else option.positive_int(value)


class MWEM(Algorithm):
    data_adaptive = True  # each round's query is selected from the estimate built on earlier noisy answers
    name = "mwem"
    summary = ("multiplicative weights over range queries chosen by the exponential mechanism (Hardt, Ligett, "
               "McSherry 2012); one column, low signal")
    options = {"rounds": ("auto", _rounds), "queries": ("prefix", option.choice("prefix", "dyadic")),
               "replay": (100, option.positive_int),
               "total_share": (Fraction(1, 4), option.fraction_between_0_and_1),
               "selection_share": (Fraction(1, 2), option.fraction_between_0_and_1),
               "scale_fit": ("lsq", option.choice("lsq", "none"))}
    option_help = {"rounds": "number of rounds T, or auto: from the noisy total times epsilon (2 at low signal, "
                             "up to 140)",
                   "queries": "candidate range queries: prefix (the n prefixes) or dyadic (a binary tree's nodes)",
                   "replay": "passes over all past measurements after each round (multiplicative weights)",
                   "total_share": "share of the budget for the noisy total (the rest: selection and measurement)",
                   "selection_share": "share of the rest (after the total) for the rounds' selections; the "
                                      "remainder measures the selected ranges",
                   "scale_fit": "lsq: rescale the released estimate by the weighted least-squares total from the "
                                "noisy total and the measured ranges; none: keep the noisy total"}

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 1:
            raise UsageError("algorithm 'mwem' works on one-column tables")
        candidates = candidate_count(shape[0], self.params["queries"])
        rounds = self.params["rounds"]
        if rounds != "auto" and rounds > candidates:
            raise UsageError(f"algorithm 'mwem': option 'rounds' must be at most the number of candidate queries "
                             f"({candidates} for {shape[0]} cells with queries={self.params['queries']})")

    ceilings = (WORK,)

    def work(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The most work a run may take (:data:`WORK`): T at its largest, every update over the whole table."""
        cells = math.prod(shape)
        candidates = candidate_count(cells, self.params["queries"])
        rounds = self.params["rounds"]
        T = min(max(ROUNDS_TABLE) if rounds == "auto" else rounds, candidates)
        return (self.params["replay"] * T * (T + 1) // 2 * (STEP_NS + cells),)

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """The total, then T selections and T measurements of the rest, at T's largest (as :meth:`work`)."""
        total, selection = self.params["total_share"], self.params["selection_share"]
        rounds = self.params["rounds"]
        T = min(max(ROUNDS_TABLE) if rounds == "auto" else rounds,
                candidate_count(math.prod(shape), self.params["queries"]))
        return [Step("the grand total", "measure", total),
                Step("the range query of each round", "selection", (1 - total) * selection, count=T),
                Step("each round's selected range", "measure", (1 - total) * (1 - selection) / T)]

    def plan(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The public candidate ranges (lo, hi), from n and the options only."""
        return candidate_ranges(n, self.params["queries"])

    def rounds_for(self, candidates: int, noisy_total: float, epsilon: Fraction) -> int:
        """T: the ``rounds`` option, or by the table on the signal r = max(N̂, 0)·ε (ε per record); at most the
        number of candidates.  Reads only the released noisy total."""
        rounds = self.params["rounds"]
        if rounds == "auto":
            signal = max(float(noisy_total), 0.0) * float(epsilon)
            rounds = int(np.interp(signal, ROUNDS_SIGNAL, ROUNDS_TABLE))
        return min(rounds, candidates)

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        n = counts.shape[0]
        lo, hi = self.plan(n)
        share = self.params["total_share"]
        for_total, rest = budget.split([share, 1 - share])
        sel = self.params["selection_share"]
        for_selection, for_measures = rest.split([sel, 1 - sel])

        # measure: the grand total, which sets the scale of the estimate (the reference reads the true N)
        noisy_total, total_record = for_total.measure(np.asarray(counts.sum()), 1, 1, for_total.amount,
                                           "the grand total (the estimate's scale)")
        total = max(float(noisy_total), 1.0)
        estimate = np.full(n, total / n)
        T = self.rounds_for(lo.size, float(noisy_total), budget.epsilon_per_record(budget.amount))

        true_prefix = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        draws = for_selection.selection(
            T, for_selection.amount, 1,
            "the range query of each round: permute-and-flip on |q(x) - round(q(estimate))| (sensitivity 1)")
        per_round = for_measures.part(Fraction(1, T))
        alive = np.ones(lo.size, dtype=bool)
        history: list[tuple[int, int, float]] = []
        variances: list[float] = []
        for t in range(T):
            # select: the worst-approximated remaining query (the score reads the true counts: paid)
            left = np.flatnonzero(alive)
            chosen = int(left[self.pick(self.scores(true_prefix, estimate, lo[left], hi[left]), draws.choose)])
            alive[chosen] = False
            a, b = int(lo[chosen]), int(hi[chosen])
            # measure: its answer (0/1 coefficients: sensitivity 1); the range is public, so the record names it
            noisy, record = for_measures.measure(np.asarray(true_prefix[b] - true_prefix[a]), 1, 1, per_round,
                                                 f"round {t + 1}: the selected range [{a}, {b})")
            history.append((a, b, float(noisy)))
            variances.append(record.noise_variance)
            # infer: multiplicative weights over every measurement so far (post-processing)
            estimate = self.update(estimate, history, total)

        if self.params["scale_fit"] == "lsq":
            estimate = self.refit_scale(estimate, history, variances, float(noisy_total),
                                        total_record.noise_variance)
        return Estimate(values=estimate,
                        structure={"queries": self.params["queries"], "candidates": int(lo.size),
                                   "replay": self.params["replay"]},
                        choices={"rounds": T, "ranges": [[a, b] for a, b, _ in history]},
                        no_interval=NO_INTERVAL)

    @staticmethod
    def refit_scale(estimate, history, variances, noisy_total, total_variance):
        """The estimate's shape f = x̂/Σx̂ times the weighted least-squares scale s from every noisy answer that
        bears on it: N̂ ≈ s (variance v₀) and m_j ≈ s·q_j(f) (variance v_j), so
        s = (N̂/v₀ + Σ q_j(f)·m_j/v_j) / (1/v₀ + Σ q_j(f)²/v_j), clamped to at least 1.  Post-processing.
        A variance that is 0 in float64 (ε in the hundreds: the noise is below the float's range) makes its
        answer exact: then s is fitted from the exact answers alone."""
        mass = float(estimate.sum())
        shape = estimate / mass
        prefix = np.concatenate([[0.0], np.cumsum(shape)])
        answers = [(1.0, noisy_total, total_variance)]
        answers += [(prefix[b] - prefix[a], m, v) for (a, b, m), v in zip(history, variances)]
        exact = [(q, m) for q, m, v in answers if v == 0 and q != 0]
        if exact:
            num, den = sum(q * m for q, m in exact), sum(q * q for q, _ in exact)
        else:  # every v > 0 (a 0 with q = 0 says nothing of s), and the total's q is 1: den > 0
            noisy = [(q, m, v) for q, m, v in answers if v > 0]
            num, den = sum(q * m / v for q, m, v in noisy), sum(q * q / v for q, _, v in noisy)
        return shape * max(num / den, 1.0)

    @staticmethod
    def scores(true_prefix: np.ndarray, estimate: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """s(q) = |q(x) − round(q(x̂))| for the ranges [lo, hi) (int64, one per candidate) from the true prefix
        sums (length n + 1) and the current estimate x̂.  Sensitivity 1 under one record (module docstring)."""
        est_prefix = np.concatenate([[0.0], np.cumsum(estimate)])
        public = np.rint(est_prefix[hi] - est_prefix[lo]).astype(np.int64)
        return np.abs(true_prefix[hi] - true_prefix[lo] - public)

    @staticmethod
    def pick(scores: np.ndarray, choose) -> int:
        """The index of the selected candidate: one paid permute-and-flip draw on ``scores``."""
        return choose(scores)

    def update(self, estimate: np.ndarray, history: list[tuple[int, int, float]], total: float) -> np.ndarray:
        """``replay`` passes of the multiplicative-weights update over the measured ranges (a, b, m) in order:
        x̂[a:b] *= exp((m − x̂[a:b].sum()) / (2·total)), then x̂ rescaled to sum to ``total``.  Free
        post-processing of the noisy answers; the returned estimate sums to ``total``."""
        # x̂ = scale · w: a step touches only w[a:b] and the scalar, so it costs O(b − a), not O(n).
        w = estimate.astype(np.float64, copy=True)
        scale, mass = 1.0, float(w.sum())
        for _ in range(self.params["replay"]):
            for a, b, m in history:
                inside = float(w[a:b].sum())
                # clipped so that a wild noisy answer on a tiny total cannot overflow (post-processing)
                factor = np.exp(np.clip((m - scale * inside) / (2.0 * total), -MAX_STEP, MAX_STEP))
                w[a:b] *= factor
                mass += (factor - 1.0) * inside
                scale = total / mass
            w *= total / float(w.sum())  # renormalised each pass: w neither drifts nor overflows
            scale, mass = 1.0, total
        return w
