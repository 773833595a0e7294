"""Bench statistics against cases whose answer is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.metrics import Accuracy
from jevserve.bench.stats import (
    automation_share,
    bootstrap_weights,
    brier,
    confidence_cutoff,
    expected_calibration_error,
    interval,
)


def test_singleton_cluster_weights_draw_as_many_items_as_there_are():
    weights = bootstrap_weights(list(range(50)), num_resamples=200, seed=1)
    assert weights.shape == (200, 50)
    assert (weights.sum(axis=1) == 50).all()


def test_bootstrap_weights_are_reproducible_from_the_seed():
    a = bootstrap_weights(list(range(30)), 100, seed=7)
    assert np.array_equal(a, bootstrap_weights(list(range(30)), 100, seed=7))
    assert not np.array_equal(a, bootstrap_weights(list(range(30)), 100, seed=8))


def test_bootstrap_interval_of_accuracy_matches_the_binomial_standard_error():
    # 400 items, 300 right: the sampling sd of accuracy is sqrt(0.75 * 0.25 / 400) = 0.02165, so the 95% interval
    # is about 0.75 ± 1.96 * 0.02165 = [0.7076, 0.7924]. 4,000 resamples put each end within ±0.006 of that.
    n, right = 400, 300
    labels = np.ones(n, dtype=bool)
    values = np.arange(n) < right
    weights = bootstrap_weights(list(range(n)), num_resamples=4000, seed=3)
    low, high = interval(Accuracy().weighted(labels, values, weights))
    half_width = 1.96 * np.sqrt(0.75 * 0.25 / n)
    assert low == pytest.approx(0.75 - half_width, abs=0.006)
    assert high == pytest.approx(0.75 + half_width, abs=0.006)


def test_cluster_bootstrap_of_duplicated_items_is_as_wide_as_for_the_distinct_items():
    # Each item twice in its own cluster carries no extra information: the interval must keep the width it has
    # for 200 distinct items (sd 0.0354), not shrink to that of 400 independent ones (sd 0.025).
    n = 200
    values = np.arange(n) % 2 == 0
    labels = np.ones(n, dtype=bool)
    twice_values, twice_labels = np.repeat(values, 2), np.repeat(labels, 2)
    clusters = np.repeat(np.arange(n), 2)
    weights = bootstrap_weights(clusters, num_resamples=4000, seed=5)
    low, high = interval(Accuracy().weighted(twice_labels, twice_values, weights))
    assert (high - low) / 2 == pytest.approx(1.96 * np.sqrt(0.25 / n), rel=0.1)


def test_brier_of_a_constant_half_is_a_quarter():
    labels = np.arange(10) % 2 == 0
    assert brier(np.full(10, 0.5), labels) == pytest.approx(0.25)


def test_ece_of_an_overconfident_constant_is_its_gap_to_the_positive_share():
    labels = np.arange(100) < 60  # 60% positive, every item said 0.9
    assert expected_calibration_error(np.full(100, 0.9), labels) == pytest.approx(0.3)


def test_ece_of_probabilities_that_come_true_at_their_rate_is_near_zero():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200_000)
    labels = rng.uniform(size=p.size) < p
    assert expected_calibration_error(p, labels) < 0.01


def test_automation_share_is_every_item_when_scores_separate_the_labels():
    labels = np.arange(100) % 2 == 0
    scores = np.where(labels, 0.9, 0.1)
    result = automation_share(scores, labels, 0.5, scores, labels)
    assert result["share"] == pytest.approx(1.0)
    assert result["error"] == pytest.approx(0.0)


def test_automation_keeps_the_confident_right_block_and_defers_the_coin_flips():
    # 60 items far from the threshold are all right; the 40 near it alternate wrong, right, wrong, ... (most
    # confident first). Taking items in order: 60 + 6 has 3 wrong (4.5%), 60 + 7 has 4 wrong (6.0%), and no longer
    # prefix gets back under 5% (4 of 68 is 5.9%, ...). So 66 of 100 are automated. Train and test are the same.
    far = np.linspace(0.95, 0.99, 60)
    near = np.linspace(0.59, 0.51, 40)  # most confident first
    scores = np.concatenate([far, near])
    labels = np.concatenate([np.ones(60, dtype=bool), np.arange(40) % 2 == 1])  # near: wrong, right, wrong, ...
    result = automation_share(scores, labels, 0.5, scores, labels)
    assert result["share"] == pytest.approx(66 / 100)
    assert result["error"] == pytest.approx(3 / 66)


def test_confidence_cutoff_is_none_when_even_the_most_confident_item_is_wrong():
    assert confidence_cutoff(np.array([0.99, 0.6]), np.array([False, True]), 0.5) is None
