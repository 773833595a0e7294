"""The token-batch step-time model: how long one engine step takes, from what the step computes.

    step_s = constant
           + per_prefill_token          * prefill tokens in the step
           + per_decode_token           * decode tokens in the step (one per decoding request)
           + per_decode_context_token   * sum over decoding requests of their context length (tokens attended)
           + per_prefill_attention_pair * sum over prefill chunks of chunk tokens x context tokens after the chunk

The first three terms are BLIS's beta model; the last two let a calibration capture attention cost that grows
with context. Coefficients are fixed before a run, so a step's time is a closed form and a run of identical
decode steps is summed without stepping through it.

A model with a `roofline` (`jevserve.sim.roofline`, built from the profile's GPU peaks and model shape) never
returns less than the roofline floor: step_s = max(the fitted terms above, the floor). A fit made at small
batches is linear and cheap per token; extrapolated to hundreds of requests per step it would promise more
tokens per second than the GPU's compute or memory bandwidth allow, and the floor stops it there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jevserve.sim.roofline import Roofline

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
    roofline: Roofline | None = field(default=None, compare=False)  # None: the fitted terms alone

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
        if self.roofline is None:
            return us * 1e-6
        return max(us * 1e-6, self.roofline.floor_s(num_prefill_tokens, num_decode_tokens, decode_context_tokens,
                                                    prefill_attention_pairs))

    def fitted_step_s(self, num_prefill_tokens: int, num_decode_tokens: int, decode_context_tokens: int = 0,
                      prefill_attention_pairs: int = 0) -> float:
        """Seconds one step takes by the fitted terms alone (what the roofline floor is compared with)."""
        return StepTimeModel(*self.coefficients()).step_s(num_prefill_tokens, num_decode_tokens,
                                                          decode_context_tokens, prefill_attention_pairs)

    def decode_run_s(self, num_steps: int, batch_size: int, context_tokens: int) -> np.ndarray:
        """Durations (s) of `num_steps` decode-only steps of `batch_size` requests whose contexts start summing
        to `context_tokens` and grow by one token per request per step."""
        base_us = self.constant + self.per_decode_token * batch_size
        growth = np.arange(num_steps, dtype=np.float64) * batch_size + context_tokens
        durations = (base_us + self.per_decode_context_token * growth) * 1e-6
        if self.roofline is None:
            return durations
        return np.maximum(durations, self.roofline.decode_run_floor_s(num_steps, batch_size, context_tokens))

    def decode_run_total_s(self, num_steps: int, batch_size: int, context_tokens: int) -> float:
        """The summed duration of `decode_run_s`'s steps: in closed form when the model is linear (no roofline)."""
        if self.roofline is None:
            first_s = self.step_s(0, batch_size, context_tokens, 0)
            context_token_s = self.step_s(0, 0, 1, 0) - self.step_s(0, 0, 0, 0)
            return num_steps * first_s + context_token_s * batch_size * num_steps * (num_steps - 1) / 2
        return float(self.decode_run_s(num_steps, batch_size, context_tokens).sum())

    def coefficients(self) -> np.ndarray:
        """The coefficients as an array, in COEFFICIENT_NAMES order."""
        return np.array([getattr(self, n) for n in COEFFICIENT_NAMES], dtype=np.float64)

    def as_dict(self) -> dict[str, float]:
        """The fitted coefficients by name (microseconds)."""
        return {name: getattr(self, name) for name in COEFFICIENT_NAMES}

    def scaled(self, factor: float) -> StepTimeModel:
        """A uniformly slower or faster engine: every fitted coefficient and the roofline floor multiplied by
        `factor` (the floor as if the GPU's peaks were divided by it)."""
        roofline = None if self.roofline is None else self.roofline.scaled(factor)
        return StepTimeModel(*(factor * c for c in self.coefficients()), roofline=roofline)
