"""Check a submitted results file against the bench it claims to be scored on, so outside rows can be added by pull
request: `jevserve bench validate results/<row>/<date>.json`.

A submission is a results file exactly as `jevserve bench run` writes it (docs/bench.md, "Submitting a row"). It is
accepted when: it reads as a bench result of this file version and of the current bench version; it names its row
and the command that made it; every task is a task of the bench; per task, its test items (ids, labels, clusters),
the default rule's and the oracle's test actions, and the items' digest (`items_sha256`) equal those of the current
reference row (default-rules), it has one prediction per item, its stored score is what its predictions give, and
its endpoint answered all but at most 5% of the items it was asked about (`MAX_UNANSWERED_SHARE`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from jevserve.bench.paired import StoredTask
from jevserve.bench.results import MAX_UNANSWERED_SHARE, unanswered_note, unanswered_share


def items_digest(items: Mapping[str, Any]) -> str:
    """sha256 of a task's test item ids and labels (what a submission must have been scored on)."""
    payload = json.dumps([items["ids"], items["labels"]], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _task_problems(name: str, task: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    items, ref = task.get("items") or {}, reference["items"]
    problems = []
    for key in ("ids", "labels", "default", "oracle"):
        if items.get(key) != ref[key]:
            problems.append(f"{name}: its test {key} differ from the current bench's; rerun `jevserve bench run`")
    if task.get("metric") != reference["metric"]:
        problems.append(f"{name}: metric {task.get('metric')!r}, the bench uses {reference['metric']!r}")
    values = items.get("values")
    if not isinstance(values, list) or len(values) != len(ref["ids"]):
        problems.append(f"{name}: {len(values) if isinstance(values, list) else 'no'} predictions for "
                        f"{len(ref['ids'])} test items")
        return problems
    digest = task.get("items_sha256")
    if digest is not None and digest != items_digest(ref):
        problems.append(f"{name}: items_sha256 {digest[:12]}… is not the current items' {items_digest(ref)[:12]}…")
    if problems:
        return problems
    stored = StoredTask.from_result(name, task)
    score = float(stored.scale().score(stored.metric(stored.labels, np.asarray(values))))
    if not np.isclose(task.get("score", np.nan), score, atol=1e-6):
        problems.append(f"{name}: stored score {task.get('score')!r}, its predictions give {score:.6f}")
    return problems


def validate_document(document: Mapping[str, Any], reference: Mapping[str, Any], bench_version: str) -> list[str]:
    """Every problem that keeps `document` off the board (empty: it is valid)."""
    problems = []
    if document.get("bench_version") != bench_version:
        problems.append(f"bench_version {document.get('bench_version')!r}; the current bench is {bench_version!r}")
    for key in ("model", "command", "date"):
        if not isinstance(document.get(key), str) or not document[key].strip():
            problems.append(f"'{key}' is missing or empty")
    tasks = document.get("tasks")
    if not isinstance(tasks, dict) or not tasks:
        return [*problems, "no tasks"]
    unknown = sorted(set(tasks) - set(reference["tasks"]))
    if unknown:
        problems.append(f"unknown task(s): {', '.join(unknown)}; the bench has: {', '.join(reference['tasks'])}")
    for name, task in tasks.items():
        if name in reference["tasks"]:
            problems += _task_problems(name, task, reference["tasks"][name])
    if unanswered_share(dict(document)) > MAX_UNANSWERED_SHARE:
        problems.append(f"{unanswered_note(dict(document))}: over {100 * MAX_UNANSWERED_SHARE:g}%, so its scores read "
                        "the endpoint's refusals more than the model; fix what it refuses (its log says why, e.g. "
                        "an input length limit) and rerun")
    return problems
