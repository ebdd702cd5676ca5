"""Transforms: per-batch DataFrame transformations, chained in order."""
