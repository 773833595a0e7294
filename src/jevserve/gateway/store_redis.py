"""The gateway's shared state in Redis, so replicas share one cache, rate limits, in-flight counts and circuits.

Keys (all under `jevserve:gw:`):
    cache:{tenant}            hash   entry id → JSON {exact_key, context_key, key_text, vector (base64 float32 or
                                     null), response, expires_at}
    cache-order:{tenant}      zset   entry id by expiry time (expired entries and, beyond max_entries, the oldest go)
    cache-version:{tenant}    int    bumped on every add, so a replica re-reads entries only when they changed
    circuit:{upstream}        hash   failures, open_until (0: closed; past: half-open, the next request claims the
                                     trial by moving it on)
    slots:{upstream}          zset   in-flight slot id (one per request holding it) by the epoch second it was taken
    bucket:{key}              hash   tokens, at (seconds, Redis server clock)
Every read-modify-write is one Lua script, so concurrent replicas cannot interleave inside it. In-flight slots of a
replica that dies holding them are not given back (documented in docs/gateway.md; `DEL` clears them). A slot is an
id, so giving it back is idempotent: one Redis was not told about (a stall, a timeout whose script ran anyway) is
removed by the replica's next call that reaches Redis, where a counter's DECR could only be sent or lost.

A Redis that stops answering must not take the replicas down with it: every operation has a short timeout, and when
one fails the replica carries on with its own in-process state (a `MemoryStore`, as `store: memory` would) and
tries Redis again a few seconds later. Meanwhile its cache is its own, its rate limits and in-flight counts are per
replica and its circuits its own; no request fails because of the store.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import TypeVar

import numpy as np
import redis
import redis.asyncio as aioredis

from jevserve.gateway.cache import MemoryCacheStore
from jevserve.gateway.cache_index import CacheEntry, EntryIndex
from jevserve.gateway.store import CircuitState, MemoryStore

log = logging.getLogger("jevserve.gateway.store")
T = TypeVar("T")

# A shared store is worth its round trip only while it answers at once: a Redis that is stopped, frozen or cut off
# costs one request at most this long per try, then the replica uses its own state for RETRY_S
OPERATION_TIMEOUT_S = 0.5
RETRY_S = 5.0
STORE_ERRORS = (redis.RedisError, OSError)  # redis-py's connection errors and timeouts are RedisErrors

PREFIX = "jevserve:gw:"

# ARGV: the limit, the new slot's id, now (epoch seconds)
_TRY_ACQUIRE = """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
return 1
"""

# ARGV: the ids of the slots given back (removing one that was never added does nothing)
_RELEASE = """
for i = 1, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
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

