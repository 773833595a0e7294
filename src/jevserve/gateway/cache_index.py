"""A tenant's cached entries indexed for both tiers: a dict by exact key, and a matrix of embeddings per context.

Built once after the entries change (an add, or another replica's add seen in Redis), then read by every lookup;
expired entries are skipped at lookup time and dropped at the next rebuild.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CacheEntry:
    """One cached reply."""

    entry_id: str
    exact_key: str  # cache_keys.exact_key of the request it answers
    context_key: str  # cache_keys.context_key: near repeats are compared within one context only
    key_text: str  # the conversation's text (DecisionInputs.cache_text)
    vector: np.ndarray | None  # its unit-length embedding (float32); None: served to exact repeats only
    response: Mapping[str, Any]  # the chat completion served on a hit
    expires_at: float  # epoch seconds


class EntryIndex:
    """Lookups over one tenant's entries (oldest first)."""

    def __init__(self, entries: Sequence[CacheEntry]) -> None:
        self.entries = list(entries)
        self._by_exact = {e.exact_key: e for e in self.entries}  # the newest entry of a key wins
        self._rows = [e for e in self.entries if e.vector is not None]
        self._matrix = np.stack([e.vector for e in self._rows]) if self._rows else None
        self._contexts = np.array([e.context_key for e in self._rows], dtype=object)
        self._expires = np.array([e.expires_at for e in self._rows], dtype=np.float64)

    def exact(self, key: str, now: float) -> CacheEntry | None:
        """The live entry stored for exactly this request, or None."""
        entry = self._by_exact.get(key)
        return entry if entry is not None and entry.expires_at > now else None

    def nearest(self, vector: np.ndarray, context: str, now: float) -> tuple[CacheEntry, float] | None:
        """The live entry of `context` whose embedding is most similar to `vector`, and the cosine; None when none."""
        if self._matrix is None:
            return None
        eligible = (self._contexts == context) & (self._expires > now)
        if not eligible.any():
            return None
        similarities = np.where(eligible, self._matrix @ vector, -np.inf)
        best = int(np.argmax(similarities))
        return self._rows[best], float(similarities[best])
