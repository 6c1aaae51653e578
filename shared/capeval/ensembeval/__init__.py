"""EnsembEval (Berger et al. 2025): components, official weights, scorer and refit."""
