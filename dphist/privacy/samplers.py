"""Exact integer noise samplers and the random-bit sources they draw from.

Every sampler here is a pure function of the random words it reads from a :class:`BitSource`, so a test can
inject a seeded source and exercise exactly the production code path.  Production code uses
:class:`SystemBits`, which reads the operating system's CSPRNG (``os.urandom``).

The discrete Laplace sampler is *exact*: the output distribution is the ideal one, with no floating-point
inversion and no truncated tail (docs/privacy.md §1.3).  It rests on two facts about a geometric variable
Y on {0, 1, 2, ...} with P(Y = y) ∝ a^y, a = exp(-1/t):

* its binary digits are independent: bit j is 1 with probability a^(2^j) / (1 + a^(2^j)) = 1/(1 + exp(2^j/t));
* above bit J, Y >> J is again geometric, with ratio a^(2^J) (scale t / 2^J), and is >= 1 with probability
  exp(-2^J/t).

Each of those Bernoulli coins has an irrational probability p.  A coin compares a uniform random binary
fraction U, read 32 bits at a time, with the binary expansion of p, read 32 bits at a time; it stops at the first
32-bit word where they differ.  That decides ``U < p`` exactly, and the digits of p are computed with verified
error bounds (``decimal`` is correctly rounded), to as many words as a tie ever needs.  A tie on the first word
happens with probability 2^-32, so the vectorised path almost never leaves numpy.

The discrete Gaussian sampler (``discrete_gaussian``, CKS20 Algorithm 3) is exact for the same reasons: its
candidates are exact discrete Laplace draws of integer scale t = floor(σ) + 1 (found by an integer square root),
and each is accepted by an exact coin of probability exp(-x), x = (|Y|·t - σ²)² / (2σ²t²) a rational; x = 0 is
accepted without a coin.  The first word of each exp(-x) is cached per (σ², |Y|), so a batch compares its
uniform words with a gathered array of words; ties go on word by word.  Details above ``discrete_gaussian``.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction
from functools import lru_cache
from typing import Callable

import numpy as np

from .bits import BitSource

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "uniform_below",
    "permute_and_flip",
    "checked_scale",
    "geometric",
    "discrete_laplace",
    "discrete_laplace_variance",
    "discrete_laplace_pmf",
    "discrete_laplace_halfwidth",
    "discrete_laplace_tail_threshold",
    "checked_sigma2",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "discrete_gaussian_pmf",
    "discrete_gaussian_halfwidth",
]

_WORD = 32
_WORD_MASK = (1 << _WORD) - 1


# --------------------------------------------------------------------------------------------------------------
# Probabilities as lazily expanded binary fractions


class _Expansion:
    """The binary expansion of an irrational probability p in (0, 1), in 32-bit words, computed on demand.

    ``value(prec)`` must return a Decimal approximation of p whose relative error is at most
    ``(x + 10) * 10**(1 - prec)``, where ``x`` is the magnitude of the exponent involved (see ``_bound``).
    """

    def __init__(self, value: Callable[[int], decimal.Decimal], magnitude: Fraction):
        self._value = value
        self._magnitude = magnitude
        self._words: list[int] = []

    def word(self, k: int) -> int:
        """The k-th 32-bit word of p's binary expansion (k = 0 is the most significant)."""
        while len(self._words) <= k:
            self._extend(2 * len(self._words) + 2)
        return self._words[k]

    def _extend(self, n_words: int) -> None:
        bits = _WORD * n_words
        prec = int(bits * 0.30103) + 30
        while True:
            with decimal.localcontext() as ctx:
                ctx.prec = prec
                ctx.Emin = -999999999
                ctx.Emax = 999999999
                approx = Fraction(self._value(prec))
            # Generous, rigorous bound on the relative error of the decimal computation (see module docs).
            rel = (abs(self._magnitude) + 10) * Fraction(10) ** (1 - prec)
            lo = math.floor(approx * (1 - rel) * (1 << bits))
            hi = math.floor(approx * (1 + rel) * (1 << bits))
            if lo == hi:
                self._words = [(lo >> (_WORD * (n_words - 1 - i))) & _WORD_MASK for i in range(n_words)]
                return
            prec *= 2  # p is irrational, so enough precision always separates it from the grid


