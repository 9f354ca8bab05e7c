"""A table for the workload tests: a 256-bin numeric column and two categorical ones, as a schema and a seeded
data frame."""

from __future__ import annotations

import numpy as np
import pandas as pd

WORKLOAD_SCHEMA = {"columns": {"x": {"type": "numeric", "lower": 0, "upper": 256, "bins": 256},
                               "g": {"type": "categorical", "values": ["a", "b", "c"]},
                               "h": {"type": "categorical", "values": ["u", "v"]}}}


def workload_frame(rows: int = 5000, seed: int = 0) -> pd.DataFrame:
    """``rows`` rows drawn uniformly from the schema's cells (seeded)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.integers(0, 256, rows), "g": rng.choice(["a", "b", "c"], rows),
                         "h": rng.choice(["u", "v"], rows)})
