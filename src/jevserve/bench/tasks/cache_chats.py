"""cache-chats: reuse a cached answer across conversations only when their histories agree (fow-cache chats)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.task import Item, Task, noul
from jevserve.bench.tasks.cache_pairs import cosine_rows
from jevserve.bench.tasks.common import record_item

QUESTIONS = {
    "reuse": noul(
        "Does the answer given in the cached conversation also correctly answer the last message of the new "
        "conversation?",
        true="The last messages ask the same thing in the same context",
        false="The earlier messages change what the last message asks (another product, detail or intent)",
    ),
}


def chat_text(messages: Sequence[Any]) -> str:
    """A conversation as lines of 'role: content'."""
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


def user_text(messages: Sequence[Any]) -> str:
    """The user messages of a conversation joined: a context-aware cache key."""
    return "\n".join(m.content for m in messages if m.role == "user")


def chats_state(cached: Sequence[Any], new: Sequence[Any]) -> str:
    """What the cache reads: the conversation whose answer is stored and the new conversation."""
    return f"Cached conversation:\n{chat_text(cached)}\n\nNew conversation:\n{chat_text(new)}"


class CacheChats(Task):
    """Reuse an answer when the last user messages match and the histories do not change their meaning."""

    name = "cache-chats"
    category = "cache"
    sources = ("fow-cache-chats",)
    summary = "reuse a cached answer across conversations whose last messages match but whose histories may not"
    questions = QUESTIONS
    primary = "reuse"
    metric = BalancedAccuracy()
    rule_text = "serve the cached answer when P(reuse) ≥ t; t tuned on train for balanced accuracy"
    default_text = (
        "context-aware semantic cache: cosine of all-MiniLM-L6-v2 embeddings of the two conversations' user messages "
        "joined (the key a semantic cache with conversation context uses), reuse when ≥ t, t tuned on train"
    )
    cap_text = "pairs fow-cache marks as ambiguous are left out"

    default_why = (
        "A semantic cache with conversation context embeds the conversation's user messages, not the last "
        "message alone (near identical across pairs here, so a last-message key is constant), and reuses "
        "when they are similar. Reusing when they are less similar scores higher on this data's "
        "construction but is no cache any system runs, so the direction is fixed."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Every unambiguous conversation pair; label True when one answer serves both."""
        return tuple(
            record_item(
                r, chats_state(r.a, r.b), r.same, "fow-cache-chats", cached=user_text(r.a), new=user_text(r.b)
            )
            for r in data.source("fow-cache-chats")
            if not r.ambiguous
        )

    def supervision(self, item: Item) -> dict[str, Any]:
        """The reuse question's answer is the label."""
        return {"reuse": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Cosine similarity of the two conversations' joined user messages (the last messages alone are near
        identical in every pair by construction, so a last-message key decides nothing)."""
        return cosine_rows(data.embed([i.extra["cached"] for i in items]), data.embed([i.extra["new"] for i in items]))
