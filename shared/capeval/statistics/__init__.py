"""Is captioning system B really better than A? The statistics of system comparison, low level (they import only
``capeval.core`` and ``capeval.functional``):

- :mod:`~capeval.statistics.resampling`: seeded bootstrap draws and swaps over units (images), percentile intervals;
- :mod:`~capeval.statistics.p_values`: p-values from the resampled differences;
- :mod:`~capeval.statistics.corrections`: multiple-testing corrections (Holm, Bonferroni);
- :mod:`~capeval.statistics.clusters`: significance clusters (WMT's ranks), in each score's direction;
- :mod:`~capeval.statistics.systems`: ``compare_systems``, all of it over several systems and metrics.

Metric A vs metric B against human judgments (correlations, Williams' test, the leaderboard) is
:mod:`capeval.meta_eval`, which builds on these.
"""
