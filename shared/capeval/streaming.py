"""Thin alias kept for code written against capeval 0.1's layout: use ``from capeval import iter_records``."""

from capeval.core.records import iter_records

__all__ = ["iter_records"]
