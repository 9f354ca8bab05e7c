"""The privacy audit: black-box checks that each algorithm's outputs are no more revealing than its claimed ε
(privacy-engineering.md §2), and deliberately broken mutants that the audit must catch."""

from .runner import AuditResult, audit, default_cases

__all__ = ["AuditResult", "audit", "default_cases"]
