"""What a decision costs on everyday traffic: its false-action rate on ordinary requests, and its recall when its
threshold is set for 1% false actions on the packaged calibration file.

Each everyday request (bench.sources.everyday) is turned into the texts the gateway's decision reads with
`serving.decision_inputs.decision_inputs`, the gateway's own function: the guard tasks judge every untrusted text
(`guard_texts`) alone, the harm and clarify tasks read `request_text`, the tool gate reads the request with the
offered tools. A request counts as acted on when the decision acts on any of its texts (the guard blocks a request
when one text is flagged). Every everyday request is taken as one that should pass; the hand-checked contamination
rate (docs/bench.md) bounds how wrong that is.

- **False-action rate** at the task's threshold (tuned on the task's train side): the share of everyday test
  requests acted on, with its exact binomial 95% interval (requests are independent: one per conversation).
- **Recall at 1% everyday false actions**: the threshold is moved until at most 1% of the calibration file's
  requests (train side, what a gateway would calibrate on) are acted on; reported: the share of the task's test
  positives still acted on, and the false-action rate that threshold then has on the everyday test side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jevserve.bench.rules import ThresholdRule
from jevserve.bench.sources.everyday import EverydayRequest
from jevserve.bench.task import Item, Task
from jevserve.serving.decision_inputs import decision_inputs

TARGET_RATE = 0.01


@dataclass(frozen=True)
class EverydayItems:
    """A task's items for everyday requests: what its decision reads, and which request each item belongs to."""

    items: tuple[Item, ...]  # test-side requests' items first, then the calibration requests'
    request_of: tuple[int, ...]  # per item, the index of its request in `requests`
    requests: tuple[EverydayRequest, ...]
    num_test: int  # requests[:num_test] are the everyday test side, the rest the calibration file


def task_texts(task: Task, request: EverydayRequest) -> list[str]:
    """The texts the task's decision reads for one request ([] when it does not apply)."""
    if task.everyday_reads is None:
        return []
    inputs = decision_inputs(request.body)
    if task.everyday_reads == "guard":
        return [t for t in inputs.guard_texts if t.strip()]
    return [inputs.request_text] if inputs.request_text.strip() else []


def everyday_items(
    task: Task, test: Sequence[EverydayRequest], calibration: Sequence[EverydayRequest]
) -> EverydayItems:
    """Every item the task reads for the test requests and the calibration requests."""
    requests = (*test, *calibration)
    items, request_of = [], []
    for index, request in enumerate(requests):
        for item in task.everyday_items(request.request_id, task_texts(task, request), request.body):
            items.append(item)
            request_of.append(index)
    return EverydayItems(tuple(items), tuple(request_of), tuple(requests), len(test))


def _request_scores(scores: np.ndarray, request_of: Sequence[int], num_requests: int, direction: int) -> np.ndarray:
    """Per request, its most acting text's signed score (−inf for a request with no text)."""
    out = np.full(num_requests, -np.inf)
    np.maximum.at(out, np.asarray(request_of, dtype=np.int64), direction * np.asarray(scores, dtype=np.float64))
    return out


def union_rate(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The share of everyday test requests on which ANY of these decisions acts (what a gateway running all of them
    blocks), with its exact 95% interval; None without results."""
    if not results:
        return None
    acted = set().union(*(r.get("acted_requests", ()) for r in results))
    n = max(r["n"] for r in results)
    return rate_of(len(acted), n)


def _rate(acted: np.ndarray) -> dict[str, Any]:
    return rate_of(int(np.sum(acted)), len(acted))


def rate_of(k: int, n: int) -> dict[str, Any]:
    """`k` acted on of `n`: the counts, the rate and its exact (Clopper-Pearson) 95% interval, as results store them."""
    from scipy.stats import binomtest  # here: scipy.stats costs a second at start-up
    ci = binomtest(k, n).proportion_ci(method="exact") if n else None
    return {"n": n, "acted": k, "rate": k / n if n else float("nan"),
            "interval": [float(ci.low), float(ci.high)] if ci else [float("nan"), float("nan")]}


def threshold_for(request_scores: np.ndarray, target: float = TARGET_RATE) -> float:
    """The smallest signed threshold at which at most `target` of these requests act (ties act together)."""
    ordered = np.sort(request_scores)[::-1]
    allowed = int(np.floor(target * len(ordered)))
    if allowed >= len(ordered):
        return -np.inf
    return float(np.nextafter(ordered[allowed], np.inf))


def calibration_requests(records: Sequence[dict]) -> list[EverydayRequest]:
    """The packaged calibration file's records as everyday requests."""
    return [EverydayRequest(r["id"], r["shape"], r["body"], r["id"].removeprefix("everyday:")) for r in records]


def everyday_result(
    batch: EverydayItems, scores: np.ndarray, rule: ThresholdRule, positive_scores: np.ndarray
) -> dict[str, Any]:
    """The everyday numbers of one row on one task: `scores` per everyday item, `rule` as tuned on the task's train
    side, `positive_scores` the row's scores on the task's test positives."""
    signed = _request_scores(scores, batch.request_of, len(batch.requests), rule.direction)
    test, calibration = signed[: batch.num_test], signed[batch.num_test :]
    threshold = rule.direction * rule.threshold
    shapes = [r.shape for r in batch.requests[: batch.num_test]]
    by_shape = {s: _rate(test[[k for k, x in enumerate(shapes) if x == s]] >= threshold)
                for s in dict.fromkeys(shapes)}
    acted = test >= threshold
    acted_ids = [r.request_id for r, a in zip(batch.requests[: batch.num_test], acted, strict=True) if a]
    result: dict[str, Any] = {**_rate(acted), "by_shape": by_shape, "acted_requests": acted_ids}
    if len(calibration):
        at = threshold_for(calibration)
        positives = rule.direction * np.asarray(positive_scores, dtype=np.float64)
        result["at_1pct"] = {
            "threshold": float(rule.direction * at),
            "calibration": _rate(calibration >= at),
            "recall": _rate(positives >= at),
            "test": _rate(test >= at),
        }
    return result
