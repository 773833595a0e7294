"""A cluster: N engine replicas (each with its own profile) behind a router, on one event loop.

Requests are routed one at a time in arrival order. Before routing a request sent at t, the loop is run up to
just before t, so the snapshots show every step that ends before t, and the step ending exactly at t (if any) as
the step in flight; the routed `Arrival` then takes its usual place among the events at t (after step
completions, before scheduling), exactly as in a one-replica run. Each snapshot also carries what only the
router's caller knows: how many requests the replica was sent (`num_routed`) and which are still in their
decision delay (`in_transit`).

A replica's snapshot is reused while nothing has happened on it (no event touched it and no step of a decode
run in flight has ended since), which is most of the time when requests arrive faster than steps end.

For every request the forward TTFT estimate and the cheap queued-prefill estimate on the chosen replica are
recorded with the time each took, so estimator quality can be checked against the realized TTFT whatever the
router.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.serving.ttft_estimate import ReplicaModel, estimate_ttft, estimate_ttft_queued_prefill
from jevserve.serving.types import QueuePolicy, ReplicaState, Request, Router
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.events import Arrival
from jevserve.sim.loop import Simulator
from jevserve.sim.metrics import MetricsRecorder
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """One replica of the cluster: the model-on-GPU profile and the engine settings."""

    profile: Profile
    config: EngineConfig

    def model(self, policy: QueuePolicy, default_output_tokens: float) -> ReplicaModel:
        """What a router knows about this replica (the same step-time model the engine runs)."""
        return ReplicaModel(self.profile.step_time, self.config, policy, default_output_tokens)


@dataclass(frozen=True, slots=True)
class RoutedRecord:
    """One routed request: where it went, what the estimators said there, and what happened."""

    request_id: str
    replica_id: int
    arrival_s: float
    route_us: float  # wall time of the router's decision, snapshots excluded (microseconds)
    estimated_ttft_s: float  # forward-simulation estimate on the chosen replica (inf: never admitted)
    estimate_us: float  # wall time of that estimate (microseconds)
    queued_prefill_ttft_s: float  # the cheap estimate on the chosen replica
    queued_prefill_us: float
    realized_ttft_s: float  # first token - arrival, from the simulation
    num_running: int  # requests running on the chosen replica when it was routed
    num_waiting: int  # waiting or in transit there


@dataclass
class ClusterResult:
    """Everything a cluster run produced: per-request routing records and the shared metrics recorder."""

    records: list[RoutedRecord]
    metrics: MetricsRecorder
    replica_of: dict[str, int]  # request id -> replica id
    num_replicas: int


class _ChangeCounter(Observer):
    """Counts the events that change each replica, so an unchanged replica's snapshot can be reused."""

    def __init__(self, num_replicas: int) -> None:
        self.versions = [0] * num_replicas

    def _bump(self, request: SimRequest, now_s: float) -> None:
        self.versions[request.replica_id] += 1

    on_enqueue = on_admit = on_preempt = on_finish = _bump

    def on_step(self, replica_id: int, batch, num_steps: int) -> None:
        """A step (or decode run) ended on a replica."""
        self.versions[replica_id] += 1


