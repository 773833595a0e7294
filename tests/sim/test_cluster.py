import dataclasses
import math
import random

import pytest

from jevserve.serving import Request, estimate_ttft, make_queue_policy, make_router
from jevserve.sim.cluster import Cluster, ReplicaSpec
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.events import Arrival
from jevserve.sim.loop import Simulator
from jevserve.sim.run import simulate
from tests.sim.builders import make_profile


def make_workload(seed: int, n: int = 40, *, rate: float = 50.0, predicted: bool = True) -> list[Request]:
    """`n` requests with Poisson arrivals, random sizes and (optionally) exact predicted reply lengths."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        num_output = rng.randint(1, 80)
        out.append(Request(f"r{i}", t, rng.randint(5, 300), num_output, float(num_output) if predicted else None))
    return out


EXACT_PROFILE = make_profile(constant_us=2000, prefill_us=5, decode_us=20, context_us=0.05, pairs_us=0.001)


def estimate_and_realize_last(requests, config, policy, profile=EXACT_PROFILE, *, observe=None):
    """Run every request but the last, estimate the last one's TTFT from a snapshot, then send it and run;
    `observe(snapshot)` sees the snapshot the estimate reads."""
    engine = Engine(profile, policy, config)
    sim = Simulator([engine])
    entities = [SimRequest(r) for r in requests]
    for e in entities[:-1]:
        sim.push(Arrival(e.spec.arrival_s, 0, e))
    last = entities[-1]
    t = last.spec.arrival_s
    sim.run(math.nextafter(t, -math.inf))
    in_transit = tuple(e.spec for e in entities[:-1] if e.enqueue_s is None)
    state = dataclasses.replace(engine.snapshot(t), in_transit=in_transit)
    if observe is not None:
        observe(state)
    model = ReplicaSpec(profile, config).model(policy, 256.0)
    estimate = estimate_ttft(last.spec, state, model)
    sim.push(Arrival(t, 0, last))
    sim.run()
    return estimate, last.first_token_s - t


CONFIGS = {
    "vllm-defaults": EngineConfig(),
    "batch-cap": EngineConfig(max_num_seqs=4),
    "small-budget": EngineConfig(max_num_seqs=6, max_num_batched_tokens=256),
    "kv-tight-preempting": EngineConfig(num_kv_blocks=60, max_num_seqs=8),
    "kv-tight-chunk-admission": EngineConfig(num_kv_blocks=60, max_num_seqs=8, kv_admission="chunk"),
    "kv-tight-no-hol": EngineConfig(num_kv_blocks=60, max_num_seqs=8, head_of_line_blocking=False),
}
POLICIES = {
    "fcfs": {"name": "fcfs"},
    "spf+aging": {"name": "spf", "aging_s": 0.2},
    "plf+delay": {"name": "plf", "decision_delay_s": 0.01},
}


@pytest.mark.parametrize("policy_name", POLICIES)
@pytest.mark.parametrize("config_name", CONFIGS)
def test_estimate_equals_realized_ttft_when_nothing_else_arrives_and_the_step_model_is_exact(config_name,
                                                                                              policy_name):
    options = dict(POLICIES[policy_name])
    policy = make_queue_policy(options.pop("name"), **options)
    for seed in range(8):
        estimate, realized = estimate_and_realize_last(make_workload(seed), CONFIGS[config_name], policy)
        assert estimate == pytest.approx(realized, rel=1e-9, abs=1e-12), f"seed {seed}"


def test_the_exactness_scenarios_include_queueing_and_preemption():
    # Guards the test above against scenarios too easy to prove anything: some must queue and preempt.
    from jevserve.sim.metrics import MetricsRecorder

    policy = make_queue_policy("fcfs")
    recorder = MetricsRecorder()
    engine = Engine(EXACT_PROFILE, policy, CONFIGS["kv-tight-preempting"], observers=(recorder,))
    sim = Simulator([engine], (recorder,))
    for r in make_workload(0):
        sim.push(Arrival(r.arrival_s, 0, SimRequest(r)))
    sim.run()
    assert recorder.num_preemptions > 0
    assert max(rec.wait_s for rec in recorder.records) > 0.05


def make_cluster(router: str, profiles, config=None, policy=None):
    config = config or EngineConfig()
    policy = policy or make_queue_policy("fcfs")
    specs = [ReplicaSpec(p, config) for p in profiles]
    models = [s.model(policy, 256.0) for s in specs]
    return Cluster(specs, make_router(router, models=models), policy, default_output_tokens=256.0)


def test_a_one_replica_cluster_reproduces_the_single_replica_simulation():
    requests = make_workload(3, 60, rate=80)
    config = EngineConfig(max_num_seqs=4)
    result = make_cluster("latency", [EXACT_PROFILE], config).run(requests)
    entities, _ = simulate(requests, EXACT_PROFILE, make_queue_policy("fcfs"), config)
    single = {e.spec.request_id: e.first_token_s - e.spec.arrival_s for e in entities}
    assert {r.request_id: r.realized_ttft_s for r in result.records} == pytest.approx(single, rel=1e-12)


def test_round_robin_sends_requests_in_turn():
    result = make_cluster("rr", [EXACT_PROFILE] * 3).run(make_workload(1, 9))
    assert [r.replica_id for r in result.records] == [0, 1, 2] * 3


def test_cluster_records_exact_estimates_with_exact_predictions_at_low_load():
    # At a rate where requests rarely overlap, nothing arrives between routing and the first token.
    result = make_cluster("latency", [EXACT_PROFILE] * 2).run(make_workload(2, 30, rate=5))
    for r in result.records:
        assert r.estimated_ttft_s == pytest.approx(r.realized_ttft_s, rel=1e-9)
        assert r.estimate_us > 0 and r.queued_prefill_us > 0


def test_latency_router_sends_more_work_to_the_faster_replica_and_cuts_the_tail():
    slow = make_profile(constant_us=8000, prefill_us=20, decode_us=40)
    fast = make_profile(constant_us=2000, prefill_us=5, decode_us=10)
    requests = make_workload(4, 200, rate=120)
    config = EngineConfig(max_num_seqs=4)
    by_router = {name: make_cluster(name, [slow, fast], config).run(requests) for name in ("rr", "latency")}
    share_fast = {name: sum(r.replica_id == 1 for r in res.records) / len(res.records)
                  for name, res in by_router.items()}
    p99 = {name: sorted(r.realized_ttft_s for r in res.records)[int(0.99 * len(res.records))]
           for name, res in by_router.items()}
    assert share_fast["rr"] == 0.5 and share_fast["latency"] > 0.6
    assert p99["latency"] < p99["rr"]


def test_requests_in_their_decision_delay_show_as_in_transit():
    policy = make_queue_policy("plf", decision_delay_s=0.5)
    cluster = make_cluster("jsq", [EXACT_PROFILE] * 2, policy=policy)
    requests = [Request(f"r{i}", 0.01 * i, 10, 5, 5.0) for i in range(3)]
    result = cluster.run(requests)
    # Without in-transit counts, every request would look like it joins an empty replica 0.
    assert [r.replica_id for r in result.records] == [0, 1, 0]
    assert [r.num_waiting for r in result.records] == [0, 0, 1]


def test_snapshot_reports_the_step_in_flight_not_the_whole_decode_run():
    # One request decoding alone: 1 ms steps, so at 10.5 ms the step in flight ends at 11 ms.
    engine = Engine(make_profile(constant_us=1000), make_queue_policy("fcfs"), EngineConfig())
    sim = Simulator([engine])
    sim.push(Arrival(0.0, 0, SimRequest(Request("r", 0.0, 10, 50))))
    sim.run(0.0105)
    state = engine.snapshot(0.0105)
    (r,) = state.running
    assert engine.batch.is_decode_run and engine.batch.end_s > 0.02
    assert state.busy_until_s == pytest.approx(0.011)
    assert (r.num_generated_tokens, r.num_scheduled_tokens) == (10, 1)


def test_snapshot_of_a_prefill_step_lists_the_chunk_it_computes():
    engine = Engine(make_profile(constant_us=1000, prefill_us=10), make_queue_policy("fcfs"),
                    EngineConfig(max_num_seqs=64, max_num_batched_tokens=64))
    sim = Simulator([engine])
    sim.push(Arrival(0.0, 0, SimRequest(Request("r", 0.0, 100, 5))))
    sim.run(0.0001)
    (r,) = engine.snapshot(0.0001).running
    assert (r.num_computed_tokens, r.num_scheduled_tokens) == (0, 64)


def test_the_estimate_stays_exact_where_a_roofline_floor_sets_the_step_times():
    from jevserve.sim.roofline import Roofline

    # 200 us of compute per token: from about 12 decoding requests on, the floor is slower than the fit.
    roof = Roofline(peak_flops=1e15, memory_bandwidth=1e12, weight_bytes=1e9, flops_per_token=2e11,
                    kv_bytes_per_token=1e5, attention_flops_per_pair=1e6)
    profile = dataclasses.replace(EXACT_PROFILE, step_time=dataclasses.replace(EXACT_PROFILE.step_time, roofline=roof))
    policy = make_queue_policy("fcfs")
    running = []
    for seed in range(4):
        estimate, realized = estimate_and_realize_last(
            make_workload(seed, 120, rate=600), EngineConfig(max_num_seqs=48), policy, profile,
            observe=lambda state: running.append(len(state.running)))
        assert estimate == pytest.approx(realized, rel=1e-9), f"seed {seed}"
    busiest = max(running)
    assert busiest > 12  # the floor set the step times of the replica the estimates replayed