def _exp_decimal(x: Fraction) -> decimal.Decimal:
    return (decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator)).exp()


@lru_cache(maxsize=4096)
def _bit_probability(scale: Fraction, j: int) -> _Expansion:
    """P(bit j of a geometric of scale t is 1) = 1 / (1 + exp(2^j / t))."""
    x = Fraction(1 << j) / scale
    return _Expansion(lambda prec: 1 / (1 + _exp_decimal(x)), x)


@lru_cache(maxsize=4096)
def _tail_probability(scale: Fraction, j: int) -> _Expansion:
    """P(geometric of scale t >= 2^j) = exp(-2^j / t)."""
    x = Fraction(1 << j) / scale
    return _Expansion(lambda prec: 1 / _exp_decimal(x), x)


def bernoulli(p: _Expansion, n: int, bits: BitSource) -> np.ndarray:
    """n independent exact Bernoulli(p) coins as a bool array."""
    r = bits.words(n)
    first = p.word(0)
    out = r < first
    for i in np.flatnonzero(r == first):  # probability 2^-32 per coin
        k = 1
        while True:
            w, t = int(bits.words(1)[0]), p.word(k)
            if w != t:
                out[i] = w < t
                break
            k += 1
    return out


# --------------------------------------------------------------------------------------------------------------
# Samplers


_MAX_SCALE = Fraction(2**40)  # keeps every draw far inside int64


def checked_scale(scale) -> Fraction:
    s = Fraction(scale)
    if not 0 < s <= _MAX_SCALE:
        raise ValueError(f"noise scale must be positive and at most 2^40, got {s}")
    return s


def geometric(scale, n: int, bits: BitSource) -> np.ndarray:
    """n exact draws of Y on {0, 1, ...} with P(Y = y) ∝ exp(-y/scale); int64 array of shape (n,).

    ``scale`` is a positive rational (Fraction, int, or decimal string).
    """
    scale = checked_scale(scale)
    # 2^J >= 4*scale keeps the overflow (Y >= 2^J) rarer than exp(-4); any J would be exact.
    J = max(1, (math.ceil(4 * scale) - 1).bit_length())
    y = np.zeros(n, dtype=np.int64)
    if n == 0:
        return y
    for j in range(J):
        y |= bernoulli(_bit_probability(scale, j), n, bits).astype(np.int64) << j
    over = np.flatnonzero(bernoulli(_tail_probability(scale, J), n, bits))
    if over.size:
        y[over] += (1 + geometric(scale / (1 << J), over.size, bits)) << J
    return y


#: Values drawn at once by :func:`discrete_laplace` (its temporaries are a few times this many words).
NOISE_CHUNK = 1 << 20


def discrete_laplace(scale, size, bits: BitSource) -> np.ndarray:
    """Exact discrete Laplace noise: P(Z = k) = (1-a)/(1+a) * a^|k|, a = exp(-1/scale), k any integer.

    Returns an int64 array of the given shape.  Adding it to an integer query of L1 sensitivity Δ with
    scale = Δ/ε is ε-differentially private.
    """
    scale = checked_scale(scale)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    # By chunks, so that a big table's temporaries (coins, words, indices) stay a few MB; the draws are
    # independent whatever the chunking (a draw of at most NOISE_CHUNK values reads the bits as it always has).
    for start in range(0, n, NOISE_CHUNK):
        part = out[start:start + NOISE_CHUNK]
        todo = np.arange(part.size)
        while todo.size:
            m = geometric(scale, todo.size, bits)
            negative = (bits.words(todo.size) & 1).astype(bool)
            # (magnitude 0, negative sign) is rejected so that 0 is not counted twice.
            keep = ~(negative & (m == 0))
            part[todo[keep]] = np.where(negative[keep], -m[keep], m[keep])
            todo = todo[~keep]
    return out.reshape(shape)


@lru_cache(maxsize=65536)
def _exp_neg(x: Fraction) -> _Expansion:
    """exp(-x) for rational x > 0, as a lazily expanded probability."""
    return _Expansion(lambda prec: 1 / _exp_decimal(x), x)


