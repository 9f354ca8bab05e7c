"""A seeded bit source that counts the words it hands out, for tests that check a refused step reads none."""

from __future__ import annotations

import numpy as np

from dphist.privacy import BitSource, SeededBits


class CountingBits(BitSource):
    """Seeded words that counts how many were read (a refused measurement must read none)."""

    def __init__(self, seed: int):
        self._inner = SeededBits(seed)
        self.read = 0

    def words(self, n: int) -> np.ndarray:
        self.read += n
        return self._inner.words(n)
