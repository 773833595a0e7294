"""The token-batch step-time model: how long one engine step takes, from what the step computes.

    step_s = constant
           + per_prefill_token          * prefill tokens in the step
           + per_decode_token           * decode tokens in the step (one per decoding request)
           + per_decode_context_token   * sum over decoding requests of their context length (tokens attended)
           + per_prefill_attention_pair * sum over prefill chunks of chunk tokens x context tokens after the chunk

The first three terms are BLIS's beta model; the last two let a calibration capture attention cost that grows
with context. Coefficients are fixed before a run, so a step's time is a closed form and a run of identical
decode steps is summed without stepping through it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

COEFFICIENT_NAMES = (
    "constant",
    "per_prefill_token",
    "per_decode_token",
    "per_decode_context_token",
    "per_prefill_attention_pair",
)


@dataclass(frozen=True, slots=True)
class StepTimeModel:
    """Step-time coefficients, in microseconds (per step, per token, per token pair)."""

    constant: float
    per_prefill_token: float
    per_decode_token: float
    per_decode_context_token: float = 0.0
    per_prefill_attention_pair: float = 0.0

    def step_s(
        self,
        num_prefill_tokens: int,
        num_decode_tokens: int,
        decode_context_tokens: int = 0,
        prefill_attention_pairs: int = 0,
    ) -> float:
        """Seconds one step takes."""
        us = (
            self.constant
            + self.per_prefill_token * num_prefill_tokens
            + self.per_decode_token * num_decode_tokens
            + self.per_decode_context_token * decode_context_tokens
            + self.per_prefill_attention_pair * prefill_attention_pairs
        )
        return us * 1e-6

    def decode_run_s(self, num_steps: int, batch_size: int, context_tokens: int) -> np.ndarray:
        """Durations (s) of `num_steps` decode-only steps of `batch_size` requests whose contexts start summing
        to `context_tokens` and grow by one token per request per step."""
        base_us = self.constant + self.per_decode_token * batch_size
        growth = np.arange(num_steps, dtype=np.float64) * batch_size + context_tokens
        return (base_us + self.per_decode_context_token * growth) * 1e-6

    def coefficients(self) -> np.ndarray:
        """The coefficients as an array, in COEFFICIENT_NAMES order."""
        return np.array([getattr(self, n) for n in COEFFICIENT_NAMES], dtype=np.float64)

    def as_dict(self) -> dict[str, float]:
        """The coefficients by name (microseconds)."""
        return asdict(self)

    def scaled(self, factor: float) -> StepTimeModel:
        """Every coefficient multiplied by `factor` (a uniformly slower or faster engine)."""
        return StepTimeModel(*(factor * c for c in self.coefficients()))
