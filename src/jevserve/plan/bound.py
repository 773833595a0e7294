"""The stability bound of one replica: the highest request rate it can serve, counting compute and KV memory.

Steps run back to back; each costs the profile's constant plus the token work of what it holds. At a request
rate λ, the token work arriving per second is λ E[w], so the mean step time is

    τ(λ) = constant / (1 - λ E[w])                                   (infinite as λ E[w] -> 1: compute)

and by Little's law the replica holds, on average, λ E[L] τ(λ) requests and λ E[D] τ(λ) KV blocks. Neither may
exceed its capacity, the batch cap S (`max_num_seqs`) and the KV cache C (blocks), which gives

    λ_slots = S / (E[L] constant + S E[w])        λ_kv = C / (E[D] constant + C E[w])

Compute limits the rate even with unlimited slots and memory: a step holds at most M tokens (the token budget),
so every M prompt tokens cost at least one step constant on top of their token work,

    λ_compute = 1 / (E[w] + constant E[p] / M)

and the replica is unstable above λ* = min(λ_slots, λ_kv, λ_compute); the smallest names the binding resource.
λ_kv is the issue's "KV capacity / (mean step time x a request's cumulative KV demand)" written with τ(λ*).
Means, not peaks: fragmentation, head-of-line blocking and preemption make the measured saturation rate lower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jevserve.plan.demand import Demand


@dataclass(frozen=True, slots=True)
class StabilityBound:
    """Per-replica rate limits (req/s) and which one binds."""

    slots_rps: float  # limit from max_num_seqs
    kv_rps: float  # limit from KV memory
    compute_rps: float  # limit from token work and the token budget (no batch cap, no memory limit)
    rate_rps: float  # min of the three: above it the replica is unstable
    binding: str  # "compute", "kv memory" or "batch slots"
    token_work_share: float  # share of step time that is token work at rate_rps
    step_s: float  # mean step time at rate_rps


def step_time_s(rate_rps: float, constant_s: float, demand: Demand) -> float:
    """Mean step time τ(λ) when requests arrive at rate_rps (inf at or beyond the compute limit)."""
    load = rate_rps * demand.mean_work_s
    return constant_s / (1.0 - load) if load < 1.0 else math.inf


def stability_bound(demand: Demand, *, constant_s: float, max_num_seqs: int, num_kv_blocks: int,
                    max_num_batched_tokens: int) -> StabilityBound:
    """The bound for one replica with this demand, step constant, batch cap, KV capacity and token budget."""
    if not constant_s > 0 or min(max_num_seqs, num_kv_blocks, max_num_batched_tokens) < 1:
        raise ValueError(f"stability_bound: constant_s={constant_s!r}, max_num_seqs={max_num_seqs!r}, "
                         f"num_kv_blocks={num_kv_blocks!r}, max_num_batched_tokens={max_num_batched_tokens!r}; "
                         "expected positive values")
    w = demand.mean_work_s
    limits = {
        "batch slots": max_num_seqs / (demand.mean_steps * constant_s + max_num_seqs * w),
        "kv memory": num_kv_blocks / (demand.mean_kv_block_steps * constant_s + num_kv_blocks * w),
        "compute": 1.0 / (w + constant_s * float(np.mean(demand.prompt_tokens)) / max_num_batched_tokens),
    }
    binding = min(limits, key=limits.__getitem__)
    rate = limits[binding]
    return StabilityBound(
        slots_rps=limits["batch slots"], kv_rps=limits["kv memory"], compute_rps=limits["compute"], rate_rps=rate,
        binding=binding, token_work_share=rate * w,
        step_s=step_time_s(rate, constant_s, demand),
    )
