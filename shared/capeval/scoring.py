"""Thin alias kept for code written against capeval 0.1's layout: use ``from capeval import load_scorer``."""

from capeval.core.scoring import load_scorer, scorers, summarize

__all__ = ["load_scorer", "scorers", "summarize"]
