"""Metrics on all items and on count-weighted resamples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import balanced_accuracy_score

from jevserve.bench.metrics import Auroc, BalancedAccuracy, KendallTau, RouteUtility, metric_by_name


def test_balanced_accuracy_on_weights_equals_sklearn_on_repeated_items():
    rng = np.random.default_rng(4)
    labels, values = rng.uniform(size=60) < 0.3, rng.uniform(size=60) < 0.5
    weights = rng.integers(0, 3, size=(5, 60))
    expected = [
        balanced_accuracy_score(np.repeat(labels, w), np.repeat(values, w)) for w in weights
    ]
    assert np.allclose(BalancedAccuracy().weighted(labels, values, weights), expected)


def test_balanced_accuracy_of_a_constant_rule_is_one_half_whatever_the_balance():
    labels = np.arange(100) < 10
    assert BalancedAccuracy()(labels, np.zeros(100, dtype=bool)) == pytest.approx(0.5)
    assert BalancedAccuracy()(labels, np.ones(100, dtype=bool)) == pytest.approx(0.5)


def test_route_utility_pays_for_strong_calls_and_counts_right_answers():
    # cheap right, strong right; cheap wrong, strong right; both wrong
    labels = np.array([[True, True], [False, True], [False, False]])
    metric = RouteUtility(strong_cost=0.2)
    assert metric(labels, np.array([True, False, True])) == pytest.approx((1 + 0.8 + 0) / 3)
    assert metric(labels, np.array([False, False, False])) == pytest.approx((0.8 + 0.8 - 0.2) / 3)


def test_kendall_tau_on_weights_equals_scipy_on_repeated_items():
    rng = np.random.default_rng(1)
    truth, predicted = rng.uniform(size=40), rng.uniform(size=40)
    weights = rng.integers(0, 3, size=(3, 40))
    expected = [stats.kendalltau(np.repeat(predicted, w), np.repeat(truth, w)).statistic for w in weights]
    assert np.allclose(KendallTau().weighted(truth, predicted, weights), expected)


def test_kendall_tau_of_a_constant_prediction_is_zero():
    assert KendallTau()(np.arange(10.0), np.ones(10)) == 0.0


def test_metric_by_name_lists_the_known_metrics_for_an_unknown_one():
    with pytest.raises(ValueError, match="expected one of: accuracy, auroc, balanced_accuracy"):
        metric_by_name("f1")


def test_auroc_is_one_for_a_perfect_ranking_and_a_half_for_a_constant_one():
    from jevserve.bench.metrics import Auroc

    labels = np.array([False, False, True, True])
    assert Auroc()(labels, np.array([0.1, 0.2, 0.8, 0.9])) == 1.0
    assert Auroc()(labels, np.full(4, 0.5)) == 0.5
    weights = np.array([[1, 1, 0, 0], [2, 0, 1, 1]])  # a draw without positives is undefined
    values = Auroc().weighted(labels, np.array([0.1, 0.2, 0.8, 0.9]), weights)
    assert np.isnan(values[0]) and values[1] == 1.0


def test_vectorised_kendall_tau_b_equals_scipy_on_the_repeated_items():
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 60, 300).astype(float)  # ties in both
    predicted = np.round(truth * rng.lognormal(0, 0.8, 300) / 10)
    weights = rng.multinomial(300, np.full(300, 1 / 300), size=15)
    ours = KendallTau().weighted(truth, predicted, weights)
    scipys = [stats.kendalltau(np.repeat(predicted, w), np.repeat(truth, w)).statistic for w in weights]
    assert np.allclose(ours, scipys, atol=1e-12)
    assert KendallTau().weighted(truth, np.ones(300), weights[:2]).tolist() == [0.0, 0.0]


def test_vectorised_auroc_equals_scikit_learn_with_sample_weights():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(5)
    labels = rng.random(200) < 0.3
    scores = np.round(rng.random(200), 1)  # many ties
    weights = rng.multinomial(200, np.full(200, 1 / 200), size=10)
    ours = Auroc().weighted(labels, scores, weights)
    assert np.allclose(ours, [roc_auc_score(labels, scores, sample_weight=w) for w in weights], atol=1e-12)
    assert np.isnan(Auroc().weighted(np.ones(5, dtype=bool), np.arange(5.0), np.ones((1, 5)))[0])
