"""Builders for bench tests: items, a tiny task, fake clients and fake data, all without real packages."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.sources import SourceMissingError
from jevserve.bench.task import Item, Task, noul


def make_items(labels: Sequence[bool], *, split: str = "test", prefix: str = "item", source: str = "s") -> list[Item]:
    """One item per label, with distinct states and ids."""
    return [
        Item(item_id=f"{prefix}-{i}", state=f"{prefix} text {i}", label=bool(y), split=split, source=source)
        for i, y in enumerate(labels)
    ]


class KeywordTask(Task):
    """A toy yes/no task: label True when the state contains "bad"; the default rule reads the item number mod 3."""

    name = "toy-keyword"
    category = "guard"
    sources = ("toy",)
    summary = "toy task for tests"
    questions = MappingProxyType({"bad": noul("Is this text bad?", true="It is bad", false="It is fine")})
    primary = "bad"
    metric = BalancedAccuracy()
    rule_text = "block when P(bad) >= t"
    default_text = "item number mod 3 (nearly uninformative)"

    def __init__(self, num_items: int = 40, *, missing: bool = False) -> None:
        self.num_items = num_items
        self.missing = missing

    def load_items(self, data: Any) -> tuple[Item, ...]:
        if self.missing:
            raise SourceMissingError("toy", "data source 'toy' is not in the cache", "jevserve data fetch --source toy")
        items = []
        for i in range(self.num_items):
            bad = i % 2 == 0
            state = f"{'bad' if bad else 'fine'} message number {i}"
            items.append(Item(item_id=f"toy-{i}", state=state, label=bad, split="test" if i % 4 < 2 else "train",
                              source="toy"))
        return tuple(items)

    def supervision(self, item: Item) -> dict[str, Any]:
        return {"bad": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        return np.array([float(int(i.item_id.split("-")[1]) % 3) for i in items])


def fake_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """A deterministic answer: P(yes) is high for states that contain "bad", else a hash-based low value."""
    state = body["state"]
    jitter = int(hashlib.sha256(state.encode()).hexdigest()[:4], 16) / 0xFFFF * 0.2
    p = 0.8 + jitter if "bad" in state else 0.1 + jitter
    answers = {}
    for qid, question in body["questions"].items():
        if question["type"] == "noul":
            answers[qid] = {"type": "noul", "noul": p}
        elif question["type"] == "choice":
            names = list(question["criteria"])
            probs = [1.0 / len(names)] * len(names)
            answers[qid] = {"type": "choice", "choice": names[0], "probabilities": dict(zip(names, probs, strict=True)),
                            "confidence": 0.0}
        else:
            n = len(question["criteria"])
            answers[qid] = {"type": "score", "score": (n - 1) / 2, "legend": {str(i): str(i) for i in range(n)},
                            "probabilities": {str(i): 1.0 / n for i in range(n)}, "confidence": 0.0}
    return {"model": body["model"], "answers": answers, "usage": {"input_tokens": 1, "output_tokens": 0}}


class FakeClient:
    """An async client that answers with `fake_answer`, counts what it was sent, and can fail after N answers."""

    def __init__(self, *, fail_after: int | None = None, error: Exception | None = None) -> None:
        self.fail_after = fail_after
        self.error = error or RuntimeError("endpoint went away")
        self.sent: list[dict[str, Any]] = []
        self.num_answered = 0

    async def decide_raw(self, body: Mapping[str, Any]) -> dict:
        self.sent.append(dict(body))
        if self.fail_after is not None and self.num_answered >= self.fail_after:
            raise self.error
        self.num_answered += 1
        return fake_answer(body)
