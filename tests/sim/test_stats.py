import math

import pytest
from scipy import stats

from jevserve.sim.stats import max_rate_meeting, mean_interval


def test_mean_interval_of_two_values_is_the_t_interval_with_one_degree_of_freedom():
    mean, low, high = mean_interval([1.0, 3.0])
    half = stats.t.ppf(0.975, 1) * 1.0  # sem of [1, 3] is 1
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - half, 2.0 + half))


def test_mean_interval_of_one_value_has_no_interval():
    mean, low, high = mean_interval([5.0])
    assert mean == 5.0 and math.isnan(low) and math.isnan(high)


def test_max_rate_meeting_interpolates_the_crossing():
    assert max_rate_meeting([1.0, 2.0, 3.0], [0.99, 0.95, 0.85]) == (pytest.approx(2.5), "")


def test_max_rate_meeting_flags_a_target_met_everywhere_or_nowhere():
    assert max_rate_meeting([1.0, 2.0], [0.95, 0.91]) == (2.0, ">=")
    assert max_rate_meeting([1.0, 2.0], [0.5, 0.4]) == (1.0, "<")
