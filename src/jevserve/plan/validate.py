"""Check the planner against the simulator: saturation rate and SLO attainment of one replica, per workload.

For each workload one replica is simulated at fractions of the analytic stability bound and at 1.5 times it.
Each run's throughput is its completion rate over the middle half of the finishes (ramp-up and drain
excluded); the measured saturation rate is the highest throughput over all runs of the case (below saturation
throughput follows the arrival rate, above it the replica serves what it can; past the bound a KV-bound replica
may serve less, as preemptions recompute work, and the overload run shows how much). The measured SLO rate is
the highest rate with attainment >= target, interpolated across the rates (DistServe's goodput). Runs are
cached per key, so a rerun resumes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.plan.planner import CapacityModel, PlanError
from jevserve.serving.registry import make_queue_policy
from jevserve.serving.types import Request
from jevserve.sim.arrivals import poisson_arrivals
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo, is_good, require_finished
from jevserve.sim.profile import Profile
from jevserve.sim.run import simulate, with_arrivals
from jevserve.sim.stats import max_rate_meeting, mean_interval

RATE_FRACTIONS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05)  # of the analytic stability bound
OVERLOAD_FACTOR = 1.5  # the saturation run sends this multiple of the analytic bound


@dataclass(frozen=True)
class ValidationCase:
    """One workload on one profile with engine settings."""

    name: str
    requests: tuple[Request, ...]
    profile: Profile
    config: EngineConfig
    slo: Slo


@dataclass(frozen=True, slots=True)
class ValidationCell:
    """One single-replica run of a case: a rate (req/s) and an arrival seed."""

    case: str
    rate_rps: float
    seed: int
    kind: str  # "sweep" or "saturation"

    @property
    def key(self) -> str:
        """Identifies the cell in a results file."""
        return f"{self.case}|{self.kind}|{self.rate_rps:.4f}|{self.seed}"


def windowed_throughput(finish_s: np.ndarray) -> float:
    """Completions per second over the middle half of the finish times (ramp-up and drain excluded)."""
    times = np.sort(finish_s)
    lo, hi = len(times) // 4, (3 * len(times)) // 4
    if hi - lo < 2 or times[hi] <= times[lo]:
        raise PlanError(f"too few requests finished ({len(times)}) to measure a throughput")
    return float((hi - lo) / (times[hi] - times[lo]))


def run_validation_cell(cell: ValidationCell, cases: dict[str, ValidationCase]) -> dict:
    """Simulate one cell: attainment for sweep cells, windowed throughput for saturation cells."""
    case = cases[cell.case]
    requests = with_arrivals(case.requests, poisson_arrivals(len(case.requests), cell.rate_rps, cell.seed))
    _, recorder = simulate(requests, case.profile, make_queue_policy("fcfs"), case.config)
    require_finished(recorder)
    records = recorder.records
    try:
        throughput = windowed_throughput(np.array([r.arrival_s + r.e2el_s for r in records]))
    except PlanError as exc:
        if not recorder.num_rejected:
            raise
        raise PlanError(f"case {case.name!r}: {exc}; the other {recorder.num_rejected} need more KV blocks than "
                        f"the cache holds (e.g. {recorder.first_rejection}); give more --num-kv-blocks") from None
    return {
        "key": cell.key, "case": cell.case, "kind": cell.kind, "rate_rps": cell.rate_rps, "seed": cell.seed,
        "slo_attainment": float(np.mean([is_good(r, case.slo) for r in records])),
        "throughput_rps": throughput, "num_preemptions": recorder.num_preemptions,
    }


def cells_for(case: ValidationCase, bound_rps: float, seeds: Sequence[int]) -> list[ValidationCell]:
    """The sweep and saturation cells of a case, from its analytic bound."""
    sweep = [ValidationCell(case.name, round(f * bound_rps, 4), s, "sweep") for f in RATE_FRACTIONS for s in seeds]
    saturation = [ValidationCell(case.name, round(OVERLOAD_FACTOR * bound_rps, 4), s, "saturation") for s in seeds]
    return sweep + saturation


def compare(case: ValidationCase, model: CapacityModel, rows: list[dict], target: float) -> dict:
    """Analytic vs measured saturation rate, SLO rate and attainment per rate for one case."""
    capacity = model.capacity(target)
    mine = [r for r in rows if r["case"] == case.name]
    by_rate: dict[float, list[float]] = {}
    for r in mine:
        by_rate.setdefault(r["rate_rps"], []).append(r["throughput_rps"])
    saturation = max(float(np.mean(v)) for v in by_rate.values())
    overload = mean_interval([r["throughput_rps"] for r in mine if r["kind"] == "saturation"])
    rates = sorted({r["rate_rps"] for r in mine if r["kind"] == "sweep"})
    measured_att = [float(np.mean([r["slo_attainment"] for r in mine if r["kind"] == "sweep" and
                                   r["rate_rps"] == rate])) for rate in rates]
    slo_rate, qualifier = max_rate_meeting(rates, measured_att, target)
    if slo_rate > saturation:
        # Past saturation the queue grows without end, so the SLO fails once a run is long enough; a finite run
        # can still show >= target there, which is not a rate anyone can sustain.
        slo_rate, qualifier = saturation, "saturation: "
    return {
        "case": case.name, "profile": case.profile.name, "binding": capacity.bound.binding,
        "bound": dataclasses.asdict(capacity.bound), "analytic_saturation_rps": capacity.bound.rate_rps,
        "measured_saturation_rps": saturation, "overload_throughput_rps": overload,
        "overload_rate_rps": OVERLOAD_FACTOR * capacity.bound.rate_rps, "analytic_slo_rate_rps": capacity.slo_rate_rps,
        "measured_slo_rate_rps": slo_rate, "measured_slo_rate_qualifier": qualifier,
        "per_rate": [{"rate_rps": rate, "measured": att, "analytic": model.attainment(rate)}
                     for rate, att in zip(rates, measured_att, strict=True)],
        "num_preemptions_overload": float(np.mean([r["num_preemptions"] for r in mine if r["kind"] == "saturation"])),
    }


# Workloads the validation runs by default: one per binding resource (slots at two batch caps, KV memory, compute).
CASES: dict[str, dict] = {
    "sharegpt": {"workload": "sharegpt", "num_requests": 4000,
                 "about": "ShareGPT, vLLM defaults (max_num_seqs 1024)"},
    "sharegpt-256": {"workload": "sharegpt", "num_requests": 4000, "max_num_seqs": 256,
                     "about": "ShareGPT, max_num_seqs 256"},
    "long-reply": {"workload": "synthetic", "prompt": "lognormal:300:0.8:4096", "output": "lognormal:2000:0.8:8192",
                   "num_requests": 2000, "about": "synthetic long replies (median 2,000 tokens), as with thinking"},
    "long-prompt": {"workload": "synthetic", "prompt": "lognormal:3000:0.5:8000", "output": "lognormal:40:0.5:200",
                    "num_requests": 2000, "about": "synthetic long prompts (median 3,000), short replies"},
    # where batch slots, KV memory and compute bind within a few percent of one another (a retrieval-augmented
    # shape): the mean-based bound is furthest from the simulator here
    "long-prompt-reply": {"workload": "synthetic", "prompt": "lognormal:3000:0.5:8000",
                          "output": "lognormal:200:0.5:1000", "num_requests": 4000,
                          "about": "synthetic long prompts (median 3,000), replies of median 200"},
    # heavy-tailed lengths on both sides (lognormal sigma 1): a replica bound by KV memory that new requests fill
    # and long replies outgrow, so it preempts
    "mixed": {"workload": "synthetic", "prompt": "lognormal:800:1.0:16000", "output": "lognormal:300:1.0:8000",
              "num_requests": 4000, "about": "synthetic mixed lengths (medians 800 and 300, heavy tails)"},
}


def build_case(name: str, profile: Profile, config: EngineConfig, slo: Slo, *, seed: int = 0) -> ValidationCase:
    """The named case (see CASES) on a profile, with the case's engine overrides applied to `config`."""
    from jevserve.sim.errors import WorkloadError
    from jevserve.sim.workloads.sharegpt import sample_sharegpt
    from jevserve.sim.workloads.synthetic import synthetic_requests

    if name not in CASES:
        raise WorkloadError(f"unknown validation case {name!r}; expected one of: {', '.join(CASES)}")
    spec = CASES[name]
    if spec["workload"] == "sharegpt":
        requests = sample_sharegpt(spec["num_requests"], seed=seed)
    else:
        requests = synthetic_requests(spec["num_requests"], spec["prompt"], spec["output"], seed=seed)
    if "max_num_seqs" in spec:
        config = dataclasses.replace(config, max_num_seqs=spec["max_num_seqs"])
    return ValidationCase(name, tuple(requests), profile, config, slo)
