"""A request's progress through an engine's scheduler: the mutable record the step planner works on."""

from __future__ import annotations

from dataclasses import dataclass

from jevserve.serving.types import Request


@dataclass(slots=True, eq=False)
class EngineRequest:
    """One request as vLLM's scheduler tracks it: prompt + generated tokens, how many are computed, KV blocks held.

    While a request runs, the planner keeps its progress in the running batch's arrays
    (`jevserve.serving.running_batch`) and writes it back here when the request leaves the batch (preempted,
    finished or aborted). Compared by identity: two requests are never the same request.
    """

    spec: Request
    # The reply length the request stops at, in tokens. 0 takes the spec's true length (simulators know it); an
    # estimator sets its guess, a live engine the client's `max_tokens` or its own draw.
    num_output_tokens: int = 0
    num_computed: int = 0  # tokens whose KV is in the cache
    num_generated: int = 0  # reply tokens produced
    num_blocks: int = 0  # KV blocks held
    num_preemptions: int = 0

    def __post_init__(self) -> None:
        if not self.num_output_tokens:
            self.num_output_tokens = self.spec.num_output_tokens or 0

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what a recompute after preemption must prefill again."""
        return self.spec.num_prompt_tokens + self.num_generated

    @property
    def is_decoding(self) -> bool:
        """True when the next step computes exactly the last sampled token."""
        return self.num_generated > 0 and self.num_computed == self.num_tokens - 1
