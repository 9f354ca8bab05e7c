"""EFPA, the enhanced Fourier perturbation algorithm (Ács, Castelluccia, Chen, ICDM 2012), 1-D.

The histogram x (n cells) is described by its discrete Fourier coefficients F_j = Σ_t x_t e^(−2πi jt/n); x is
real, so F_0 … F_⌊n/2⌋ determine the rest.  Keeping the m lowest frequencies (F_0, the real and imaginary parts
of F_1 … F_(m−1), and F_(n/2) when m = ⌊n/2⌋ + 1 and n is even) is a lossy compression of a smooth histogram.

    exact queries: every coefficient's real and imaginary part, with its weights cos(2πjt/n) and sin(2πjt/n)
             rounded to the grid 2^-b: the integer rows C_j[t] = rint(2^b cos(2πjt/n)), S_j[t] = rint(2^b
             sin(2πjt/n)), the total 2^b·Σx and the Nyquist row 2^b(−1)^t.  Rounding the *weights* is a public
             change of the queries (a fixed integer matrix W), so the answers W·x are integers, computed exactly
             in int64, and the kernel's exact discrete Laplace applies; b is a public function of n, ε₂ and the
             unit (at most 24, so the largest noise scale stays below the sampler's 2^40).
    select:  m ∈ {1, …, ⌊n/2⌋ + 1} by permute-and-flip with ε₁ = share·ε on the score
                 q(m) = −(⌊√E(m)⌋ + N(m)),   E(m) = Σ_{dropped rows r} c_r (W_r·x)²,
             c_r = 2 for a cos/sin row (F_j and its conjugate F_(n−j) are both dropped), 1 for the Nyquist row.
             √E(m)/(2^b √n) is the L2 truncation error ‖x − x_m‖₂ of dropping the rest (Parseval, up to the
             rounding of the weights); N(m) = √(Σ_{kept r} c_r · 2λ_m²), λ_m = Δ₁(m)/ε₂, is, in the same units,
             the expected L2 norm of the noise that keeping m frequencies adds: the paper's (and dpcomp's)
             trade-off "truncation error + noise error", both in cell units times 2^b √n.
    measure: the 2m − 1 (or n) kept rows W_m·x + DLap(Δ₁(m)/ε₂), ε₂ = ε − ε₁, one measurement
    infer:   F̂_j = (y_cos,j − i·y_sin,j)/2^b, the dropped coefficients 0, x̂ = the inverse real DFT (the
             least-squares estimate from the kept coefficients of the exact transform)

Privacy (add/remove of one record in cell t; the budget multiplies every Δ by the unit's factor).

* Measurement: the kept rows move by the column W_m[:, t], so Δ₁(m) = max_t Σ_{kept r} |W[r, t]|, an exact
  integer computed from the rounded rows themselves (≈ 2^b(1 + (4/π)(m − 1)); at most 2^b(1 + √2(m − 1)) plus
  rounding, since |cos| + |sin| ≤ √2).  Discrete Laplace of scale Δ₁(m)/ε₂ on integer answers is ε₂-DP.  m is
  the output of the previous step, so the measurement is chosen by a DP output: sequential composition.
* Selection: g_m(x) = √E(m) = ‖D W_dropped x‖₂ with D = diag(√c_r), a norm of a linear map, so
  |g_m(x) − g_m(x')| ≤ ‖D W_dropped e_t‖₂ ≤ √V, V = max_t Σ_{r ≠ total} c_r W[r, t]² (an exact integer, ≈ 4^b (n − 1):
  one record moves the L2 truncation error by at most 1 cell unit).  The floor changes an integer by at most
  ⌈|g_m(x) − g_m(x')|⌉ ≤ ⌈√V⌉, N(m) is public, so the integer scores have sensitivity Δ_q = ⌈√V⌉, exact.
  Permute-and-flip with Δ_q is ε₁-DP.
* Composition: ε₁ + ε₂ = ε.  The true total is never read (the total is a kept row, measured like the others).
  Under zCDP the kernel converts both steps (each ε-DP step costs ε²/2).

No interval.  Given m, x̂ is linear in the noisy rows and every cell's noise variance is the same, v·2^-2b·(1 + 4p + ν)/n²
(v the rows' noise variance, p the pairs kept, ν = 1 with the Nyquist row); but x̂ estimates x_m, the histogram's
m lowest frequencies, not x.  m is chosen to balance the truncation error ‖x − x_m‖ against the noise, so the two
are of one size, and an interval from the noise covers x_m and not the counts (measured on 8 DPBench data sets at
1,024 cells, ε 0.1 and 1, 1,000 and 100,000 records, 10 runs each: 16 to 95 % of the cells' counts inside a
normal 95 % interval, 95 % only where m kept every frequency).  The Estimate says so (``no_interval``).

Differences from dpcomp's code (read for facts only): it splits ε in halves (kept here as the default) and uses
the same score, but on the unnormalised transform with the sensitivities of the orthonormal one.  Its score
sensitivity is 1 where one record moves √E by up to √n (the dropped coefficients each move by a unit-modulus
amount), so its selection is close to an argmax; and it adds Laplace noise of scale √k/ε₂ to the magnitude of each
of the ~k/2 kept complex coefficients, publishing their true phases, where one record moves those magnitudes by
up to k/2 in all.  Here the noise is on the real and imaginary parts, with the sensitivities derived above.
"""

