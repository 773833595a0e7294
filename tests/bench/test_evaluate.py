"""Predictors of a task: thresholds from train only, source-only rows for pooled tasks."""

from __future__ import annotations

import dataclasses

import numpy as np

from jevserve.bench.evaluate import DEFAULT, MAJORITY, MODEL, ORACLE, STYLE, TFIDF, evaluate
from jevserve.bench.task import split_items
from jevserve.bench.tasks.route_math import RouteMath
from tests.bench.builders import KeywordTask, fake_answer


def _answers(task, items):
    return [fake_answer({**task.request(i), "model": "m"})["answers"] for i in items]


def test_the_rule_is_tuned_on_train_and_ignores_test_labels():
    task = KeywordTask()
    train, test = split_items(task.load_items(None))
    outcome = evaluate(task, train, test, None, _answers(task, train), _answers(task, test))
    flipped = [dataclasses.replace(i, label=not i.label) for i in test]
    again = evaluate(task, train, flipped, None, _answers(task, train), _answers(task, flipped))
    assert outcome.predictions[MODEL].rule == again.predictions[MODEL].rule
    assert np.array_equal(outcome.predictions[MODEL].values, again.predictions[MODEL].values)
    assert set(outcome.predictions) == {MODEL, DEFAULT, ORACLE, TFIDF, STYLE}  # the surface probe on every task


def test_a_pooled_task_gets_the_source_only_rows():
    class Pooled(KeywordTask):
        pooled = True

    task = Pooled()
    train, test = split_items(task.load_items(None))
    outcome = evaluate(task, train, test, None)
    assert {STYLE, MAJORITY} <= set(outcome.predictions) and MODEL not in outcome.predictions
    assert MAJORITY not in evaluate(KeywordTask(), train, test, None).predictions  # one source: nothing to know


def test_the_routing_oracle_sends_to_the_cheap_model_unless_only_the_strong_one_is_right():
    labels = np.array([[True, True], [False, True], [False, False], [True, False]])
    assert RouteMath().oracle(labels).tolist() == [True, False, True, True]
    assert RouteMath().target(labels).tolist() == [True, False, False, True]
