"""Time-to-first-token estimates for a request on a replica, as pure functions of a snapshot and a step-time model.

Two estimators, so the cost of the better one can be judged:

- `estimate_ttft`: simulate the replica's batches forward from the snapshot with its own step-time model,
  the new request included (see `replica_forward`), until the new request's first token. Each resident
  request's remaining decode comes from its `predicted_output_tokens` when it has one, else from
  `ReplicaModel.default_output_tokens`; a request that has outlived that length is assumed to end with its next
  token. A prediction that is too short makes a busy replica look free too early (TTFT underestimated), one that
  is too long the opposite; with exact lengths and no later arrivals the estimate is exact. A preempted request
  is replayed recomputing its whole context: prefix caching (which lets it reuse its cached blocks) is not
  modelled, so against an engine with it on the estimate can come out late (cluster runs keep it off by default).
- `estimate_ttft_queued_prefill`: the rest of the step in flight plus every queued prefill token (the new
  prompt included) divided by the replica's prefill throughput. It ignores decode work, batch caps and KV
  memory, which is what makes it cheap.

A step-time model is anything with `step_s(num_prefill_tokens, num_decode_tokens, decode_context_tokens,
prefill_attention_pairs) -> seconds`, linear in the context term unless it also sums a run of decode steps itself
(`decode_run_total_s(num_steps, batch_size, context_tokens)`, as `jevserve.sim.step_time.StepTimeModel` does), so
the gateway can run these functions unchanged against live engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from jevserve.serving.engine_config import EngineConfig, SchedulerLimits
from jevserve.serving.queue import FirstComeFirstServed
from jevserve.serving.replica_forward import ReplicaForward
from jevserve.serving.types import QueuePolicy, ReplicaState, Request

__all__ = ["DEFAULT_OUTPUT_TOKENS", "ReplicaModel", "SchedulerLimits", "StepTimer", "estimate_ttft",
           "estimate_ttft_queued_prefill"]
DEFAULT_OUTPUT_TOKENS = 256.0  # remaining-decode guess for a request without a prediction (about ShareGPT's median)


class StepTimer(Protocol):
    """A step-time model: seconds one engine step takes from what it computes."""

    def step_s(
        self,
        num_prefill_tokens: int,
        num_decode_tokens: int,
        decode_context_tokens: int = 0,
        prefill_attention_pairs: int = 0,
    ) -> float:
        """Seconds one step takes."""
        ...


@dataclass(frozen=True, slots=True)
class ReplicaModel:
    """What a router knows about one replica: its step-time model, scheduler limits and queue policy."""

    step_time: StepTimer
    limits: EngineConfig = field(default_factory=EngineConfig)  # the replica's engine settings
    queue_policy: QueuePolicy | None = None  # None: first come, first served
    default_output_tokens: float = DEFAULT_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        if not self.default_output_tokens >= 1:
            raise ValueError(
                f"ReplicaModel: default_output_tokens={self.default_output_tokens!r}; expected a number >= 1"
            )


_FCFS = FirstComeFirstServed()


def estimate_ttft(request: Request, state: ReplicaState, model: ReplicaModel) -> float:
    """Seconds from the snapshot's instant to the request's first token if it were sent to this replica now
    (inf if it could never be admitted); TTFT as a client sees it, the queue policy's decision delay included."""
    policy = model.queue_policy or _FCFS
    forward = ReplicaForward(
        state,
        request,
        step_time=model.step_time,
        policy=policy,
        config=model.limits,
        default_output_tokens=model.default_output_tokens,
        enqueue_delay_s=policy.decision_delay_s,
    )
    return forward.run()


def prefill_tokens_per_s(model: ReplicaModel) -> float:
    """Prefill throughput of a replica: a full token budget of prompt tokens per step."""
    budget = model.limits.max_num_batched_tokens
    return budget / model.step_time.step_s(budget, 0, 0, 0)


def estimate_ttft_queued_prefill(request: Request, state: ReplicaState, model: ReplicaModel) -> float:
    """The cheap estimate: rest of the step in flight + queued prefill tokens (new prompt included) / throughput."""
    queued = request.num_prompt_tokens
    cols = state.running_columns
    if cols is not None:  # the same sum as the loop below, in array operations
        pending = cols.num_prompt_tokens + cols.num_generated_tokens - cols.num_computed_tokens
        remaining = np.where((cols.num_generated_tokens > 0) & (pending <= 1), 0, pending)
        queued += int(np.maximum(0, remaining - cols.num_scheduled_tokens).sum())
    else:
        for r in state.running:
            queued += max(0, r.num_remaining_prefill_tokens - r.num_scheduled_tokens)
    for r in state.waiting:
        queued += r.num_remaining_prefill_tokens
    residual = max(0.0, state.busy_until_s - state.now_s) if state.busy_until_s is not None else 0.0
    return residual + max(queued, 0) / prefill_tokens_per_s(model)
