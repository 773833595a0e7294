"""Simulator entities: mutable state holders with no behaviour. Timestamps stay None until they happen."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jevserve.serving.types import Request


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request's progress through an engine, as vLLM tracks it (prompt + generated tokens, computed ones).

    While it runs, the engine keeps its progress in arrays (`jevserve.sim.running`) and writes it back here when
    it leaves the running batch; read a running request through `Engine.running` or `Engine.snapshot`.
    """

    spec: Request
    enqueue_s: float | None = None  # reached the engine's queue: arrival plus the decision delay
    first_admit_s: float | None = None  # first admitted to the running batch
    first_token_s: float | None = None
    finish_s: float | None = None
    replica_id: int | None = None
    num_computed: int = 0  # tokens whose KV is in the cache
    num_generated: int = 0  # reply tokens produced
    num_blocks: int = 0  # KV blocks held
    num_preemptions: int = 0
    rejected: str | None = None  # why the engine refused it (it can never fit in the KV cache); None: accepted
    # Times (s) of the reply tokens, in order: arrays of consecutive tokens (floats are accepted too). The engine
    # fills it when a run of consecutive tokens breaks, so it is complete once the request has finished.
    token_times: list[float | np.ndarray] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what a recompute after preemption must prefill again."""
        return self.spec.num_prompt_tokens + self.num_generated

    @property
    def num_output_tokens(self) -> int:
        """The reply length this request stops at."""
        return self.spec.num_output_tokens  # type: ignore[return-value]  # checked when the engine accepts it

    @property
    def is_decoding(self) -> bool:
        """True when the next step computes exactly the last sampled token."""
        return self.num_generated > 0 and self.num_computed == self.num_tokens - 1


@dataclass(slots=True, eq=False)
class Batch:
    """The work of a step in flight, or of a run of identical decode steps."""

    # The step holds the first `num_requests` running requests in admission order (the engine schedules the
    # running batch from its front, and admits new requests at its back); nothing joins or leaves the running
    # batch while a step is in flight.
    num_requests: int
    num_new_tokens: np.ndarray  # tokens each of them computes in the step (1 per step in a decode run)
    start_s: float
    ends_s: np.ndarray | list[float]  # end of each step; one entry for a single step
    num_prefill_tokens: int
    num_decode_tokens: int
    decode_context_tokens: int  # at the first step
    prefill_attention_pairs: int
    is_decode_run: bool  # True: len(ends_s) identical decode steps whose KV blocks are allocated when they end
    run_id: int  # StepDone events carrying another run id are stale

    @property
    def end_s(self) -> float:
        """When the last step ends."""
        return float(self.ends_s[-1])