def bernoulli_exp(x, bits: BitSource) -> bool:
    """One exact Bernoulli(exp(-x)) coin for a rational x >= 0."""
    x = Fraction(x)
    if x < 0:
        raise ValueError("x must be >= 0")
    if x == 0:
        return True
    # exp(-x) = exp(-f) · Π_j exp(-2^j) over the set bits j of floor(x): an AND of independent coins.  The
    # whole-power coins have cached expansions, and the largest fails first with probability >= 1 - e^-1, so a
    # large x costs about one cheap coin instead of a fresh high-precision exponential.
    whole = x.numerator // x.denominator
    for j in range(whole.bit_length() - 1, -1, -1):
        if whole >> j & 1 and not bernoulli(_exp_neg(Fraction(1 << j)), 1, bits)[0]:
            return False
    rest = x - whole
    return True if rest == 0 else bool(bernoulli(_exp_neg(rest), 1, bits)[0])


def uniform_below(m: int, bits: BitSource) -> int:
    """An exactly uniform integer in [0, m), by rejection on the fewest whole bits."""
    if m < 1:
        raise ValueError("m must be positive")
    k = (m - 1).bit_length()
    if k == 0:
        return 0
    words = (k + _WORD - 1) // _WORD
    while True:
        value = 0
        for w in bits.words(words):
            value = (value << _WORD) | int(w)
        value >>= words * _WORD - k
        if value < m:
            return value


def permute_and_flip(scores, epsilon, sensitivity, bits: BitSource) -> int:
    """The index of one candidate, chosen by permute-and-flip (McKenna & Sheldon 2020): ε-DP for scores whose
    sensitivity (change under add/remove of one record) is at most ``sensitivity``; higher scores are better.

    Candidates are visited in a uniformly random order; candidate r is accepted with probability
    exp(−ε (q* − q_r) / (2Δ)), q* the best score, with exact coins (scores, ε and Δ are exact rationals).  The
    best candidate is always accepted, so the loop ends.
    """
    # Python numbers compare exactly (ints, floats and Fractions alike), so the best is found without making a
    # Fraction of every score; only the candidates visited are converted.
    scores = scores.tolist() if isinstance(scores, np.ndarray) else list(scores)
    if not scores:
        raise ValueError("no candidates")
    if any(isinstance(q, float) and not math.isfinite(q) for q in scores):
        raise ValueError("scores must be finite")
    factor = Fraction(epsilon) / (2 * Fraction(sensitivity))
    best = Fraction(max(scores))
    remaining = list(range(len(scores)))
    while True:
        j = uniform_below(len(remaining), bits)
        r = remaining[j]
        remaining[j] = remaining[-1]
        remaining.pop()
        if bernoulli_exp(factor * (best - Fraction(scores[r])), bits):
            return r


# --------------------------------------------------------------------------------------------------------------
# Facts about the distribution (floats are fine here: these describe, they do not sample)


def _ratio(scale) -> float:
    return math.exp(-1.0 / float(checked_scale(scale)))


def discrete_laplace_variance(scale) -> float:
    """Var Z = 2a/(1-a)^2 with a = exp(-1/scale)."""
    a = _ratio(scale)
    return 2 * a / (1 - a) ** 2


def discrete_laplace_pmf(k, scale) -> np.ndarray:
    """P(Z = k) for integer k (array-like)."""
    a = _ratio(scale)
    k = np.abs(np.asarray(k, dtype=float))
    return (1 - a) / (1 + a) * a**k


def discrete_laplace_halfwidth(scale, level: float = 0.95) -> int:
    """The smallest integer q with P(|Z| <= q) >= level.

    P(|Z| > q) = 2 a^(q+1) / (1 + a), so [y - q, y + q] covers the true count with probability >= level.
    """
    a = _ratio(scale)
    beta = 1 - level
    if 2 * a / (1 + a) <= beta:  # includes a == 0 (tiny scales): the noise is 0 with probability >= level
        return 0
    q = max(0, math.ceil(math.log(beta * (1 + a) / 2) / math.log(a)) - 1)
    while q > 0 and 2 * a**q / (1 + a) <= beta:  # guard the float log against off-by-one
        q -= 1
    while 2 * a ** (q + 1) / (1 + a) > beta:
        q += 1
    return q


