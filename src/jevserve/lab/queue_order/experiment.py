"""The queue-order experiment: FCFS vs shortest-prompt vs predicted-length vs true-length first, with and
without aging (a fixed threshold, or one relative to each request's own expected time), on 2,000 ShareGPT
requests over a range of arrival rates, on one simulated replica.

Goodput is steady-state goodput: the highest rate with >= 90% SLO attainment (DistServe's definition) among the
rates at which the engine keeps up (`jevserve.sim.steady`: the backlog does not grow over the second half of the
run). One knob of the scenario (`scenarios.py`) is calibrated before the sweep so that FCFS's steady-state goodput
matches the published 1.13 req/s; the rest of the published table is then a prediction, not a fit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.stats import kendalltau

from jevserve.lab.queue_order.scenarios import KNOBS, Scenario
from jevserve.lab.queue_order.sweep import Cell, PolicyRun, PolicySpec, SweepContext, run_cells
from jevserve.serving.types import Request
from jevserve.sim.engine import EngineConfig
from jevserve.sim.errors import WorkloadError
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import Profile
from jevserve.sim.stats import max_rate_meeting, mean_interval, steady_goodput
from jevserve.sim.workloads.predictions import attach_predictions, noisy_oracle, read_predictions
from jevserve.sim.workloads.sharegpt import sample_sharegpt

# Below the published range too: steady-state goodput needs the rates at which the engine still keeps up.
DEFAULT_RATES = (0.90, 1.00, 1.05, 1.10, 1.15, 1.20, 1.30, 1.42, 1.54)
OWN_TIME_AGING = ("plf-edf", "plf-relage")  # predicted length with aging relative to the own expected time
ATTAINMENT_TARGET = 0.9
# Per-rate metrics the report uses: name -> how to read it from one run's summary.
RATE_METRICS: dict[str, Callable[[PolicyRun], float]] = {
    "slo_attainment": lambda r: r.metrics.slo_attainment,
    "ttft_p90_s": lambda r: r.metrics.ttft_ms.p90 / 1000,
    "ttft_p99_s": lambda r: r.metrics.ttft_ms.p99 / 1000,
    "tpot_mean_ms": lambda r: r.metrics.tpot_ms.mean,
    "e2el_p99_s": lambda r: r.metrics.e2el_ms.p99 / 1000,
    "max_wait_s": lambda r: r.metrics.max_wait_s,
    "vllm_goodput_rps": lambda r: r.metrics.goodput_rps,
    "num_preemptions": lambda r: r.metrics.num_preemptions,
    "keeps_up": lambda r: float(r.keep_up.keeps_up),
    "completion_ratio": lambda r: r.keep_up.completion_ratio,
    "long_wait_p999_s": lambda r: r.metrics.long_wait_p999_s,
    "keep_up_margin": lambda r: r.keep_up.margin,
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
    arrivals: str = "poisson"  # an `ArrivalSpec` text: poisson, gamma:CV, mmpp:...
    doublings: int = 0  # run length: the sampled requests, doubled this many times (see `doubled`)

    def policies(self) -> list[PolicySpec]:
        """The four orders without aging; predicted length also with the fixed-threshold aging and with the two
        own-time aging schemes (every order that reads predictions waits for them). FCFS with aging is FCFS."""
        delay = self.decision_delay_s
        return [PolicySpec("fcfs"), PolicySpec("spf"), PolicySpec("plf", None, delay),
                PolicySpec("plf", self.aging_s, delay), *(PolicySpec(n, None, delay) for n in OWN_TIME_AGING),
                PolicySpec("tlf")]


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
    context = SweepContext(tuple(requests), profile, setup.config, setup.slo, setup.arrivals)
    for _ in range(setup.doublings):
        context = doubled(context)
    return context, source


def doubled(context: SweepContext) -> SweepContext:
    """The same experiment run twice as long: the requests, then the same requests again in another order
    (ids suffixed `#2`), so the arrival process continues with the same length distribution."""
    second = np.random.default_rng(12345).permutation(len(context.requests))
    extra = tuple(dataclasses.replace(context.requests[i], request_id=f"{context.requests[i].request_id}#2")
                  for i in second)
    return dataclasses.replace(context, requests=context.requests + extra)


def meets(rows: Sequence[PolicyRun]) -> tuple[float, bool]:
    """Mean SLO attainment over seeds, and whether every seed keeps up."""
    return float(np.mean([r.metrics.slo_attainment for r in rows])), all(r.keep_up.keeps_up for r in rows)


def worst_margin(rows: Sequence[PolicyRun]) -> float:
    """The smallest keep-up margin over seeds (>= 0 exactly when every seed keeps up)."""
    return float(min(r.keep_up.margin for r in rows))


def fcfs_goodput(context: SweepContext, setup: QueueOrderSetup, jobs: int | None) -> float:
    """FCFS's steady-state goodput over the setup's rates, from attainment averaged over seeds.

    Rates run in increasing order and stop at the first that misses the target or falls behind: the goodput only
    depends on the rates up to there, and the rates above are the slowest to simulate.
    """
    attainment: list[float] = []
    kept: list[bool] = []
    margins: list[float] = []
    for rate in setup.rates:
        rows = run_cells([Cell(PolicySpec("fcfs"), rate, s) for s in setup.seeds], context, jobs=jobs)
        mean, keeps = meets(rows)
        attainment.append(mean)
        kept.append(keeps)
        margins.append(worst_margin(rows))
        if mean < ATTAINMENT_TARGET or not keeps:
            break
    rate, qualifier = steady_goodput(setup.rates[: len(attainment)], attainment, kept, ATTAINMENT_TARGET, margins)
    # Outside the sweep, push the value past the ends so the root finder sees the right sign.
    return rate - 1.0 if qualifier == "<" else rate + 1.0 if qualifier == ">=" else rate


def _said(goodput: float, rates: Sequence[float]) -> str:
    """A goodput for the calibration's log; the values fcfs_goodput pushes past the sweep's ends said as such (the
    log printed "-0.100 req/s")."""
    if goodput < rates[0]:
        return f"below the sweep (the SLO is missed at its lowest rate, {rates[0]:g} req/s)"
    if goodput > rates[-1]:
        return f"above the sweep (the SLO is met at its highest rate, {rates[-1]:g} req/s)"
    return f"{goodput:.3f} req/s"


def calibrate_knob(setup: QueueOrderSetup, jobs: int | None, log: Callable[[str], None] = print) -> float:
    """The knob value at which FCFS goodput equals the target (Brent's method in the scenario's bracket)."""
    scenario, base = setup.scenario, base_requests(setup)
    seen: dict[float, float] = {}

    def gap(value: float) -> float:
        if value not in seen:
            profile, requests = scenario.apply(value, setup.profile, base)
            context = SweepContext(tuple(requests), profile, setup.config, setup.slo, setup.arrivals)
            for _ in range(setup.doublings):
                context = doubled(context)
            goodput = fcfs_goodput(context, setup, jobs)
            log(f"  {KNOBS[scenario.knob]} {value:.4f}: FCFS goodput {_said(goodput, setup.rates)}")
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


def aggregate(rows: list[PolicyRun], setup: QueueOrderSetup) -> dict[str, dict]:
    """Per policy: per-rate means, 95% intervals and per-seed values; steady-state goodput with its interval, and
    the latency-only (DistServe) goodput for comparison."""
    out: dict[str, dict] = {}
    for spec in setup.policies():
        mine = [r for r in rows if r.policy == spec.label]
        per_rate = []
        for rate in setup.rates:
            at = sorted((r for r in mine if r.rate_rps == rate), key=lambda r: r.seed)
            entry: dict[str, object] = {"rate_rps": rate, "by_seed": {}}
            for name, get in RATE_METRICS.items():
                values = [get(r) for r in at]
                entry[name] = mean_interval(values)
                entry["by_seed"][name] = values
            per_rate.append(entry)
        by_seed = []
        for seed in setup.seeds:
            runs = [next(r for r in mine if r.rate_rps == x and r.seed == seed) for x in setup.rates]
            by_seed.append(steady_goodput(setup.rates, [r.metrics.slo_attainment for r in runs],
                                          [r.keep_up.keeps_up for r in runs], ATTAINMENT_TARGET,
                                          [r.keep_up.margin for r in runs]))
        mean_att = [e["slo_attainment"][0] for e in per_rate]
        all_keep_up = [all(e["by_seed"]["keeps_up"]) for e in per_rate]
        margins = [min(e["by_seed"]["keep_up_margin"]) for e in per_rate]
        out[spec.label] = {
            "per_rate": per_rate,
            "goodput_rps": steady_goodput(setup.rates, mean_att, all_keep_up, ATTAINMENT_TARGET, margins),
            "latency_only_goodput_rps": max_rate_meeting(setup.rates, mean_att, ATTAINMENT_TARGET),
            "goodput_by_seed": by_seed,
            "goodput_interval": mean_interval([g for g, _ in by_seed]),
        }
    return out


def run_length_check(
    agg: dict[str, dict], context: SweepContext, setup: QueueOrderSetup, *, results_path: Path | None,
    jobs: int | None,
) -> list[dict]:
    """Rerun each policy at the two rates around its goodput (the last rate counted and the next) with the run
    twice as long (`doubled`), every seed; a rate's verdict (>= 90% attainment and keeping up) should not change."""
    wanted: list[tuple[PolicySpec, float]] = []
    for spec in setup.policies():
        verdicts = [e["slo_attainment"][0] >= ATTAINMENT_TARGET and all(e["by_seed"]["keeps_up"])
                    for e in agg[spec.label]["per_rate"]]
        first_bad = verdicts.index(False) if False in verdicts else len(verdicts)
        wanted += [(spec, setup.rates[i]) for i in (first_bad - 1, first_bad) if 0 <= i < len(setup.rates)]
    long_context = doubled(context)
    cells = [Cell(spec, rate, seed) for spec, rate in wanted for seed in setup.seeds]
    rows = run_cells(cells, long_context, results_path=results_path, jobs=jobs)
    out = []
    for spec, rate in wanted:
        entry = next(e for e in agg[spec.label]["per_rate"] if e["rate_rps"] == rate)
        short = (entry["slo_attainment"][0], all(entry["by_seed"]["keeps_up"]))
        long = meets([r for r in rows if r.policy == spec.label and r.rate_rps == rate])
        out.append({"policy": spec.label, "rate_rps": rate, "requests": len(context.requests),
                    "attainment": short[0], "keeps_up": short[1],
                    "meets": short[0] >= ATTAINMENT_TARGET and short[1],
                    "attainment_2x": long[0], "keeps_up_2x": long[1],
                    "meets_2x": long[0] >= ATTAINMENT_TARGET and long[1]})
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
