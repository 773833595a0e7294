"""Where an engine's time goes: tokens computed, work redone after preemption, and busy time by step-time term."""

from __future__ import annotations

from jevserve.sim.entities import Batch, SimRequest
from jevserve.sim.observer import Observer
from jevserve.sim.step_time import COEFFICIENT_NAMES, StepTimeModel


class WorkCounter(Observer):
    """Counts computed tokens, re-admissions after preemption (and what the prefix cache saved them), and splits
    the engines' busy time over the terms of the step-time model."""

    def __init__(self, step_time: StepTimeModel) -> None:
        self.step_time = step_time
        self.num_prefill_tokens = 0
        self.num_decode_tokens = 0
        self.num_readmissions = 0
        self.num_readmitted_context_tokens = 0  # context of re-admitted requests: what recompute would redo
        self.num_cache_hit_tokens = 0  # of those, tokens found in the prefix cache instead
        self.busy_us = dict.fromkeys(COEFFICIENT_NAMES, 0.0)  # busy time by term (microseconds)

    def on_admit(self, request: SimRequest, now_s: float) -> None:
        """Count a re-admission and the tokens it took from the prefix cache (its computed tokens on admission)."""
        if request.num_preemptions:
            self.num_readmissions += 1
            self.num_readmitted_context_tokens += request.num_tokens
            self.num_cache_hit_tokens += request.num_computed

    def on_step(self, replica_id: int, batch: Batch, num_steps: int) -> None:
        """Add the step's (or decode run's) tokens and its time, term by term."""
        m, k = self.step_time, num_steps
        self.num_prefill_tokens += batch.num_prefill_tokens * k
        self.num_decode_tokens += batch.num_decode_tokens * k
        # A decode run's context grows by one token per request per step.
        context = batch.decode_context_tokens * k + batch.num_decode_tokens * k * (k - 1) // 2
        self.busy_us["constant"] += m.constant * k
        self.busy_us["per_prefill_token"] += m.per_prefill_token * batch.num_prefill_tokens * k
        self.busy_us["per_decode_token"] += m.per_decode_token * batch.num_decode_tokens * k
        self.busy_us["per_decode_context_token"] += m.per_decode_context_token * context
        self.busy_us["per_prefill_attention_pair"] += m.per_prefill_attention_pair * batch.prefill_attention_pairs * k

    def summary(self) -> dict[str, object]:
        """The counts, and busy seconds in total and as shares by term."""
        busy = sum(self.busy_us.values())
        return {
            "num_prefill_tokens": self.num_prefill_tokens,
            "num_decode_tokens": self.num_decode_tokens,
            "num_readmissions": self.num_readmissions,
            "num_readmitted_context_tokens": self.num_readmitted_context_tokens,
            "num_cache_hit_tokens": self.num_cache_hit_tokens,
            "busy_s": busy * 1e-6,
            "busy_share": {name: (us / busy if busy else 0.0) for name, us in self.busy_us.items()},
        }
