"""The stability bound of one replica: the highest request rate it can serve, counting compute and KV memory.

Steps run back to back; each costs the profile's constant plus the token work of what it holds. At a request
rate λ, the token work arriving per second is λ E[w], so the mean step time is

    τ(λ) = constant / (1 - λ E[w])                                   (infinite as λ E[w] -> 1: compute)

and by Little's law the replica holds, on average, λ E[L] τ(λ) requests and λ E[D] τ(λ) KV blocks. Neither may
exceed its capacity, the batch cap S (`max_num_seqs`) and the KV cache C (blocks), which gives

    λ_slots = S / (E[L] constant + S E[w])        λ_kv = C / (E[D] constant + C E[w])

Compute limits the rate even with unlimited slots and memory: a step holds at most M tokens (the token budget),
prompt and decode tokens together, so every M of a request's p + o - 1 scheduled tokens cost at least one step
constant on top of their token work,

    λ_compute = 1 / (E[w] + constant E[p + o - 1] / M)

(counting the prompt alone overstated a small budget's rate fourfold: decodes fill it first.)

and the replica is unstable above λ* = min(λ_slots, λ_kv, λ_compute); the smallest names the binding resource,
unless token work fills at least 90% of every step at λ* (λ* within 10% of the pure compute limit 1/E[w]): more
slots or memory would then buy at most a tenth more, so compute binds whichever of the three is smallest.
λ_kv is "KV capacity / (mean step time x a request's cumulative KV demand)" written with τ(λ*).

With a roofline-bounded profile a step is never faster than its floor (`jevserve.sim.roofline`): the weights read
once per step at peak bandwidth, the KV traffic of its tokens at peak bandwidth, its FLOPs at peak compute. The
floor and the fit bind in different steps: a step that prefills a long prompt takes its fitted time, while a
decode-only step over many long contexts takes the time to read their KV. So the mean step time is not the larger
of two means but the mean over two kinds of step, each the longer of its fitted time and its floor: λ E[chunks]
prefill steps a second (every step, when there are fewer steps than chunks), each with its share of the prompts'
work, and the rest decode-only; both carry the running requests' decode work, λ E[decode work] τ by Little's law.
Steps run back to back, so τ(λ) solves

    busy(τ) = (prefill steps/s) × T_prefill(τ) + (1/τ − prefill steps/s) × T_decode(τ) = 1

(without a floor this is τ = constant / (1 - λ E[w]) again), and the slot and KV limits are the highest λ with
λ E[L] τ(λ) ≤ S and λ E[D] τ(λ) ≤ C. The bandwidth limit (the floor's terms with the token budget, as for compute)
and the FLOPs arriving per second at the GPU's peak, λ_peak = 1 / E[FLOPs / peak], bound the rate as well. Means,
not peaks: fragmentation, head-of-line blocking and preemption make the measured saturation rate lower, and a GPU
reaches only part of its peaks, so the roofline limits are upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize

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


def busy_per_second(rate_rps: float, constant_s: float, demand: Demand, tau_s: float, *,
                    peak_compute: bool = True) -> float:
    """Seconds of steps per second when steps average `tau_s` at `rate_rps`: prefill steps and decode-only steps,
    each the longer of its fitted time and its roofline floor (without a floor, constant / τ + λ E[w])."""
    floor = demand.floor
    steps = 1.0 / tau_s
    prefill_steps = min(rate_rps * demand.mean_prefill_chunks, steps)
    decode_fit = rate_rps * (demand.mean_work_s - demand.mean_prefill_work_s) * tau_s
    prefill_fit = rate_rps * demand.mean_prefill_work_s
    if floor is None:
        return constant_s * steps + prefill_fit + decode_fit * steps
    flops = 1.0 if peak_compute else 0.0
    decode_memory = rate_rps * (floor.mean_memory_s - floor.mean_prefill_memory_s) * tau_s
    decode_flops = flops * rate_rps * (floor.mean_compute_s - floor.mean_prefill_compute_s) * tau_s
    decode_step = max(constant_s + decode_fit, floor.weights_s + decode_memory, decode_flops)
    if prefill_steps <= 0:
        return steps * decode_step
    per = rate_rps / prefill_steps  # each prefill step's share of the prompts arriving per second
    prefill_step = max(constant_s + decode_fit + per * demand.mean_prefill_work_s,
                       floor.weights_s + decode_memory + per * floor.mean_prefill_memory_s,
                       decode_flops + flops * per * floor.mean_prefill_compute_s)
    return prefill_steps * prefill_step + (steps - prefill_steps) * decode_step


_LONGEST_STEP_S = 1e4  # a mean step longer than this is no steady state


def step_time_s(rate_rps: float, constant_s: float, demand: Demand, *, peak_compute: bool = True) -> float:
    """Mean step time τ(λ) when requests arrive at rate_rps: the τ at which steps fill every second (inf at or
    beyond the compute limit, or the GPU's peak compute unless `peak_compute` is False)."""
    tau = _tau(rate_rps, constant_s, demand.mean_work_s)
    floor = demand.floor
    if floor is None or not math.isfinite(tau):
        return tau
    if peak_compute and rate_rps * floor.mean_compute_s >= 1.0:
        return math.inf

    def over(t: float) -> float:
        return busy_per_second(rate_rps, constant_s, demand, t, peak_compute=peak_compute) - 1.0

    low = tau  # no step is shorter than its fitted time, so the fitted mean is a lower bound
    if over(low) <= 0:
        return low
    high = 2.0 * low
    while over(high) > 0:
        if high > _LONGEST_STEP_S:
            return math.inf
        low, high = high, 2.0 * high
    return float(optimize.brentq(over, low, high, xtol=1e-9, rtol=1e-9))


def _limits(demand: Demand, constant_s: float, work_s: float, *, max_num_seqs: int, num_kv_blocks: int,
            max_num_batched_tokens: int) -> dict[str, float]:
    """The slot, KV and throughput limits for steps of `constant_s` plus `work_s` per request."""
    return {
        "batch slots": max_num_seqs / (demand.mean_steps * constant_s + max_num_seqs * work_s),
        "kv memory": num_kv_blocks / (demand.mean_kv_block_steps * constant_s + num_kv_blocks * work_s),
        "compute": 1.0 / (work_s + constant_s * demand.mean_budget_tokens / max_num_batched_tokens),
    }


def _highest_rate(held_at, capacity: float, ceiling_rps: float) -> float:
    """The highest rate below `ceiling_rps` at which `held_at(rate)` (what the replica holds on average, rising with
    the rate, infinite past a steady state) stays within `capacity`; `ceiling_rps` when it does up to there."""
    low, high = 0.0, ceiling_rps * (1 - 1e-9)
    if held_at(high) <= capacity:
        return ceiling_rps
    while high - low > ceiling_rps * 1e-7:  # bisection: held_at may be infinite, which root finders do not take
        middle = (low + high) / 2
        low, high = (middle, high) if held_at(middle) <= capacity else (low, middle)
    return low


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
        limits["memory bandwidth"] = at_floor["compute"]
        limits["peak compute"] = 1.0 / floor.mean_compute_s
        # Both kinds of step, each the longer of its fit and its floor (peak FLOPs are their own limit): the rate at
        # which they fill every second, and the slot and KV limits with their mean step time. Each replaces the
        # limit above only where it binds below the throughput limits; elsewhere the closed forms stand, so the
        # report still says how far each resource is from binding.
        ceiling = min(limits["compute"], limits["memory bandwidth"])

        def tau(rate: float) -> float:
            return step_time_s(rate, constant_s, demand, peak_compute=False)

        # the highest rate whose mean step is finite: "what it holds" is nothing below it and without end past it
        steady = _highest_rate(lambda rate: 0.0 if math.isfinite(tau(rate)) else math.inf, 0.0, ceiling)
        if steady < ceiling * (1 - 1e-6):
            limits["compute"] = steady
        for name, per_request, capacity in (("batch slots", demand.mean_steps, max_num_seqs),
                                            ("kv memory", demand.mean_kv_block_steps, num_kv_blocks)):
            mixed = _highest_rate(lambda rate, n=per_request: rate * n * tau(rate), capacity, steady)
            if mixed < steady * (1 - 1e-6):
                limits[name] = min(limits[name], mixed)
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
