"""dphist: differentially private histograms and contingency tables from CSV and Parquet."""

__version__ = "0.1.0"

from .api import Release, release  # noqa: E402

__all__ = ["__version__", "release", "Release"]
