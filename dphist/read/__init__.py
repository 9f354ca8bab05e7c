"""Reading rows: sources (CSV, Parquet, DataFrames), the engines that run the counting pass, axes and counting, and contribution bounding for privacy units."""
