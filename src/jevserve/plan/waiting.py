"""A waiting-time approximation for TTFT SLO attainment of one replica under Poisson arrivals (FCFS queue).

A request waits for two things in turn: a place in the batch, then its share of the steps' token budget.

**A place**: the replica is an M/G/c queue whose c "servers" are the requests it can hold at once: the batch
cap S, or the KV cache divided by the blocks a request holds on average over its life (C E[L] / E[D]), whichever
is smaller. A request occupies a server for E[L] steps of τ(λ) seconds (see `bound`), so the offered load is
a = λ E[L] τ(λ) and the utilisation a / c reaches 1 at the slot or KV bound.

    P(wait) = Erlang C(c, a)  (Erlang B from scipy's Poisson)     E[W] = P(wait) / (c/S̄ - λ) x (1 + cs²) / 2

(Allen-Cunneen: the M/M/c wait scaled by variability; S̄ = E[L] τ(λ), cs² the squared coefficient of variation
of L.)

**The token budget**: prompts are prefilled first come first served at up to M tokens per step. A step full of
prompt tokens takes constant + a M, and decode work takes a share λ E[w_decode] of the time, so prompts are served
at μ = M (1 - λ E[w_decode]) / (constant + a M) tokens per second: an M/G/1 queue with service p / μ, whose mean
wait is Pollaczek-Khinchine's λ E[(p/μ)²] / (2 (1 - ρ)) and P(wait) = ρ = λ E[p] / μ. It matters only when
prompts are long (compute-bound replicas).

The two waits are combined into one with P(wait) = 1 - (1 - P1)(1 - P2) and the sum of the means, exponential
given that it is positive; then

    TTFT = W + 1.5 τ(λ) + prefill of its own prompt + decision delay

(the 1.5 τ is the rest of the step in flight on arrival, half a step on average, plus the step that runs its
prefill). Attainment averages P(TTFT <= SLO) over the workload's prompts. Queue order is not modelled: this is
the FCFS estimate.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from jevserve.plan.bound import step_time_s
from jevserve.plan.demand import Demand


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with c servers and offered load a (a < c)."""
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    erlang_b = stats.poisson.pmf(servers, offered_load) / stats.poisson.cdf(servers, offered_load)
    return float(servers * erlang_b / (servers - offered_load * (1.0 - erlang_b)))


def effective_servers(demand: Demand, *, max_num_seqs: int, num_kv_blocks: int) -> int:
    """Requests a replica can hold at once: the batch cap or the KV cache over the mean blocks per request."""
    kv_servers = num_kv_blocks * demand.mean_steps / demand.mean_kv_block_steps
    return max(1, int(min(max_num_seqs, kv_servers)))


def prefill_queue_wait(
    rate_rps: float, demand: Demand, *, constant_s: float, per_prefill_token_s: float, max_num_batched_tokens: int
) -> tuple[float, float]:
    """(P(wait), mean wait in s) for the token budget: the M/G/1 queue of prompts described above."""
    decode_share = rate_rps * (demand.mean_work_s - demand.mean_prefill_work_s)
    full_step_s = constant_s + per_prefill_token_s * max_num_batched_tokens
    tokens_per_s = max_num_batched_tokens * (1.0 - decode_share) / full_step_s
    if tokens_per_s <= 0:
        return 1.0, math.inf
    service_s = demand.prompt_tokens / tokens_per_s
    rho = rate_rps * float(np.mean(service_s))
    if rho >= 1:
        return 1.0, math.inf
    return rho, rate_rps * float(np.mean(service_s**2)) / (2.0 * (1.0 - rho))


def slo_attainment(
    rate_rps: float,
    demand: Demand,
    *,
    constant_s: float,
    per_prefill_token_s: float,
    max_num_seqs: int,
    num_kv_blocks: int,
    max_num_batched_tokens: int,
    ttft_slo_s: float,
    decision_delay_s: float = 0.0,
) -> float:
    """Estimated share of requests whose TTFT meets `ttft_slo_s` on one replica at `rate_rps` (0 if unstable)."""
    tau = step_time_s(rate_rps, constant_s, demand)
    if not math.isfinite(tau):
        return 0.0
    servers = effective_servers(demand, max_num_seqs=max_num_seqs, num_kv_blocks=num_kv_blocks)
    service_s = demand.mean_steps * tau
    load = rate_rps * service_s
    if load >= servers:
        return 0.0
    p_slot = erlang_c(servers, load)
    wait_slot = p_slot / (servers / service_s - rate_rps) * (1.0 + demand.steps_scv) / 2.0 if p_slot > 0 else 0.0
    p_tokens, wait_tokens = prefill_queue_wait(rate_rps, demand, constant_s=constant_s,
                                               per_prefill_token_s=per_prefill_token_s,
                                               max_num_batched_tokens=max_num_batched_tokens)
    if not math.isfinite(wait_tokens):
        return 0.0
    p_wait = 1.0 - (1.0 - p_slot) * (1.0 - p_tokens)
    mean_wait = wait_slot + wait_tokens
    slack = ttft_slo_s - decision_delay_s - 1.5 * tau - per_prefill_token_s * demand.prompt_tokens
    if p_wait <= 0 or mean_wait <= 0:
        return float(np.mean(slack >= 0))
    p_late = np.where(slack >= 0, p_wait * np.exp(-np.maximum(slack, 0.0) * p_wait / mean_wait), 1.0)
    return float(np.mean(1.0 - p_late))


def max_rate_meeting_slo(target: float, upper_rps: float, attainment_at) -> float:
    """The highest rate in (0, upper_rps) whose estimated attainment is >= target (0 if even a trickle misses)."""
    low = upper_rps * 1e-6
    if attainment_at(low) < target:
        return 0.0
    high = upper_rps * (1 - 1e-9)
    if attainment_at(high) >= target:
        return high
    return float(optimize.brentq(lambda r: attainment_at(r) - target, low, high, xtol=upper_rps * 1e-5))
