"""Reply-length metrics on predictions whose errors are known exactly."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.length import length_bin, length_report


def test_exact_predictions_are_perfect_on_every_metric():
    truth = np.array([20.0, 160.0, 320.0, 800.0, 90.0])
    report = length_report(truth, truth)
    assert report == {"kendall_tau_b": pytest.approx(1.0), "median_ratio_error": pytest.approx(1.0),
                      "within_2x": 1.0, "bin_accuracy": 1.0, "num_requests": 5}


def test_predictions_three_times_too_long_keep_the_order_but_miss_by_three():
    truth = np.array([20.0, 40.0, 60.0, 90.0])
    report = length_report(3 * truth, truth)
    assert report["kendall_tau_b"] == pytest.approx(1.0)
    assert report["median_ratio_error"] == pytest.approx(3.0)
    assert report["within_2x"] == 0.0


def test_bins_split_at_150_300_and_500_tokens():
    assert length_bin(np.array([0, 149, 150, 299, 300, 499, 500, 5000])).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
