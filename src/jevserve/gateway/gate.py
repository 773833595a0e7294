"""The gateway's queue in front of an upstream's concurrency limit, ordered by a `serving` queue policy.

A request takes an in-flight slot when one is free (the count lives in the store, so replicas sharing a Redis
store share the limit). Otherwise it waits; when a slot frees, the waiter the policy ranks first (`sort_key`,
aging included) goes next. Slots freed by other replicas are noticed by polling every `poll_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from jevserve.gateway.store import Store
from jevserve.serving import QueuePolicy, Request


class QueueFull(Exception):
    """More requests wait for this upstream than admission allows."""


@dataclass
class _Waiter:
    request: Request
    future: asyncio.Future
    seq: int


class UpstreamGate:
    """Concurrency limit + policy-ordered waiting for one upstream."""

    def __init__(
        self,
        upstream: str,
        limit: int,
        policy: QueuePolicy,
        store: Store,
        *,
        poll_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = upstream
        self.limit = limit
        self.policy = policy
        self.store = store
        self.poll_s = poll_s
        self.clock = clock
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()

    @property
    def num_waiting(self) -> int:
        """Requests waiting for a slot in this process."""
        return len(self._waiting)

    async def acquire(self, request: Request, *, timeout_s: float, max_queue: int | None = None) -> None:
        """Take a slot, waiting in policy order; raises QueueFull, or TimeoutError after `timeout_s`."""
        if not self._waiting and await self.store.try_acquire(self.upstream, self.limit):
            return
        if max_queue is not None and len(self._waiting) >= max_queue:
            raise QueueFull(f"{len(self._waiting)} requests already wait for upstream {self.upstream!r}")
        waiter = _Waiter(request, asyncio.get_running_loop().create_future(), next(self._seq))
        self._waiting.append(waiter)
        deadline = self.clock() + timeout_s
        try:
            while True:
                # a fresh future before the check, so a wake-up during the check is not lost
                waiter.future = asyncio.get_running_loop().create_future()
                if self._first() is waiter and await self.store.try_acquire(self.upstream, self.limit):
                    return
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise TimeoutError(f"waited {timeout_s:.1f} s for upstream {self.upstream!r}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(waiter.future), min(self.poll_s, remaining))
        finally:
            self._waiting.remove(waiter)
            self._wake_first()

    async def release(self) -> None:
        """Give the slot back and wake the waiter ranked first."""
        await self.store.release(self.upstream)
        self._wake_first()

    def _first(self) -> _Waiter | None:
        if not self._waiting:
            return None
        now = self.clock()
        return min(self._waiting, key=lambda w: (self.policy.sort_key(w.request, now), w.seq))

    def _wake_first(self) -> None:
        first = self._first()
        if first is not None and not first.future.done():
            first.future.set_result(None)
