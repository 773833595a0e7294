"""Arrival processes: Poisson, Gamma (bursty) and a two-state Markov-modulated Poisson process (MMPP).

Each returns `num_requests` send times in seconds, the first at 0 (as vLLM's benchmark sends its first request
at once and then sleeps an inter-arrival gap). Times depend only on the process, its parameters and the seed,
so every queue policy in an experiment sees the same arrivals; each is one realisation drawn at unit rate and
divided by the rate, so a rate sweep compresses the same pattern rather than drawing a new one per rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jevserve.sim.errors import WorkloadError

ARRIVAL_PROCESSES = ("poisson", "gamma", "mmpp")


def _check(name: str, value: float, *, minimum: float = 0.0) -> None:
    if not value > minimum:
        raise WorkloadError(f"{name}={value!r}; expected a number > {minimum}")


def _times(gaps: np.ndarray) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if gaps.size else gaps


def poisson_arrivals(num_requests: int, rate_rps: float, seed: int) -> np.ndarray:
    """Poisson arrivals: exponential gaps with mean 1 / rate_rps."""
    _check("rate_rps", rate_rps)
    return _times(np.random.default_rng(seed).exponential(1.0 / rate_rps, size=num_requests))


def gamma_arrivals(num_requests: int, rate_rps: float, cv: float, seed: int) -> np.ndarray:
    """Gamma-distributed gaps with mean 1 / rate_rps and coefficient of variation cv (cv > 1 is burstier than
    Poisson, cv = 1 is Poisson); vLLM's `--burstiness` is 1 / cv**2."""
    _check("rate_rps", rate_rps)
    _check("cv", cv)
    shape = 1.0 / cv**2
    return _times(np.random.default_rng(seed).gamma(shape, 1.0 / (rate_rps * shape), size=num_requests))


def mmpp_arrivals(
    num_requests: int, rate_rps: float, seed: int, *, burst_ratio: float = 4.0, burst_share: float = 0.2,
    mean_phase_gaps: float = 100.0,
) -> np.ndarray:
    """Two-state Markov-modulated Poisson arrivals with long-run rate rate_rps: a burst state (rate x burst_ratio
    relative to the calm state) holding `burst_share` of the time, exponential phases averaging
    `mean_phase_gaps` mean inter-arrival gaps (so 100 gaps is 100 s at 1 req/s).

    The process is drawn once per seed at unit rate, rescaled so its realised mean gap is exactly 1, and divided
    by rate_rps: like Poisson and Gamma arrivals, a rate sweep scales one realisation, so the same requests
    arrive in the same pattern at every rate and only the time scale changes.
    """
    _check("rate_rps", rate_rps)
    if not burst_ratio >= 1:  # said as the bound it is (it read "> 0.999999999999")
        raise WorkloadError(f"burst_ratio={burst_ratio!r}; expected a number >= 1 (the burst state's rate over the "
                            "calm state's)")
    _check("mean_phase_gaps", mean_phase_gaps)
    if not 0 < burst_share < 1:
        raise WorkloadError(f"burst_share={burst_share!r}; expected a fraction in (0, 1)")
    calm_rate = 1.0 / (1 - burst_share + burst_share * burst_ratio)
    rates = (calm_rate, calm_rate * burst_ratio)
    # Phase means chosen so the burst state holds burst_share of the time and a calm+burst cycle lasts
    # 2 * mean_phase_gaps (in unit-rate time).
    means = (2 * mean_phase_gaps * (1 - burst_share), 2 * mean_phase_gaps * burst_share)
    rng = np.random.default_rng(seed)
    times: list[float] = []
    t, state = 0.0, 0
    while len(times) < num_requests:
        phase_end = t + rng.exponential(means[state])
        while len(times) < num_requests:
            t += rng.exponential(1.0 / rates[state])
            if t >= phase_end:
                t = phase_end  # memoryless: restart the clock of the next state at the phase boundary
                break
            times.append(t)
        state = 1 - state
    out = np.asarray(times) - times[0]
    if num_requests > 1 and out[-1] > 0:
        out *= (num_requests - 1) / out[-1]  # realised mean gap exactly 1 at unit rate
    return out / rate_rps


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """An arrival process and its parameters, as `--arrivals` names it: `poisson`, `gamma:CV`,
    `mmpp:BURST_RATIO:BURST_SHARE:MEAN_PHASE_GAPS` (defaults 4, 0.2, 100) or `trace` (the workload's own times)."""

    process: str = "poisson"
    cv: float = 2.0
    burst_ratio: float = 4.0
    burst_share: float = 0.2
    mean_phase_gaps: float = 100.0

    @classmethod
    def parse(cls, text: str, *, cv: float = 2.0) -> ArrivalSpec:
        """Read `text`; `cv` is the Gamma CV when `text` is a bare `gamma` (the older `--cv` option)."""
        name, *params = text.strip().split(":")
        accepted = ("poisson, gamma:CV, mmpp:BURST_RATIO:BURST_SHARE:MEAN_PHASE_GAPS (e.g. mmpp:4:0.2:100) "
                    "or trace")
        if name not in (*ARRIVAL_PROCESSES, "trace"):
            raise WorkloadError(f"unknown arrival process {text!r}; expected one of: {accepted}")
        limit = {"poisson": 0, "trace": 0, "gamma": 1, "mmpp": 3}[name]
        try:
            values = [float(p) for p in params]
        except ValueError:
            raise WorkloadError(f"arrivals {text!r}: parameters must be numbers; expected {accepted}") from None
        if len(values) > limit or not all(math.isfinite(v) for v in values):
            raise WorkloadError(f"arrivals {text!r}: expected {accepted}")
        if name == "gamma":
            spec = cls("gamma", cv=values[0] if values else cv)
        elif name == "mmpp":
            spec = cls("mmpp", **dict(zip(("burst_ratio", "burst_share", "mean_phase_gaps"), values, strict=False)))
        else:
            spec = cls(name)
        spec.times(2, 1.0, 0) if name != "trace" else None  # validate the parameters now, with their names
        return spec

    def times(self, num_requests: int, rate_rps: float, seed: int) -> np.ndarray:
        """Send times of `num_requests` requests at long-run rate `rate_rps`."""
        if self.process == "poisson":
            return poisson_arrivals(num_requests, rate_rps, seed)
        if self.process == "gamma":
            return gamma_arrivals(num_requests, rate_rps, self.cv, seed)
        if self.process == "mmpp":
            return mmpp_arrivals(num_requests, rate_rps, seed, burst_ratio=self.burst_ratio,
                                 burst_share=self.burst_share, mean_phase_gaps=self.mean_phase_gaps)
        raise WorkloadError("arrivals 'trace' take the workload's own times; there is nothing to generate")

    def __str__(self) -> str:
        if self.process == "gamma":
            return f"gamma:{self.cv:g}"
        if self.process == "mmpp":
            return f"mmpp:{self.burst_ratio:g}:{self.burst_share:g}:{self.mean_phase_gaps:g}"
        return self.process


def make_arrivals(process: str, num_requests: int, rate_rps: float, seed: int, *, cv: float = 2.0) -> np.ndarray:
    """Arrival times from a named process (`poisson`, `gamma` with cv, `mmpp`) or a spec (`gamma:2`,
    `mmpp:4:0.2:100`; see `ArrivalSpec`)."""
    if process.split(":")[0] not in ARRIVAL_PROCESSES:
        raise WorkloadError(
            f"unknown arrival process {process!r}; expected one of: {', '.join(ARRIVAL_PROCESSES)}")
    return ArrivalSpec.parse(process, cv=cv).times(num_requests, rate_rps, seed)
