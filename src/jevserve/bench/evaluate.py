"""Turn a task's items and a model's answers into test-side predictions of every predictor.

Predictors: the model (its answers), the default rule, the oracle, and for pooled tasks the two source-only
baselines. Every threshold is tuned on the train side and then applied, unchanged, to the test side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from jevserve.bench.baselines import SourceMajority, StyleBaseline
from jevserve.bench.everyday import EverydayItems
from jevserve.bench.rules import ThresholdRule, tune_threshold
from jevserve.bench.stats import automation_share
from jevserve.bench.supervised import TfidfClassifier, TfidfLengthRegressor
from jevserve.bench.task import Answers, Item, Task, state_key

MODEL, DEFAULT, ORACLE, STYLE, MAJORITY = "model", "default", "oracle", "source-style", "source-majority"
TFIDF = "tfidf-lr"  # the supervised per-task baseline (bench.supervised)


@dataclass(frozen=True)
class Prediction:
    """One predictor's output on the test items."""

    values: np.ndarray  # what the metric reads: actions (bool) or predicted values
    probabilities: np.ndarray | None = None  # P(positive) per test item, where the predictor has one
    rule: ThresholdRule | None = None  # the rule tuned on train, for thresholded tasks
    automation: dict[str, Any] | None = None  # automation share at the error budget (stats.automation_share)
    scores: np.ndarray | None = None  # the score the rule thresholds, per test item (thresholded predictors)
    everyday_scores: np.ndarray | None = None  # the same score per everyday item (bench.everyday)


@dataclass(frozen=True)
class TaskOutcome:
    """A task's test items, their truth and what each predictor said about them."""

    task: Task
    item_ids: tuple[str, ...]  # test items, in order
    clusters: tuple[str, ...]  # resampling unit per test item
    labels: np.ndarray  # as the metric reads them
    targets: np.ndarray | None  # 0/1 truth a probability predicts (None for value predictions)
    num_train: int
    predictions: dict[str, Prediction]
    # per test item, the keys that tie it to items of other tasks (its group, its text), for joint resampling
    cluster_keys: tuple[tuple[str, ...], ...] = ()
    # the share of the chance-to-oracle range the default rule closes on the TRAIN side (bench.paired.near_oracle)
    default_train_share: float | None = None
    everyday: EverydayItems | None = None  # the task's everyday items, when measured


def _thresholded(
    task: Task, train_scores: np.ndarray, train_labels: np.ndarray, test_scores: np.ndarray,
    test_labels: np.ndarray, *, both_directions: bool, probabilities: bool,
) -> Prediction:
    rule = tune_threshold(train_scores, train_labels, task.metric, both_directions=both_directions)
    train_target, test_target = task.target(train_labels), task.target(test_labels)
    # Automation reads scores in the rule's direction, so "far above the threshold" always means "act".
    signed = rule.direction
    automation = automation_share(
        signed * train_scores, train_target, signed * rule.threshold, signed * test_scores, test_target
    )
    return Prediction(
        values=rule.apply(test_scores),
        probabilities=test_scores if probabilities else None,
        rule=rule,
        automation=automation,
        scores=test_scores,
    )


def _supervised(
    task: Task, train: Sequence[Item], test: Sequence[Item], train_labels: np.ndarray, test_labels: np.ndarray,
    default_train: np.ndarray, default_test: np.ndarray, everyday: Sequence[Item] = (),
) -> Prediction:
    train_texts, test_texts = [i.state for i in train], [i.state for i in test]
    if not task.thresholded and train_labels.dtype == bool:
        # A ranking of a yes/no label (AUROC): the classifier's probability is the ranking score.
        classifier = TfidfClassifier().fit(train_texts, train_labels)
        return Prediction(values=classifier.predict_proba(test_texts))
    if not task.thresholded:
        # A value prediction (reply length): ridge on the text and the default rule's own number (prompt tokens).
        regressor = TfidfLengthRegressor().fit(train_texts, default_train, train_labels)
        return Prediction(values=regressor.predict(test_texts, default_test))
    classifier = TfidfClassifier().fit(train_texts, task.target(train_labels))
    prediction = _thresholded(
        task, classifier.predict_proba(train_texts), train_labels, classifier.predict_proba(test_texts), test_labels,
        both_directions=False, probabilities=True,
    )
    if everyday:
        prediction = replace(prediction, everyday_scores=classifier.predict_proba([i.state for i in everyday]))
    return prediction


