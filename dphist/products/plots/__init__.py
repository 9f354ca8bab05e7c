"""Pictures of a release (post-processing: reads the release directory only).  ``table_figure`` draws one
released table (:mod:`.figure` says what a reader sees and why), ``plot_release`` writes it to a file, and
:mod:`.labels` turns bins, counts and amounts into the text on it.  Needs matplotlib, an optional extra:
``pip install 'dphist[plot]'``."""

from .figure import MAX_PANELS, auto_log_scale, table_figure
from .output import picture_suffixes, plot_release

__all__ = ["plot_release", "picture_suffixes", "table_figure", "auto_log_scale", "MAX_PANELS"]
