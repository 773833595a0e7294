"""Arrival processes: Poisson, Gamma (bursty) and a two-state Markov-modulated Poisson process (MMPP).

Each returns `num_requests` send times in seconds, the first at 0 (as vLLM's benchmark sends its first request
at once and then sleeps an inter-arrival gap). Times depend only on the process, its parameters and the seed,
so every queue policy in an experiment sees the same arrivals.
"""

from __future__ import annotations

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
    num_requests: int, rate_rps: float, seed: int, *, burst_ratio: float = 4.0, mean_phase_s: float = 60.0,
    burst_share: float = 0.2,
) -> np.ndarray:
    """Two-state MMPP with long-run rate rate_rps: a burst state (rate x burst_ratio relative to the calm state)
    occupying `burst_share` of the time, with exponential phase lengths averaging mean_phase_s overall."""
    _check("rate_rps", rate_rps)
    _check("burst_ratio", burst_ratio, minimum=1.0 - 1e-12)
    _check("mean_phase_s", mean_phase_s)
    if not 0 < burst_share < 1:
        raise WorkloadError(f"burst_share={burst_share!r}; expected a fraction in (0, 1)")
    calm_rate = rate_rps / (1 - burst_share + burst_share * burst_ratio)
    rates = (calm_rate, calm_rate * burst_ratio)
    # Phase means chosen so the burst state holds burst_share of the time and a calm+burst cycle lasts
    # 2 * mean_phase_s.
    means = (2 * mean_phase_s * (1 - burst_share), 2 * mean_phase_s * burst_share)
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
    out = np.asarray(times)
    return out - out[0]


def make_arrivals(process: str, num_requests: int, rate_rps: float, seed: int, *, cv: float = 2.0) -> np.ndarray:
    """Arrival times from a named process (`poisson`, `gamma` with cv, `mmpp`)."""
    if process == "poisson":
        return poisson_arrivals(num_requests, rate_rps, seed)
    if process == "gamma":
        return gamma_arrivals(num_requests, rate_rps, cv, seed)
    if process == "mmpp":
        return mmpp_arrivals(num_requests, rate_rps, seed)
    raise WorkloadError(f"unknown arrival process {process!r}; expected one of: {', '.join(ARRIVAL_PROCESSES)}")
