"""How many replicas a load needs: the stability bound and the SLO rate of one replica, then a division.

Each replica is assumed to get an equal share of Poisson traffic (what round-robin gives; a load-aware router
pools queues and does a little better), so n replicas serve a total rate R when R / n is below the rate at which
one replica still meets the SLO target. The answer says which limit set n: the SLO (waiting time) or, when the
SLO is loose, the stability bound, and which resource binds there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from jevserve.plan.bound import StabilityBound, stability_bound
from jevserve.plan.demand import request_demand
from jevserve.plan.waiting import effective_servers, max_rate_meeting_slo, slo_attainment
from jevserve.serving.scheduling_rules import blocks_for
from jevserve.serving.types import Request
from jevserve.sim.engine import EngineConfig
from jevserve.sim.profile import Profile


class PlanError(ValueError):
    """A plan that cannot be made from the inputs given (the message says which and what to change)."""


@dataclass(frozen=True, slots=True)
class ReplicaCapacity:
    """What one replica of a profile can carry for a workload."""

    profile: str
    bound: StabilityBound
    slo_rate_rps: float  # highest per-replica rate whose estimated attainment meets the target
    servers: int  # requests held at once in the waiting-time model
    ttft_slo_s: float
    attainment_target: float


# The analytic bound is 1-15% above the simulator's saturation on five of the six validation workloads of the
# shipped profiles (docs/capacity.md, "Validation against the simulator"); planned at 97% of its bound, a replica met
# its TTFT target for 30% of requests in the simulator. So a replica is planned at most at 0.8 of its bound: 80-92%
# of its simulated saturation there. Where KV memory binds and lengths vary widely the bound is a third too high,
# and the command says to simulate the answer (`plan table`).
MAX_LOAD = 0.8


@dataclass(frozen=True, slots=True)
class Plan:
    """The answer for a total rate: replicas and GPUs, what limits them, and the margin left."""

    rate_rps: float
    replicas: int
    gpus: int
    per_replica_rate_rps: float
    capacity: ReplicaCapacity
    limited_by: str  # "SLO" or "stability bound"
    max_load: float = MAX_LOAD  # the most of its stability bound a replica is planned at

    @property
    def utilisation(self) -> float:
        """Per-replica rate over the stability bound."""
        return self.per_replica_rate_rps / self.capacity.bound.rate_rps


# The engine settings the analytic model reads; the others (KV admission, head-of-line blocking, prefix caching, the
# long-prefill threshold) change what the simulator does, not the means the bound and the waiting model take.
MODELLED_ENGINE_OPTIONS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_kv_blocks")


class CapacityModel:
    """The analytic model of one replica: the workload's demand on a profile with given engine settings."""

    def __init__(self, requests: Sequence[Request], profile: Profile, config: EngineConfig, *, ttft_slo_s: float,
                 decision_delay_s: float = 0.0) -> None:
        if not requests:
            raise PlanError("the workload has no requests; give --workload and --num-requests > 0")
        if not ttft_slo_s > 0:
            raise PlanError(f"ttft_slo_s={ttft_slo_s!r}; expected seconds > 0 (e.g. --slo-ttft-ms 1000)")
        self.profile, self.config = profile, config
        self.ttft_slo_s, self.decision_delay_s = ttft_slo_s, decision_delay_s
        self.demand = request_demand(requests, profile.step_time, max_num_batched_tokens=config.max_num_batched_tokens,
                                     block_size=config.block_size)
        self.num_kv_blocks = config.num_kv_blocks or profile.num_kv_blocks(config.block_size)
        self._check_fits(requests, config.block_size)

    def _check_fits(self, requests: Sequence[Request], block_size: int) -> None:
        """Refuse a workload with requests no replica can hold: the engine refuses them (as vLLM does), so no
        replica count serves them, and the analytic bound would plan for them as if they ran."""
        need = [blocks_for(r.num_prompt_tokens + (r.num_output_tokens or 0), block_size) for r in requests]
        too_big = [(n, r) for n, r in zip(need, requests, strict=True) if n > self.num_kv_blocks]
        if too_big:
            blocks, example = max(too_big, key=lambda pair: pair[0])
            raise PlanError(
                f"{len(too_big)} of {len(requests)} requests need more KV blocks than a replica holds (e.g. "
                f"request {example.request_id!r}: {blocks} > {self.num_kv_blocks}); the engine refuses them, so no "
                "number of replicas serves them: give more --num-kv-blocks, a profile with more memory or a workload "
                "of shorter requests"
            )

    @property
    def constant_s(self) -> float:
        """The per-step constant of the profile, seconds."""
        return self.profile.step_time.constant * 1e-6

    def bound(self) -> StabilityBound:
        """The stability bound of one replica."""
        return stability_bound(self.demand, constant_s=self.constant_s, max_num_seqs=self.config.max_num_seqs,
                               num_kv_blocks=self.num_kv_blocks,
                               max_num_batched_tokens=self.config.max_num_batched_tokens)

    def attainment(self, rate_rps: float) -> float:
        """Estimated TTFT SLO attainment of one replica at rate_rps (FCFS)."""
        return slo_attainment(
            rate_rps, self.demand, constant_s=self.constant_s,
            per_prefill_token_s=self.profile.step_time.per_prefill_token * 1e-6,
            max_num_seqs=self.config.max_num_seqs, num_kv_blocks=self.num_kv_blocks,
            max_num_batched_tokens=self.config.max_num_batched_tokens, ttft_slo_s=self.ttft_slo_s,
            decision_delay_s=self.decision_delay_s,
        )

    def capacity(self, attainment_target: float = 0.9) -> ReplicaCapacity:
        """Stability bound and SLO rate of one replica."""
        if not 0 < attainment_target < 1:
            raise PlanError(f"attainment target {attainment_target!r}; expected a fraction in (0, 1), e.g. 0.9")
        bound = self.bound()
        slo_rate = max_rate_meeting_slo(attainment_target, bound.rate_rps, self.attainment)
        servers = effective_servers(self.demand, max_num_seqs=self.config.max_num_seqs,
                                    num_kv_blocks=self.num_kv_blocks)
        return ReplicaCapacity(self.profile.name, bound, slo_rate, servers, self.ttft_slo_s, attainment_target)


