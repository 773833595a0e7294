"""One cluster run: a workload routed over simulated replicas at a rate, and its summary (serving metrics,
per-replica load and attainment, TTFT-estimator quality). The same arrival seed gives the same arrival times for
every router."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from jevserve.serving.registry import make_queue_policy, make_router
from jevserve.serving.types import Request
from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.cluster import Cluster, ClusterResult, ReplicaSpec
from jevserve.sim.metrics import RunSummary, Slo, is_good, summarize_recorded
from jevserve.sim.run import with_arrivals
from jevserve.sim.steady import KeepUp, keep_up, too_short_to_tell


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


def run_cluster(setup: ClusterSetup, router: str, rate_rps: float, seed: int, *, progress=None) -> ClusterResult:
    """Route the setup's workload at `rate_rps` (arrival seed `seed`) through the cluster."""
    policy = make_queue_policy(setup.queue_policy, aging_s=setup.aging_s, decision_delay_s=setup.decision_delay_s)
    models = [spec.model(policy, setup.default_output_tokens) for spec in setup.replicas]
    router_object = make_router(router, models=models, **setup.router_options.get(router, {}))
    arrivals = make_arrivals(setup.arrival_process, len(setup.requests), rate_rps, seed, cv=setup.cv)
    cluster = Cluster(setup.replicas, router_object, policy, default_output_tokens=setup.default_output_tokens)
    return cluster.run(with_arrivals(setup.requests, arrivals), progress=progress)


@dataclass(frozen=True, slots=True)
class EstimateErrors:
    """How one TTFT estimator did against the realised TTFT over a run's requests."""

    mape: float  # mean absolute percentage error, finite estimates only
    median_ape: float
    p90_ape: float
    bias: float  # mean signed relative error; > 0: overestimates
    num_infinite: int  # estimates of inf (the request could never be admitted, as estimated)
    us_median: float  # time per estimate, microseconds
    us_p90: float


@dataclass(frozen=True, slots=True)
class EstimatorQuality:
    """Both TTFT estimators' errors, the latency router's cost per decision and the load it saw."""

    forward: EstimateErrors  # `estimate_ttft`, the planner stepped forward from a snapshot
    queued_prefill: EstimateErrors  # `estimate_ttft_queued_prefill`
    route_us_median: float  # time per routing decision, microseconds
    mean_running: float  # running requests on the chosen replica at routing time

    def as_dict(self) -> dict[str, float]:
        """Flat JSON-ready data: `forward_mape`, `queued_prefill_us_p90`, ..., `route_us_median`, `mean_running`."""
        out: dict[str, float] = {}
        for name in ("forward", "queued_prefill"):
            errors = getattr(self, name)
            out.update({f"{name}_{key}": getattr(errors, key) for key in EstimateErrors.__dataclass_fields__})
        return {**out, "route_us_median": self.route_us_median, "mean_running": self.mean_running}

    @classmethod
    def from_dict(cls, data: dict) -> EstimatorQuality:
        """Read back from `as_dict`'s data."""
        errors = {name: EstimateErrors(**{key: data[f"{name}_{key}"] for key in EstimateErrors.__dataclass_fields__})
                  for name in ("forward", "queued_prefill")}
        return cls(errors["forward"], errors["queued_prefill"], data["route_us_median"], data["mean_running"])


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """What one replica of a cluster run served."""

    replica_id: int
    num_requests: int
    slo_attainment: float  # NaN when it served nothing
    ttft_p90_ms: float
    ttft_p99_ms: float


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    """One cluster run: the serving metrics over all replicas, each replica's share, and estimator quality."""

    metrics: RunSummary
    per_replica: tuple[ReplicaLoad, ...]
    num_rejected: int  # requests that could never fit in their replica's KV cache
    estimator: EstimatorQuality
    keep_up: KeepUp | None = None  # the steady-state verdict over all replicas' requests (None: read from a run
    # stored without it)
    too_short: str | None = None  # why the run is too short for that verdict to tell (steady.too_short_to_tell)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready data: the metrics' fields beside `per_replica`, `num_rejected`, `estimator` and `keep_up`."""
        return {**self.metrics.as_dict(), "per_replica": [dataclasses.asdict(r) for r in self.per_replica],
                "num_rejected": self.num_rejected, "estimator": self.estimator.as_dict(),
                "keep_up": None if self.keep_up is None else self.keep_up.as_dict(), "too_short": self.too_short}

    @classmethod
    def from_dict(cls, data: dict) -> ClusterSummary:
        """Read back from `as_dict`'s data."""
        keep = data.get("keep_up")
        return cls(RunSummary.from_dict(data), tuple(ReplicaLoad(**r) for r in data["per_replica"]),
                   data["num_rejected"], EstimatorQuality.from_dict(data["estimator"]),
                   None if keep is None else KeepUp.from_dict(keep), data.get("too_short"))


def _errors(estimates: np.ndarray, realized: np.ndarray, us: np.ndarray) -> EstimateErrors:
    finite = np.isfinite(estimates)
    relative = (estimates[finite] - realized[finite]) / realized[finite]
    ape = np.abs(relative)
    return EstimateErrors(float(np.mean(ape)), float(np.median(ape)), float(np.percentile(ape, 90)),
                          float(np.mean(relative)), int(np.sum(~finite)), float(np.median(us)),
                          float(np.percentile(us, 90)))


def estimator_quality(result: ClusterResult) -> EstimatorQuality:
    """Errors of both TTFT estimators against the realized TTFT, and the time each took per estimate."""
    records = result.records
    real = np.array([r.realized_ttft_s for r in records])
    forward = _errors(np.array([r.estimated_ttft_s for r in records]), real, np.array([r.estimate_us for r in records]))
    cheap = _errors(np.array([r.queued_prefill_ttft_s for r in records]), real,
                    np.array([r.queued_prefill_us for r in records]))
    return EstimatorQuality(forward, cheap, float(np.median([r.route_us for r in records])),
                            float(np.mean([r.num_running for r in records])))


def summarize_cluster(result: ClusterResult, slo: Slo) -> ClusterSummary:
    """Overall serving metrics, per-replica load and attainment, and estimator quality."""
    records = result.metrics.records
    per_replica = []
    for replica_id in range(result.num_replicas):
        mine = [r for r in records if result.replica_of[r.request_id] == replica_id]
        ttft = np.array([r.ttft_s for r in mine]) * 1000 if mine else np.array([np.nan])
        per_replica.append(ReplicaLoad(
            replica_id, len(mine), float(np.mean([is_good(r, slo) for r in mine])) if mine else float("nan"),
            float(np.percentile(ttft, 90)), float(np.percentile(ttft, 99))))
    return ClusterSummary(summarize_recorded(result.metrics, slo), tuple(per_replica), result.metrics.num_rejected,
                          estimator_quality(result), keep_up(records), too_short_to_tell(records))
