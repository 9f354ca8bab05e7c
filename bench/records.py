"""The benchmarks' raw records (bench/results/*.jsonl): one JSON object per line, read and written whole."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path


def read_records(path: Path, missing_ok: bool = False) -> list[dict]:
    """The records in ``path``, in file order; [] where it does not exist and ``missing_ok``."""
    if missing_ok and not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_records(path: Path, records: Iterable[dict]) -> None:
    """Replace ``path`` with ``records`` (its folder made if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