def discrete_laplace_tail(scale, t: int) -> float:
    """P(Z > t) for Z ~ discrete Laplace(scale) and a whole t >= 0: a^(t+1)/(1+a), a = exp(-1/scale); by
    symmetry also P(Z < -t)."""
    a = math.exp(-1 / float(scale))
    return a ** (int(t) + 1) / (1 + a)


def discrete_laplace_tail_threshold(scale: Fraction, tail: float) -> int:
    """The smallest integer t >= 0 with P(Z > t) <= tail for Z ~ discrete Laplace(scale): a^(t+1)/(1+a) <= tail,
    a = exp(-1/scale)."""
    a = math.exp(-1 / float(scale))
    t = math.ceil(math.log(tail * (1 + a)) / math.log(a)) - 1
    while a ** (t + 1) / (1 + a) > tail:  # guard the float log against an off-by-one
        t += 1
    return max(t, 0)


# --------------------------------------------------------------------------------------------------------------
# The discrete Gaussian (Canonne, Kamath & Steinke 2020, Algorithm 3)
#
# Exactness.  With t = floor(σ) + 1, a candidate Y is an exact discrete Laplace draw of scale t (above), and it is
# accepted with probability exp(-x(|Y|)), x(y) = (y - σ²/t)² / (2σ²) = (y·t - σ²)² / (2σ²t²).  CKS20 (Thm. 6)
# show the accepted Y has P(Y = k) ∝ exp(-k²/(2σ²)) exactly.  σ² is a rational, t an integer (found with an
# integer square root, not a float sqrt), so every x(y) is an exact rational.  x(y) = 0 (σ² = y·t) means p = 1
# and is accepted without a coin.  Otherwise exp(-x) is irrational (Lindemann), and the coin compares a uniform
# binary fraction U, read in 32-bit words, with the binary expansion of exp(-x) (``_Expansion``, correctly
# rounded decimal arithmetic with a rigorous error bound), deciding U < exp(-x) at the first word where they
# differ: exactly Bernoulli(exp(-x)).  No float touches a probability.  The vectorisation only changes the
# order in which independent uniform words are consumed: every pending position runs its own independent copy
# of the rejection loop, so the outputs are i.i.d. with the exact law.

_MAX_SIGMA2 = Fraction(2**60)  # t <= 2^30 + 1, so the Laplace candidates stay far inside int64
_TABLE_MAX = 1 << 20  # per-σ² lookup table of first words covers |Y| < min(32 t, 2^20); beyond that a dict


def checked_sigma2(sigma2) -> Fraction:
    """σ² as an exact positive Fraction (Fraction, int or decimal string), at most 2^60; ValueError otherwise."""
    try:
        s = Fraction(sigma2) if not isinstance(sigma2, bool) else None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        s = None
    if s is None or not 0 < s <= _MAX_SIGMA2:
        raise ValueError(f"discrete Gaussian σ² must be a positive rational at most 2^60, got {sigma2!r}")
    return s


def _gaussian_t(sigma2: Fraction) -> int:
    """t = floor(σ) + 1, exactly: floor(sqrt(a/b)) = floor(isqrt(a·b) / b)."""
    return math.isqrt(sigma2.numerator * sigma2.denominator) // sigma2.denominator + 1


def _gaussian_x(sigma2: Fraction, t: int, y: int) -> Fraction:
    """The exponent of the acceptance probability exp(-x) for a candidate of magnitude y."""
    return (y * t - sigma2) ** 2 / (2 * sigma2 * t * t)


@lru_cache(maxsize=65536)
def _gaussian_acceptance(sigma2: Fraction, t: int, y: int) -> _Expansion:
    """exp(-x(y)) for a candidate of magnitude y, as a lazily expanded probability (x(y) > 0 only)."""
    x = _gaussian_x(sigma2, t, y)
    if x == 0:
        raise ValueError("acceptance probability is 1; no coin is needed")  # an _Expansion needs p < 1
    return _Expansion(lambda prec: 1 / _exp_decimal(x), x)


