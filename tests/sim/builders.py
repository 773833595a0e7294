"""Builders for simulator tests: a profile with round coefficients, requests and a recording observer."""

from __future__ import annotations

from jevserve.serving import Request
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile
from jevserve.sim.step_time import StepTimeModel


def make_profile(constant_us: float = 1000.0, prefill_us: float = 0.0, decode_us: float = 0.0,
                 context_us: float = 0.0, pairs_us: float = 0.0) -> Profile:
    """A profile with the given step-time coefficients and a large KV cache."""
    return Profile(
        name="test", gpu="test-gpu", model="test-model", sources=("test builder",),
        step_time=StepTimeModel(constant_us, prefill_us, decode_us, context_us, pairs_us),
        gpu_memory_gib=80.0, gpu_memory_utilization=0.9, weights_gib=16.0, non_kv_reserve_gib=0.0,
        num_layers=36, num_kv_heads=8, head_dim=128, kv_dtype_bytes=2,
    )


def make_requests(n: int, *, prompt_len: int = 128, output_len: int = 16, gap_s: float = 0.0) -> list[Request]:
    """`n` identical requests sent `gap_s` apart."""
    return [Request(f"r{i}", i * gap_s, prompt_len, output_len) for i in range(n)]


class EventLog(Observer):
    """Records (event, request id, time) for every request-level hook."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []

    def on_arrival(self, request, now_s):
        self.events.append(("arrival", request.spec.request_id, round(now_s, 9)))

    def on_enqueue(self, request, now_s):
        self.events.append(("enqueue", request.spec.request_id, round(now_s, 9)))

    def on_admit(self, request, now_s):
        self.events.append(("admit", request.spec.request_id, round(now_s, 9)))

    def on_preempt(self, request, now_s):
        self.events.append(("preempt", request.spec.request_id, round(now_s, 9)))

    def on_finish(self, request, now_s):
        self.events.append(("finish", request.spec.request_id, round(now_s, 9)))


def run_under_kv_pressure(config, checker):
    """200 requests of 5-300 prompt and 1-300 reply tokens, 2 ms apart, through one engine under `config` with
    shortest-true-length-first and `checker` observing (its `engine` set); returns (engine, entities) after the run.
    With a small KV cache it preempts often."""
    from jevserve.serving import make_queue_policy
    from jevserve.sim.engine import Engine
    from jevserve.sim.entities import SimRequest
    from jevserve.sim.events import Arrival
    from jevserve.sim.loop import Simulator
    from jevserve.sim.workloads.synthetic import synthetic_requests

    requests = synthetic_requests(200, "uniform:5:300", "uniform:1:300", seed=7)
    requests = [Request(r.request_id, i * 0.002, r.num_prompt_tokens, r.num_output_tokens)
                for i, r in enumerate(requests)]
    engine = Engine(make_profile(decode_us=50), make_queue_policy("tlf"), config, observers=(checker,))
    checker.engine = engine
    sim = Simulator([engine], (checker,))
    entities = [SimRequest(r) for r in requests]
    for entity in entities:
        sim.push(Arrival(entity.spec.arrival_s, 0, entity))
    sim.run()
    return engine, entities
