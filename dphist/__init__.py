"""dphist: differentially private histograms and contingency tables from CSV and Parquet."""

from .api import Release, release
from .version import __version__

__all__ = ["__version__", "release", "Release"]
