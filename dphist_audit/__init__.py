"""The privacy audit: black-box checks that each algorithm's outputs are no more revealing than its claimed ε
(docs/privacy.md §2), and deliberately broken mutants that the audit must catch."""

from .runner import (FULL, QUICK, WIDE, AuditResult, AuditSize, audit, default_cases, plan, quick_cases)

__all__ = ["AuditResult", "AuditSize", "audit", "default_cases", "quick_cases", "plan", "FULL", "WIDE", "QUICK"]
