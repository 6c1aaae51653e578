"""A metric suite over several systems in one pass (:func:`score_suite`), following one resolved plan
(:func:`resolve_plan`; :func:`expand_metrics`: the names it accepts)."""

from capeval.suite.engine import SuiteScores, score_suite
from capeval.suite.plan import Plan, expand_metrics, resolve_plan

__all__ = ["Plan", "SuiteScores", "expand_metrics", "resolve_plan", "score_suite"]
