"""Correlation of metric scores with human judgments (Kendall τ-b/τ-c, Pearson, Spearman + bootstrap CIs)."""

import datasets
import evaluate
import numpy as np

from capeval.core.errors import InputError
from capeval.functional import agreement, correlation

_CITATION = """\
@article{kendall1938new, title={A New Measure of Rank Correlation}, author={Kendall, M. G.},
  journal={Biometrika}, volume={30}, pages={81--93}, year={1938}}
"""

_DESCRIPTION = """\
How well a caption metric agrees with people: Kendall's τ-b and τ-c (the caption-evaluation literature reports
τ-c on Flickr8k-Expert and Composite and τ-b on Flickr8k-CF), Pearson and Spearman correlation, each with a
seeded percentile bootstrap confidence interval. Give one row per human judgment (several raters of one caption
are several rows with the same metric score), as the literature does. With `units` and `raters` (which item and
which rater each row is), it also returns the raters' agreement with each other, Krippendorff's α.
A statistic that is undefined (a constant column) is NaN with a warning naming the cause, and so is its interval.
A missing (NaN/None) score or judgment is an error naming its rows, unless `nan_policy="omit"` drops those rows.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): metric scores, one per human judgment.
    references (`list` of `float`): the human scores.
    resamples (`int`, default 1000): bootstrap resamples (0 disables intervals).
    confidence (`float`, default 0.95); seed (`int`, default 0).
    units, raters (`list`, optional): per row, the rated item (e.g. image + caption) and the rater's id.
    agreement_level (`str`, default "interval"): Krippendorff's α level: nominal, ordinal, interval or ratio.
    nan_policy (`str`, default "raise"): a missing (NaN/None) score or judgment is an error naming its rows;
        "omit" drops every row with one (from the units and raters too).
Returns:
    kendall_tau_b, kendall_tau_c, pearson, spearman (`float`, NaN where undefined), and `<statistic>_ci` =
    [low, high] (NaN, NaN where undefined); with units and raters also krippendorff_alpha (`float`) over the
    human scores; omitted (`int`): rows dropped by nan_policy="omit".
Examples:
    >>> import evaluate
    >>> corr = evaluate.load("capeval/human_correlation")
    >>> result = corr.compute(predictions=[0.1, 0.4, 0.35, 0.8], references=[1, 2, 2, 4], resamples=0)
    >>> {name: round(value, 4) for name, value in sorted(result.items())}
    {'kendall_tau_b': 0.9129, 'kendall_tau_c': 0.9375, 'omitted': 0, 'pearson': 0.9942, 'spearman': 0.9487}
    >>> result = corr.compute(predictions=[0.1, 0.4, 0.35, 0.8, 0.6, 0.2, 0.7, 0.3],
    ...                       references=[1, 2, 2, 4, 3, 1, 4, 2], resamples=200)
    >>> low, high = result["kendall_tau_c_ci"]  # seeded percentile bootstrap (seed=0)
    >>> low <= result["kendall_tau_c"] <= high
    True
    >>> result = corr.compute(predictions=[0.1, 0.1, 0.8, 0.8], references=[1, 2, 4, 4], resamples=0,
    ...                       units=["a", "a", "b", "b"], raters=[0, 1, 0, 1])  # two raters per caption
    >>> round(result["krippendorff_alpha"], 4)
    0.8889
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class HumanCorrelation(evaluate.Measurement):
    def _info(self):
        return evaluate.MeasurementInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("float64"),
                                        "references": datasets.Value("float64")}),
        )

    def _compute(self, predictions, references, resamples=1000, confidence=0.95, seed=0, units=None, raters=None,
                 agreement_level="interval", nan_policy="raise"):
        if (units is None) != (raters is None):
            raise InputError("give both units and raters (one per row) for Krippendorff's alpha, or neither")
        if units is not None and not len(units) == len(raters) == len(references):
            raise InputError(f"units/raters have {len(units)}/{len(raters)} rows but there are {len(references)} "
                             f"judgments")
        kept, omitted = correlation.finite_rows({"predictions": predictions, "references": references}, nan_policy)
        metric, human = kept["predictions"], kept["references"]
        if len(metric) < 3:
            raise InputError(f"need at least 3 judgments to correlate, got {len(metric)}"
                             + (f" ({len(omitted)} omitted)" if len(omitted) else ""))
        out = {"omitted": len(omitted)}
        if units is not None:
            rows = np.setdiff1d(np.arange(len(references)), omitted)
            table = agreement.reliability_table([units[k] for k in rows], [raters[k] for k in rows], human)
            out["krippendorff_alpha"] = agreement.krippendorff_alpha(table, agreement_level)
        for name, statistic in correlation.STATISTICS.items():
            out[name] = statistic(metric, human)
            if resamples:
                out[f"{name}_ci"] = list(correlation.bootstrap_interval(
                    statistic, metric, human, resamples=resamples, confidence=confidence, seed=seed))
        return out