def replicas_for(rate_rps: float, per_replica_rps: float) -> int:
    """The fewest replicas (at least one) that carry `rate_rps` at no more than `per_replica_rps` each (a rate equal
    to a whole multiple of it, up to float noise, needs no extra replica)."""
    return max(1, math.ceil(rate_rps / per_replica_rps * (1 - 1e-12)))


def plan_replicas(
    rate_rps: float, capacity: ReplicaCapacity, *, gpus_per_replica: int = 1, max_load: float = MAX_LOAD
) -> Plan:
    """Replicas (and GPUs) needed to serve rate_rps with the SLO target met on every replica and no replica planned
    above `max_load` of its stability bound."""
    if not rate_rps > 0:
        raise PlanError(f"--rate {rate_rps!r}; expected requests per second > 0")
    if gpus_per_replica < 1:
        raise PlanError(f"--gpus-per-replica {gpus_per_replica!r}; expected an integer >= 1")
    if not 0 < max_load <= 1:
        raise PlanError(f"--max-load {max_load!r}; expected a fraction of the stability bound in (0, 1]")
    if capacity.slo_rate_rps <= 0:
        raise PlanError(
            f"profile {capacity.profile!r} cannot meet TTFT <= {capacity.ttft_slo_s * 1000:g} ms for "
            f"{100 * capacity.attainment_target:g}% of requests even unloaded; loosen --slo-ttft-ms or "
            "--attainment, or use a faster profile"
        )
    headroom_rps = max_load * capacity.bound.rate_rps
    replicas = replicas_for(rate_rps, min(capacity.slo_rate_rps, headroom_rps))
    # Within 2% of the most a replica is planned at, the waiting-time model adds nothing a user could act on: the
    # bound decides.
    limited_by = "stability bound" if capacity.slo_rate_rps >= 0.98 * headroom_rps else "SLO"
    return Plan(rate_rps, replicas, replicas * gpus_per_replica, rate_rps / replicas, capacity, limited_by, max_load)


def plan_for(
    rate_rps: float,
    requests: Sequence[Request],
    profile: Profile,
    config: EngineConfig,
    *,
    ttft_slo_s: float,
    attainment_target: float = 0.9,
    decision_delay_s: float = 0.0,
    gpus_per_replica: int = 1,
    max_load: float = MAX_LOAD,
) -> Plan:
    """`CapacityModel(...).capacity()` then `plan_replicas` in one call."""
    model = CapacityModel(requests, profile, config, ttft_slo_s=ttft_slo_s, decision_delay_s=decision_delay_s)
    try:
        return plan_replicas(rate_rps, model.capacity(attainment_target), gpus_per_replica=gpus_per_replica,
                             max_load=max_load)
    except PlanError as exc:
        raise PlanError(with_delay_named(str(exc), decision_delay_s, ttft_slo_s)) from None


def with_delay_named(message: str, decision_delay_s: float, ttft_slo_s: float) -> str:
    """A plan error that the decision delay may cause (the target missed even unloaded), with the delay named."""
    if decision_delay_s > 0 and "even unloaded" in message:  # the delay may be what eats the budget
        share = decision_delay_s / ttft_slo_s
        return (f"{message}; --decision-delay-ms {decision_delay_s * 1000:g} alone takes {share:.0%} of the TTFT "
                "target: shorten it")
    return message
