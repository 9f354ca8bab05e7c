"""Sources of uniformly random 32-bit words for the samplers.

Production draws from :class:`SystemBits` (the operating system's CSPRNG).  :class:`SeededBits` exists for tests
and the explicit test mode, whose releases say they are not private.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["BitSource", "SystemBits", "SeededBits", "SimulationBits", "bit_source"]


class BitSource:
    """A stream of uniformly random 32-bit words.

    ``private`` says whether the words come from a cryptographically secure source; a release made from a
    non-private source is not differentially private and must say so.
    """

    private: bool = False

    def words(self, n: int) -> np.ndarray:
        """Return ``n`` independent uniform words as a uint32 array of shape (n,)."""
        raise NotImplementedError


class SystemBits(BitSource):
    """Words from the operating system's CSPRNG (``os.urandom``, i.e. getrandom(2) on Linux)."""

    private = True

    def words(self, n: int) -> np.ndarray:
        return np.frombuffer(os.urandom(4 * n), dtype=np.uint32)


class SeededBits(BitSource):
    """Deterministic words from a seeded PCG64.  For tests and the explicit test mode only: NOT private."""

    private = False

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._generator = np.random.PCG64(self.seed)

    def words(self, n: int) -> np.ndarray:
        raw = self._generator.random_raw((n + 1) // 2)
        return raw.view(np.uint32)[:n]


class SimulationBits(SeededBits):
    """Seeded words for simulating an algorithm's error on a table of zeros (the report's expected error), never
    for a release: NOT private.  A budget drawing from it may replace discrete Gaussian noise of a very large
    variance parameter (at least ``APPROXIMATE_GAUSSIAN_FROM``) by a rounded normal of the same σ², whose law
    differs from it by far less than a simulation can see (its variance is σ² + 1/12 against σ²·(1 − ~e^(−2π²σ²)))
    and which costs a microsecond a draw instead of a hundred: strategies measured at an integer scale, such as an
    optimised range strategy's, carry σ² of 2³² and more."""

    approximate_gaussian = True

    def normal(self, n: int) -> np.ndarray:
        """``n`` standard normal draws from this source's words."""
        return np.random.Generator(np.random.PCG64(self.words(8).view(np.uint64))).standard_normal(n)


#: The variance parameter from which a :class:`SimulationBits` budget draws rounded normals for discrete Gaussian
#: noise.
APPROXIMATE_GAUSSIAN_FROM = 2**16


def bit_source(seed: int | None) -> BitSource:
    """The bits noise is drawn from: the OS CSPRNG, or a seeded stream in test mode (NOT private)."""
    return SystemBits() if seed is None else SeededBits(int(seed))
