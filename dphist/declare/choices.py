"""The names and defaults that the command line's options list in ``--help``, defined here once.

This module imports nothing: ``dphist --help`` reads it without loading the modules that use these names
(planning, the algorithms, the engines, the writers pull in pandas, pyarrow and the algorithm code).  Those
modules import the names from here, so each is still defined in one place.
"""

__all__ = ["DEFAULT_ALGORITHM", "DEFAULT_MAX_CELLS", "ENGINES", "EVALUATE_WORKLOADS", "FORMATS", "RELEASE_WORKLOADS"]

#: The algorithm of a table that names none.
DEFAULT_ALGORITHM = "auto"
#: Tables of more cells than this are refused before any row is read, unless a larger limit is given.
DEFAULT_MAX_CELLS = 2**24
#: Where rows are counted (:mod:`dphist.read.engines`).
ENGINES = ("local", "dask", "spark")
#: Release file formats (:mod:`dphist.publishing.writers`).
FORMATS = ("csv", "parquet", "json")
#: The questions a table may be released for (``--workload``; :mod:`dphist.algorithms.auto.choice`): range sums along
#: its ordered columns, its single cells, or its one-way marginals (the cells themselves for one column).
RELEASE_WORKLOADS = ("ranges", "cells", "marginals")
#: The query sets ``dphist evaluate`` can score (:mod:`dphist.evaluation.evaluate`).
EVALUATE_WORKLOADS = ("all-ranges", "prefix", "random-ranges", "random-boxes", "identity", "ranges", "cells",
                      "marginals")
