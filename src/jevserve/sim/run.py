"""Run a workload through one simulated replica and summarise it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.serving.types import QueuePolicy, Request
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.errors import WorkloadError
from jevserve.sim.events import Arrival
from jevserve.sim.loop import Simulator
from jevserve.sim.metrics import MetricsRecorder, RunSummary, Slo, summarize_recorded
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile
from jevserve.sim.steady import KeepUp, keep_up


def with_arrivals(requests: Sequence[Request], arrivals_s: np.ndarray) -> list[Request]:
    """The requests with arrival times set, the i-th request sent at the i-th time."""
    if len(requests) != len(arrivals_s):
        raise WorkloadError(f"{len(requests)} requests but {len(arrivals_s)} arrival times; expected as many")
    return [dataclasses.replace(r, arrival_s=float(t)) for r, t in zip(requests, arrivals_s, strict=True)]


def simulate(
    requests: Sequence[Request],
    profile: Profile,
    policy: QueuePolicy,
    config: EngineConfig | None = None,
    *,
    observers: Sequence[Observer] = (),
) -> tuple[list[SimRequest], MetricsRecorder]:
    """Send `requests` (arrival_s set) to one replica and run until all finish; returns the entities and metrics."""
    recorder = MetricsRecorder()
    all_observers = (recorder, *observers)
    engine = Engine(profile, policy, config, observers=all_observers)
    sim = Simulator([engine], all_observers)
    entities = [SimRequest(r) for r in requests]
    for entity in entities:
        sim.push(Arrival(entity.spec.arrival_s, 0, entity))
    sim.run()
    unfinished = [e.spec.request_id for e in entities if e.finish_s is None and e.rejected is None]
    assert not unfinished, f"requests left unfinished: {unfinished[:5]}"
    return entities, recorder


@dataclass(frozen=True, slots=True)
class SimulationSummary:
    """One replica's run: its serving metrics, engine counts and whether it kept up (`jevserve.sim.steady`)."""

    metrics: RunSummary
    num_steps: int  # engine steps, every step of a decode run counted
    num_rejected: int  # requests that could never fit in the KV cache
    keep_up: KeepUp

    def as_dict(self) -> dict[str, object]:
        """JSON-ready data: the metrics' fields, the counts and the verdict's fields, side by side."""
        return {**self.metrics.as_dict(), "num_steps": self.num_steps, "num_rejected": self.num_rejected,
                **self.keep_up.as_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> SimulationSummary:
        """A summary read back from `as_dict`'s data."""
        return cls(RunSummary.from_dict(data), data["num_steps"], data["num_rejected"], KeepUp.from_dict(data))


def simulate_summary(
    requests: Sequence[Request], profile: Profile, policy: QueuePolicy, config: EngineConfig | None, slo: Slo
) -> SimulationSummary:
    """`simulate` and `summarize` in one call, with the steady-state verdict (`jevserve.sim.steady`)."""
    _, recorder = simulate(requests, profile, policy, config)
    return SimulationSummary(summarize_recorded(recorder, slo), recorder.num_steps, recorder.num_rejected,
                             keep_up(recorder.records))
