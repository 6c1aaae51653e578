"""A metric suite over several systems in one pass (:func:`score_suite`), and the names it accepts
(:func:`expand_metrics`)."""

from capeval.suite.engine import SuiteScores, score_suite
from capeval.suite.metrics import expand_metrics

__all__ = ["SuiteScores", "expand_metrics", "score_suite"]
