"""The event loop: pop the earliest event, advance the clock, handle it, push what it returns."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence

from jevserve.sim.engine import Engine
from jevserve.sim.events import RANK
from jevserve.sim.observer import Observer
from jevserve.sim.state import SimState


class Simulator:
    """A discrete-event loop over one or more engines; `run(until_s)` steps it to a given time."""

    def __init__(self, engines: Sequence[Engine], observers: Iterable[Observer] = ()) -> None:
        for index, engine in enumerate(engines):
            if engine.replica_id != index:
                raise ValueError(f"engine at position {index} has replica_id={engine.replica_id}; expected {index}")
        self.state = SimState(engines=list(engines), observers=tuple(observers))
        self.now_s = 0.0
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()  # owned by the simulator: ties at (time, rank) keep insertion order

    def push(self, event: object) -> None:
        """Schedule an event (it must not be in the past)."""
        if event.time < self.now_s:
            raise ValueError(f"event {event!r} at {event.time} s is before the clock ({self.now_s} s)")
        heapq.heappush(self._heap, (event.time, RANK[type(event).__name__], next(self._seq), event))

    def next_time_s(self) -> float:
        """Time of the next event, or inf when none is left."""
        return self._heap[0][0] if self._heap else math.inf

    def run(self, until_s: float = math.inf) -> int:
        """Handle every event at or before until_s; returns how many were handled."""
        heap, handled = self._heap, 0
        while heap and heap[0][0] <= until_s:
            time, _, _, event = heapq.heappop(heap)
            self.now_s = time
            for follow_up in event.handle(self.state):
                heapq.heappush(heap, (follow_up.time, RANK[type(follow_up).__name__], next(self._seq), follow_up))
            handled += 1
        if until_s != math.inf and until_s > self.now_s:
            self.now_s = until_s
        return handled
