"""cache-pairs: serve a cached answer to a new question only when it answers it too (fow-cache question pairs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.task import Item, Task, noul
from jevserve.bench.tasks.common import record_item

QUESTIONS = {
    "reuse": noul(
        "Does the answer to the cached question also correctly answer the new question?",
        true="Both ask the same thing, maybe in other words",
        false="The questions differ in a way that changes the answer (a negation, another entity, number, date or "
        "scope)",
    ),
}


def pair_state(cached: str, new: str) -> str:
    """What the cache reads: the question whose answer is stored and the new one."""
    return f"Cached question: {cached}\nNew question: {new}"


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of unit-length embeddings."""
    return np.einsum("ij,ij->i", a, b)


class CachePairs(Task):
    """Reuse a cached answer; fow-cache pairs paraphrases and repeats with one-edit traps (negation, entity, ...)."""

    name = "cache-pairs"
    category = "cache"
    sources = ("fow-cache-pairs",)
    summary = "reuse a cached answer for paraphrases, not for one-edit traps (negation, entity, number, scope)"
    questions = QUESTIONS
    primary = "reuse"
    metric = BalancedAccuracy()
    rule_text = "serve the cached answer when P(reuse) ≥ t; t tuned on train for balanced accuracy"
    default_text = (
        "semantic cache: cosine of all-MiniLM-L6-v2 embeddings of the two questions (GPTCache's default encoder), "
        "reuse when ≥ t, t tuned on train"
    )
    cap_text = "the 8 pairs fow-cache marks as ambiguous (the answer depends on the application) are left out"

    default_why = (
        "GPTCache's default: embed the query with all-MiniLM-L6-v2 and reuse above a cosine threshold."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Every unambiguous pair; label True when one answer serves both."""
        return tuple(
            record_item(r, pair_state(r.a, r.b), r.same, "fow-cache-pairs", cached=r.a, new=r.b)
            for r in data.source("fow-cache-pairs")
            if not r.ambiguous
        )

    def supervision(self, item: Item) -> dict[str, Any]:
        """The reuse question's answer is the label."""
        return {"reuse": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Cosine similarity of the two questions' embeddings."""
        return cosine_rows(data.embed([i.extra["cached"] for i in items]), data.embed([i.extra["new"] for i in items]))
