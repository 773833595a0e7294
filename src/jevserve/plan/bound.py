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

and the replica is unstable above λ* = min(λ_slots, λ_kv, λ_compute); the smallest names the binding resource,
unless token work fills at least 90% of every step at λ* (λ* within 10% of the pure compute limit 1/E[w]): more
slots or memory would then buy at most a tenth more, so compute binds whichever of the three is smallest.
λ_kv is "KV capacity / (mean step time x a request's cumulative KV demand)" written with τ(λ*).

With a roofline-bounded profile a step is never faster than its floor (`jevserve.sim.roofline`), so the same
reasoning runs again with the floor's terms: the weights read once per step at peak bandwidth are its constant and
each request's KV traffic at peak bandwidth its token work, which gives a second τ(λ) and second slot, KV and
bandwidth limits; and the FLOPs arriving per second may not exceed the GPU's peak, λ_peak = 1 / E[FLOPs / peak].
Each resource's limit is the lower of the two, and the mean step time the larger τ. Means, not peaks:
fragmentation, head-of-line blocking and preemption make the measured saturation rate lower, and a GPU reaches
only part of its peaks, so the roofline limits are upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jevserve.plan.demand import Demand

# token work's share of each step at the bound from which compute binds, whatever limit is smallest
COMPUTE_BOUND_SHARE = 0.9


@dataclass(frozen=True, slots=True)
class StabilityBound:
    """Per-replica rate limits (req/s) and which one binds."""

    slots_rps: float  # limit from max_num_seqs
    kv_rps: float  # limit from KV memory
    compute_rps: float  # limit from token work and the token budget (no batch cap, no memory limit)
    rate_rps: float  # min of the three: above it the replica is unstable
    binding: str  # "compute", "kv memory", "batch slots", "memory bandwidth" or "peak compute"
    token_work_share: float  # share of step time that is token work at rate_rps
    step_s: float  # mean step time at rate_rps
    memory_bandwidth_rps: float = math.inf  # roofline: KV traffic and per-step weights at peak bandwidth
    peak_compute_rps: float = math.inf  # roofline: FLOPs at the GPU's peak


def _tau(rate_rps: float, constant_s: float, work_s: float) -> float:
    load = rate_rps * work_s
    return constant_s / (1.0 - load) if load < 1.0 else math.inf


def step_time_s(rate_rps: float, constant_s: float, demand: Demand, *, peak_compute: bool = True) -> float:
    """Mean step time τ(λ) when requests arrive at rate_rps (inf at or beyond the compute limit, or the GPU's peak
    compute unless `peak_compute` is False): the fitted terms', or the roofline floor's when that is longer."""
    tau = _tau(rate_rps, constant_s, demand.mean_work_s)
    floor = demand.floor
    if floor is None:
        return tau
    if peak_compute and rate_rps * floor.mean_compute_s >= 1.0:
        return math.inf
    return max(tau, _tau(rate_rps, floor.weights_s, floor.mean_memory_s))


def _limits(demand: Demand, constant_s: float, work_s: float, *, max_num_seqs: int, num_kv_blocks: int,
            max_num_batched_tokens: int) -> dict[str, float]:
    """The slot, KV and throughput limits for steps of `constant_s` plus `work_s` per request."""
    return {
        "batch slots": max_num_seqs / (demand.mean_steps * constant_s + max_num_seqs * work_s),
        "kv memory": num_kv_blocks / (demand.mean_kv_block_steps * constant_s + num_kv_blocks * work_s),
        "compute": 1.0 / (work_s + constant_s * float(np.mean(demand.prompt_tokens)) / max_num_batched_tokens),
    }


def stability_bound(demand: Demand, *, constant_s: float, max_num_seqs: int, num_kv_blocks: int,
                    max_num_batched_tokens: int) -> StabilityBound:
    """The bound for one replica with this demand, step constant, batch cap, KV capacity and token budget."""
    if not constant_s > 0 or min(max_num_seqs, num_kv_blocks, max_num_batched_tokens) < 1:
        raise ValueError(f"stability_bound: constant_s={constant_s!r}, max_num_seqs={max_num_seqs!r}, "
                         f"num_kv_blocks={num_kv_blocks!r}, max_num_batched_tokens={max_num_batched_tokens!r}; "
                         "expected positive values")
    w = demand.mean_work_s
    caps = {"max_num_seqs": max_num_seqs, "num_kv_blocks": num_kv_blocks,
            "max_num_batched_tokens": max_num_batched_tokens}
    limits = _limits(demand, constant_s, w, **caps)
    floor = demand.floor
    if floor is not None:
        at_floor = _limits(demand, floor.weights_s, floor.mean_memory_s, **caps)
        limits["batch slots"] = min(limits["batch slots"], at_floor["batch slots"])
        limits["kv memory"] = min(limits["kv memory"], at_floor["kv memory"])
        limits["memory bandwidth"] = at_floor["compute"]
        limits["peak compute"] = 1.0 / floor.mean_compute_s
    binding = min(limits, key=limits.__getitem__)
    rate = limits[binding]
    if binding in ("batch slots", "kv memory") and rate * w >= COMPUTE_BOUND_SHARE:
        binding = "compute"
    return StabilityBound(
        slots_rps=limits["batch slots"], kv_rps=limits["kv memory"], compute_rps=limits["compute"], rate_rps=rate,
        binding=binding, token_work_share=rate * w,
        step_s=step_time_s(rate, constant_s, demand, peak_compute=False),  # the step time just below the bound
        memory_bandwidth_rps=limits.get("memory bandwidth", math.inf),
        peak_compute_rps=limits.get("peak compute", math.inf),
    )
