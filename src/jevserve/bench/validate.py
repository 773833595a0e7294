"""Check a submitted results file against the bench it claims to be scored on, so outside rows can be added by pull
request: `jevserve bench validate results/<row>/<date>.json`.

A submission is a results file exactly as `jevserve bench run` writes it (docs/bench.md, "Submitting a row"). It is
accepted when: it reads as a bench result of this file version and of the current bench version; it names its row
and the command that made it; every task is a task of the bench; per task, its test items (ids, labels, clusters),
the default rule's and the oracle's test actions, and the items' digest (`items_sha256`) equal those of the current
reference row (default-rules), it has one prediction per item, its stored score and every other number it stores
(intervals, gap shares, differences, P(beats the rule), metric values, the averages) are what its predictions give
on the file's own draws, and its endpoint answered all but at most 5% of the items it was asked about
(`MAX_UNANSWERED_SHARE`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from jevserve.bench.everyday import rate_of
from jevserve.bench.paired import StoredTask
from jevserve.bench.results import MAX_UNANSWERED_SHARE, unanswered_note, unanswered_share
from jevserve.protocol.text import is_iso_date


def items_digest(items: Mapping[str, Any]) -> str:
    """sha256 of a task's test item ids and labels (what a submission must have been scored on)."""
    payload = json.dumps([items["ids"], items["labels"]], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _mistyped(values: list[Any], defaults: list[Any]) -> str | None:
    """The first prediction not of its task's kind, said: a yes/no task's are booleans (0.5 and NaN were valid,
    being truthy, and changed no score), others finite numbers. None when every one is."""
    yes_no = all(isinstance(v, bool) for v in defaults)
    for index, value in enumerate(values):
        if yes_no and not isinstance(value, bool):
            return f"#{index} is {value!r}; this task's actions are true or false"
        if not yes_no and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
            return f"#{index} is {value!r}; this task's actions are finite numbers"
    return None


def _task_problems(name: str, task: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    items, ref = task.get("items") or {}, reference["items"]
    problems = []
    for key, what in (("ids", "item ids"), ("labels", "labels"), ("default", "default rule's actions"),
                      ("oracle", "oracle's actions")):
        if items.get(key) != ref[key]:
            problems.append(f"{name}: its test {what} differ from the current bench's; rerun `jevserve bench run`")
    if task.get("metric") != reference["metric"]:
        problems.append(f"{name}: metric {task.get('metric')!r}, the bench uses {reference['metric']!r}")
    values = items.get("values")
    if not isinstance(values, list) or len(values) != len(ref["ids"]):
        problems.append(f"{name}: {len(values) if isinstance(values, list) else 'no'} predictions for "
                        f"{len(ref['ids'])} test items")
        return problems
    if wrong := _mistyped(values, ref["default"]):
        problems.append(f"{name}: prediction {wrong}")
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


CELL_KEYS = ("score_interval", "gap_share", "gap_share_interval", "difference", "difference_interval", "p_beats_rule")
AVERAGE_KEYS = ("average", "average_all")


def _same(stored: Any, computed: Any) -> bool:
    """Whether a stored number (or list of numbers) is what was computed, NaN equal to NaN."""
    if isinstance(computed, list | tuple):
        return isinstance(stored, list | tuple) and len(stored) == len(computed) and all(
            _same(a, b) for a, b in zip(stored, computed, strict=True))
    if not isinstance(stored, int | float) or isinstance(stored, bool):
        return stored is None and not np.isfinite(computed)  # strict JSON writes an undefined number as null
    return bool(np.isclose(stored, computed, rtol=1e-9, atol=1e-6, equal_nan=True))


def _beats_bounds(score_draws: np.ndarray) -> tuple[float, float]:
    """The share of draws on which the row beats the default rule, not counting and counting the draws on which it
    ties it: a tie's difference is 0 up to float rounding, which the order of a weighted sum's terms can tip either
    way (a row's stored P(beats the rule) lies between the two)."""
    finite = score_draws[np.isfinite(score_draws)]
    if not finite.size:
        return np.nan, np.nan
    return float(np.mean(finite > TIE_SCORE)), float(np.mean(finite > -TIE_SCORE))


TIE_SCORE = 1e-6  # score points: far above float rounding, far below any difference one item makes


def _summary_problems(document: Mapping[str, Any], headline: set[str]) -> list[str]:
    """Every stored number that does not follow from the predictions: each task's interval, gap share, difference,
    P(beats the rule) and metric values and intervals, and the averages, recomputed from the same draws (the
    file's own resample count and seed). Fields a file does not hold are not asked for (older files hold fewer)."""
    from types import SimpleNamespace

    from jevserve.bench.resolve import resolve_tasks
    from jevserve.bench.stats import BOOTSTRAP_SEED, NUM_RESAMPLES

    stored_tasks = document["tasks"]
    recomputed = copy.deepcopy(dict(stored_tasks))  # resolve_tasks fills its input in place
    for task in recomputed.values():
        for key in ("model", "default", "oracle"):  # the point values, from the arrays as scoring computes them
            if key in task.get("metrics", {}):
                task["metrics"][key] = {}
    tasks = {name: SimpleNamespace(headline=name in headline) for name in recomputed}
    num_resamples = document.get("num_resamples", NUM_RESAMPLES)
    seed = document.get("bootstrap_seed", BOOTSTRAP_SEED)
    if not isinstance(num_resamples, int) or isinstance(num_resamples, bool) or num_resamples < 1:
        return [f"num_resamples {num_resamples!r}: expected a positive integer"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:  # numpy's seeding raised a TypeError
        return [f"bootstrap_seed {seed!r}: expected an integer >= 0"]
    cells: dict = {}
    averages = resolve_tasks(recomputed, tasks, num_resamples, seed, cells_out=cells)
    problems = []
    for name, task in stored_tasks.items():
        fresh = recomputed[name]
        stored_task = StoredTask.from_result(name, task)
        for key in CELL_KEYS:
            if key == "p_beats_rule" and key in task:
                low, high = _beats_bounds(cells[name].draws)
                if not (isinstance(task[key], int | float) and low - 1e-9 <= task[key] <= high + 1e-9):
                    problems.append(f"{name}: stored p_beats_rule {task[key]!r}, its predictions give {fresh[key]!r}"
                                    f" (between {low:g} and {high:g} counting the draws it ties the rule on)")
            elif key in task and not _same(task[key], fresh[key]):
                problems.append(f"{name}: stored {key} {task[key]!r}, its predictions give {fresh[key]!r}")
        arrays = {"model": task["items"]["values"], "default": task["items"]["default"],
                  "oracle": task["items"]["oracle"]}
        for key, values in arrays.items():
            stored_metric = task.get("metrics", {}).get(key)
            if not isinstance(stored_metric, Mapping):
                continue
            value = float(stored_task.metric(stored_task.labels, np.asarray(values)))
            if "value" in stored_metric and not _same(stored_metric["value"], value):
                problems.append(f"{name}: stored metrics.{key}.value {stored_metric['value']!r}, its "
                                f"{'predictions' if key == 'model' else key + ' actions'} give {value!r}")
            interval = fresh["metrics"].get(key, {}).get("interval")
            if interval is not None and "interval" in stored_metric and not _same(stored_metric["interval"], interval):
                problems.append(f"{name}: stored metrics.{key}.interval {stored_metric['interval']!r}, the draws "
                                f"give {interval!r}")
    for key in AVERAGE_KEYS:
        stored, fresh = document.get(key), averages[key]
        if not isinstance(stored, Mapping):
            continue
        for field_name in ("score", "interval"):
            if field_name in stored and not _same(stored[field_name], fresh[field_name]):
                problems.append(f"{key}.{field_name} {stored[field_name]!r}, its tasks give {fresh[field_name]!r}")
        if "tasks" in stored and list(stored["tasks"]) != fresh["tasks"]:
            problems.append(f"{key}.tasks {stored['tasks']!r}; the bench averages {fresh['tasks']!r}")
    return problems


def everyday_problems(everyday: Any) -> list[str]:
    """What does not add up in a task's everyday numbers. They come from answers the file does not carry, so they
    cannot be recomputed here; each must agree with the acted requests it lists (one changed number does not)."""
    if everyday is None:
        return []
    if not isinstance(everyday, Mapping):
        return ["is not an object"]
    problems = []
    acted_ids = everyday.get("acted_requests")
    blocks = {"": everyday, **{f"shape {k} ": v for k, v in (everyday.get("by_shape") or {}).items()}}
    for label, block in blocks.items():
        n, acted = block.get("n"), block.get("acted")
        if not isinstance(n, int) or not isinstance(acted, int) or not 0 <= acted <= n:
            problems.append(f"{label}counts n={n!r}, acted={acted!r} are not counts")
            continue
        stored = rate_of(acted, n)  # as the bench computes them from the counts
        if not _same(block.get("rate"), stored["rate"]):
            problems.append(f"{label}rate {block.get('rate')!r} is not acted/n = {acted}/{n}")
        if n and not _same(list(block.get("interval") or ()), stored["interval"]):
            problems.append(f"{label}interval {block.get('interval')!r} is not the exact binomial interval of "
                            f"{acted}/{n}")
    if not isinstance(acted_ids, list) or len(set(map(str, acted_ids))) != everyday.get("acted"):
        problems.append(f"acted={everyday.get('acted')!r} is not the number of distinct acted requests it lists")
    shapes = everyday.get("by_shape") or {}
    if shapes and (sum(b.get("n", 0) for b in shapes.values()) != everyday.get("n")
                   or sum(b.get("acted", 0) for b in shapes.values()) != everyday.get("acted")):
        problems.append("the shapes' counts do not add up to the task's")
    return problems


def headline_tasks(reference: Mapping[str, Any]) -> set[str]:
    """The tasks the current bench's headline averages: the reference row's (default-rules) headline."""
    return set(reference.get("average", {}).get("tasks") or reference["tasks"])


def validate_document(document: Mapping[str, Any], reference: Mapping[str, Any], bench_version: str) -> list[str]:
    """Every problem that keeps `document` off the board (empty: it is valid). A field of a type `bench run` never
    writes, which the checks below reach before they check it, is one problem, not a traceback."""
    try:
        return _document_problems(document, reference, bench_version)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        return [f"a field is not what `bench run` writes ({type(exc).__name__}: {exc}); rerun `jevserve bench run` "
                "rather than editing the file"]


def _document_problems(document: Mapping[str, Any], reference: Mapping[str, Any], bench_version: str) -> list[str]:
    problems = []
    if document.get("bench_version") != bench_version:
        problems.append(f"bench_version {document.get('bench_version')!r}; the current bench is {bench_version!r}")
    for key in ("model", "command", "date"):
        if not isinstance(document.get(key), str) or not document[key].strip():
            problems.append(f"'{key}' is missing or empty")
    if isinstance(document.get("date"), str) and not is_iso_date(document["date"]):
        problems.append(f"date {document['date']!r}: expected YYYY-MM-DD")
    for name, task in (document.get("tasks") or {}).items() if isinstance(document.get("tasks"), dict) else ():
        for key in ("brier", "ece"):  # the submitter's word, but never outside [0, 1] (binary Brier, and ECE)
            value = task.get(key) if isinstance(task, dict) else None
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not 0 <= value <= 1):
                problems.append(f"{name}: {key} {value!r}; expected a number from 0 to 1")
    tasks = document.get("tasks")
    if not isinstance(tasks, dict) or not tasks:
        return [*problems, "no tasks"]
    unknown = sorted(set(tasks) - set(reference["tasks"]))
    if unknown:
        problems.append(f"unknown task(s): {', '.join(unknown)}; the bench has: {', '.join(reference['tasks'])}")
    for name, task in tasks.items():
        if name in reference["tasks"]:
            problems += _task_problems(name, task, reference["tasks"][name])
    if not problems:  # the summary's numbers are checked once every task's items and scores are right
        problems += _summary_problems(document, headline_tasks(reference))
    for name, task in tasks.items():
        problems += [f"{name}: everyday {p}" for p in everyday_problems(task.get("everyday"))]
    if "num_items" not in document and document.get("num_unanswered"):
        # files written before num_items was kept: the items the file itself says it scored
        counted = sum(int(t.get("n_train") or 0) + int(t.get("n_test") or 0) for t in tasks.values())
        document = {**document, "num_items": counted or None}
    if unanswered_share(dict(document)) > MAX_UNANSWERED_SHARE:
        problems.append(f"{unanswered_note(dict(document))}: over {100 * MAX_UNANSWERED_SHARE:g}%, so its scores read "
                        "the endpoint's refusals more than the model; fix what it refuses (its log says why, e.g. "
                        "an input length limit) and rerun")
    return problems
