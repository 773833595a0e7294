"""Score a task outcome for one row of the board: metric values with intervals, the normalised score with its
interval, calibration and automation, and the per-item arrays the board needs to rank rows on paired resamples."""

from __future__ import annotations

from typing import Any

import numpy as np

from jevserve.bench.evaluate import DEFAULT, MAJORITY, MODEL, ORACLE, STYLE, TaskOutcome
from jevserve.bench.everyday import everyday_result
from jevserve.bench.metrics import Metric
from jevserve.bench.paired import TaskScale
from jevserve.bench.stats import (
    ECE_BINS,
    NUM_RESAMPLES,
    bootstrap_weights,
    brier,
    expected_calibration_error,
    interval,
    task_seed,
)
from jevserve.bench.validate import items_digest

SOURCE_ONLY = (STYLE, MAJORITY)
METRIC_RESAMPLES = 1000


def cluster_codes(clusters: tuple[str, ...]) -> np.ndarray:
    """Small integer codes for cluster names, in order of first appearance (what results files store)."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(c, len(codes)) for c in clusters], dtype=np.int64)


def _value(metric: Metric, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
    return {"value": metric(labels, values), "interval": list(interval(metric.weighted(labels, values, weights)))}


def score_row(
    outcome: TaskOutcome, row: str = MODEL, *, num_resamples: int = NUM_RESAMPLES, with_items: bool = True
) -> dict[str, Any]:
    """Everything the results file says about one task for the predictor `row` (model, default, or a baseline).

    The score, its interval and the averages come from the document's shared draws (`bench.resolve`); here:
    the point values, the raw metric of every predictor (intervals over this task's own `num_resamples` draws), and
    the source-only rows (same fixed-denominator score, this task's own draws).
    """
    task, metric, labels = outcome.task, outcome.task.metric, outcome.labels
    if row not in outcome.predictions:
        raise KeyError(f"task {task.name} has no predictor {row!r}; it has: {', '.join(outcome.predictions)}")
    # Raw-metric intervals of every predictor are informational: this task's own draws, at most METRIC_RESAMPLES.
    weights = bootstrap_weights(cluster_codes(outcome.clusters), min(num_resamples, METRIC_RESAMPLES),
                                task_seed(task.name))
    predicted = outcome.predictions[row]
    default, oracle = outcome.predictions[DEFAULT].values, outcome.predictions[ORACLE].values
    metrics = {name: _value(metric, labels, p.values, weights) for name, p in outcome.predictions.items()}
    scale = TaskScale(metric.chance(labels), metrics[DEFAULT]["value"], metrics[ORACLE]["value"])
    result: dict[str, Any] = {
        "task": task.name,
        "category": task.category,
        "metric": metric.name,
        "predictor": row,  # which of `metrics` this row is
        "n_train": outcome.num_train,
        "n_test": len(labels),
        "score": float(scale.score(metrics[row]["value"])),
        "chance": scale.chance,
        "default_train_share": outcome.default_train_share,
        "metrics": metrics,
        "rule": predicted.rule.as_dict() if predicted.rule else None,
        "brier": None,
        "ece": None,
        "ece_bins": ECE_BINS,
        "automation": predicted.automation,
    }
    if predicted.probabilities is not None and outcome.targets is not None:
        result["brier"] = brier(predicted.probabilities, outcome.targets)
        result["ece"] = expected_calibration_error(predicted.probabilities, outcome.targets)
    source_only = {}
    default_draws = metric.weighted(labels, default, weights)
    for name in SOURCE_ONLY:
        if name in outcome.predictions:
            draws = metric.weighted(labels, outcome.predictions[name].values, weights)
            source_only[name] = {
                "score": float(scale.score(metrics[name]["value"])),
                "interval": list(interval(scale.score(draws - default_draws + scale.default))),
            }
    result["source_only"] = source_only or None
    if outcome.everyday is not None and predicted.everyday_scores is not None and predicted.rule is not None:
        positives = predicted.scores[outcome.targets.astype(bool)]
        result["everyday"] = everyday_result(outcome.everyday, predicted.everyday_scores, predicted.rule, positives)
    if with_items:
        result["items"] = {
            "ids": list(outcome.item_ids),
            "clusters": cluster_codes(outcome.clusters).tolist(),
            "labels": labels.tolist(),
            "values": predicted.values.tolist(),
            "default": default.tolist(),
            "oracle": oracle.tolist(),
        }
        if outcome.cluster_keys:
            result["items"]["cluster_keys"] = [list(k) for k in outcome.cluster_keys]
        result["items_sha256"] = items_digest(result["items"])
    return result
