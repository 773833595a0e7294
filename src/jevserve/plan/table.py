"""The deployment table: replicas and GPUs a load needs, per profile and per queue policy.

The analytic plan (`planner`) models FCFS. Queue order changes the waiting time, so for each (profile, policy)
the table also searches the simulator for the fewest replicas whose cluster meets the SLO target at the rate:
start from the analytic answer, then step down while the target is met, or up until it is. Each probe is one
cluster run per arrival seed (cached, so a rerun resumes); attainment is the mean over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jevserve.serving.registry import reads_predictions
from jevserve.serving.types import Request
from jevserve.sim.cluster import ReplicaSpec
from jevserve.sim.cluster_run import ClusterSetup, run_cluster, summarize_cluster
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import Profile
from jevserve.sim.resumable import run_keyed

MAX_PROBES = 12  # replica counts tried per (profile, policy) before giving up


@dataclass(frozen=True, slots=True)
class QueuePolicyChoice:
    """A queue policy as the table names it: `fcfs`, `plf+aging`, ..."""

    name: str
    aging_s: float | None
    decision_delay_s: float

    @property
    def label(self) -> str:
        """`name` or `name+aging`."""
        return self.name + ("+aging" if self.aging_s is not None else "")


def parse_policy(text: str, *, aging_s: float, decision_delay_s: float) -> QueuePolicyChoice:
    """`fcfs`, `spf+aging`, ...: a policy that reads predictions (plf, plf-edf, plf-relage) waits `decision_delay_s`
    for its prediction."""
    name, _, suffix = text.partition("+")
    if suffix not in ("", "aging"):
        raise ValueError(f"queue policy {text!r}; expected NAME or NAME+aging, e.g. fcfs or plf+aging")
    return QueuePolicyChoice(name, aging_s if suffix else None, decision_delay_s if reads_predictions(name) else 0.0)


@dataclass(frozen=True, slots=True)
class TableCell:
    """One cluster run of the search: a profile and policy with n replicas, at an arrival seed."""

    profile: str
    policy: str
    num_replicas: int
    seed: int

    @property
    def key(self) -> str:
        """Identifies the cell in a results file."""
        return f"{self.profile}|{self.policy}|{self.num_replicas}|{self.seed}"


@dataclass(frozen=True)
class TableContext:
    """What every search run shares."""

    requests: tuple[Request, ...]  # predictions attached, arrival times not set
    profiles: dict[str, Profile]
    policies: dict[str, QueuePolicyChoice]
    config: EngineConfig
    slo: Slo
    rate_rps: float
    router: str
    default_output_tokens: float


def run_table_cell(cell: TableCell, ctx: TableContext) -> dict:
    """Simulate a cluster of `num_replicas` replicas of the cell's profile under its queue policy."""
    policy = ctx.policies[cell.policy]
    replicas = tuple(ReplicaSpec(ctx.profiles[cell.profile], ctx.config) for _ in range(cell.num_replicas))
    setup = ClusterSetup(replicas, ctx.requests, ctx.slo, policy.name, policy.aging_s, policy.decision_delay_s,
                         ctx.default_output_tokens)
    summary = summarize_cluster(run_cluster(setup, ctx.router, ctx.rate_rps, cell.seed), ctx.slo)
    return {"key": cell.key, "profile": cell.profile, "policy": cell.policy, "num_replicas": cell.num_replicas,
            "seed": cell.seed, "slo_attainment": summary.metrics.slo_attainment,
            "ttft_p99_ms": summary.metrics.ttft_ms.p99}


def simulated_attainment(
    profile: str, policy: str, ctx: TableContext, *, seeds: Sequence[int], results_path: Path | None,
    jobs: int | None,
) -> Callable[[int], float]:
    """attainment(n): mean simulated SLO attainment over seeds of n replicas of `profile` under `policy`."""

    def attainment(n: int) -> float:
        cells = [TableCell(profile, policy, n, s) for s in seeds]
        rows = run_keyed(cells, run_table_cell, ctx, results_path=results_path, jobs=jobs)
        return float(np.mean([r["slo_attainment"] for r in rows]))

    return attainment


def search_replicas(
    attainment: Callable[[int], float], start: int, target: float, *, floor: int = 1,
    on_probe: Callable[[int, float], None] | None = None,
) -> tuple[int | None, dict[int, float]]:
    """The fewest replicas n >= floor with attainment(n) >= target, searching one step at a time from `start`,
    and every probe's result; None if MAX_PROBES counts were tried without finding the boundary. Attainment is
    assumed not to fall when replicas are added. `floor` is the fewest replicas that are stable: a finite run
    above the stability bound can still meet the target before its queue has grown, so it is not searched."""
    tried: dict[int, float] = {}

    def probe(n: int) -> float:
        if n not in tried:
            tried[n] = attainment(n)
            if on_probe is not None:
                on_probe(n, tried[n])
        return tried[n]

    floor = max(1, floor)
    n = max(floor, start)
    if probe(n) >= target:
        while n > floor:
            if len(tried) >= MAX_PROBES:
                return None, tried
            if probe(n - 1) < target:
                break
            n -= 1
        return n, tried
    while len(tried) < MAX_PROBES:
        n += 1
        if probe(n) >= target:
            return n, tried
    return None, tried


def gpus(replicas: int | None, gpus_per_replica: int) -> float:
    """GPUs for a replica count (nan when the search gave no answer)."""
    return math.nan if replicas is None else replicas * gpus_per_replica
