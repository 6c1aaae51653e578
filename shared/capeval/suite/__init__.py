"""A metric suite over several systems in one pass (:func:`score_suite`), following one plan resolved at the door
(:func:`resolve_plan`; :func:`select_metrics`: the names it accepts)."""

from capeval.suite.engine import SuiteScores, score_suite
from capeval.suite.plan import Plan, resolve_plan, select_metrics

__all__ = ["Plan", "SuiteScores", "resolve_plan", "score_suite", "select_metrics"]
