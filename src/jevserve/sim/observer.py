"""The observer interface: one `on_<event>` hook per thing that happens in an engine. Entities count nothing;
observers (metrics, step logs) do."""

from __future__ import annotations

from jevserve.sim.entities import Batch, SimRequest


class Observer:
    """Base class with no-op hooks; subclasses override the ones they need."""

    def on_arrival(self, request: SimRequest, now_s: float) -> None:
        """A request was sent by the client."""

    def on_enqueue(self, request: SimRequest, now_s: float) -> None:
        """A request reached an engine's waiting queue (after any decision delay)."""

    def on_admit(self, request: SimRequest, now_s: float) -> None:
        """A waiting request joined the running batch (again, if it was preempted)."""

    def on_preempt(self, request: SimRequest, now_s: float) -> None:
        """A running request lost its KV blocks and went back to waiting (recompute)."""

    def on_step(self, replica_id: int, batch: Batch, num_steps: int) -> None:
        """`num_steps` steps of `batch` ended (more than one for a decode run)."""

    def on_finish(self, request: SimRequest, now_s: float) -> None:
        """A request produced its last token."""

    def on_reject(self, request: SimRequest, now_s: float) -> None:
        """A request was refused because it can never fit in the replica's KV cache (`request.rejected` says
        why)."""
