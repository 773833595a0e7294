"""The semantic cache's entries: embeddings per tenant, nearest neighbour in numpy, TTL and size bounds.

Entries live in a `CacheStore`: in process by default, or in Redis so that gateway replicas share them
(gateway/store_redis.py). Only complete, successful answers are stored (the app checks `finish_reason` and status
before calling `put`). Whether a neighbour may be served is the cache decision's call (policies/cache.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from jevserve.gateway.policies.base import CacheCandidate

logger = logging.getLogger("jevserve.gateway")

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → (n, d) unit-length rows


@dataclass(frozen=True)
class CacheEntry:
    """One cached answer."""

    entry_id: str
    key_text: str  # the conversation whose answer this is
    vector: np.ndarray  # its unit-length embedding, float32
    response: Mapping[str, Any]  # the chat completion served on a hit
    expires_at: float  # epoch seconds


class CacheStore(Protocol):
    """Where entries live."""

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int) -> None:
        """Store `entry`; drop the oldest of the tenant's entries beyond `max_entries`."""

    async def live(self, tenant: str, now: float) -> tuple[list[CacheEntry], np.ndarray | None]:
        """The tenant's unexpired entries and their embeddings stacked as rows (None when empty)."""


class MemoryCacheStore:
    """Entries in this process, oldest first per tenant."""

    def __init__(self) -> None:
        self._tenants: dict[str, OrderedDict[str, CacheEntry]] = {}
        self._matrix: dict[str, tuple[list[CacheEntry], np.ndarray]] = {}  # rebuilt after a change

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int) -> None:
        """Append and trim to `max_entries`."""
        entries = self._tenants.setdefault(tenant, OrderedDict())
        entries[entry.entry_id] = entry
        while len(entries) > max_entries:
            entries.popitem(last=False)
        self._matrix.pop(tenant, None)

    async def live(self, tenant: str, now: float) -> tuple[list[CacheEntry], np.ndarray | None]:
        """Drop expired entries, then return the rest."""
        entries = self._tenants.get(tenant)
        if not entries:
            return [], None
        expired = [k for k, e in entries.items() if e.expires_at <= now]
        for key in expired:
            del entries[key]
        if expired:
            self._matrix.pop(tenant, None)
        if not entries:
            return [], None
        if tenant not in self._matrix:
            values = list(entries.values())
            self._matrix[tenant] = (values, np.stack([e.vector for e in values]))
        return self._matrix[tenant]


class SemanticCache:
    """Nearest cached conversation per tenant by cosine of embeddings."""

    def __init__(self, embed: Embed, store: CacheStore | None = None, *, clock: Callable[[], float] = time.time):
        self.embed = embed
        self.store = store or MemoryCacheStore()
        self.clock = clock
        # the embedder is not thread-safe: one thread runs it, off the event loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-embed")

    async def vector(self, text: str) -> np.ndarray:
        """The text's unit embedding, computed off the event loop."""
        loop = asyncio.get_running_loop()
        rows = await loop.run_in_executor(self._executor, self.embed, [text])
        return np.asarray(rows[0], dtype=np.float32)

    async def nearest(
        self, tenant: str, text: str, min_similarity: float
    ) -> tuple[CacheCandidate | None, np.ndarray | None]:
        """The most similar live entry at or above `min_similarity` (or None), and the text's embedding (None when
        the embedder failed: a miss, never an error for the request)."""
        try:
            vector = await self.vector(text)
        except Exception:  # the embedder must not turn a request into a 5xx: no candidate, nothing stored
            logger.warning("cache embedder failed; treating the request as a miss", exc_info=True)
            return None, None
        entries, matrix = await self.store.live(tenant, self.clock())
        if matrix is None:
            return None, vector
        similarities = matrix @ vector
        best = int(np.argmax(similarities))
        similarity = float(similarities[best])
        if similarity < min_similarity:
            return None, vector
        entry = entries[best]
        return CacheCandidate(entry.entry_id, entry.key_text, similarity, entry.response), vector

    async def put(
        self,
        tenant: str,
        text: str,
        response: Mapping[str, Any],
        *,
        ttl_s: float,
        max_entries: int,
        vector: np.ndarray | None = None,
    ) -> str | None:
        """Store a complete answer for `text`; returns the new entry's id (None when the embedder failed)."""
        if vector is None:
            try:
                vector = await self.vector(text)
            except Exception:
                logger.warning("cache embedder failed; the answer is not stored", exc_info=True)
                return None
        entry = CacheEntry(uuid.uuid4().hex, text, vector, dict(response), self.clock() + ttl_s)
        await self.store.add(tenant, entry, max_entries)
        return entry.entry_id

    def close(self) -> None:
        """Release the embedding thread."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def embedded_embed() -> Embed:
    """The embedded encoder's `embed` (all-MiniLM-L6-v2, int8): the default cache embedding."""
    from jevserve.decide.embedder import Embedder

    return Embedder("int8").embed
