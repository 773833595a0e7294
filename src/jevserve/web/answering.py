"""Models' answers to playground items: the served model live (any System One endpoint), the board rows stored.

The served model is asked the item's bench task questions (the exact request the bench sends) and its answer turns
into a playground answer by the same rule the bench scored: the threshold tuned on train for that model and task,
from its committed results (0.5 when the model has no row); for reply length, the bin of the length regression's
stored prediction for that item. Board rows answer from their committed results alone: per test item, the action or
prediction the bench scored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from jevserve.bench.results import latest_results
from jevserve.web.decisions import DECISIONS, TASK_DECISION, PlayDecision, PoolItem, answer_value
from jevserve.web.store import ModelAnswer


class Decider(Protocol):
    """Anything that answers a System One request body: a remote endpoint, the embedded model, a test stub."""

    name: str  # the model name answers are stored under

    def decide(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The response's `answers` object for one request body (without `model`)."""


class SystemOneDecider:
    """A System One endpoint through jevserve.client (the embedded default is such an endpoint, run in process)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        from jevserve.client import SystemOne

        self.name = model
        self._client = SystemOne(base_url, api_key, timeout_s=30.0)

    def decide(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the body (with this model's name) and return its answers, read as the contract says (strictly: a
        `"noul": true` is no probability)."""
        from jevserve.protocol import SystemOneResponse

        raw = self._client.decide_raw({**body, "model": self.name})
        SystemOneResponse.model_validate(raw, strict=True)
        return raw["answers"]

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


@dataclass(frozen=True)
class StoredRow:
    """One board row's committed answers on the playground's tasks."""

    model: str
    kind: str  # "model" or "baseline"
    values: Mapping[str, Mapping[str, Any]]  # task → item id → stored action (bool) or predicted tokens
    rules: Mapping[str, Mapping[str, Any] | None]  # task → {"threshold", "direction"} or None


def stored_rows(results_dir: Any) -> tuple[StoredRow, ...]:
    """The newest results of every board row, reduced to the playground tasks' per-item values and rules."""
    rows = []
    for document in latest_results(results_dir).documents:
        values, rules = {}, {}
        for task, result in document["tasks"].items():
            if task in TASK_DECISION and "items" in result:
                values[task] = dict(zip(result["items"]["ids"], result["items"]["values"], strict=True))
                rules[task] = result.get("rule")
        if values:
            rows.append(StoredRow(document["model"], document.get("row_kind", "model"), values, rules))
    return tuple(rows)


def stored_choice(row: StoredRow, decision: PlayDecision, item_id: str) -> str | None:
    """The playground answer a board row gave the item, or None when its results lack it."""
    if decision.key == "length" and row.kind != "model":
        # A baseline's stored length values are its ranking score (prompt tokens), not predicted reply tokens,
        # so they name no bin; model rows store the length regression's predicted reply tokens.
        return None
    value = row.values.get(decision.task, {}).get(item_id)
    return None if value is None else answer_value(decision, value)


def _probabilities(answer: Mapping[str, Any] | None) -> dict[str, float]:
    if answer is None:
        return {}
    if answer["type"] == "noul":
        return {"yes": float(answer["noul"]), "no": 1.0 - float(answer["noul"])}
    return {str(k): float(v) for k, v in answer["probabilities"].items()}


def _threshold_choice(probabilities: Mapping[str, float], rule: Mapping[str, Any] | None) -> str | None:
    if "yes" not in probabilities:
        return None
    threshold, direction = 0.5, 1
    if rule is not None:
        threshold, direction = float(rule["threshold"]), int(rule["direction"])
    return "yes" if direction * probabilities["yes"] >= direction * threshold else "no"


def ask_model(
    decider: Decider, decision: PlayDecision, item: PoolItem, rows: tuple[StoredRow, ...], row_name: str | None = None
) -> ModelAnswer:
    """Ask the served model about one item, time the call, and apply its board rule (see the module doc)."""
    from jevserve.bench import TASKS

    task = TASKS[decision.task]
    body = task.request(_as_bench_item(item))
    started = time.perf_counter()
    answers = decider.decide(body)
    decision_ms = (time.perf_counter() - started) * 1000.0
    probabilities = _probabilities(answers.get(task.primary))
    # its row: the one filed under its name, or under the name its results were filed under (`row_name`: a model
    # served as minilm-reader has its results, and its thresholds, as jev-minilm-2)
    own = next((r for r in rows if r.model in (decider.name, row_name)), None)
    if decision.key == "length":
        choice = stored_choice(own, decision, item.item_id) if own else None
    else:
        choice = _threshold_choice(probabilities, own.rules.get(decision.task) if own else None)
    return ModelAnswer(decider.name, choice, probabilities, decision_ms)


def cached_probabilities(
    answers: Mapping[str, Any] | None, model: str, decision: PlayDecision, item: PoolItem
) -> dict[str, float]:
    """A board row's probabilities for an item from its bench answers cache ({} when the cache lacks it)."""
    if not answers:
        return {}
    from jevserve.bench import TASKS
    from jevserve.bench.answers_cache import request_key

    task = TASKS[decision.task]
    found = answers.get(request_key(model, task.request(_as_bench_item(item))))
    return _probabilities(found.get(task.primary)) if found else {}


def _as_bench_item(item: PoolItem) -> Any:
    from jevserve.bench import Item

    return Item(item_id=item.item_id, state=item.state, label=item.label, split="test", source="")


def decision_of(key: str) -> PlayDecision | None:
    """The playground decision for a key, or None."""
    return DECISIONS.get(key)
