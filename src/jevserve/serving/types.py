"""Value types the serving policies work on: a request, a snapshot of a replica, and a decision.

They are frozen so that a policy cannot change what it is shown; simulators and gateways keep their own mutable
entities and hand policies these values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(frozen=True, slots=True)
class Request:
    """A request as a policy sees it: its sizes, when it arrived and, optionally, a predicted reply length."""

    request_id: str
    arrival_s: float  # when the client sent it, seconds on the caller's clock
    num_prompt_tokens: int
    num_output_tokens: int | None = None  # the true reply length: known to simulators and oracles only
    predicted_output_tokens: float | None = None  # a decision model's estimate of the reply length, tokens
    priority: int = 0  # vLLM's request priority: lower is served earlier by the `priority` policy

    def __post_init__(self) -> None:
        if self.num_prompt_tokens < 1:
            raise ValueError(
                f"request {self.request_id!r}: num_prompt_tokens={self.num_prompt_tokens}; expected an integer >= 1"
            )
        if self.num_output_tokens is not None and self.num_output_tokens < 1:
            raise ValueError(
                f"request {self.request_id!r}: num_output_tokens={self.num_output_tokens}; expected an integer >= 1"
            )
        if self.predicted_output_tokens is not None and not self.predicted_output_tokens >= 0:
            raise ValueError(
                f"request {self.request_id!r}: predicted_output_tokens={self.predicted_output_tokens}; "
                "expected a number >= 0"
            )


@dataclass(frozen=True, slots=True)
class ResidentRequest:
    """One request held by a replica, with how far it has got."""

    request: Request
    num_computed_tokens: int  # tokens whose KV is in the cache (prompt chunks done, plus decoded tokens)
    num_generated_tokens: int  # reply tokens produced so far
    is_running: bool  # True: in the running batch; False: waiting (new or preempted)
    num_scheduled_tokens: int = 0  # tokens the step in flight is computing for it (0 when none is in flight)

    @property
    def num_remaining_prefill_tokens(self) -> int:
        """Tokens still to be prefilled before the next reply token (the whole context again after preemption)."""
        # vLLM's view: a request has prompt + generated tokens, of which num_computed are in the KV cache; one
        # pending token after the first reply token is an ordinary decode step, not prefill.
        pending = self.request.num_prompt_tokens + self.num_generated_tokens - self.num_computed_tokens
        return 0 if self.num_generated_tokens > 0 and pending <= 1 else pending


@dataclass(frozen=True, slots=True, eq=False)
class RunningColumns:
    """The running requests' sizes and progress as arrays, row i for `ReplicaState.running[i]`.

    A replica that keeps its batch as arrays (the simulator's engine does) attaches them to its snapshot, so the
    forward TTFT estimate reads a busy replica with a few numpy operations instead of a Python pass over
    hundreds of `ResidentRequest`s. They say nothing `running` does not; estimates are the same with or without.
    """

    num_prompt_tokens: np.ndarray
    num_computed_tokens: np.ndarray
    num_generated_tokens: np.ndarray
    num_scheduled_tokens: np.ndarray
    predicted_output_tokens: np.ndarray  # float64; NaN where the request has no prediction
    requests: np.ndarray  # object array of the `Request`s, so a subset is one indexing operation

    def __len__(self) -> int:
        return len(self.num_prompt_tokens)


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """A snapshot of one engine replica at an instant, as a router sees it."""

    replica_id: int
    now_s: float  # the instant of the snapshot
    num_free_kv_blocks: int
    num_total_kv_blocks: int
    running: tuple[ResidentRequest, ...]  # in admission order
    waiting: tuple[ResidentRequest, ...]  # in the replica's queue order at now_s
    busy_until_s: float | None = None  # end of the step in flight; None when idle
    num_routed: int = 0  # requests routed to this replica so far (set by the router's caller; round-robin uses it)
    # Requests routed here that are not queued yet (waiting for their decision); each reaches the queue at its
    # arrival_s plus the queue policy's decision delay. Set by the router's caller, which knows what it sent.
    in_transit: tuple[Request, ...] = ()
    running_columns: RunningColumns | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.running_columns is not None and len(self.running_columns) != len(self.running):
            raise ValueError(
                f"replica {self.replica_id}: running_columns has {len(self.running_columns)} rows for "
                f"{len(self.running)} running requests; they must describe the same requests in the same order"
            )

    @property
    def num_outstanding(self) -> int:
        """Requests the replica holds or is about to: running, waiting or in transit."""
        return len(self.running) + len(self.waiting) + len(self.in_transit)


@dataclass(frozen=True, slots=True)
class Decision:
    """A routing decision: the chosen replica and a short reason for logs."""

    replica_id: int
    reason: str = ""


class Router(Protocol):
    """Picks the replica that takes a request, from snapshots of every replica."""

    name: str

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The chosen replica and why; `replicas` holds one snapshot per replica, taken at the same instant."""
        ...


class QueuePolicy(Protocol):
    """The order in which waiting requests are admitted and the choice of preemption victim."""

    name: str
    decision_delay_s: float  # how long a request waits for its prediction before it is queued
    reads_predictions: bool  # whether the order reads predicted reply lengths (every request then needs one)

    def sort_key(self, request: Request, now_s: float) -> tuple:
        """Smaller keys are admitted first."""
        ...

    def key_valid_until_s(self, request: Request, now_s: float) -> float:
        """When the request's key may next change (math.inf if never), so a queue knows when to re-rank it."""
        ...

    def victim(self, candidates: tuple[Request, ...] | list[Request], now_s: float) -> int:
        """Index of the request to preempt: the one this policy ranks last."""
        ...
