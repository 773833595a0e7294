"""The semantic cache's storage: nearest neighbour per tenant, TTL and size bounds."""

from __future__ import annotations

import asyncio

from jevserve.gateway.cache import SemanticCache
from tests.gateway.upstreams import char_embed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_nearest_returns_the_most_similar_entry_above_the_bar():
    async def scenario():
        cache = SemanticCache(char_embed)
        await cache.put("t", "capital of france", {"a": 1}, ttl_s=60, max_entries=10)
        await cache.put("t", "zzz qqq", {"a": 2}, ttl_s=60, max_entries=10)
        hit, _ = await cache.nearest("t", "capital of France?", 0.5)
        miss, _ = await cache.nearest("t", "xyz", 0.99)
        other, _ = await cache.nearest("other-tenant", "capital of france", 0.0)
        return hit, miss, other

    hit, miss, other = asyncio.run(scenario())
    assert hit.response == {"a": 1} and hit.similarity > 0.9
    assert miss is None and other is None


def test_entries_expire_after_their_ttl():
    clock = Clock()

    async def scenario():
        cache = SemanticCache(char_embed, clock=clock)
        await cache.put("t", "hello", {"a": 1}, ttl_s=10, max_entries=10)
        before, _ = await cache.nearest("t", "hello", 0.5)
        clock.now += 11
        after, _ = await cache.nearest("t", "hello", 0.5)
        return before, after

    before, after = asyncio.run(scenario())
    assert before is not None and after is None


def test_the_oldest_entries_go_beyond_max_entries():
    async def scenario():
        cache = SemanticCache(char_embed)
        for text in ("aaaa", "bbbb", "cccc"):
            await cache.put("t", text, {"text": text}, ttl_s=60, max_entries=2)
        entries, _ = await cache.store.live("t", 0)
        return [e.key_text for e in entries]

    assert asyncio.run(scenario()) == ["bbbb", "cccc"]