def evaluate(
    task: Task, train: Sequence[Item], test: Sequence[Item], data: Any,
    train_answers: Sequence[Answers | None] | None = None, test_answers: Sequence[Answers | None] | None = None,
    *, everyday: EverydayItems | None = None, everyday_answers: Sequence[Answers | None] | None = None,
) -> TaskOutcome:
    """Predictions of the model (when answers are given), the default rule, the oracle, the supervised baseline
    (tfidf-lr) and, for pooled tasks, the source-only baselines; with `everyday`, the default's, the model's and
    tfidf-lr's scores on the everyday items too."""
    if not train or not test:
        raise ValueError(f"task {task.name}: {len(train)} train and {len(test)} test items; both sides are needed")
    train_labels, test_labels = task.labels(train), task.labels(test)
    predictions: dict[str, Prediction] = {ORACLE: Prediction(values=task.oracle(test_labels))}

    default = task.default_scores([*train, *test], data)
    default_train, default_test = default[: len(train)], default[len(train) :]
    if task.thresholded:
        predictions[DEFAULT] = _thresholded(
            task, default_train, train_labels, default_test, test_labels,
            both_directions=task.default_tunes_direction, probabilities=False,
        )
    else:
        if task.default_tunes_direction and task.metric(train_labels, -default_train) > task.metric(
            train_labels, default_train
        ):  # the default's sign is chosen on train, as a thresholded default's direction is
            default_train, default_test = -default_train, -default_test
        predictions[DEFAULT] = Prediction(values=default_test)
    default_train_share = train_share(task, train_labels, default_train, predictions[DEFAULT].rule)

    if train_answers is not None and test_answers is not None:
        model_train, model_test = task.model_scores(train, train_answers, test, test_answers)
        if task.thresholded:
            predictions[MODEL] = _thresholded(
                task, model_train, train_labels, model_test, test_labels, both_directions=False, probabilities=True
            )
        else:
            predictions[MODEL] = Prediction(values=model_test)

    predictions[TFIDF] = _supervised(task, train, test, train_labels, test_labels, default_train, default_test,
                                     everyday.items if everyday and task.thresholded else ())
    if everyday is not None and task.thresholded and everyday.items:
        predictions[DEFAULT] = replace(predictions[DEFAULT],
                                       everyday_scores=task.default_scores(everyday.items, data))
        if MODEL in predictions and everyday_answers is not None:
            predictions[MODEL] = replace(predictions[MODEL], everyday_scores=task.model_scores(
                [], [], everyday.items, everyday_answers)[1])

    if task.thresholded:
        # surface features on every thresholded task: how far a text's look gets without its meaning (four keywords
        # and a length rule scored level with the embedded default on a verify task); on a pooled task that look
        # includes its source's, and knowing the source is a probe of its own
        target = task.target(train_labels)
        style = StyleBaseline().fit([i.state for i in train], target)
        predictions[STYLE] = _thresholded(
            task, style.predict_proba([i.state for i in train]), train_labels,
            style.predict_proba([i.state for i in test]), test_labels, both_directions=False, probabilities=True,
        )
        if task.pooled:
            majority = SourceMajority().fit([i.source for i in train], target)
            predictions[MAJORITY] = _thresholded(
                task, majority.predict_proba([i.source for i in train]), train_labels,
                majority.predict_proba([i.source for i in test]), test_labels, both_directions=False,
                probabilities=True,
            )

    return TaskOutcome(
        task=task,
        item_ids=tuple(i.item_id for i in test),
        clusters=tuple(i.cluster for i in test),
        labels=test_labels,
        targets=task.target(test_labels) if task.thresholded else None,
        num_train=len(train),
        predictions=predictions,
        cluster_keys=tuple(cluster_keys(i) for i in test),
        default_train_share=default_train_share,
        everyday=everyday if everyday is not None and everyday.items else None,
    )


def train_share(task: Task, labels: np.ndarray, scores: np.ndarray, rule: ThresholdRule | None) -> float | None:
    """(m − chance) / (oracle − chance) of the default rule on the train side (its tuned rule applied to train)."""
    metric = task.metric
    value = metric(labels, rule.apply(scores) if rule is not None else scores)
    chance, oracle = metric.chance(labels), metric(labels, task.oracle(labels))
    return float((value - chance) / (oracle - chance)) if oracle - chance > 1e-12 else None


def cluster_keys(item: Item) -> tuple[str, ...]:
    """An item's keys for resampling across tasks: its group (when it has one) and its text's content id."""
    text = "t:" + state_key(item)[-16:]
    return (f"g:{item.group}", text) if item.group else (text,)
