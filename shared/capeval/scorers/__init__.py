"""Scorer classes: thin layers joining backbones (model calls) and :mod:`capeval.functional` (formulas)."""
