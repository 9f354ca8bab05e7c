"""The publishing algorithms: one module per algorithm, all behind the same interface (``base.Algorithm``)."""

from __future__ import annotations

from .auto.choice import Auto
from .base import Algorithm, Estimate
from .catalog import REGISTRY, applicable_options, get_algorithm, register

__all__ = ["Algorithm", "Auto", "Estimate", "REGISTRY", "applicable_options", "get_algorithm", "register"]

register(Auto)
