"""The supervised tfidf-lr baseline: learns the words of the train side, never reads the test labels."""

from __future__ import annotations

import dataclasses

import numpy as np

from jevserve.bench.evaluate import TFIDF, evaluate
from jevserve.bench.supervised import TfidfClassifier, TfidfLengthRegressor
from jevserve.bench.task import split_items
from tests.bench.builders import KeywordTask


def test_the_classifier_learns_a_word_that_separates_the_train_labels():
    texts = [f"{'refund' if i % 2 else 'weather'} request number {i}" for i in range(40)]
    labels = np.array([i % 2 == 1 for i in range(40)])
    model = TfidfClassifier().fit(texts, labels)
    p = model.predict_proba(["refund request number 99", "weather request number 98"])
    assert p[0] > 0.5 > p[1]


def test_a_single_class_train_side_answers_its_share():
    model = TfidfClassifier().fit(["a b", "a b", "c d"], np.array([True, True, True]))
    assert model.predict_proba(["x y"]).tolist() == [1.0]


def test_the_length_regressor_ranks_long_reply_prompts_above_short_ones():
    texts = [("write an essay" if i % 2 else "say yes or no") + f" topic {i}" for i in range(60)]
    replies = np.array([800.0 if i % 2 else 5.0 for i in range(60)])
    model = TfidfLengthRegressor().fit(texts, np.full(60, 10.0), replies)
    long, short = model.predict(["write an essay topic 7", "say yes or no topic 8"], np.array([10.0, 10.0]))
    assert long > 10 * short


def test_the_supervised_row_is_fitted_on_train_only():
    task = KeywordTask()
    train, test = split_items(task.load_items(None))
    outcome = evaluate(task, train, test, None)
    flipped = [dataclasses.replace(i, label=not i.label) for i in test]
    again = evaluate(task, train, flipped, None)
    assert np.array_equal(outcome.predictions[TFIDF].values, again.predictions[TFIDF].values)
    assert outcome.predictions[TFIDF].rule == again.predictions[TFIDF].rule
    # "bad" vs "fine" is in the words, so the bag of words gets every test item right
    assert np.array_equal(outcome.predictions[TFIDF].values, outcome.labels)
