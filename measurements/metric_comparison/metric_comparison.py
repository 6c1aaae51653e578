"""Is metric A better than metric B on the same human judgments? Paired bootstrap, permutation and Williams' tests."""

import warnings

import datasets
import evaluate

from capeval.functional.correlation import UndefinedStatisticWarning
from capeval.meta_eval import significance

_CITATION = """\
@inproceedings{graham2014testing, title={Testing for Significance of Increased Correlation with Human Judgment},
  author={Graham, Yvette and Baldwin, Timothy}, booktitle={EMNLP}, pages={172--176}, year={2014}}
@inproceedings{deutsch2021statistical, title={A Statistical Analysis of Summarization Evaluation Metrics Using
  Resampling Methods}, author={Deutsch, Daniel and Dror, Rotem and Roth, Dan}, journal={TACL}, year={2021}}
"""

_DESCRIPTION = """\
Compares two caption metrics scored on the same human judgments: the difference of their correlation with people
(Kendall tau-b/tau-c, Pearson or Spearman) with a paired bootstrap confidence interval and p-value, a paired
permutation test (PERM-BOTH: both metrics z-scored, a unit's scores swapped between them), and for Pearson
Williams' test. `units` keeps rows together in every resample (e.g. the image of each row, or its caption where
several raters rated it). Where a metric's statistic is undefined (a constant column), its value, the difference,
the interval and every p-value are NaN, with a warning and the cause under `undefined`. A missing (NaN/None) score
or judgment is an error naming its rows, unless `nan_policy="omit"` drops those rows.
"""

_KWARGS_DESCRIPTION = """
Args:
    metric_a, metric_b (`list` of `float`): the two metrics' scores, one per human judgment row.
    human (`list` of `float`): the human scores.
    statistic (`str`, default "kendall_tau_c"): kendall_tau_b, kendall_tau_c, pearson or spearman.
    units (`list`, optional): a label per row; rows with the same label are resampled and swapped together.
    resamples (`int`, default 1000); seed (`int`, default 0); confidence (`float`, default 0.95).
    alternative (`str`, default "two-sided"): "greater" tests A > B, "less" A < B.
    nan_policy (`str`, default "raise"): a missing score or judgment is an error naming its rows; "omit" drops
        every row with one.
Returns:
    value_a, value_b, delta (A − B), delta_ci = [low, high], p_bootstrap, p_permutation, and for Pearson
    p_williams (NaN where undefined, the cause under `undefined`); units (number of units), resamples, omitted
    (rows dropped by nan_policy="omit").
Examples:
    >>> import evaluate
    >>> compare = evaluate.load("capeval/metric_comparison")
    >>> result = compare.compute(metric_a=[0.9, 0.1, 0.4, 0.8, 0.3, 0.7, 0.2, 0.6],
    ...                          metric_b=[0.5, 0.4, 0.1, 0.9, 0.6, 0.2, 0.3, 0.8],
    ...                          human=[4, 1, 2, 4, 1, 3, 1, 3], statistic="pearson", resamples=200)
    >>> [round(result[k], 4) for k in ("value_a", "value_b", "delta", "p_williams", "p_permutation")]
    [0.974, 0.4187, 0.5553, 0.0169, 0.025]
    >>> low, high = result["delta_ci"]  # seeded paired bootstrap (seed=0)
    >>> low <= result["delta"] <= high
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MetricComparison(evaluate.Measurement):
    def _info(self):
        return evaluate.MeasurementInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"metric_a": datasets.Value("float64"), "metric_b": datasets.Value("float64"),
                                        "human": datasets.Value("float64")}),
        )

    def _compute(self, metric_a, metric_b, human, statistic="kendall_tau_c", units=None, resamples=1000, seed=0,
                 confidence=0.95, alternative="two-sided", nan_policy="raise"):
        options = dict(statistic=statistic, units=units, resamples=resamples, seed=seed, alternative=alternative,
                       nan_policy=nan_policy)
        boot = significance.paired_bootstrap(metric_a, metric_b, human, confidence=confidence, **options)
        with warnings.catch_warnings():  # the bootstrap has said it: one warning per undefined comparison
            warnings.simplefilter("ignore", UndefinedStatisticWarning)
            perm = significance.paired_permutation(metric_a, metric_b, human, **options)
            williams = significance.williams(metric_a, metric_b, human, alternative=alternative,
                                             nan_policy=nan_policy) if statistic == "pearson" else None
        out = {"statistic": statistic, "value_a": boot["value_a"], "value_b": boot["value_b"],
               "delta": boot["delta"], "delta_ci": boot["ci"], "p_bootstrap": boot["p_value"],
               "p_permutation": perm["p_value"], "alternative": alternative, "units": boot["units"],
               "resamples": resamples, "omitted": boot["omitted"]}
        if "undefined" in boot:
            out["undefined"] = boot["undefined"]
        if williams is not None:
            out["p_williams"] = williams["p_value"]
        return out
