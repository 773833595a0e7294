"""Bench statistics against cases whose answer is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.metrics import Accuracy, BalancedAccuracy
from jevserve.bench.stats import (
    automation_share,
    bootstrap_weights,
    brier,
    confidence_cutoff,
    expected_calibration_error,
    interval,
    mean_with_interval,
    normalised,
    paired_ranks,
    resampled_scores,
)


def test_normalised_score_is_zero_for_the_default_and_hundred_for_the_oracle():
    assert normalised(0.6, 0.6, 1.0) == pytest.approx(0.0)
    assert normalised(1.0, 0.6, 1.0) == pytest.approx(100.0)
    assert normalised(0.8, 0.6, 1.0) == pytest.approx(50.0)


def test_normalised_score_goes_below_zero_when_worse_than_the_default():
    assert normalised(0.5, 0.6, 1.0) == pytest.approx(-25.0)


def test_normalised_score_is_undefined_when_the_oracle_is_no_better_than_the_default():
    assert np.isnan(normalised(0.7, 1.0, 1.0))


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


def test_resampled_scores_keep_the_default_at_zero_and_the_oracle_at_hundred():
    labels = np.arange(100) % 3 == 0
    default = np.zeros(100, dtype=bool)
    weights = bootstrap_weights(list(range(100)), 300, seed=2)
    metric = BalancedAccuracy()
    assert np.allclose(resampled_scores(metric, labels, default, default, labels, weights), 0.0)
    assert np.allclose(resampled_scores(metric, labels, labels, default, labels, weights), 100.0)


def test_mean_with_interval_averages_tasks_resample_by_resample():
    a, b = np.array([10.0, 20.0, 30.0]), np.array([30.0, 40.0, np.nan])
    means, _ = mean_with_interval([a, b])
    assert np.allclose(means, [20.0, 30.0, 30.0])


def test_paired_ranks_put_a_model_that_is_never_worse_first_on_every_resample():
    # B is right wherever A is, and on 10 more of 200 items: on any paired draw B's accuracy is >= A's.
    n = 200
    labels = np.ones(n, dtype=bool)
    a = np.arange(n) < 120
    b = np.arange(n) < 130
    weights = bootstrap_weights(list(range(n)), 1000, seed=11)
    metric = Accuracy()
    resampled = {"a": metric.weighted(labels, a, weights), "b": metric.weighted(labels, b, weights)}
    ranks = paired_ranks(resampled, {"a": metric(labels, a), "b": metric(labels, b)})
    assert ranks["b"] == {"rank": 1, "low": 1, "high": 1}
    assert ranks["a"]["rank"] == 2


def test_unpaired_resamples_would_not_separate_the_same_two_models():
    # The same two models scored on independent draws overlap: pairing is what makes the difference visible.
    n = 200
    labels = np.ones(n, dtype=bool)
    a, b = np.arange(n) < 120, np.arange(n) < 130
    metric = Accuracy()
    resampled = {
        "a": metric.weighted(labels, a, bootstrap_weights(list(range(n)), 1000, seed=1)),
        "b": metric.weighted(labels, b, bootstrap_weights(list(range(n)), 1000, seed=2)),
    }
    ranks = paired_ranks(resampled, {"a": 0.60, "b": 0.65})
    assert ranks["b"]["high"] == 2


def test_identical_models_tie_for_first_place():
    values = np.array([0.5, 0.6, 0.7])
    ranks = paired_ranks({"a": values, "b": values.copy()}, {"a": 0.6, "b": 0.6})
    assert ranks["a"] == ranks["b"] == {"rank": 1, "low": 1, "high": 1}


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


def test_joint_draws_give_items_that_share_a_key_across_tasks_the_same_weight():
    from jevserve.bench.stats import joint_bootstrap_weights

    keys = {
        "route": [("g:p1", "t:a"), ("g:p2", "t:b"), ("g:p3", "t:c")],
        "verify": [("g:p1", "t:x"), ("g:p1", "t:y"), ("g:p9", "t:z")],
        "guard": [("t:b",), ("t:q",)],  # shares a text with route's second item
    }
    weights = joint_bootstrap_weights(keys, 300, seed=7)
    assert weights["route"].shape == (300, 3) and weights["guard"].shape == (300, 2)
    assert np.array_equal(weights["route"][:, 0], weights["verify"][:, 0])
    assert np.array_equal(weights["verify"][:, 0], weights["verify"][:, 1])
    assert np.array_equal(weights["route"][:, 1], weights["guard"][:, 0])
    assert not np.array_equal(weights["route"][:, 2], weights["verify"][:, 2])
    # six clusters in all (p1, p2 with b, p3, p9, q): each draw picks as many clusters as there are
    clusters = [weights["route"][:, 0], weights["route"][:, 1], weights["route"][:, 2], weights["verify"][:, 2],
                weights["guard"][:, 1]]
    assert np.all(sum(clusters) == 5)
    again = joint_bootstrap_weights(keys, 300, seed=7)
    assert all(np.array_equal(weights[t], again[t]) for t in keys)
