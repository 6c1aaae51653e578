import numpy as np
import pytest

from capeval.core.errors import InputError
from capeval.functional.agreement import krippendorff_alpha, reliability_table
from capeval.functional.correlation import UndefinedStatisticWarning

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x 12 units
CANONICAL = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
])
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


@pytest.mark.parametrize("level", sorted(PUBLISHED))
def test_reproduces_krippendorffs_worked_example(level):
    assert krippendorff_alpha(CANONICAL, level) == pytest.approx(PUBLISHED[level], abs=5e-4)


@pytest.mark.parametrize("level", sorted(PUBLISHED))
def test_equals_the_krippendorff_package_on_random_tables_with_missing_values(level):
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(7)
    for _ in range(5):
        table = rng.integers(1, 6, size=(4, 40)).astype(float)
        table[rng.random(table.shape) < 0.3] = nan
        expected = krippendorff.alpha(reliability_data=table, level_of_measurement=level)
        assert krippendorff_alpha(table, level) == pytest.approx(expected, abs=1e-9)


def test_perfect_agreement_is_one_and_unpairable_units_are_ignored():
    table = np.array([[1, 2, 3, 4, nan], [1, 2, 3, 4, 2]])
    assert krippendorff_alpha(table, "interval") == pytest.approx(1.0)


def test_reliability_table_from_judgment_rows():
    table = reliability_table(units=["a", "a", "b", "b", "c"], raters=[0, 1, 0, 1, 1], values=[1, 2, 3, 3, 4])
    np.testing.assert_array_equal(table, [[1, 3, nan], [2, 3, 4]])
    with pytest.raises(ValueError, match="more than once"):
        reliability_table(["a", "a"], [0, 0], [1, 2])
    with pytest.raises(ValueError, match="length"):
        reliability_table(["a"], [0, 1], [1, 2])


def test_undefined_cases_are_nan_with_a_warning_naming_the_cause():
    with pytest.warns(UndefinedStatisticWarning, match="two or more"):
        assert np.isnan(krippendorff_alpha([[1, nan], [nan, 2]]))
    with pytest.warns(UndefinedStatisticWarning, match="same value"):
        assert np.isnan(krippendorff_alpha([[2, 2], [2, 2]]))
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(CANONICAL, "cosine")


def test_a_missing_or_infinite_rating_is_refused_naming_its_rows():
    """NaN marks "no rating" inside the table; a judgment row that carries NaN is not silently taken as missing."""
    with pytest.raises(InputError, match=r"values: missing value \(NaN\) at row 1 \(1 of 3 rows\)"):
        reliability_table(["a", "a", "b"], [0, 1, 0], [1, nan, 2])
    with pytest.raises(InputError, match=r"values: infinite value at row 2"):
        reliability_table(["a", "a", "b"], [0, 1, 0], [1, 2, np.inf])
