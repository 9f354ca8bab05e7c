"""The bench's scripts as modules, for tests of what they compute (they live outside the package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(relative: str) -> ModuleType:
    """The module of ``bench/<relative>`` (e.g. ``corpus/fetch.py``), executed once per call."""
    path = BENCH / relative
    spec = importlib.util.spec_from_file_location(f"bench_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
