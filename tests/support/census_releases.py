"""Test-mode releases of the sample census, for the tests that read releases back (``synth``, ``plot``)."""

from __future__ import annotations

from pathlib import Path

import dphist

from conftest import SAMPLE

CENSUS, SCHEMA = str(SAMPLE / "census.csv"), str(SAMPLE / "census.schema.yaml")


def census_releases(base: Path) -> dict[str, Path]:
    """Test-mode releases (no ledger) under ``base``: age x sex in CSV and Parquet, interview_date x education in
    JSON, CSV and Parquet (a null category), and a --raw one (negative, fractional counts)."""
    made = {}
    for key, columns, fmt, raw in [("csv", "age,sex", "csv", False), ("parquet", "age,sex", "parquet", False),
                                   ("json", "interview_date,education", "json", False),
                                   ("nulls-csv", "interview_date,education", "csv", False),
                                   ("nulls-parquet", "interview_date,education", "parquet", False),
                                   ("raw", "age,education", "csv", True)]:
        made[key] = base / key
        extra = {"raw": True, "algorithm": "h", "epsilon": 0.5} if raw else {"epsilon": 1}  # h: fractional counts
        dphist.release(CENSUS, schema=SCHEMA, columns=columns, seed=3, **extra).write(made[key], fmt)
    return made