class _AcceptanceTable:
    """First 32-bit words of the acceptance probabilities for |Y| < size, filled lazily from the cache."""

    def __init__(self, sigma2: Fraction, t: int):
        self.sigma2, self.t = sigma2, t
        self.size = min(_TABLE_MAX, 32 * t)
        self.words = np.zeros(self.size, dtype=np.uint32)
        self.known = np.zeros(self.size, dtype=bool)
        # σ² = y0·t makes x(y0) = 0: probability 1, accepted without a coin (-1: no such y0).
        y0 = sigma2 / t
        self.sure = int(y0) if y0.denominator == 1 else -1

    def first_words(self, y: np.ndarray) -> np.ndarray:
        """word 0 of exp(-x(y)) for each magnitude in ``y`` (0 where y is the sure value; callers mask it)."""
        out = np.empty(y.size, dtype=np.uint32)
        small = y < self.size
        ys = y[small]
        missing = ys[~self.known[ys]]
        if missing.size:
            for v in np.unique(missing).tolist():
                self.words[v] = 0 if v == self.sure else _gaussian_acceptance(self.sigma2, self.t, v).word(0)
            self.known[missing] = True
        out[small] = self.words[ys]
        big = ~small
        if big.any():  # |Y| >= 32 t: probability below e^-32 per candidate, or t beyond the table's cap
            values, inverse = np.unique(y[big], return_inverse=True)
            found = [0 if v == self.sure else _gaussian_acceptance(self.sigma2, self.t, v).word(0)
                     for v in values.tolist()]
            out[big] = np.asarray(found, dtype=np.uint32)[inverse]
        return out


@lru_cache(maxsize=64)
def _acceptance_table(sigma2: Fraction) -> _AcceptanceTable:
    return _AcceptanceTable(sigma2, _gaussian_t(sigma2))


_CHUNK = 1 << 20  # positions processed together (bounds the temporaries at ~10 MB each; measured fastest)


def discrete_gaussian(sigma2, size, bits: BitSource) -> np.ndarray:
    """Exact discrete Gaussian noise: P(Z = k) = exp(-k²/(2σ²)) / Σ_j exp(-j²/(2σ²)), k any integer.

    ``sigma2`` is σ², a positive rational (Fraction, int or decimal string) at most 2^60; ``size`` an int or a
    shape tuple.  Returns an int64 array of that shape.  Adding it to an integer query of L2 sensitivity Δ₂ is
    ρ-zCDP with ρ = Δ₂² / (2σ²) (CKS20 Thm. 4), the same as continuous Gaussian noise of variance σ²; the noise
    variance is ``discrete_gaussian_variance(sigma2)`` (slightly below σ² for small σ²).

    Exact, not approximate: CKS20 Algorithm 3 with exact discrete Laplace candidates and exact
    Bernoulli(exp(-x)) acceptance coins on rational x (see the comment above this function).  The number of
    random words read is random (about 1/0.75 candidates per output near σ = 10), and so is the running time.
    """
    sigma2 = checked_sigma2(sigma2)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(np.prod(shape, dtype=np.int64))
    table = _acceptance_table(sigma2)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        out[start:start + _CHUNK] = _gaussian_chunk(sigma2, table, min(_CHUNK, n - start), bits)
    return out.reshape(shape)


def _gaussian_chunk(sigma2: Fraction, table: _AcceptanceTable, n: int, bits: BitSource) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = discrete_laplace(table.t, todo.size, bits)
        magnitude = np.abs(y)
        first = table.first_words(magnitude)
        r = bits.words(todo.size)
        accept = (r < first) | (magnitude == table.sure)
        for i in np.flatnonzero((r == first) & (magnitude != table.sure)):  # probability 2^-32 per candidate
            p = _gaussian_acceptance(sigma2, table.t, int(magnitude[i]))
            k = 1
            while True:
                w, target = int(bits.words(1)[0]), p.word(k)
                if w != target:
                    accept[i] = w < target
                    break
                k += 1
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out


