"""The gateway's shared state in Redis, so replicas share one cache, rate limits, in-flight counts and circuits.

Keys (all under `jevserve:gw:`):
    cache:{tenant}            hash   entry id → JSON {exact_key, context_key, key_text, vector (base64 float32 or
                                     null), response, expires_at}
    cache-order:{tenant}      zset   entry id by expiry time (expired entries and, beyond max_entries, the oldest go)
    cache-version:{tenant}    int    bumped on every add, so a replica re-reads entries only when they changed
    circuit:{upstream}        hash   failures, open_until
    inflight:{upstream}       int    slots taken across replicas
    bucket:{key}              hash   tokens, at (seconds, Redis server clock)
Every read-modify-write is one Lua script, so concurrent replicas cannot interleave inside it. In-flight slots of a
replica that dies holding them are not given back (documented in docs/gateway.md; restart clears with `DEL`).
"""

from __future__ import annotations

import base64
import json

import numpy as np
import redis
import redis.asyncio as aioredis

from jevserve.gateway.cache_index import CacheEntry, EntryIndex
from jevserve.gateway.store import CircuitState

PREFIX = "jevserve:gw:"

_TRY_ACQUIRE = """
local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
if taken >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[1])
return 1
"""

_RELEASE = """
local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
if taken > 0 then redis.call('DECR', KEYS[1]) end
return 1
"""

_RECORD = """
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'failures', 0, 'open_until', 0)
  return {0, '0'}
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local open_until = 0
if failures >= tonumber(ARGV[2]) then
  local now = redis.call('TIME')
  open_until = tonumber(now[1]) + tonumber(now[2]) / 1e6 + tonumber(ARGV[3])
end
redis.call('HSET', KEYS[1], 'open_until', tostring(open_until))
return {failures, tostring(open_until)}
"""

_TAKE_TOKEN = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or burst)
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or now)
tokens = math.min(burst, tokens + (now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 60)
return tostring(wait)
"""

_ADD_ENTRY = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('INCR', KEYS[3])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[5])
for _, id in ipairs(expired) do redis.call('HDEL', KEYS[1], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[5])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, extra - 1)
  for _, id in ipairs(old) do redis.call('HDEL', KEYS[1], id) end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return 1
"""


class RedisCacheStore:
    """Semantic-cache entries in Redis; each replica keeps a decoded copy until the tenant's version changes."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._add = client.register_script(_ADD_ENTRY)
        self._local: dict[str, tuple[bytes | None, EntryIndex]] = {}

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int, now: float) -> None:
        """Store an entry; drop the tenant's expired entries and the oldest beyond `max_entries`."""
        vector = None
        if entry.vector is not None:
            vector = base64.b64encode(np.asarray(entry.vector, dtype=np.float32).tobytes()).decode()
        record = json.dumps(
            {
                "exact_key": entry.exact_key,
                "context_key": entry.context_key,
                "key_text": entry.key_text,
                "vector": vector,
                "response": entry.response,
                "expires_at": entry.expires_at,
            }
        )
        keys = [f"{PREFIX}cache:{tenant}", f"{PREFIX}cache-order:{tenant}", f"{PREFIX}cache-version:{tenant}"]
        await self._add(keys=keys, args=[entry.entry_id, record, entry.expires_at, max_entries, now])

    async def index(self, tenant: str) -> EntryIndex:
        """The tenant's entries (re-read from Redis only when another add happened)."""
        version = await self.client.get(f"{PREFIX}cache-version:{tenant}")
        cached = self._local.get(tenant)
        if cached is None or cached[0] != version:
            raw = await self.client.hgetall(f"{PREFIX}cache:{tenant}")
            entries = []
            for entry_id, value in raw.items():
                data = json.loads(value)
                vector = data.get("vector")
                entries.append(
                    CacheEntry(
                        entry_id.decode(),
                        data["exact_key"],
                        data["context_key"],
                        data["key_text"],
                        np.frombuffer(base64.b64decode(vector), dtype=np.float32) if vector else None,
                        data["response"],
                        float(data["expires_at"]),
                    )
                )
            entries.sort(key=lambda e: e.expires_at)
            cached = (version, EntryIndex(entries))
            self._local[tenant] = cached
        return cached[1]


def check_reachable(url: str, timeout_s: float = 3.0) -> None:
    """Raise ValueError saying so when no Redis answers PING at `url` within `timeout_s`."""
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ValueError(f"store {url}: no Redis answers there ({exc}); start it or use store: memory") from None
    finally:
        client.close()


class RedisStore:
    """Store (see store.py) backed by one Redis database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = aioredis.Redis.from_url(url)
        self.cache = RedisCacheStore(self.client)
        self._try_acquire = self.client.register_script(_TRY_ACQUIRE)
        self._release = self.client.register_script(_RELEASE)
        self._record = self.client.register_script(_RECORD)
        self._take_token = self.client.register_script(_TAKE_TOKEN)

    async def circuit(self, upstream: str) -> CircuitState:
        """The upstream's circuit state."""
        raw = await self.client.hgetall(f"{PREFIX}circuit:{upstream}")
        if not raw:
            return CircuitState()
        return CircuitState(int(raw.get(b"failures", 0)), float(raw.get(b"open_until", 0)))

    async def record_result(self, upstream: str, ok: bool, threshold: int, reset_s: float) -> CircuitState:
        """See Store.record_result."""
        failures, open_until = await self._record(
            keys=[f"{PREFIX}circuit:{upstream}"], args=["1" if ok else "0", threshold, reset_s]
        )
        return CircuitState(int(failures), float(open_until))

    async def try_acquire(self, upstream: str, limit: int) -> bool:
        """See Store.try_acquire."""
        return bool(await self._try_acquire(keys=[f"{PREFIX}inflight:{upstream}"], args=[limit]))

    async def release(self, upstream: str) -> None:
        """See Store.release."""
        await self._release(keys=[f"{PREFIX}inflight:{upstream}"])

    async def in_flight(self, upstream: str) -> int:
        """See Store.in_flight."""
        return int(await self.client.get(f"{PREFIX}inflight:{upstream}") or 0)

    async def take_token(self, key: str, rate_per_s: float, burst: float) -> float:
        """See Store.take_token (the bucket runs on the Redis server's clock, one clock for every replica)."""
        return float(await self._take_token(keys=[f"{PREFIX}bucket:{key}"], args=[rate_per_s, burst]))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
