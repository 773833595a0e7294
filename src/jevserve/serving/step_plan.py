"""The plan of one engine step: which running requests compute how many tokens, who joined, who was preempted."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jevserve.serving.engine_request import EngineRequest

_NO_TOKENS = np.zeros(0, dtype=np.int64)
_NO_TOKENS.flags.writeable = False


@dataclass(frozen=True, slots=True, eq=False)
class StepPlan:
    """One step as the planner scheduled it (vLLM's `SchedulerOutput`, in token and block counts).

    The step holds the first `num_rows` rows of the running batch, in admission order: the planner schedules
    running requests from the front of the batch and appends the requests it admits at the back, so a step is
    always a prefix of the batch.
    """

    num_rows: int  # running requests in the step: rows 0 .. num_rows - 1 of the running batch
    num_new_tokens: np.ndarray  # int64, read-only: tokens each of those rows computes in the step (1 when decoding)
    admitted: tuple[EngineRequest, ...]  # joined the running batch for this step (its last rows), in order
    preempted: tuple[EngineRequest, ...]  # lost their KV blocks and went back to waiting while planning, in order
    num_prefill_tokens: int  # tokens of prompts (or recomputes) in the step, chunks included
    num_decode_tokens: int  # decoding requests in the step: one token each
    decode_context_tokens: int  # sum of the decoding requests' contexts (prompt + generated tokens)
    prefill_attention_pairs: int  # query-key pairs the prefill chunks' attention computes
    # True when the step is decode only, holds every running request, and the pass that planned it admitted and
    # preempted nothing: identical decode steps may follow it without planning again (until a request finishes,
    # KV blocks run short or the queue changes; the caller decides how many).
    is_repeatable: bool

    @classmethod
    def make_empty(cls, preempted: tuple[EngineRequest, ...] = ()) -> StepPlan:
        """A step that computes nothing."""
        return cls(0, _NO_TOKENS, (), preempted, 0, 0, 0, 0, False)

    @property
    def is_empty(self) -> bool:
        """True when the step computes nothing (the engine idles until a request arrives)."""
        return self.num_rows == 0

    @property
    def is_decode_only(self) -> bool:
        """True when every request in the step computes exactly its last sampled token."""
        return self.num_rows > 0 and self.num_prefill_tokens == 0