_CLAIM_TRIAL = """
local open_until = tonumber(redis.call('HGET', KEYS[1], 'open_until') or '0')
if open_until == 0 then return 0 end
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1e6
if open_until > now then return 0 end
redis.call('HSET', KEYS[1], 'open_until', tostring(now + tonumber(ARGV[1])))
return 1
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


def _slots_key(upstream: str) -> str:
    return f"{PREFIX}slots:{upstream}"


class Outage:
    """Whether Redis is worth asking now: after a failed operation it is left alone for `retry_s`, and the replica
    uses its own state meanwhile. Says so in the log once when it goes, and once when it answers again."""

    def __init__(self, url: str, retry_s: float = RETRY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.retry_s = retry_s
        self.clock = clock
        self.down_until = 0.0
        self.down_since: float | None = None  # epoch seconds of the first failure of this outage

    @property
    def is_down(self) -> bool:
        return self.down_since is not None

    async def either(self, shared: Callable[[], Awaitable[T]], local: Callable[[], Awaitable[T]]) -> T:
        """`shared()` while Redis answers, else `local()`."""
        if self.clock() >= self.down_until:
            try:
                result = await shared()
            except STORE_ERRORS as exc:
                self.failed(exc)
            else:
                self.answered()
                return result
        return await local()

    def failed(self, exc: BaseException) -> None:
        self.down_until = self.clock() + self.retry_s
        if self.down_since is None:
            self.down_since = time.time()
            log.warning("store %s does not answer (%s: %s); this replica carries on with its own state and tries "
                        "again every %g s", self.url, type(exc).__name__, exc, self.retry_s)

    def answered(self) -> None:
        if self.down_since is not None:
            log.warning("store %s answers again after %.0f s", self.url, time.time() - self.down_since)
            self.down_since = None


class RedisCacheStore:
    """Semantic-cache entries in Redis; each replica keeps a decoded copy until the tenant's version changes (and,
    while Redis does not answer, entries of its own)."""

    def __init__(self, client: aioredis.Redis, outage: Outage | None = None) -> None:
        self.client = client
        self.outage = outage or Outage("redis")
        self.fallback = MemoryCacheStore()
        self._add = client.register_script(_ADD_ENTRY)
        self._local: dict[str, tuple[bytes | None, EntryIndex]] = {}

    async def add(self, tenant: str, entry: CacheEntry, max_entries: int, now: float) -> None:
        """Store an entry; drop the tenant's expired entries and the oldest beyond `max_entries`."""
        await self.outage.either(lambda: self._add_shared(tenant, entry, max_entries, now),
                                 lambda: self.fallback.add(tenant, entry, max_entries, now))

    async def index(self, tenant: str) -> EntryIndex:
        """The tenant's entries (re-read from Redis only when another add happened)."""
        return await self.outage.either(lambda: self._index_shared(tenant), lambda: self.fallback.index(tenant))

    async def _add_shared(self, tenant: str, entry: CacheEntry, max_entries: int, now: float) -> None:
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

    async def _index_shared(self, tenant: str) -> EntryIndex:
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
    """Store (see store.py) backed by one Redis database, and by this process's own state while Redis does not answer
    (module docstring)."""

    def __init__(self, url: str, *, timeout_s: float = OPERATION_TIMEOUT_S, retry_s: float = RETRY_S) -> None:
        self.url = url
        self.client = aioredis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        self.outage = Outage(url, retry_s)
        self.local = MemoryStore()
        self.cache = RedisCacheStore(self.client, self.outage)
        self._try_acquire = self.client.register_script(_TRY_ACQUIRE)
        self._release = self.client.register_script(_RELEASE)
        self._record = self.client.register_script(_RECORD)
        self._claim_trial = self.client.register_script(_CLAIM_TRIAL)
        self._take_token = self.client.register_script(_TAKE_TOKEN)
        self._local_slots: Counter[str] = Counter()  # in-flight slots this replica took from `local`, per upstream
        self._held: defaultdict[str, list[str]] = defaultdict(list)  # ids of the slots it holds in Redis
        # ids Redis may hold that this replica has given back (or never got: a timed-out acquire may have run)
        self._unreturned: defaultdict[str, list[str]] = defaultdict(list)

    def describe(self) -> str:
        """For /healthz: the store, and whether this replica is on its own state now."""
        if self.outage.is_down:
            since = time.strftime("%H:%M:%S", time.gmtime(self.outage.down_since))
            return f"{self.url}: not answering since {since} UTC; this replica uses its own state"
        return f"{self.url}: shared"

    async def circuit(self, upstream: str) -> CircuitState:
        """The upstream's circuit state."""

        async def shared() -> CircuitState:
            await self._return_unreturned()
            return await self._circuit(upstream)

        return await self.outage.either(shared, lambda: self.local.circuit(upstream))

    async def _circuit(self, upstream: str) -> CircuitState:
        raw = await self.client.hgetall(f"{PREFIX}circuit:{upstream}")
        if not raw:
            return CircuitState()
        return CircuitState(int(raw.get(b"failures", 0)), float(raw.get(b"open_until", 0)))

    async def record_result(self, upstream: str, ok: bool, threshold: int, reset_s: float) -> CircuitState:
        """See Store.record_result."""

        async def shared() -> CircuitState:
            failures, open_until = await self._record(
                keys=[f"{PREFIX}circuit:{upstream}"], args=["1" if ok else "0", threshold, reset_s]
            )
            return CircuitState(int(failures), float(open_until))

        return await self.outage.either(shared, lambda: self.local.record_result(upstream, ok, threshold, reset_s))

    async def claim_trial(self, upstream: str, hold_s: float) -> bool:
        """See Store.claim_trial: one replica's request claims it (one Lua script), the others' see the circuit
        open."""

        async def shared() -> bool:
            return bool(await self._claim_trial(keys=[f"{PREFIX}circuit:{upstream}"], args=[hold_s]))

        return await self.outage.either(shared, lambda: self.local.claim_trial(upstream, hold_s))

    async def try_acquire(self, upstream: str, limit: int) -> bool:
        """See Store.try_acquire."""
        slot = uuid.uuid4().hex

        async def local() -> bool:
            taken = await self.local.try_acquire(upstream, limit)
            self._local_slots[upstream] += taken
            return taken

        async def shared() -> bool:
            await self._return_unreturned(upstream)
            try:
                taken = await self._try_acquire(keys=[_slots_key(upstream)], args=[limit, slot, time.time()])
            except BaseException:
                # the script may have run (its answer timed out, or the client left while Redis was frozen, and a
                # cancelled call still runs when Redis resumes): the slot is removed later
                self._unreturned[upstream].append(slot)
                raise
            if taken:
                self._held[upstream].append(slot)
            return bool(taken)

        return await self.outage.either(shared, local)

    async def release(self, upstream: str) -> None:
        """See Store.release: a slot taken from this replica's own state goes back there, the others to Redis. One
        Redis cannot be told about now is removed by this replica's next call that reaches it: counted down with a
        DECR that was never sent, one stall of a second kept an upstream's slots taken for good, and with them every
        request of the route waiting out its deadline on every replica."""
        if self._local_slots[upstream] > 0:
            self._local_slots[upstream] -= 1
            await self.local.release(upstream)
            return
        if not self._held[upstream]:
            return
        slot = self._held[upstream].pop()

        async def shared() -> None:
            try:
                await self._release(keys=[_slots_key(upstream)], args=[slot])
            except BaseException:
                self._unreturned[upstream].append(slot)
                raise
            await self._return_unreturned(upstream)

        async def later() -> None:
            if slot not in self._unreturned[upstream]:
                self._unreturned[upstream].append(slot)
            log.warning("store %s: an in-flight slot of %s is given back when the store answers again", self.url,
                        upstream)

        await self.outage.either(shared, later)

    async def _return_unreturned(self, *upstreams: str) -> None:
        """Tell Redis to remove the slots this replica gave back (or may have taken) while it could not be told, of
        `upstreams` (all when none is named). Called by every shared call about slots or circuits, so a replica
        that serves any request gives back its stalled slots, not only its next request to that upstream (the
        other replicas waited out their deadlines meanwhile), and at shutdown."""
        for upstream in upstreams or list(self._unreturned):
            pending = list(self._unreturned.get(upstream, ()))
            if pending:
                await self._release(keys=[_slots_key(upstream)], args=pending)
                gone = set(pending)  # by id: another call may have added some meanwhile
                self._unreturned[upstream] = [slot for slot in self._unreturned[upstream] if slot not in gone]

    async def in_flight(self, upstream: str) -> int:
        """See Store.in_flight."""

        async def shared() -> int:
            return int(await self.client.zcard(_slots_key(upstream)))

        return await self.outage.either(shared, lambda: self.local.in_flight(upstream))

    async def take_token(self, key: str, rate_per_s: float, burst: float) -> float:
        """See Store.take_token (the bucket runs on the Redis server's clock, one clock for every replica)."""

        async def shared() -> float:
            return float(await self._take_token(keys=[f"{PREFIX}bucket:{key}"], args=[rate_per_s, burst]))

        return await self.outage.either(shared, lambda: self.local.take_token(key, rate_per_s, burst))

    async def aclose(self) -> None:
        """Give back what slots it still can, then close the connection pool."""
        if not self.outage.is_down:
            with contextlib.suppress(*STORE_ERRORS):
                await self._return_unreturned()
        await self.client.aclose()
