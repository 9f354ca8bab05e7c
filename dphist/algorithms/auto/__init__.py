"""auto: one algorithm per table, chosen from public facts and a paid noisy total."""

from .choice import Auto

__all__ = ["Auto"]
