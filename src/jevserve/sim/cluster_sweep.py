"""Cluster runs as (router, rate, seed) cells: one run, its summary, and a resumable parallel sweep.

Each finished cell is appended to a JSONL file at once, so an interrupted sweep loses at most the cells in
flight and a rerun skips what is done. The same arrival seed gives the same arrival times for every router.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from jevserve.serving.registry import make_queue_policy, make_router
from jevserve.serving.types import Request
from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.cluster import Cluster, ClusterResult, ReplicaSpec
from jevserve.sim.metrics import Slo, is_good, summarize
from jevserve.sim.resumable import run_keyed
from jevserve.sim.run import with_arrivals


@dataclass(frozen=True)
class ClusterSetup:
    """What every cell of a cluster sweep shares."""

    replicas: tuple[ReplicaSpec, ...]
    requests: tuple[Request, ...]  # the workload, arrival times not yet set
    slo: Slo
    queue_policy: str = "fcfs"
    aging_s: float | None = None
    decision_delay_s: float = 0.0
    default_output_tokens: float = 256.0  # remaining-decode guess for requests without a prediction
    arrival_process: str = "poisson"
    cv: float = 2.0  # gamma arrivals
    router_options: dict = field(default_factory=dict)  # extra options by router name, e.g. {"utility": {...}}


@dataclass(frozen=True, slots=True)
class ClusterCell:
    """One cluster run: a router at a rate with an arrival seed."""

    router: str
    rate_rps: float
    seed: int

    @property
    def key(self) -> str:
        """Identifies the cell in a results file."""
        return f"{self.router}|{self.rate_rps:.4f}|{self.seed}"


def run_cluster(setup: ClusterSetup, router: str, rate_rps: float, seed: int, *, progress=None) -> ClusterResult:
    """Route the setup's workload at `rate_rps` (arrival seed `seed`) through the cluster."""
    policy = make_queue_policy(setup.queue_policy, aging_s=setup.aging_s, decision_delay_s=setup.decision_delay_s)
    models = [spec.model(policy, setup.default_output_tokens) for spec in setup.replicas]
    router_object = make_router(router, models=models, **setup.router_options.get(router, {}))
    arrivals = make_arrivals(setup.arrival_process, len(setup.requests), rate_rps, seed, cv=setup.cv)
    cluster = Cluster(setup.replicas, router_object, policy, default_output_tokens=setup.default_output_tokens)
    return cluster.run(with_arrivals(setup.requests, arrivals), progress=progress)


def estimator_quality(result: ClusterResult) -> dict[str, float]:
    """MAPE of both TTFT estimators against the realized TTFT, and the time each took per estimate."""
    real = np.array([r.realized_ttft_s for r in result.records])
    out: dict[str, float] = {}
    for name, est_field, us_field in (("forward", "estimated_ttft_s", "estimate_us"),
                                      ("queued_prefill", "queued_prefill_ttft_s", "queued_prefill_us")):
        est = np.array([getattr(r, est_field) for r in result.records])
        finite = np.isfinite(est)
        ape = np.abs(est[finite] - real[finite]) / real[finite]
        us = np.array([getattr(r, us_field) for r in result.records])
        out[f"{name}_mape"] = float(np.mean(ape))
        out[f"{name}_median_ape"] = float(np.median(ape))
        out[f"{name}_p90_ape"] = float(np.percentile(ape, 90))
        out[f"{name}_bias"] = float(np.mean((est[finite] - real[finite]) / real[finite]))  # > 0: overestimates
        out[f"{name}_num_infinite"] = int(np.sum(~finite))
        out[f"{name}_us_median"] = float(np.median(us))
        out[f"{name}_us_p90"] = float(np.percentile(us, 90))
    route_us = np.array([r.route_us for r in result.records])
    out["route_us_median"] = float(np.median(route_us))
    out["mean_running"] = float(np.mean([r.num_running for r in result.records]))
    return out


def summarize_cluster(result: ClusterResult, slo: Slo) -> dict[str, object]:
    """Overall serving metrics, per-replica load and attainment, and estimator quality."""
    records = result.metrics.records
    out = summarize(records, result.metrics.itls_s, slo)
    per_replica = []
    for replica_id in range(result.num_replicas):
        mine = [r for r in records if result.replica_of[r.request_id] == replica_id]
        ttft = np.array([r.ttft_s for r in mine]) * 1000 if mine else np.array([np.nan])
        per_replica.append({
            "replica_id": replica_id, "num_requests": len(mine),
            "slo_attainment": float(np.mean([is_good(r, slo) for r in mine])) if mine else float("nan"),
            "ttft_p90_ms": float(np.percentile(ttft, 90)), "ttft_p99_ms": float(np.percentile(ttft, 99)),
        })
    out["per_replica"] = per_replica
    out["num_rejected"] = result.metrics.num_rejected
    out["estimator"] = estimator_quality(result)
    return out


def run_cell(cell: ClusterCell, setup: ClusterSetup) -> dict:
    """Simulate one cell and return its summary with the cell's identity."""
    result = run_cluster(setup, cell.router, cell.rate_rps, cell.seed)
    return {"key": cell.key, "router": cell.router, "rate_rps": cell.rate_rps, "seed": cell.seed,
            **summarize_cluster(result, setup.slo)}


def run_cluster_cells(
    cells: Iterable[ClusterCell],
    setup: ClusterSetup,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Run every cluster cell not already in `results_path`; returns the rows of these cells."""
    return run_keyed(cells, run_cell, setup, results_path=results_path, jobs=jobs, on_done=on_done)


def cells_for(routers: Sequence[str], rates: Sequence[float], seeds: Sequence[int]) -> list[ClusterCell]:
    """Every (router, rate, seed) combination, grouped by rate."""
    return [ClusterCell(r, rate, s) for rate in rates for r in routers for s in seeds]
