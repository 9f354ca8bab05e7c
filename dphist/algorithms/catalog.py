"""The catalogue of publishing algorithms by name: one module per algorithm, all behind the same interface.

``auto`` is added by the package (it chooses among the others, so it cannot be imported here).
"""

from __future__ import annotations

from ..errors import UsageError
from .ahp import AHP
from .base import Algorithm
from .dawa import DAWA
from .efpa import EFPA
from .grids import AGrid, UGrid
from .hdmm import HDMM
from .hierarchical import H, Hb, QuadTree
from .identity import Identity
from .mwem import MWEM
from .partitioning import DPCube, KDTree, NoiseFirst
from .privelet import Privelet
from .privtree import PrivTree
from .structurefirst import StructureFirst
from ..text import quoted

__all__ = ["REGISTRY", "applicable_options", "get_algorithm", "register"]

REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Add an algorithm class to the registry under ``cls.name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"algorithm {quoted(cls.name)} registered twice")
    REGISTRY[cls.name] = cls
    return cls


def applicable_options(name: str, options: dict | None) -> dict:
    """The subset of ``options`` that the named algorithm accepts (tree options do not apply to identity)."""
    if not options:
        return {}
    key = str(name).strip().lower()
    accepted = REGISTRY[key].options if key in REGISTRY else {}
    return {k: v for k, v in options.items() if k in accepted}


def get_algorithm(name: str, **options) -> Algorithm:
    """An instance of the named algorithm with validated options; UsageError naming the problem otherwise."""
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise UsageError(f"unknown algorithm {quoted(name)} (available: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[key](**options)


for _cls in (Identity, H, Hb, QuadTree, Privelet, NoiseFirst, DPCube, KDTree, StructureFirst, AHP,
             PrivTree, MWEM, EFPA, DAWA, UGrid, AGrid, HDMM):
    register(_cls)