# Facts about the discrete Gaussian (floats: these describe the distribution, they do not sample).
#
# Up to σ² = 10^6 the sums run over |k| <= 9σ + 2, past which exp(-k²/(2σ²)) < e^-40 of the centre term and
# the tail (a Gaussian tail, decaying faster than geometrically) is below double precision.  Above, the
# normaliser and variance come from Poisson summation, an identity, not an approximation:
#   Σ_k exp(-k²/2σ²)    = sqrt(2π)σ · Σ_m exp(-2π²σ²m²)
#   Σ_k k² exp(-k²/2σ²) = sqrt(2π)σ · Σ_m (σ² - 4π²σ⁴m²) exp(-2π²σ²m²)
# whose m ≠ 0 terms are below exp(-2·10^7) there, i.e. exactly 0 in double precision.

_DIRECT_MAX = 10**6


def _gaussian_float(sigma2) -> float:
    return float(checked_sigma2(sigma2))


def _direct_terms(s2: float) -> tuple[np.ndarray, np.ndarray]:
    """k = 0..K and exp(-k²/(2σ²)) for the direct sums (non-negative half; callers double k > 0)."""
    k = np.arange(int(9 * math.sqrt(s2)) + 3, dtype=float)
    return k, np.exp(-k * k / (2 * s2))


def _normaliser(s2: float) -> float:
    if s2 <= _DIRECT_MAX:
        _, w = _direct_terms(s2)
        return float(w[0] + 2 * w[1:][::-1].sum())  # small terms first
    return math.sqrt(2 * math.pi * s2)


def discrete_gaussian_variance(sigma2) -> float:
    """Var Z = Σ k² P(Z = k) for the discrete Gaussian with parameter σ² (<= σ², equal to it within double
    precision once σ² >~ 4)."""
    s2 = _gaussian_float(sigma2)
    if s2 > _DIRECT_MAX:
        return s2
    k, w = _direct_terms(s2)
    return float(2 * (k * k * w)[::-1].sum() / (w[0] + 2 * w[1:][::-1].sum()))


def discrete_gaussian_pmf(k, sigma2) -> np.ndarray:
    """P(Z = k) for integer k (array-like; float array of the same shape)."""
    s2 = _gaussian_float(sigma2)
    k = np.abs(np.asarray(k, dtype=float))
    return np.exp(-k * k / (2 * s2)) / _normaliser(s2)


def discrete_gaussian_halfwidth(sigma2, level: float = 0.95) -> int:
    """The smallest integer q with P(|Z| <= q) >= level, so [y - q, y + q] covers the true count with
    probability >= level.  Computed from the tail sums P(|Z| > q) = 2 Σ_{k>q} P(Z = k), in double precision."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    s2 = _gaussian_float(sigma2)
    beta = 1 - level
    z = _normaliser(s2)
    # Locate q with the continuous tail, then settle it on the discrete tail sums (a window of a few σ).
    sigma = math.sqrt(s2)
    q = max(0, int(sigma * math.sqrt(2) * _erfcinv(beta)) - 2)

    def tail(q: int) -> float:  # P(|Z| > q): Σ over q < k <= q + 10σ + 3, in chunks, small terms first
        end, total = q + 1 + int(10 * sigma) + 3, 0.0
        for hi in range(end, q + 1, -(1 << 20)):
            k = np.arange(max(q + 1, hi - (1 << 20)), hi, dtype=float)
            total += float(np.exp(-k * k / (2 * s2))[::-1].sum())
        return 2 * total / z

    def mass(q: int) -> float:  # P(|Z| = q) for q >= 1
        return 2 * math.exp(-q * q / (2 * s2)) / z

    t = tail(q)  # then step by single terms: tail(q - 1) = tail(q) + P(|Z| = q)
    while q > 0 and t + mass(q) <= beta:
        t += mass(q)
        q -= 1
    while t > beta:
        q += 1
        t -= mass(q)
    return q


def _erfcinv(y: float) -> float:
    """x with erfc(x) ≈ y, by bisection (only a starting point for the exact search above)."""
    lo, hi = 0.0, 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erfc(mid) > y else (lo, mid)
    return lo