class Cluster:
    """Replicas behind a router, all on one simulator; `run` sends a workload and runs it to the end."""

    def __init__(
        self,
        replicas: Sequence[ReplicaSpec],
        router: Router,
        policy: QueuePolicy,
        *,
        default_output_tokens: float,
        observers: Sequence[Observer] = (),
    ) -> None:
        if not replicas:
            raise ValueError("Cluster: replicas is empty; give at least one ReplicaSpec")
        self.metrics = MetricsRecorder()
        self._changes = _ChangeCounter(len(replicas))
        all_observers = (self.metrics, self._changes, *observers)
        self.engines = [Engine(spec.profile, policy, spec.config, replica_id=i, observers=all_observers)
                        for i, spec in enumerate(replicas)]
        self.models = [spec.model(policy, default_output_tokens) for spec in replicas]
        self.router = router
        self.sim = Simulator(self.engines, all_observers)
        self._num_routed = [0] * len(replicas)
        self._in_transit: list[deque[SimRequest]] = [deque() for _ in replicas]
        self._cache: list[tuple[tuple, ReplicaState] | None] = [None] * len(replicas)

    def _engine_state(self, engine: Engine, now_s: float) -> ReplicaState:
        """`engine.snapshot(now_s)`, reused (with the new instant) when nothing on the replica has changed."""
        batch = engine.batch
        position = None
        if batch is not None and batch.is_decode_run:
            ends = batch.ends_s
            position = (int(np.searchsorted(ends, now_s, side="left")), int(np.searchsorted(ends, now_s, "right")))
        key = (self._changes.versions[engine.replica_id], id(batch), position)
        cached = self._cache[engine.replica_id]
        if cached is not None and cached[0] == key:
            return dataclasses.replace(cached[1], now_s=now_s)
        state = engine.snapshot(now_s)
        self._cache[engine.replica_id] = (key, state)
        return state

    def _snapshots(self, now_s: float) -> list[ReplicaState]:
        states = []
        for engine, routed, transit in zip(self.engines, self._num_routed, self._in_transit, strict=True):
            while transit and transit[0].enqueue_s is not None:
                transit.popleft()  # queued by now (decision delays are equal, so they leave in order)
            states.append(dataclasses.replace(self._engine_state(engine, now_s), num_routed=routed,
                                              in_transit=tuple(r.spec for r in transit)))
        return states

    def route_one(self, entity: SimRequest) -> tuple[int, dict]:
        """Route one request at its arrival time: run the loop up to then, decide, record the estimates."""
        request: Request = entity.spec
        t = request.arrival_s
        self.sim.run(math.nextafter(t, -math.inf))
        states = self._snapshots(t)
        start = time.perf_counter()
        decision = self.router.route(request, states)
        route_us = (time.perf_counter() - start) * 1e6
        chosen, model = states[decision.replica_id], self.models[decision.replica_id]
        start = time.perf_counter()
        estimate = estimate_ttft(request, chosen, model)
        middle = time.perf_counter()
        cheap = estimate_ttft_queued_prefill(request, chosen, model)
        end = time.perf_counter()
        engine = self.engines[decision.replica_id]
        reason = engine.check_fits(entity)
        if reason is not None:
            engine.reject(entity, reason, t)  # refused on its own, as vLLM refuses it; the run goes on
        else:
            self.sim.push(Arrival(t, decision.replica_id, entity))
            self._num_routed[decision.replica_id] += 1
            self._in_transit[decision.replica_id].append(entity)
        return decision.replica_id, {
            "route_us": route_us, "estimated_ttft_s": estimate, "estimate_us": (middle - start) * 1e6,
            "queued_prefill_ttft_s": cheap, "queued_prefill_us": (end - middle) * 1e6,
            "num_running": len(chosen.running), "num_waiting": len(chosen.waiting) + len(chosen.in_transit),
        }

    def run(self, requests: Sequence[Request], *, progress=None) -> ClusterResult:
        """Route every request (arrival_s set) in arrival order and run until all finish."""
        entities = sorted((SimRequest(r) for r in requests), key=lambda e: (e.spec.arrival_s, e.spec.request_id))
        routed = []
        for entity in entities:
            routed.append(self.route_one(entity))
            if progress is not None:
                progress.update()
        self.sim.run()
        records, replica_of = [], {}
        for entity, (replica_id, info) in zip(entities, routed, strict=True):
            if entity.rejected is not None:
                continue  # counted by the metrics recorder (num_rejected)
            if entity.first_token_s is None:
                raise AssertionError(f"request {entity.spec.request_id!r} never got a first token")
            replica_of[entity.spec.request_id] = replica_id
            records.append(RoutedRecord(entity.spec.request_id, replica_id, entity.spec.arrival_s,
                                        realized_ttft_s=entity.first_token_s - entity.spec.arrival_s, **info))
        return ClusterResult(records, self.metrics, replica_of, len(self.engines))
