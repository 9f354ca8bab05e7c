"""The registry of publishing algorithms: one module per algorithm, all behind the same interface."""

from __future__ import annotations

from ..errors import UsageError
from .base import Algorithm, Estimate, Measurement, measure
from .hierarchical import H, Hb, QuadTree
from .identity import Identity

__all__ = ["Algorithm", "Estimate", "Measurement", "REGISTRY", "get_algorithm", "measure", "register"]

REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Add an algorithm class to the registry under ``cls.name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"algorithm '{cls.name}' registered twice")
    REGISTRY[cls.name] = cls
    return cls


def get_algorithm(name: str, **options) -> Algorithm:
    """An instance of the named algorithm with validated options; UsageError naming the problem otherwise."""
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise UsageError(f"unknown algorithm '{name}' (available: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[key](**options)


register(Identity)
register(H)
register(Hb)
register(QuadTree)
