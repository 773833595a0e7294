"""The roofline floor of an engine step: the least time a GPU can take for what the step computes.

A step can be no faster than its floating-point work at the GPU's peak dense throughput, nor than the bytes it
must move at the GPU's peak memory bandwidth (both from the datasheet). Counted, per step:

    FLOPs  = 2 x matmul parameters x tokens computed (prefill + decode)
             + attention: 4 x query heads x head dim x layers per (query, key) pair, for each decoding request's
               context and for half the step model's prefill pairs (causal attention needs at least half of the
               chunk-by-context square the step model counts)
    bytes  = the weights, read once per step
             + K and V of every decode context token, read once
             + K and V of every token computed, written once

Everything else a real step does (reading a prefill chunk's earlier context, activations, sampling, kernel
launches, the scheduler) only adds time, so the floor is a lower bound: a step model may be slower, never faster.
The fitted step-time terms (`jevserve.sim.step_time`) apply where they are slower than the floor; where they are
faster, which happens when a fit made at small batches is extrapolated to large ones, the floor applies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Roofline:
    """The per-step floor of one model on one GPU, from datasheet peaks and the model's shape."""

    peak_flops: float  # dense BF16 FLOP/s of the GPU (datasheet)
    memory_bandwidth: float  # bytes/s of the GPU's HBM (datasheet)
    weight_bytes: float  # the model's weights, read once per step
    flops_per_token: float  # 2 x the parameters every computed token multiplies (the input embedding is a lookup)
    kv_bytes_per_token: float  # K and V of one token across all layers
    attention_flops_per_pair: float  # 4 x query heads x head dim x layers: QK^T and AV for one (query, key) pair

    def floor_s(self, num_prefill_tokens: int, num_decode_tokens: int, decode_context_tokens: int = 0,
                prefill_attention_pairs: int = 0) -> float:
        """Seconds a step can take at least: max(its FLOPs / peak compute, its bytes / peak bandwidth)."""
        tokens = num_prefill_tokens + num_decode_tokens
        flops = (self.flops_per_token * tokens
                 + self.attention_flops_per_pair * (decode_context_tokens + prefill_attention_pairs / 2))
        moved = self.weight_bytes + self.kv_bytes_per_token * (decode_context_tokens + tokens)
        return max(flops / self.peak_flops, moved / self.memory_bandwidth)

    def decode_run_floor_s(self, num_steps: int, batch_size: int, context_tokens: int) -> np.ndarray:
        """`floor_s` of `num_steps` decode-only steps of `batch_size` requests whose contexts start summing to
        `context_tokens` and grow by one token per request per step."""
        context = np.arange(num_steps, dtype=np.float64) * batch_size + context_tokens
        flops = self.flops_per_token * batch_size + self.attention_flops_per_pair * context
        moved = self.weight_bytes + self.kv_bytes_per_token * (context + batch_size)
        return np.maximum(flops / self.peak_flops, moved / self.memory_bandwidth)

    def scaled(self, factor: float) -> Roofline:
        """The floor of a GPU `factor` times slower: both peaks divided by `factor`."""
        return dataclasses.replace(self, peak_flops=self.peak_flops / factor,
                                   memory_bandwidth=self.memory_bandwidth / factor)


@dataclass(frozen=True, slots=True)
class FloorCheck:
    """What `check_fit` found for one profile: where its fitted terms undercut the floor."""

    problems: tuple[str, ...]  # why the profile is refused; empty when it passes
    crossover_batch: int | None  # smallest decode batch (at 512 context tokens each) where the floor binds

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.problems


def check_fit(fitted_step_s, roofline: Roofline | None, *, max_batch: int = 4096) -> FloorCheck:
    """Check a fitted step model (`fitted_step_s(prefill, decode, context, pairs)`) against the floor.

    A fit is made at small batches, so where it is faster than the floor for one request alone (a decode step at
    a short context, or one prompt chunk) it contradicts the hardware and the profile is refused. Past some batch
    size the floor binds and the step model uses it; the first such batch is reported.
    """
    if roofline is None:
        return FloorCheck(("no roofline: declare [gpu] peak_dense_bf16_tflops and memory_bandwidth_tbps and "
                           "[model_shape] num_query_heads and num_matmul_parameters",), None)
    problems = []
    for label, step in (("one decode token at a 128-token context", (0, 1, 128, 0)),
                        ("one 512-token prompt", (512, 0, 0, 512 * 512))):
        fit, floor = fitted_step_s(*step), roofline.floor_s(*step)
        if fit < floor:
            problems.append(f"{label}: fitted {fit * 1e6:.0f} us < floor {floor * 1e6:.0f} us")
    crossover = next((batch for batch in range(1, max_batch + 1)
                      if fitted_step_s(0, batch, 512 * batch, 0) < roofline.floor_s(0, batch, 512 * batch, 0)), None)
    return FloorCheck(tuple(problems), crossover)
