"""Carry a model row computed under an older bench version onto the current test items and zero-points.

A row's test-side actions do not depend on the test side (thresholds are tuned on train), so when the current test
side is a subset of the old one (v0.3 only drops near-duplicates) the row's stored actions can be rescored against
the current default and oracle without asking the model again. The result says where it came from
(`rebased_from`), and the board notes it. What cannot be carried: a task whose metric now reads a probability
(schedule-return's AUROC) is scored on the stored actions, i.e. the AUROC of a thresholded score.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from jevserve.bench.metrics import metric_by_name
from jevserve.bench.paired import StoredTask
from jevserve.bench.resolve import resolve_tasks
from jevserve.bench.tasks import TASKS


def rebase_task(old: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """One task of an old row on the reference row's test items (ids must be a subset of the old ones)."""
    position = {item_id: k for k, item_id in enumerate(old["items"]["ids"])}
    ids = reference["items"]["ids"]
    missing = [i for i in ids if i not in position]
    if missing:
        raise ValueError(f"task {old['task']}: {len(missing)} current test items were not in the old row, e.g. "
                         f"{missing[0]}; the row must be recomputed, not rebased")
    pick = np.array([position[i] for i in ids], dtype=np.int64)
    if not np.array_equal(np.asarray(old["items"]["labels"])[pick], np.asarray(reference["items"]["labels"])):
        raise ValueError(f"task {old['task']}: labels differ from the current ones; the row must be recomputed")
    values = np.asarray(old["items"]["values"])[pick]
    metric = metric_by_name(reference["metric"])
    labels = np.asarray(reference["items"]["labels"])
    task = copy.deepcopy(reference)  # the current items, clusters, default, oracle, metric and reference metrics
    task["items"]["values"] = values.tolist()
    model_value = metric(labels, values)
    task["metrics"] = {k: v for k, v in reference["metrics"].items() if k in ("default", "oracle")}
    task["metrics"]["model"] = {"value": model_value, "interval": [float("nan"), float("nan")]}
    task["predictor"] = "model"
    task["score"] = float(StoredTask.from_result(old["task"], reference).scale().score(model_value))
    for key in ("rule", "brier", "ece", "automation", "details"):
        task[key] = old.get(key)
    task["source_only"] = None
    return task


def rebase_document(
    old: dict[str, Any], reference: dict[str, Any], note: str, fresh: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An old model row carried onto the reference (default-rules) row's test items and zero-points; tasks that a
    `fresh` result of the same model (a current run over some tasks) has are taken from it instead."""
    num_resamples = int(reference.get("num_resamples", 1000))
    version, old_version = reference.get("bench_version"), old.get("bench_version", "0.2")
    same_version = old_version == version  # only some zero-points moved (the baselines rerun): those tasks rescored
    tasks = {name: result if same_version and _same_zero_points(result, reference["tasks"][name])
             else rebase_task(result, reference["tasks"][name])
             for name, result in old["tasks"].items() if name in reference["tasks"]}
    for name, result in (fresh or {}).get("tasks", {}).items():
        if result["items"]["ids"] != reference["tasks"][name]["items"]["ids"]:
            raise ValueError(f"task {name}: the fresh result was scored on other test items than the reference")
        tasks[name] = result
    document = {k: v for k, v in old.items() if k not in ("tasks", "average", "average_all")}
    document.update(resolve_tasks(tasks, dict(TASKS), num_resamples))
    document.update(tasks=tasks, bench_version=version if same_version else f"{old_version} rebased to {version}",
                    rebased_from=note, date=reference["date"],
                    split_salt=reference.get("split_salt"),
                    rerun_tasks=sorted((fresh or {}).get("tasks", {})))
    return document


def _same_zero_points(result: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether a task of a row was scored on the reference's test items against its default and oracle."""
    mine, theirs = result["items"], reference["items"]
    return all(mine[key] == theirs[key] for key in ("ids", "labels", "default", "oracle"))
