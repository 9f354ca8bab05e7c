"""Sources of uniformly random 32-bit words for the samplers.

Production draws from :class:`SystemBits` (the operating system's CSPRNG).  :class:`SeededBits` exists for tests
and the explicit test mode, whose releases say they are not private.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["BitSource", "SystemBits", "SeededBits", "bit_source"]


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


def bit_source(seed: int | None) -> BitSource:
    """The bits noise is drawn from: the OS CSPRNG, or a seeded stream in test mode (NOT private)."""
    return SystemBits() if seed is None else SeededBits(int(seed))
