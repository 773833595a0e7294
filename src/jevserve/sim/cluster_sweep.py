"""Cluster runs as (router, rate, seed) cells: one run, its summary, and a resumable parallel sweep.

Each finished cell is appended to a JSONL file at once, so an interrupted sweep loses at most the cells in
flight and a rerun skips what is done. The same arrival seed gives the same arrival times for every router.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.serving.registry import make_queue_policy, make_router
from jevserve.serving.types import Request
from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.cluster import Cluster, ClusterResult, ReplicaSpec
from jevserve.sim.metrics import Slo, is_good, summarize
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
    out["estimator"] = estimator_quality(result)
    return out


_WORKER: tuple[Callable[[Any, Any], dict], Any] | None = None  # (worker, context), set by _init_worker


def _init_worker(worker: Callable[[Any, Any], dict], context: Any) -> None:
    global _WORKER
    _WORKER = (worker, context)


def _call(cell: Any) -> dict:
    assert _WORKER is not None, "_call runs in a pool whose initializer set the worker"
    worker, context = _WORKER
    return worker(cell, context)


def read_rows(path: Path) -> dict[str, dict]:
    """Finished cells of a results file by key (a torn last line from a killed run is skipped)."""
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[row["key"]] = row
    return done


def run_keyed(
    cells: Iterable[Any],
    worker: Callable[[Any, Any], dict],
    context: Any,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Run `worker(cell, context)` for every cell (anything with a `.key`) not already in `results_path`, in
    `jobs` processes, appending each row (which carries the key) as it finishes; returns the rows in cell order."""
    cells = list(cells)
    done = read_rows(results_path) if results_path is not None else {}
    todo = [c for c in cells if c.key not in done]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = None
    sink = results_path.open("a") if results_path is not None else None
    try:
        if jobs == 1:
            results: Iterable[dict] = (worker(c, context) for c in todo)
        else:
            pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_init_worker,
                                                            initargs=(worker, context))
            results = pool.imap_unordered(_call, todo)
        for row in results:
            done[row["key"]] = row
            if sink is not None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()  # a finished cell is on disk before the next one is taken
            if on_done is not None:
                on_done(row)
    finally:
        if pool is not None:
            pool.terminate()
        if sink is not None:
            sink.close()
    return [done[c.key] for c in cells]


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
