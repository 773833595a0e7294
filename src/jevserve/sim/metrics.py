"""Serving metrics as vLLM's serving benchmark defines them, plus SLO attainment, goodput and starvation.

Definitions (vLLM `benchmarks/serve.py`, `calculate_metrics`): TTFT = first token - send time; E2EL = last token
- send time; TPOT = (E2EL - TTFT) / (output tokens - 1), over requests with more than one output token; ITL =
every gap between consecutive tokens of a request, pooled over requests; percentiles with np.percentile;
goodput = requests meeting every SLO given / benchmark duration. The send time is the request's arrival, so a
decision delay counts in TTFT as a client would see it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jevserve.sim.entities import Batch, SimRequest
from jevserve.sim.errors import EngineConfigError
from jevserve.sim.observer import Observer
from jevserve.sim.stats import batch_means_interval

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency targets in milliseconds; None leaves a metric unconstrained."""

    ttft_ms: float | None = 1000.0
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    def __post_init__(self) -> None:
        values = {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2el_ms": self.e2el_ms}
        if all(v is None for v in values.values()):
            raise ValueError("Slo: every target is None; set at least one of ttft_ms, tpot_ms, e2el_ms")
        for name, value in values.items():
            if value is not None and not value > 0:
                raise ValueError(f"Slo: {name}={value!r}; expected milliseconds > 0 or None")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request's latencies."""

    request_id: str
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    ttft_s: float
    e2el_s: float
    tpot_s: float | None  # None for one-token replies
    wait_s: float  # arrival to first admission into the running batch (queueing, decision delay included); NaN
    # when not seen (a load generator sees only the client's side)
    num_preemptions: int


def token_times_array(parts: list[float | np.ndarray]) -> np.ndarray:
    """A request's token times as one array, in order, from floats (single steps) and arrays (decode runs)."""
    # Runs of floats are packed into one array each: one small array per token was most of the cost of
    # finishing a request in runs with tens of thousands of single steps (preemption-heavy, long replies).
    chunks: list[np.ndarray] = []
    floats: list[float] = []
    for part in parts:
        if isinstance(part, np.ndarray):
            if floats:
                chunks.append(np.array(floats, dtype=np.float64))
                floats = []
            chunks.append(part.astype(np.float64, copy=False))
        else:
            floats.append(part)
    if floats:
        chunks.append(np.array(floats, dtype=np.float64))
    return np.concatenate(chunks) if chunks else np.empty(0)


class MetricsRecorder(Observer):
    """Collects finished requests and inter-token gaps; counts preemptions and steps."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.itls_s: list[np.ndarray] = []
        self.num_preemptions = 0
        self.num_steps = 0
        self.num_rejected = 0  # refused because they can never fit (vLLM's benchmark counts them as failed)
        self.first_rejection: str | None = None  # the first refusal's reason, to say why when nothing finished

    def on_preempt(self, request: SimRequest, now_s: float) -> None:
        """Count a preemption."""
        self.num_preemptions += 1

    def on_reject(self, request: SimRequest, now_s: float) -> None:
        """Count a refused request."""
        self.num_rejected += 1
        self.first_rejection = self.first_rejection or request.rejected

    def on_step(self, replica_id: int, batch: Batch, num_steps: int) -> None:
        """Count engine steps."""
        self.num_steps += num_steps

    def on_finish(self, request: SimRequest, now_s: float) -> None:
        """Turn a finished request into a record and keep its inter-token gaps."""
        times = token_times_array(request.token_times)
        arrival = request.spec.arrival_s
        ttft, e2el = request.first_token_s - arrival, now_s - arrival
        n_out = request.num_generated
        self.records.append(
            RequestRecord(
                request_id=request.spec.request_id,
                arrival_s=arrival,
                num_prompt_tokens=request.spec.num_prompt_tokens,
                num_output_tokens=n_out,
                ttft_s=ttft,
                e2el_s=e2el,
                tpot_s=(e2el - ttft) / (n_out - 1) if n_out > 1 else None,
                wait_s=request.first_admit_s - arrival,
                num_preemptions=request.num_preemptions,
            )
        )
        if times.size > 1:
            self.itls_s.append(np.diff(times))


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """The mean and percentiles of one latency over a run, in milliseconds (NaN when no request has it)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values_s: np.ndarray) -> LatencyStats:
        """The statistics of latencies given in seconds (np.percentile's default interpolation, as vLLM)."""
        if values_s.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        ms = values_s * 1000.0
        return cls(float(np.mean(ms)), *(float(np.percentile(ms, p)) for p in PERCENTILES))

    def as_dict(self) -> dict[str, float]:
        """{"mean", "p50", "p90", "p99"}: the shape of result files."""
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Aggregate serving metrics of one run: vLLM's benchmark metrics, SLO attainment, goodput and waits."""

    num_requests: int  # finished requests
    duration_s: float  # first arrival to last finish
    request_throughput: float  # finished requests per second
    output_throughput: float  # reply tokens per second
    ttft_ms: LatencyStats
    tpot_ms: LatencyStats  # over requests with more than one reply token
    itl_ms: LatencyStats  # every gap between consecutive tokens, pooled
    e2el_ms: LatencyStats
    slo_attainment: float  # share of requests meeting every SLO target
    goodput_rps: float  # requests meeting every SLO target per second (vLLM's goodput)
    max_wait_s: float  # longest arrival-to-first-admission
    long_wait_p999_s: float  # p99.9 of the waits of the 10% longest replies
    num_preemptions: int

    def as_dict(self) -> dict[str, object]:
        """The summary as JSON-ready data: latency statistics as nested {"mean", "p50", ...} objects."""
        out: dict[str, object] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = value.as_dict() if isinstance(value, LatencyStats) else value
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RunSummary:
        """A summary read back from `as_dict`'s data (extra keys are ignored)."""
        values = {name: LatencyStats(**data[name]) if name.endswith("_ms") else data[name]
                  for name in cls.__dataclass_fields__}
        return cls(**values)


