"""Simulation events: small frozen records with a time and a `handle(state)` that returns follow-up events."""

from __future__ import annotations

from dataclasses import dataclass

from jevserve.sim.entities import SimRequest
from jevserve.sim.state import SimState

# Order of events at the same instant (the heap key is (time, rank, seq)):
# - StepDone first, so the KV blocks and batch slots that a finished step frees are visible to everything that
#   happens at that instant;
# - then Arrival and Enqueue, so a request that arrives exactly at a step boundary is seen by the scheduling
#   at that boundary (vLLM drains its input queue before every schedule());
# - ScheduleTick last: it schedules the next step once the instant's completions and arrivals are in.
RANK = {"StepDone": 0, "Arrival": 1, "Enqueue": 2, "ScheduleTick": 3}


@dataclass(frozen=True, slots=True)
class Arrival:
    """A client sends a request to replica `replica_id`; it is queued after the policy's decision delay."""

    time: float
    replica_id: int
    request: SimRequest

    def handle(self, state: SimState) -> list:
        """Notify observers and queue the request now or after the decision delay."""
        for o in state.observers:
            o.on_arrival(self.request, self.time)
        engine = state.engines[self.replica_id]
        reason = engine.check_fits(self.request)
        if reason is not None:
            engine.reject(self.request, reason, self.time)
            return []
        delay = engine.policy.decision_delay_s
        if delay > 0:
            return [Enqueue(self.time + delay, self.replica_id, self.request)]
        return Enqueue(self.time, self.replica_id, self.request).handle(state)


@dataclass(frozen=True, slots=True)
class Enqueue:
    """A request reaches the waiting queue of replica `replica_id`."""

    time: float
    replica_id: int
    request: SimRequest

    def handle(self, state: SimState) -> list:
        """Queue it; wake an idle engine, or cut a decode run short so the next step can admit it."""
        engine = state.engines[self.replica_id]
        new_end = engine.enqueue(self.request, self.time)
        if new_end is not None:
            return [StepDone(new_end, self.replica_id, engine.batch.run_id)]
        if engine.is_idle and not engine.tick_pending:
            engine.tick_pending = True
            return [ScheduleTick(self.time, self.replica_id)]
        return []


@dataclass(frozen=True, slots=True)
class ScheduleTick:
    """Replica `replica_id` schedules its next step."""

    time: float
    replica_id: int

    def handle(self, state: SimState) -> list:
        """Start a step (or a decode run) if there is work."""
        batch = state.engines[self.replica_id].start_step(self.time)
        return [] if batch is None else [StepDone(batch.end_s, self.replica_id, batch.run_id)]


@dataclass(frozen=True, slots=True)
class StepDone:
    """The step (or decode run) `run_id` of replica `replica_id` ends."""

    time: float
    replica_id: int
    run_id: int

    def handle(self, state: SimState) -> list:
        """Apply the step's tokens and completions, then schedule the next step at the same instant."""
        engine = state.engines[self.replica_id]
        if engine.batch is None or engine.batch.run_id != self.run_id:
            return []  # superseded: the run was cut short and a new StepDone carries its new end
        engine.finish_step(self.time)
        engine.tick_pending = True
        return [ScheduleTick(self.time, self.replica_id)]
