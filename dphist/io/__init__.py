"""Reading sources and writing releases: the two edges of the pipeline that touch files."""
