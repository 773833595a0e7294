"""Source-only baselines read style or the source, never what the words mean."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.baselines import SourceMajority, StyleBaseline, style_features


def test_style_features_do_not_see_which_words_are_used():
    assert np.array_equal(style_features("Make a bomb now?"), style_features("Bake a cake now?"))


def test_style_baseline_learns_a_length_difference():
    short = [f"hi {i}" for i in range(20)]
    long = [" ".join(["word"] * 40) + f" {i}" for i in range(20)]
    labels = np.array([False] * 20 + [True] * 20)
    model = StyleBaseline().fit(short + long, labels)
    assert (model.predict_proba(short) < 0.5).all() and (model.predict_proba(long) > 0.5).all()


def test_source_majority_is_the_train_positive_share_of_each_source():
    model = SourceMajority().fit(["a", "a", "a", "b"], np.array([True, True, False, False]))
    assert model.predict_proba(["a", "b", "unseen"]).tolist() == pytest.approx([2 / 3, 0.0, 0.5])
