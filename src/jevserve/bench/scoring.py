"""Score a task outcome for one row of the board: metric values with intervals, the normalised score with its
interval, calibration and automation, and the per-item arrays the board needs to rank rows on paired resamples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jevserve.bench.evaluate import DEFAULT, MAJORITY, MODEL, ORACLE, STYLE, TaskOutcome
from jevserve.bench.metrics import Metric, metric_by_name
from jevserve.bench.stats import (
    ECE_BINS,
    NUM_RESAMPLES,
    bootstrap_weights,
    brier,
    expected_calibration_error,
    interval,
    joint_bootstrap_weights,
    normalised,
    resampled_scores,
    task_seed,
)

SOURCE_ONLY = (STYLE, MAJORITY)


def cluster_codes(clusters: tuple[str, ...]) -> np.ndarray:
    """Small integer codes for cluster names, in order of first appearance (what results files store)."""
    codes: dict[str, int] = {}
    return np.array([codes.setdefault(c, len(codes)) for c in clusters], dtype=np.int64)


def _value(metric: Metric, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
    return {"value": metric(labels, values), "interval": list(interval(metric.weighted(labels, values, weights)))}


def score_row(
    outcome: TaskOutcome, row: str = MODEL, *, num_resamples: int = NUM_RESAMPLES, with_items: bool = True
) -> dict[str, Any]:
    """Everything the results file says about one task for the predictor `row` (model, default, or a baseline)."""
    task, metric, labels = outcome.task, outcome.task.metric, outcome.labels
    if row not in outcome.predictions:
        raise KeyError(f"task {task.name} has no predictor {row!r}; it has: {', '.join(outcome.predictions)}")
    weights = bootstrap_weights(cluster_codes(outcome.clusters), num_resamples, task_seed(task.name))
    predicted = outcome.predictions[row]
    default, oracle = outcome.predictions[DEFAULT].values, outcome.predictions[ORACLE].values
    metrics = {name: _value(metric, labels, p.values, weights) for name, p in outcome.predictions.items()}
    score = float(normalised(metrics[row]["value"], metrics[DEFAULT]["value"], metrics[ORACLE]["value"]))
    resampled = resampled_scores(metric, labels, predicted.values, default, oracle, weights)
    result: dict[str, Any] = {
        "task": task.name,
        "category": task.category,
        "metric": metric.name,
        "n_train": outcome.num_train,
        "n_test": len(labels),
        "score": score,
        "score_interval": list(interval(resampled)),
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
    for name in SOURCE_ONLY:
        if name in outcome.predictions:
            values = outcome.predictions[name].values
            source_only[name] = {
                "score": float(normalised(metrics[name]["value"], metrics[DEFAULT]["value"], metrics[ORACLE]["value"])),
                "interval": list(interval(resampled_scores(metric, labels, values, default, oracle, weights))),
            }
    result["source_only"] = source_only or None
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
    return result


def rescore(task_result: dict[str, Any], metric: Metric, *, num_resamples: int = NUM_RESAMPLES) -> np.ndarray:
    """The resampled scores of a stored task result (the same draws `score_row` used), for averages and ranks."""
    items = task_result["items"]
    labels = np.asarray(items["labels"])
    weights = bootstrap_weights(items["clusters"], num_resamples, task_seed(task_result["task"]))
    return resampled_scores(
        metric, labels, np.asarray(items["values"]), np.asarray(items["default"]), np.asarray(items["oracle"]), weights
    )


def joint_rescore(
    task_results: Mapping[str, dict[str, Any]], *, num_resamples: int = NUM_RESAMPLES
) -> dict[str, np.ndarray]:
    """Resampled scores of stored task results on JOINT draws (items sharing a group or a text are drawn together
    across tasks), for averages and ranks; results without cluster keys (older files) fall back to per-task draws."""
    if not task_results:
        return {}
    if not all("cluster_keys" in r.get("items", {}) for r in task_results.values()):
        return {
            n: rescore(r, metric_by_name(r["metric"]), num_resamples=num_resamples) for n, r in task_results.items()
        }
    weights = joint_bootstrap_weights(
        {n: r["items"]["cluster_keys"] for n, r in task_results.items()}, num_resamples
    )
    out = {}
    for name, result in task_results.items():
        items = result["items"]
        out[name] = resampled_scores(
            metric_by_name(result["metric"]), np.asarray(items["labels"]), np.asarray(items["values"]),
            np.asarray(items["default"]), np.asarray(items["oracle"]), weights[name],
        )
    return out
