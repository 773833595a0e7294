"""What a workload asks of one replica, request by request: steps, KV blocks held over its life, token work.

For a request with prompt p and reply o on an engine with token budget M and block size b (vLLM v1 semantics,
see `jevserve.sim.engine`):

    lifetime steps          L = ceil(p / M) + (o - 1)            prefill chunk(s), then one decode step per token
    KV block-steps          D = ceil(p / M) * blocks(p) + sum_{k=1}^{o-1} blocks(p + k)
    decode context tokens   X = sum_{k=1}^{o-1} (p + k)           attended by its decode steps
    prefill attention pairs P = sum over chunks of chunk x (tokens computed after the chunk)
    token work (s)          w = (a p + b_d (o - 1) + c X + d P) * 1e-6    with the profile's coefficients

With "prompt" admission the whole prompt's blocks are held from admission, hence blocks(p) during prefill.

With a roofline-bounded profile (`jevserve.sim.roofline`), each request also has its floor work: the seconds its
FLOPs take at the GPU's peak, and the seconds its KV reads and writes take at peak bandwidth; the weights read
once per step are the floor's per-step constant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.serving.types import Request
from jevserve.sim.step_time import StepTimeModel


@dataclass(frozen=True, slots=True)
class Demand:
    """Per-request demand of a workload on one replica: means over its requests, plus the arrays."""

    steps: np.ndarray  # L: steps a request holds a batch slot
    kv_block_steps: np.ndarray  # D: KV blocks held, summed over its steps
    work_s: np.ndarray  # w: seconds of token work it adds to the steps it is in (the per-step constant excluded)
    prompt_tokens: np.ndarray
    prefill_work_s: np.ndarray  # the part of w spent on its prompt (prefill tokens and their attention pairs)
    floor: FloorDemand | None = None  # the roofline's view of the same requests; None without a roofline
    prefill_chunks: np.ndarray | None = None  # steps that compute part of its prompt, ceil(p / M); None: 1 each

    @property
    def mean_prefill_chunks(self) -> float:
        """E[ceil(p / M)]: prefill chunks per request."""
        return 1.0 if self.prefill_chunks is None else float(np.mean(self.prefill_chunks))

    @property
    def mean_steps(self) -> float:
        """E[L]."""
        return float(np.mean(self.steps))

    @property
    def mean_budget_tokens(self) -> float:
        """E[p + o - 1]: the tokens a request puts through the steps' token budget, its prompt and one per decode step
        (L minus its prefill chunks)."""
        return float(np.mean(self.prompt_tokens)) + self.mean_steps - self.mean_prefill_chunks

    @property
    def mean_kv_block_steps(self) -> float:
        """E[D]."""
        return float(np.mean(self.kv_block_steps))

    @property
    def mean_work_s(self) -> float:
        """E[w]."""
        return float(np.mean(self.work_s))

    @property
    def mean_prefill_work_s(self) -> float:
        """E[prefill part of w]."""
        return float(np.mean(self.prefill_work_s))

    @property
    def steps_scv(self) -> float:
        """Squared coefficient of variation of L (service-time variability in the waiting-time model)."""
        return float(np.var(self.steps) / np.mean(self.steps) ** 2)


@dataclass(frozen=True, slots=True)
class FloorDemand:
    """Per-request work at the roofline floor: what no step-time fit may undercut."""

    compute_s: np.ndarray  # the request's FLOPs (its tokens' matmuls and its attention) at peak compute
    memory_s: np.ndarray  # its KV reads (decode context) and writes (every token computed) at peak bandwidth
    weights_s: float  # the weights read once per step at peak bandwidth: the floor's per-step constant
    prefill_compute_s: np.ndarray | None = None  # the part of compute_s spent on its prompt; None: none
    prefill_memory_s: np.ndarray | None = None  # the part of memory_s spent on its prompt (its KV writes)

    @property
    def mean_prefill_compute_s(self) -> float:
        """E[prefill part of compute_s]."""
        return 0.0 if self.prefill_compute_s is None else float(np.mean(self.prefill_compute_s))

    @property
    def mean_prefill_memory_s(self) -> float:
        """E[prefill part of memory_s]."""
        return 0.0 if self.prefill_memory_s is None else float(np.mean(self.prefill_memory_s))

    @property
    def mean_compute_s(self) -> float:
        """E[compute_s]."""
        return float(np.mean(self.compute_s))

    @property
    def mean_memory_s(self) -> float:
        """E[memory_s]."""
        return float(np.mean(self.memory_s))


def _blocks(tokens: np.ndarray, block_size: int) -> np.ndarray:
    return -(-tokens // block_size)


def _sum_blocks(first: np.ndarray, last: np.ndarray, block_size: int) -> np.ndarray:
    """sum_{t=first}^{last} ceil(t / block_size) for each pair (0 where last < first), in closed form."""

    def upto(n: np.ndarray) -> np.ndarray:
        # sum_{t=1}^{n} ceil(t / b): full groups of b tokens contribute b * (1 + ... + q), the rest (q + 1) each
        q, r = np.divmod(n, block_size)
        return block_size * q * (q + 1) // 2 + r * (q + 1)

    return np.where(last >= first, upto(last) - upto(first - 1), 0)


def request_demand(
    requests: Sequence[Request], step_time: StepTimeModel, *, max_num_batched_tokens: int, block_size: int
) -> Demand:
    """The demand of every request (true reply lengths) on a replica with these settings."""
    p = np.array([r.num_prompt_tokens for r in requests], dtype=np.int64)
    o = np.array([r.num_output_tokens for r in requests], dtype=np.int64)
    if p.size == 0:
        raise ValueError("request_demand: the workload has no requests")
    chunks = -(-p // max_num_batched_tokens)
    steps = chunks + o - 1
    kv = chunks * _blocks(p, block_size) + _sum_blocks(p + 1, p + o - 1, block_size)
    context = (o - 1) * p + (o - 1) * o // 2
    # Prefill chunks of M tokens: chunk j (1-based) pairs M tokens with j*M computed, the last with p.
    full = p // max_num_batched_tokens
    rest = p - full * max_num_batched_tokens
    pairs = max_num_batched_tokens**2 * full * (full + 1) // 2 + rest * p
    st = step_time
    prefill_us = st.per_prefill_token * p + st.per_prefill_attention_pair * pairs
    work_us = prefill_us + st.per_decode_token * (o - 1) + st.per_decode_context_token * context
    floor = None
    roof = st.roofline
    if roof is not None:
        tokens = (p + o - 1).astype(np.float64)
        flops = roof.flops_per_token * tokens + roof.attention_flops_per_pair * (context + pairs / 2)
        memory_s = roof.kv_bytes_per_token * (context + tokens) / roof.memory_bandwidth
        prefill_flops = roof.flops_per_token * p + roof.attention_flops_per_pair * pairs / 2
        floor = FloorDemand(flops / roof.peak_flops, memory_s, roof.weight_bytes / roof.memory_bandwidth,
                            prefill_flops / roof.peak_flops, roof.kv_bytes_per_token * p / roof.memory_bandwidth)
    return Demand(steps.astype(np.float64), kv.astype(np.float64), work_us * 1e-6, p.astype(np.float64),
                  prefill_us * 1e-6, floor, chunks.astype(np.float64))
