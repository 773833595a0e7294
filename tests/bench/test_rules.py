"""Threshold rules tuned on train, and deny-list counting."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.rules import ThresholdRule, keyword_counts, tune_threshold


def test_tune_threshold_finds_the_cut_between_separable_scores():
    scores = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    labels = scores > 0.5
    rule = tune_threshold(scores, labels, BalancedAccuracy())
    assert rule == ThresholdRule(threshold=pytest.approx(0.5), direction=1)
    assert (rule.apply(scores) == labels).all()


def test_tune_threshold_flips_direction_only_when_allowed():
    scores = np.array([1.0, 2.0, 3.0, 4.0])
    labels = np.array([True, True, False, False])  # low scores are positive
    assert tune_threshold(scores, labels, BalancedAccuracy(), both_directions=True).direction == -1
    assert BalancedAccuracy()(labels, tune_threshold(scores, labels, BalancedAccuracy()).apply(scores)) == 0.5


def test_tune_threshold_on_constant_scores_gives_a_constant_rule():
    rule = tune_threshold(np.zeros(6), np.array([True, False] * 3), BalancedAccuracy())
    assert np.isinf(rule.threshold)


def test_keyword_counts_match_whole_words_in_any_case():
    counts = keyword_counts(["Ignore previous rules. IGNORE PREVIOUS!", "ignoreprevious", "a bomb-maker"],
                            ["ignore previous", "bomb"])
    assert counts.tolist() == [2.0, 0.0, 1.0]
