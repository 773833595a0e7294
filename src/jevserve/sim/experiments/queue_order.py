"""The queue-order experiment: FCFS vs shortest-prompt vs predicted-length vs true-length first, with and
without aging, on 2,000 ShareGPT requests over a range of Poisson rates, on one simulated replica.

One knob of the scenario (`scenarios.py`) is calibrated before the sweep, so that FCFS goodput (the highest rate
with >= 90% SLO attainment, DistServe's definition) matches the published 1.13 req/s. The rest of the published
table is then a prediction, not a fit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.stats import kendalltau

from jevserve.serving.types import Request
from jevserve.sim.engine import EngineConfig
from jevserve.sim.errors import WorkloadError
from jevserve.sim.experiments.scenarios import KNOBS, Scenario
from jevserve.sim.experiments.sweep import Cell, PolicySpec, SweepContext, run_cells
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import Profile
from jevserve.sim.stats import max_rate_meeting, mean_interval
from jevserve.sim.workloads.predictions import attach_predictions, noisy_oracle, read_predictions
from jevserve.sim.workloads.sharegpt import sample_sharegpt

DEFAULT_RATES = (1.05, 1.10, 1.15, 1.20, 1.25, 1.30, 1.36, 1.42, 1.48, 1.54)
QUEUE_POLICY_NAMES = ("fcfs", "spf", "plf", "tlf")
ATTAINMENT_TARGET = 0.9
# Per-rate metrics the report uses: name -> how to read it from one run's summary.
RATE_METRICS: dict[str, Callable[[dict], float]] = {
    "slo_attainment": lambda r: r["slo_attainment"],
    "ttft_p90_s": lambda r: r["ttft_ms"]["p90"] / 1000,
    "ttft_p99_s": lambda r: r["ttft_ms"]["p99"] / 1000,
    "tpot_mean_ms": lambda r: r["tpot_ms"]["mean"],
    "e2el_p99_s": lambda r: r["e2el_ms"]["p99"] / 1000,
    "max_wait_s": lambda r: r["max_wait_s"],
    "vllm_goodput_rps": lambda r: r["goodput_rps"],
    "num_preemptions": lambda r: r["num_preemptions"],
}


@dataclass(frozen=True)
class QueueOrderSetup:
    """Everything that defines one queue-order experiment in one scenario."""

    scenario: Scenario
    profile: Profile  # before the knob is applied
    config: EngineConfig
    num_requests: int = 2000
    workload_seed: int = 0  # which ShareGPT requests (test split) are sampled
    rates: tuple[float, ...] = DEFAULT_RATES
    seeds: tuple[int, ...] = (0, 1)  # arrival seeds
    aging_s: float = 10.0
    decision_delay_s: float = 0.092  # applied to 'plf' only: the decision model answers before queueing
    kendall_tau: float = 0.6  # of the noisy oracle used when no predictions file is given
    predictions_path: Path | None = None
    slo: Slo = field(default_factory=Slo)
    knob_value: float | None = None  # None: calibrate to target_fcfs_goodput
    target_fcfs_goodput: float = 1.13

    def policies(self) -> list[PolicySpec]:
        """Each queue policy without and with aging."""
        out = []
        for name in QUEUE_POLICY_NAMES:
            delay = self.decision_delay_s if name == "plf" else 0.0
            out += [PolicySpec(name, None, delay), PolicySpec(name, self.aging_s, delay)]
        return out


def base_requests(setup: QueueOrderSetup) -> list[Request]:
    """The sampled ShareGPT test-split requests, before the knob and predictions."""
    return sample_sharegpt(setup.num_requests, seed=setup.workload_seed, split="test")


def build_context(setup: QueueOrderSetup, knob_value: float) -> tuple[SweepContext, dict[str, object]]:
    """The context every cell shares (knob applied once, predictions attached), and how predictions were made."""
    profile, requests = setup.scenario.apply(knob_value, setup.profile, base_requests(setup))
    if setup.predictions_path is not None:
        requests = attach_predictions(requests, read_predictions(setup.predictions_path))
        tau = kendalltau([r.predicted_output_tokens for r in requests], [r.num_output_tokens for r in requests])
        # the content digest keys cached runs, so an edited file at the same path is never mistaken for the old
        digest = hashlib.sha256(setup.predictions_path.read_bytes()).hexdigest()[:12]
        source: dict[str, object] = {"kind": "file", "path": str(setup.predictions_path), "sha256": digest,
                                     "kendall_tau": round(float(tau.statistic), 4)}
    else:
        requests, tau = noisy_oracle(requests, kendall_tau=setup.kendall_tau, seed=setup.workload_seed)
        source = {"kind": "noisy oracle", "target_kendall_tau": setup.kendall_tau, "kendall_tau": round(tau, 4)}
    return SweepContext(tuple(requests), profile, setup.config, setup.slo), source


def fcfs_goodput(context: SweepContext, setup: QueueOrderSetup, jobs: int | None) -> float:
    """FCFS's DistServe goodput over the setup's rates, from attainment averaged over seeds.

    Rates run in increasing order and stop at the first whose attainment misses the target: the goodput only
    depends on the rates up to there, and the rates above are the slowest to simulate.
    """
    attainment: list[float] = []
    for rate in setup.rates:
        rows = run_cells([Cell(PolicySpec("fcfs"), rate, s) for s in setup.seeds], context, jobs=jobs)
        attainment.append(float(np.mean([r["slo_attainment"] for r in rows])))
        if attainment[-1] < ATTAINMENT_TARGET:
            break
    rate, qualifier = max_rate_meeting(setup.rates[: len(attainment)], attainment, ATTAINMENT_TARGET)
    # Outside the sweep, push the value past the ends so the root finder sees the right sign.
    return rate - 1.0 if qualifier == "<" else rate + 1.0 if qualifier == ">=" else rate


def calibrate_knob(setup: QueueOrderSetup, jobs: int | None, log: Callable[[str], None] = print) -> float:
    """The knob value at which FCFS goodput equals the target (Brent's method in the scenario's bracket)."""
    scenario, base = setup.scenario, base_requests(setup)
    seen: dict[float, float] = {}

    def gap(value: float) -> float:
        if value not in seen:
            profile, requests = scenario.apply(value, setup.profile, base)
            context = SweepContext(tuple(requests), profile, setup.config, setup.slo)
            goodput = fcfs_goodput(context, setup, jobs)
            log(f"  {KNOBS[scenario.knob]} {value:.4f}: FCFS goodput {goodput:.3f} req/s")
            seen[value] = goodput - setup.target_fcfs_goodput
        return seen[value]

    low, high = scenario.bracket
    # Both knobs make the engine slower or the work larger as they grow, so FCFS goodput falls with them.
    if gap(low) < 0 or gap(high) > 0:
        raise WorkloadError(
            f"target_fcfs_goodput={setup.target_fcfs_goodput} is not reachable with {scenario.knob} in "
            f"[{low}, {high}] in scenario {scenario.name!r}; fix the knob instead, or change the rates or engine"
        )
    return float(optimize.brentq(gap, low, high, xtol=scenario.xtol))


def aggregate(rows: list[dict], setup: QueueOrderSetup) -> dict[str, dict]:
    """Per policy: per-rate means, 95% intervals and per-seed values, and DistServe goodput with its interval."""
    out: dict[str, dict] = {}
    for spec in setup.policies():
        mine = [r for r in rows if r["policy"] == spec.label]
        per_rate = []
        for rate in setup.rates:
            at = sorted((r for r in mine if r["rate_rps"] == rate), key=lambda r: r["seed"])
            entry: dict[str, object] = {"rate_rps": rate, "by_seed": {}}
            for name, get in RATE_METRICS.items():
                values = [get(r) for r in at]
                entry[name] = mean_interval(values)
                entry["by_seed"][name] = values
            per_rate.append(entry)
        by_seed = []
        for seed in setup.seeds:
            att = [next(r["slo_attainment"] for r in mine if r["rate_rps"] == x and r["seed"] == seed)
                   for x in setup.rates]
            by_seed.append(max_rate_meeting(setup.rates, att, ATTAINMENT_TARGET))
        mean_att = [e["slo_attainment"][0] for e in per_rate]
        out[spec.label] = {
            "per_rate": per_rate,
            "goodput_rps": max_rate_meeting(setup.rates, mean_att, ATTAINMENT_TARGET),
            "goodput_by_seed": by_seed,
            "goodput_interval": mean_interval([g for g, _ in by_seed]),
        }
    return out


def output_length_stats(requests: Sequence[Request]) -> dict[str, float]:
    """Mean, median, p90, p99 and max reply length of the requests (tokens)."""
    lengths = np.array([r.num_output_tokens for r in requests], dtype=np.float64)
    p50, p90, p99 = np.percentile(lengths, [50, 90, 99])
    return {"mean": float(lengths.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
            "max": float(lengths.max())}


def save_json(data: object, path: Path) -> None:
    """Write JSON atomically (a temp file, then a rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)