def is_good(record: RequestRecord, slo: Slo) -> bool:
    """True when the request meets every target the SLO sets (vLLM's goodput rule)."""
    if slo.ttft_ms is not None and record.ttft_s * 1000.0 > slo.ttft_ms:
        return False
    if slo.tpot_ms is not None and record.tpot_s is not None and record.tpot_s * 1000.0 > slo.tpot_ms:
        return False
    return not (slo.e2el_ms is not None and record.e2el_s * 1000.0 > slo.e2el_ms)


def long_reply_wait(records: list[RequestRecord], percentile: float, share: float = 0.1) -> float:
    """A percentile of the waits of the `share` of requests with the longest replies (the ones a length-first
    order holds back; aging must bound their wait)."""
    lengths = np.array([r.num_output_tokens for r in records])
    cut = np.quantile(lengths, 1 - share)
    waits = np.array([r.wait_s for r in records])[lengths >= cut]
    return float(np.percentile(waits, percentile))


def summarize(records: list[RequestRecord], itls_s: list[np.ndarray], slo: Slo, num_refused: int = 0) -> RunSummary:
    """Aggregate metrics of one run: latency statistics (ms), throughput, SLO attainment, goodput, longest wait.
    `num_refused` requests that could never run count in SLO attainment as misses (vLLM's benchmark counts them as
    failed): a configuration does not meet an SLO by refusing the requests it cannot serve."""
    if not records:
        raise ValueError("summarize: no finished requests")
    start = min(r.arrival_s for r in records)
    duration = max(r.arrival_s + r.e2el_s for r in records) - start
    num_good = sum(is_good(r, slo) for r in records)
    tpots = np.array([r.tpot_s for r in records if r.tpot_s is not None])
    return RunSummary(
        num_requests=len(records),
        duration_s=duration,
        request_throughput=len(records) / duration,
        output_throughput=sum(r.num_output_tokens for r in records) / duration,
        ttft_ms=LatencyStats.of(np.array([r.ttft_s for r in records])),
        tpot_ms=LatencyStats.of(tpots),
        itl_ms=LatencyStats.of(np.concatenate(itls_s) if itls_s else np.empty(0)),
        e2el_ms=LatencyStats.of(np.array([r.e2el_s for r in records])),
        slo_attainment=num_good / (len(records) + num_refused),
        goodput_rps=num_good / duration,
        max_wait_s=float(np.max([r.wait_s for r in records])),
        long_wait_p999_s=long_reply_wait(records, 99.9),
        num_preemptions=sum(r.num_preemptions for r in records),
    )


def summarize_recorded(recorder: MetricsRecorder, slo: Slo) -> RunSummary:
    """`summarize` over what a run's recorder collected (`require_finished` first)."""
    require_finished(recorder)
    return summarize(recorder.records, recorder.itls_s, slo, num_refused=recorder.num_rejected)


def attainment_interval(recorder: MetricsRecorder, slo: Slo) -> tuple[float, float] | None:
    """A 95% interval for the run's SLO attainment, by batch means over its requests in arrival order (sim.stats);
    requests it refused count as misses, as `summarize` counts them. None for a run too short to cut in batches."""
    records = sorted(recorder.records, key=lambda r: r.arrival_s)
    found = batch_means_interval([is_good(r, slo) for r in records])
    if found is None:
        return None
    share = len(records) / (len(records) + recorder.num_rejected)
    return found[1] * share, found[2] * share


def require_finished(recorder: MetricsRecorder) -> None:
    """Refuse, in words, a run in which no request finished: an input error (every request larger than the KV cache,
    the only requests the simulator refuses), not a run to summarize."""
    if recorder.records:
        return
    if recorder.num_rejected == 0:
        raise EngineConfigError("no request finished: the workload has no requests")
    raise EngineConfigError(
        f"no request finished: all {recorder.num_rejected} requests need more KV blocks than the cache holds (e.g. "
        f"{recorder.first_rejection}); give more --num-kv-blocks, a profile with more memory or shorter requests")
