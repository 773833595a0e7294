"""Shared state of the gateway: circuit state, in-flight counts, token buckets and semantic-cache entries.

`MemoryStore` keeps them in this process (the default). `RedisStore` (store_redis.py) keeps them in Redis, so
that replicas of the gateway share one cache, one rate limit per tenant, one in-flight count per upstream and one
circuit state per upstream. Both implement the same async methods; the logic that reads them is the same.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from jevserve.gateway.cache import CacheStore, MemoryCacheStore


@dataclass(frozen=True)
class CircuitState:
    """One upstream's circuit: consecutive failures, and until when it is open (0: closed)."""

    num_failures: int = 0
    # epoch seconds; 0 while closed. Once it has passed the circuit is half-open: one request claims the trial
    # (claim_trial), which holds it open while it tries, and that request's result closes or re-opens it
    open_until: float = 0.0


class Store(Protocol):
    """What the gateway keeps, in this process or shared."""

    cache: CacheStore

    async def circuit(self, upstream: str) -> CircuitState:
        """The upstream's circuit state."""

    async def record_result(self, upstream: str, ok: bool, threshold: int, reset_s: float) -> CircuitState:
        """Count a success (closes the circuit) or a failure (opens it at `threshold` in a row)."""

    async def claim_trial(self, upstream: str, hold_s: float) -> bool:
        """Claim the one trial request of a half-open circuit (its reset passed): True for the request that claims
        it, which holds the circuit open `hold_s` longer while it tries (if its result has not come by then, another
        trial follows); False for every other request, and for a circuit that is closed or still open."""

    async def try_acquire(self, upstream: str, limit: int) -> bool:
        """Take an in-flight slot when fewer than `limit` are taken."""

    async def release(self, upstream: str) -> None:
        """Give an in-flight slot back."""

    async def in_flight(self, upstream: str) -> int:
        """Slots taken now."""

    async def take_token(self, key: str, rate_per_s: float, burst: float) -> float:
        """Take one token from the bucket `key`; 0 when taken, else seconds until one is available."""

    async def aclose(self) -> None:
        """Release connections."""


def store_state(store: Store) -> str:
    """What /healthz says of the store (both front ends): `memory`, or a shared store's URL and whether it answers."""
    describe = getattr(store, "describe", None)
    return describe() if describe is not None else "memory"


class MemoryStore:
    """All state in this process."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.cache = MemoryCacheStore()
        self._circuits: dict[str, CircuitState] = {}
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # key → (tokens, at)

    async def circuit(self, upstream: str) -> CircuitState:
        """The upstream's circuit state."""
        return self._circuits.get(upstream, CircuitState())

    async def record_result(self, upstream: str, ok: bool, threshold: int, reset_s: float) -> CircuitState:
        """See Store.record_result."""
        if ok:
            state = CircuitState()
        else:
            failures = self._circuits.get(upstream, CircuitState()).num_failures + 1
            state = CircuitState(failures, self.clock() + reset_s if failures >= threshold else 0.0)
        self._circuits[upstream] = state
        return state

    async def claim_trial(self, upstream: str, hold_s: float) -> bool:
        """See Store.claim_trial."""
        state = self._circuits.get(upstream, CircuitState())
        now = self.clock()
        if state.open_until == 0.0 or state.open_until > now:
            return False
        self._circuits[upstream] = CircuitState(state.num_failures, now + hold_s)
        return True

    async def try_acquire(self, upstream: str, limit: int) -> bool:
        """See Store.try_acquire."""
        taken = self._in_flight.get(upstream, 0)
        if taken >= limit:
            return False
        self._in_flight[upstream] = taken + 1
        return True

    async def release(self, upstream: str) -> None:
        """See Store.release."""
        self._in_flight[upstream] = max(0, self._in_flight.get(upstream, 0) - 1)

    async def in_flight(self, upstream: str) -> int:
        """See Store.in_flight."""
        return self._in_flight.get(upstream, 0)

    async def take_token(self, key: str, rate_per_s: float, burst: float) -> float:
        """See Store.take_token."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - at) * rate_per_s)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate_per_s if rate_per_s > 0 else math.inf

    async def aclose(self) -> None:
        """Nothing to release."""
        return None