from __future__ import annotations

from fractions import Fraction
import math
from functools import lru_cache

import numpy as np

from ..errors import UsageError
from ..privacy import PrivacyBudget
from . import options as option
from .base import Algorithm, Estimate, Step

__all__ = ["EFPA", "RoundedDFT", "MAX_CELLS"]

MAX_CELLS = 1 << 14  # the score reads every rounded coefficient exactly: O(n²) integer work (0.3 s at 4,096, 5 s here)
MAX_BITS = 24  # weight grid 2^-24: the rounding moves a coefficient by at most N·2^-25
MIN_BITS = 8
_CHUNK = 256  # frequencies per block of rows (256 × n int64)
#: Why a release of EFPA has no per-cell intervals (module docstring, "No interval"; the report and the plot say it).
NO_INTERVAL = ("EFPA keeps only the lowest Fourier frequencies, so each cell is off by the dropped ones about as "
               "much as by the noise, and an interval from the noise alone would not cover the cell's count")


class RoundedDFT:
    """The real DFT of an ``n``-cell histogram with its weights rounded to the grid 2^-``bits``: an integer matrix.

    Rows, in order: the total (weight 2^b), then for j = 1 … p (p = ⌈n/2⌉ − 1) the pair C_j, S_j, then the
    Nyquist row 2^b(−1)^t when n is even.  Keeping m frequencies (m = 1 … M, M = ⌊n/2⌋ + 1) keeps the total,
    the first m − 1 pairs, and the Nyquist row when m = M and n is even.
    """

    def __init__(self, n: int, bits: int):
        self.n, self.bits = n, bits
        self.pairs = (n - 1) // 2
        self.nyquist = n % 2 == 0
        self.candidates = n // 2 + 1
        angle = 2 * np.pi * np.arange(n) / n  # the weight of (j, t) is the table entry at u = jt mod n
        self.cos_table = np.rint(np.ldexp(np.cos(angle), bits)).astype(np.int64)
        self.sin_table = np.rint(np.ldexp(np.sin(angle), bits)).astype(np.int64)

    def rows(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(C, S) for frequencies j = first … stop − 1: two int64 arrays of shape (stop − first, n)."""
        u = np.outer(np.arange(first, stop, dtype=np.int64), np.arange(self.n, dtype=np.int64)) % self.n
        return self.cos_table[u], self.sin_table[u]

    def matrix(self, m: int) -> np.ndarray:
        """The kept rows for m frequencies, in measurement order (total, C_1..C_(m−1), S_1..S_(m−1), Nyquist)."""
        one = np.full((1, self.n), 1 << self.bits, dtype=np.int64)
        pairs = min(m - 1, self.pairs)
        c, s = self.rows(1, pairs + 1)
        parts = [one, c, s]
        if self.nyquist and m == self.candidates:
            parts.append(one * np.where(np.arange(self.n) % 2 == 0, 1, -1))
        return np.concatenate(parts, axis=0)

    def kept(self, m: int) -> tuple[int, bool]:
        """(number of cos/sin pairs kept, whether the Nyquist row is kept) for m frequencies."""
        return min(m - 1, self.pairs), bool(self.nyquist and m == self.candidates)

    def analyse(self, x: np.ndarray) -> dict:
        """Everything exact the plan needs (O(n²) integer work, in blocks):

        ``cos``, ``sin``: the answers C_j·x, S_j·x (int64, j = 1 … p); ``total``, ``nyquist``: 2^b Σx and the
        Nyquist answer; ``l1``: Δ₁(m) for m = 1 … M (Python ints); ``v``: max_t Σ_{r ≠ total} c_r W[r, t]².
        ``l1`` and ``v`` depend on n and b only (:func:`_public_bounds`, cached)."""
        one = 1 << self.bits
        x = np.asarray(x, dtype=np.int64)
        cos_ans = np.zeros(self.pairs, dtype=np.int64)
        sin_ans = np.zeros(self.pairs, dtype=np.int64)
        # Only the occupied cells add to W·x, so the rows are read at those columns alone: the same integers in
        # O(p·nnz) instead of O(p·n) (low-signal tables, EFPA's use, occupy a few per cent of their cells).
        occupied = np.flatnonzero(x)
        values = x[occupied]
        for first in range(1, self.pairs + 1, _CHUNK):
            stop = min(first + _CHUNK, self.pairs + 1)
            u = np.outer(np.arange(first, stop, dtype=np.int64), occupied) % self.n
            cos_ans[first - 1:stop - 1] = self.cos_table[u] @ values
            sin_ans[first - 1:stop - 1] = self.sin_table[u] @ values
        l1, v = _public_bounds(self.n, self.bits)
        total = one * int(x.sum())
        nyquist = one * int(x[0::2].sum() - x[1::2].sum()) if self.nyquist else 0
        return {"cos": cos_ans, "sin": sin_ans, "total": total, "nyquist": nyquist, "l1": list(l1), "v": v}

    def bounds(self) -> tuple[tuple[int, ...], int]:
        """(Δ₁(m) for m = 1 … M, V): the sensitivities of the kept rows and of the scores, exact integers."""
        n, one = self.n, 1 << self.bits
        pair_l1 = [0]  # max_t Σ_{j ≤ p} (|C_j[t]| + |S_j[t]|) for p = 0 … pairs
        carry = np.zeros(n, dtype=np.int64)
        squares = np.zeros(n, dtype=object)
        for first in range(1, self.pairs + 1, _CHUNK):
            stop = min(first + _CHUNK, self.pairs + 1)
            c, s = self.rows(first, stop)
            running = carry + np.cumsum(np.abs(c) + np.abs(s), axis=0)
            pair_l1.extend(int(v) for v in running.max(axis=1))
            carry = running[-1]
            squares = squares + 2 * (c * c + s * s).sum(axis=0).astype(object)  # ≤ 2^57 per block: exact
        l1 = [one + pair_l1[min(m - 1, self.pairs)] for m in range(1, self.candidates + 1)]
        if self.nyquist:
            l1[-1] += one
            squares = squares + one * one
        v = int(max(squares.tolist())) if n > 1 else 0
        return tuple(l1), v


    def dropped_energy(self, cos_ans: np.ndarray, sin_ans: np.ndarray, nyquist: int) -> list[int]:
        """E(m) for m = 1 … M: Σ over the dropped rows of c_r (W_r·x)², exact Python integers."""
        pair = [2 * (int(a) * int(a) + int(b) * int(b)) for a, b in zip(cos_ans.tolist(), sin_ans.tolist())]
        nyq = nyquist * nyquist if self.nyquist else 0
        energy, tail = [nyq], 0  # m = p + 1: every pair kept, the Nyquist row (if any) dropped
        for j in range(self.pairs, 0, -1):  # m = j drops pairs j … p and the Nyquist row
            tail += pair[j - 1]
            energy.append(tail + nyq)
        energy.reverse()  # energy[m − 1] = E(m) for m = 1 … p + 1
        if self.nyquist:
            energy.append(0)  # m = M: nothing dropped
        return energy

    def inverse(self, total, cos_ans, sin_ans, nyquist, m: int) -> np.ndarray:
        """x̂ from the (noisy) kept answers, the dropped coefficients 0: float array, leading axes carried."""
        pairs, with_nyquist = self.kept(m)
        scale = math.ldexp(1.0, -self.bits)
        lead = np.shape(total)
        spectrum = np.zeros(lead + (self.candidates,), dtype=np.complex128)
        spectrum[..., 0] = np.asarray(total, dtype=np.float64) * scale
        if pairs:
            spectrum[..., 1:pairs + 1] = (np.asarray(cos_ans, dtype=np.float64)
                                          - 1j * np.asarray(sin_ans, dtype=np.float64)) * scale
        if with_nyquist:
            spectrum[..., -1] = np.asarray(nyquist, dtype=np.float64) * scale
        return np.fft.irfft(spectrum, self.n, axis=-1)


@lru_cache(maxsize=16)
def _public_bounds(n: int, bits: int) -> tuple[tuple[int, ...], int]:
    """:meth:`RoundedDFT.bounds` for (n, b), computed once per process: public numbers, reused across releases."""
    return RoundedDFT(n, bits).bounds()


def weight_bits(n: int, measure: PrivacyBudget) -> int:
    """The public weight grid 2^-b: the largest b ≤ 24 with the largest candidate's noise scale below 2^39.

    Δ₁(M)/2^b ≤ 2 + 1.5·p (|cos| + |sin| ≤ √2, plus 2^(1−b) of rounding per row), so its scale is at most
    2^b·budget.scale(2 + 1.5p).  Depends on n, ε₂ and the unit only.  UsageError when b would fall below 8."""
    bound = measure.scale(Fraction(2) + Fraction(3, 2) * ((n - 1) // 2), measure.amount)
    bits = min(MAX_BITS, 39 - math.ceil(math.log2(bound)) - 1)
    if bits < MIN_BITS:
        raise UsageError(f"algorithm 'efpa': epsilon is too small for {n:,} cells (the noise on the Fourier "
                         f"coefficients would exceed the sampler's range); use fewer cells or more budget")
    return bits


class EFPA(Algorithm):
    data_adaptive = True  # the number of measured coefficients is chosen privately from the data
    name = "efpa"
    summary = ("the lowest Fourier frequencies with noise, their number chosen privately (Acs et al. 2012); one "
               "column, smooth histograms at low signal")
    options = {"select_share": (Fraction(1, 2), option.fraction_between_0_and_1)}
    option_help = {"select_share": "share of epsilon spent choosing how many frequencies to keep (paper: 1/2)"}

    def check_shape(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 1:
            raise UsageError("algorithm 'efpa' works on one-column tables")
        if shape[0] > MAX_CELLS:
            raise UsageError(f"algorithm 'efpa' works on at most {MAX_CELLS:,} cells (here {shape[0]:,})")

    def steps(self, shape: tuple[int, ...], columns=None, noise: str = "laplace") -> list[Step]:
        """One selection at ``select_share``; the coefficients' measurement is sized by :func:`weight_bits`,
        which :meth:`check_budget` runs."""
        return [Step("frequencies kept", "selection", self.params["select_share"])]

    def check_budget(self, shape: tuple[int, ...], budget: PrivacyBudget, columns=None) -> None:
        super().check_budget(shape, budget, columns)
        weight_bits(math.prod(shape), budget.probe(1 - self.params["select_share"]))

    def run(self, counts: np.ndarray, budget: PrivacyBudget, columns=None) -> Estimate:
        self.check_shape(counts.shape)
        n = counts.shape[0]
        share = self.params["select_share"]
        select, measure = budget.split([share, 1 - share])
        bits = weight_bits(n, measure)
        if int(np.abs(counts).sum()) >= 1 << (62 - bits):
            raise UsageError(f"algorithm 'efpa': the table's total is too large for its exact integer Fourier "
                             f"queries (at most 2^{62 - bits})")
        dft = RoundedDFT(n, bits)
        facts = dft.analyse(counts)

        # select: the number m of lowest frequencies kept, by permute-and-flip on −(truncation + noise)
        scores = self.scores(dft, facts, measure)
        sensitivity = self.score_sensitivity(facts)
        draw = select.selection(1, select.amount, sensitivity,
                                f"frequencies kept: one permute-and-flip draw among {dft.candidates} "
                                f"(score: L2 truncation error + expected L2 noise, sensitivity ⌈√V⌉ = "
                                f"{sensitivity} in units of 2^{bits}·√n per cell)")
        m = self.choose(draw, scores) + 1

        # measure: the kept rows, exactly integer, one discrete Laplace measurement
        pairs, with_nyquist = dft.kept(m)
        answers = np.concatenate([[facts["total"]], facts["cos"][:pairs], facts["sin"][:pairs],
                                  [facts["nyquist"]] if with_nyquist else []]).astype(np.int64)
        noisy, record = measure.laplace(
            answers, facts["l1"][m - 1], measure.amount,
            f"the {answers.size} real Fourier coefficients of the {m} lowest frequencies (weights on the grid "
            f"2^-{bits})",
            composition="one measurement of the kept coefficients; L1 sensitivity the largest column sum of the "
                        "rounded rows")

        # infer: the inverse real DFT with the dropped coefficients set to 0
        values = dft.inverse(noisy[..., 0], noisy[..., 1:1 + pairs], noisy[..., 1 + pairs:1 + 2 * pairs],
                             noisy[..., -1] if with_nyquist else 0, m)
        return Estimate(values=values,
                        structure={"transform": "real DFT, weights rounded to 2^-%d" % bits, "weight_bits": bits,
                                   "candidate_frequencies": dft.candidates,
                                   "select_epsilon_share": str(share)},
                        choices={"frequencies_kept": m, "coefficients_measured": int(answers.size)},
                        no_interval=NO_INTERVAL)

    # -- the selection, as public methods (the audit's mutants override them) ----------------------------------

    def scores(self, dft: RoundedDFT, facts: dict, measure: PrivacyBudget) -> list[int]:
        """q(m) = −(⌊√E(m)⌋ + N(m)) for m = 1 … M, integers (see the module docstring): the L2 truncation error
        plus the expected L2 noise of keeping m frequencies, both in units of 2^b √n per cell."""
        energy = dft.dropped_energy(facts["cos"], facts["sin"], facts["nyquist"])
        out = []
        for m in range(1, dft.candidates + 1):
            pairs, with_nyquist = dft.kept(m)
            weight = 1 + 4 * pairs + (1 if with_nyquist else 0)  # Σ_{kept r} c_r (c = 2 for each cos/sin row)
            scale = float(measure.scale(facts["l1"][m - 1], measure.amount))
            noise = math.ceil(math.sqrt(2.0 * weight) * scale)  # public: any rounding is fine
            out.append(-(math.isqrt(energy[m - 1]) + noise))
        return out

    @staticmethod
    def score_sensitivity(facts: dict) -> int:
        """Δ_q = ⌈√V⌉ (at least 1): the most one record moves a floored truncation norm ⌊√E(m)⌋."""
        v = facts["v"]
        return max(1, math.isqrt(v - 1) + 1) if v > 0 else 1

    def choose(self, draw, scores: list[int]) -> int:
        """The index of the chosen candidate: one paid permute-and-flip draw."""
        return draw.choose(scores)
