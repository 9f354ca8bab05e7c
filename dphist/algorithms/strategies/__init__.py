"""Public structures the algorithms measure through: trees of ranges and the Hilbert curve."""
