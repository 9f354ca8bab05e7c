"""dphist: differentially private histograms and contingency tables from CSV and Parquet.

``import dphist`` is cheap: only the version is loaded.  ``Release`` and ``release`` (and any submodule, e.g.
``dphist.declare.schema``) are imported on first use (PEP 562), so the command line starts without pandas or scipy.
"""

from __future__ import annotations

import importlib

from .version import __version__

__all__ = ["__version__", "release", "Release"]

# Exported name -> the module that defines it, imported when the name is first looked up.
_LAZY = {"release": ".api", "Release": ".publishing.assemble"}


def __getattr__(name: str):
    """The lazy exports, then any submodule by name (``dphist.declare.schema``), as an eager import of everything would
    have made them available; AttributeError otherwise."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # looked up once
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":  # the submodule exists but one of its imports is missing
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
