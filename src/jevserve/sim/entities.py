"""Simulator entities: mutable state holders with no behaviour. Timestamps stay None until they happen."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.step_plan import StepPlan


@dataclass(slots=True, eq=False)
class SimRequest(EngineRequest):
    """One request's progress through a simulated engine: the planner's record plus when each thing happened.

    While it runs, the planner keeps its progress in arrays (`jevserve.serving.running_batch`) and writes it back
    when it leaves the running batch; read a running request through `Engine.running` or `Engine.snapshot`.
    """

    enqueue_s: float | None = None  # reached the engine's queue: arrival plus the decision delay
    first_admit_s: float | None = None  # first admitted to the running batch
    first_token_s: float | None = None
    finish_s: float | None = None
    replica_id: int | None = None
    rejected: str | None = None  # why the engine refused it (it can never fit in the KV cache); None: accepted
    # Times (s) of the reply tokens, in order: arrays of consecutive tokens (floats are accepted too). The engine
    # fills it when a run of consecutive tokens breaks, so it is complete once the request has finished.
    token_times: list[float | np.ndarray] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Batch:
    """The work of a step in flight, or of a run of identical decode steps: the planner's plan with its times."""

    # The step holds the first `plan.num_rows` running requests in admission order; nothing joins or leaves the
    # running batch while a step is in flight.
    plan: StepPlan
    start_s: float
    ends_s: np.ndarray | list[float]  # end of each step; one entry for a single step
    is_decode_run: bool  # True: len(ends_s) identical decode steps whose KV blocks are allocated when they end
    run_id: int  # StepDone events carrying another run id are stale

    @property
    def end_s(self) -> float:
        """When the last step ends."""
        return float(self.ends_s[-1])

    @property
    def num_requests(self) -> int:
        """Running requests in the step."""
        return self.plan.num_rows

    @property
    def num_new_tokens(self) -> np.ndarray:
        """Tokens each of them computes in the step (1 per step in a decode run)."""
        return self.plan.num_new_tokens

    @property
    def num_prefill_tokens(self) -> int:
        """Prompt (or recompute) tokens in the step."""
        return self.plan.num_prefill_tokens

    @property
    def num_decode_tokens(self) -> int:
        """Decoding requests in the step (per step of a run)."""
        return self.plan.num_decode_tokens

    @property
    def decode_context_tokens(self) -> int:
        """The decoding requests' summed context at the first step."""
        return self.plan.decode_context_tokens

    @property
    def prefill_attention_pairs(self) -> int:
        """Query-key pairs of the step's prefill attention."""
        return self.plan.prefill_attention_pairs
