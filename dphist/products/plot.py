"""Pictures of a release: the public names of :mod:`dphist.products.plots`, importable from here as before."""

from .plots import MAX_PANELS, auto_log_scale, picture_suffixes, plot_release, table_figure

__all__ = ["plot_release", "picture_suffixes", "table_figure", "auto_log_scale", "MAX_PANELS"]
