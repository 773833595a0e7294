"""Back-of-envelope check of whether KV memory binds: the steady state of a decode-bound engine that admits every
request at once (no queue), from Little's law and the step-time model.

A request with prompt P and reply L holds the KV of P + k tokens during its k-th decode step, for L steps. If
every step takes s seconds and requests arrive at rate lam, then on average

    running requests   N = lam * s * E[L]
    KV tokens held     C = lam * s * E[P * L + L * (L + 1) / 2]
    step time          s = constant + per_decode_token * N + per_decode_context_token * C

so s = constant / (1 - per_decode_token * lam * E[L] - per_decode_context_token * lam * E[P L + L(L+1)/2]).
When the denominator is <= 0 there is no steady state: the engine cannot keep up even with unlimited KV. When C
exceeds the KV capacity, admission must wait (and running requests get preempted): queue order starts to matter.
Prefill time is left out (prompts are short next to thinking-length replies), so this slightly favours the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.serving.types import Request
from jevserve.sim.profile import Profile


@dataclass(frozen=True, slots=True)
class SteadyState:
    """The no-queue steady state at one arrival rate (nan everywhere when there is none)."""

    rate_rps: float
    step_ms: float  # mean decode step time
    num_running: float  # mean requests in the running batch
    kv_tokens: float  # mean KV tokens held
    kv_fraction: float  # kv_tokens / KV capacity in tokens; > 1 means KV memory binds


def steady_state(requests: Sequence[Request], rate_rps: float, profile: Profile, block_size: int = 16) -> SteadyState:
    """The steady state of `profile` serving `requests` (their sizes) arriving at `rate_rps` with no queue."""
    p = np.array([r.num_prompt_tokens for r in requests], dtype=np.float64)
    n = np.array([r.num_output_tokens for r in requests], dtype=np.float64)
    mean_reply, mean_kv_steps = float(n.mean()), float(np.mean(p * n + n * (n + 1) / 2))
    st = profile.step_time
    load = rate_rps * (st.per_decode_token * mean_reply + st.per_decode_context_token * mean_kv_steps) * 1e-6
    if load >= 1:
        return SteadyState(rate_rps, math.nan, math.nan, math.nan, math.nan)
    step_s = st.constant * 1e-6 / (1 - load)
    kv = rate_rps * step_s * mean_kv_steps
    capacity = profile.num_kv_blocks(block_size) * block_size
    return SteadyState(rate_rps, step_s * 1000, rate_rps * step_s * mean_reply, kv, kv / capacity)


def arithmetic_table(cases: Sequence[tuple[str, Sequence[Request], Profile]], rates: Sequence[float]) -> str:
    """A markdown table of the steady state of each (label, requests, profile) case at each rate."""
    lines = ["| workload and profile | mean reply (tokens) | rate (req/s) | step (ms) | running | KV held (tokens) "
             "| share of KV capacity |", "|---|---|---|---|---|---|---|"]
    for label, requests, profile in cases:
        mean_reply = float(np.mean([r.num_output_tokens for r in requests]))
        for rate in rates:
            s = steady_state(requests, rate, profile)
            if math.isnan(s.step_ms):
                cells = "no steady state | — | — | — (the engine cannot keep up)"
            else:
                cells = f"{s.step_ms:.2f} | {s.num_running:.1f} | {s.kv_tokens:,.0f} | {100 * s.kv_fraction:.1f}%"
            lines.append(f"| {label} | {mean_reply:,.0f} | {rate:.2f} | {cells} |")
    return "\n".join(lines)
