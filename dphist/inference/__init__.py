"""Post-processing of noisy measurements (no budget): non-negativity and rounding, consistent marginals, maximum-entropy fitting."""
