"""The waiting queue of one engine, ordered by a queue policy's keys, including keys that change with time."""

from __future__ import annotations

import heapq
import itertools
import math

from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.types import QueuePolicy


class WaitingQueue:
    """A heap of (key, seq, version, request); keys that age are re-ranked when the policy says they change.

    Each request's key is computed when it is pushed and again at `key_valid_until_s`, so a policy with aging
    costs one re-ranking per promotion instead of a sort per scheduling step. Superseded heap entries are
    skipped by comparing versions (lazy deletion).
    """

    def __init__(self, policy: QueuePolicy) -> None:
        self._policy = policy
        self._heap: list[tuple[tuple, int, int, EngineRequest]] = []
        self._changes: list[tuple[float, int, int, EngineRequest]] = []  # (when the key changes, seq, version, req)
        self._version: dict[int, int] = {}  # id(request) -> its live entry's version; absent when not queued
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._version)

    def push(self, request: EngineRequest, now_s: float) -> None:
        """Add a request (new or preempted), ranked by its key at now_s."""
        self._rank(request, now_s)

    def extend(self, requests: list[EngineRequest], now_s: float) -> None:
        """Add many requests at once, ranked at now_s: the same queue as pushing them one by one, built in one
        heapify (the TTFT estimate loads a whole snapshot's queue for every estimate)."""
        key, valid_until = self._policy.sort_key, self._policy.key_valid_until_s
        changes = []
        for request in requests:
            seq = next(self._seq)
            self._version[id(request)] = seq
            self._heap.append((key(request.spec, now_s), seq, seq, request))
            until = valid_until(request.spec, now_s)
            if until != math.inf:
                changes.append((until, seq, seq, request))
        heapq.heapify(self._heap)
        if changes:
            self._changes.extend(changes)
            heapq.heapify(self._changes)

    def remove(self, request: EngineRequest) -> bool:
        """Take a request out of the queue (its heap entries are skipped from now on); False if not queued."""
        return self._version.pop(id(request), None) is not None

    def _rank(self, request: EngineRequest, now_s: float) -> None:
        # An entry's version is its sequence number, unique for the queue's life, so an entry superseded by a
        # re-ranking or a removal never matches again, even if the request is queued anew later.
        seq = next(self._seq)
        self._version[id(request)] = seq
        heapq.heappush(self._heap, (self._policy.sort_key(request.spec, now_s), seq, seq, request))
        until = self._policy.key_valid_until_s(request.spec, now_s)
        if until != math.inf:
            heapq.heappush(self._changes, (until, seq, seq, request))

    def _refresh(self, now_s: float) -> None:
        while self._changes and self._changes[0][0] <= now_s:
            _, _, version, request = heapq.heappop(self._changes)
            if self._version.get(id(request)) == version:
                self._rank(request, now_s)
        while self._heap and self._version.get(id(self._heap[0][3])) != self._heap[0][2]:
            heapq.heappop(self._heap)

    def peek(self, now_s: float) -> EngineRequest | None:
        """The request ranked first at now_s, or None when empty."""
        self._refresh(now_s)
        return self._heap[0][3] if self._heap else None

    def pop(self, now_s: float) -> EngineRequest:
        """Remove and return the request ranked first at now_s."""
        self._refresh(now_s)
        request = heapq.heappop(self._heap)[3]
        del self._version[id(request)]
        return request

    def next_change_s(self) -> float:
        """The earliest instant at which some queued request's key changes (inf if none)."""
        while self._changes and self._version.get(id(self._changes[0][3])) != self._changes[0][2]:
            heapq.heappop(self._changes)
        return self._changes[0][0] if self._changes else math.inf

    def ordered(self, now_s: float) -> list[EngineRequest]:
        """All queued requests in rank order at now_s (for snapshots; does not change the queue)."""
        self._refresh(now_s)
        version = self._version
        live = [e for e in self._heap if version.get(id(e[3])) == e[2]]
        live.sort()  # (key, seq, ...): seq is unique, so the sort never compares further
        return [e[3] for e in live]
