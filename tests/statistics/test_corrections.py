"""Multiple-testing corrections: Holm and Bonferroni against statsmodels, ``none`` unchanged, an unknown one refused."""

import numpy as np
import pytest

from capeval.core.errors import InputError
from capeval.statistics.corrections import adjust


def test_adjustments_match_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, 0.04, 0.03, 0.2, 0.001, 0.04])
    for ours, theirs in (("holm", "holm"), ("bonferroni", "bonferroni")):
        np.testing.assert_allclose(adjust(p, ours), multipletests(p, method=theirs)[1], atol=1e-12)
    np.testing.assert_array_equal(adjust(p, "none"), p)
    with pytest.raises(InputError, match="correction"):
        adjust(p, "fdr")
