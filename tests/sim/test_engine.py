import numpy as np
import pytest

from jevserve.serving import Request, SchedulerConfigError, make_queue_policy
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.errors import EngineConfigError
from jevserve.sim.events import Arrival
from jevserve.sim.loop import Simulator
from jevserve.sim.observer import Observer
from jevserve.sim.run import simulate
from jevserve.sim.workloads.synthetic import synthetic_requests
from tests.sim.builders import EventLog, make_profile, make_requests, run_under_kv_pressure


def run(requests, *, policy="fcfs", config=None, profile=None, observers=(), **policy_kwargs):
    return simulate(requests, profile or make_profile(), make_queue_policy(policy, **policy_kwargs),
                    config or EngineConfig(), observers=observers)


def test_three_request_scenario_has_the_exact_event_order_under_spf():
    requests = [Request("A", 0.0, 10, 2), Request("B", 0.0005, 10, 2), Request("C", 0.0006, 5, 1)]
    log = EventLog()
    run(requests, policy="spf", config=EngineConfig(max_num_seqs=1), observers=(log,))
    assert log.events == [
        ("arrival", "A", 0.0), ("enqueue", "A", 0.0), ("admit", "A", 0.0),
        ("arrival", "B", 0.0005), ("enqueue", "B", 0.0005),
        ("arrival", "C", 0.0006), ("enqueue", "C", 0.0006),
        ("finish", "A", 0.002), ("admit", "C", 0.002),  # C's shorter prompt goes before B
        ("finish", "C", 0.003), ("admit", "B", 0.003),
        ("finish", "B", 0.005),
    ]


def test_three_request_scenario_admits_in_arrival_order_under_fcfs():
    requests = [Request("A", 0.0, 10, 2), Request("B", 0.0005, 10, 2), Request("C", 0.0006, 5, 1)]
    log = EventLog()
    run(requests, policy="fcfs", config=EngineConfig(max_num_seqs=1), observers=(log,))
    assert [e[1] for e in log.events if e[0] == "admit"] == ["A", "B", "C"]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_single_request_timeline_equals_the_step_model_sum(fast_forward):
    profile = make_profile(constant_us=1000, prefill_us=10, decode_us=5, context_us=0.1, pairs_us=0.001)
    entities, recorder = run([Request("r", 0.0, 100, 4)], profile=profile,
                             config=EngineConfig(fast_forward=fast_forward))
    st = profile.step_time
    prefill = st.step_s(100, 0, 0, 100 * 100)
    decodes = [st.step_s(0, 1, 100 + k) for k in (1, 2, 3)]  # context = prompt + tokens generated so far
    (r,) = entities
    assert r.first_token_s == pytest.approx(prefill, rel=1e-12)
    assert r.finish_s == pytest.approx(prefill + sum(decodes), rel=1e-12)
    assert recorder.records[0].tpot_s == pytest.approx(sum(decodes) / 3, rel=1e-12)


def test_chunked_prefill_splits_a_long_prompt_over_the_token_budget():
    profile = make_profile(constant_us=1000, prefill_us=10)
    entities, recorder = run([Request("r", 0.0, 100, 1)], profile=profile,
                             config=EngineConfig(max_num_seqs=64, max_num_batched_tokens=64))
    assert recorder.num_steps == 2
    assert entities[0].first_token_s == pytest.approx(0.001 + 64e-5 + 0.001 + 36e-5)


def test_decode_steps_of_running_requests_come_before_new_prefill():
    # r0 decodes while r1 arrives; the step after r1's arrival holds r0's decode token and r1's prompt.
    log = []

    class Steps(Observer):
        def on_step(self, replica_id, batch, num_steps):
            log.append((batch.num_prefill_tokens, batch.num_decode_tokens, num_steps))

    run([Request("r0", 0.0, 10, 5), Request("r1", 0.0025, 20, 1)], observers=(Steps(),))
    assert log[0] == (10, 0, 1)
    assert (20, 1, 1) in log


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_fast_forward_gives_the_same_timeline_as_stepping_one_by_one(prefix_caching):
    requests = synthetic_requests(300, "lognormal:60:1.0:400", "lognormal:80:1.0:400", seed=3)
    requests = [Request(r.request_id, i * 0.004, r.num_prompt_tokens, r.num_output_tokens) for i, r in
                enumerate(requests)]
    profile = make_profile(constant_us=2000, prefill_us=5, decode_us=20, context_us=0.05)
    outcomes = []
    for fast in (True, False):
        config = EngineConfig(num_kv_blocks=120, max_num_seqs=12, fast_forward=fast, prefix_caching=prefix_caching)
        entities, recorder = run(requests, policy="spf", config=config, profile=profile, aging_s=0.5,
                                 decision_delay_s=0.003)
        outcomes.append(([(e.first_token_s, e.finish_s, e.num_preemptions) for e in entities], recorder))
    (fast, rec_fast), (slow, rec_slow) = outcomes
    assert rec_slow.num_preemptions > 0  # the scenario exercises preemption
    assert rec_fast.num_steps == rec_slow.num_steps
    np.testing.assert_allclose(np.array([(a, b) for a, b, _ in fast]), np.array([(a, b) for a, b, _ in slow]),
                               rtol=1e-9)
    assert [c for _, _, c in fast] == [c for _, _, c in slow]


class Invariants(Observer):
    """Checks KV accounting after every step and counts finishes per request."""

    def __init__(self):
        self.engine = None
        self.finishes: dict[str, int] = {}

    def on_step(self, replica_id, batch, num_steps):
        e = self.engine
        held = sum(r.num_blocks for r in e.running) + sum(r.num_blocks for r in e.waiting.ordered(0.0))
        assert 0 <= e.num_free_blocks <= e.num_total_blocks
        assert held + e.num_free_blocks == e.num_total_blocks
        for r in e.running:
            assert r.num_blocks * e.config.block_size >= r.num_computed

    def on_finish(self, request, now_s):
        self.finishes[request.spec.request_id] = self.finishes.get(request.spec.request_id, 0) + 1


@pytest.mark.parametrize("kv_admission", ["prompt", "chunk"])
@pytest.mark.parametrize("hol", [True, False])
def test_invariants_hold_under_kv_pressure(kv_admission, hol):
    checker = Invariants()
    config = EngineConfig(num_kv_blocks=60, max_num_seqs=16, max_num_batched_tokens=256,
                          kv_admission=kv_admission, head_of_line_blocking=hol)
    engine, entities = run_under_kv_pressure(config, checker)
    assert checker.finishes == {e.spec.request_id: 1 for e in entities}
    assert engine.num_free_blocks == engine.num_total_blocks
    for e in entities:
        assert e.num_generated == e.spec.num_output_tokens
        assert e.spec.arrival_s <= e.first_admit_s <= e.first_token_s <= e.finish_s
    assert sum(e.num_preemptions for e in entities) > 0


def test_preemption_recomputes_the_victim_the_policy_ranks_last():
    # Two requests each needing 3 blocks of 16 tokens share 4 blocks: one must be preempted. Under FCFS the
    # later arrival is the victim; under true-length-first the longer reply is.
    requests = [Request("early-long", 0.0, 16, 30), Request("late-short", 0.0001, 16, 20)]
    for policy, victim in (("fcfs", "late-short"), ("tlf", "early-long")):
        log = EventLog()
        entities, _ = run(requests, policy=policy, config=EngineConfig(num_kv_blocks=4), observers=(log,))
        preempted = {e[1] for e in log.events if e[0] == "preempt"}
        assert preempted == {victim}
        assert all(e.finish_s is not None for e in entities)


def test_head_of_line_blocking_holds_a_small_request_behind_one_that_does_not_fit():
    # 4 blocks: R holds 2, head H needs 3, small S needs 1.
    requests = [Request("R", 0.0, 17, 10), Request("H", 0.0001, 40, 1), Request("S", 0.0002, 5, 1)]
    blocked, _ = run(requests, config=EngineConfig(num_kv_blocks=4))
    skipping, _ = run(requests, config=EngineConfig(num_kv_blocks=4, head_of_line_blocking=False))
    r_finish = blocked[0].finish_s
    assert blocked[2].first_admit_s >= r_finish
    assert skipping[2].first_admit_s < skipping[0].finish_s


def test_a_request_larger_than_the_kv_cache_is_refused_alone_and_counted_and_the_run_goes_on():
    requests = [Request("a", 0.0, 10, 5), Request("big", 0.001, 90, 10), Request("b", 0.002, 10, 5)]
    entities, recorder = run(requests, config=EngineConfig(num_kv_blocks=4))
    big = entities[1]
    assert big.rejected == "request 'big' needs 7 KV blocks but replica 0 has 4" and big.first_admit_s is None
    assert recorder.num_rejected == 1
    assert sorted(r.request_id for r in recorder.records) == ["a", "b"]


def test_a_request_without_true_length_is_rejected():
    with pytest.raises(EngineConfigError, match="num_output_tokens is None"):
        run([Request("x", 0.0, 10)])


@pytest.mark.parametrize("kwargs, field", [({"max_num_seqs": 0}, "max_num_seqs=0"),
                                           ({"kv_admission": "all"}, "kv_admission='all'; expected one of"),
                                           ({"num_kv_blocks": 0}, "num_kv_blocks=0")])
def test_engine_config_rejects_bad_values_naming_the_field(kwargs, field):
    with pytest.raises(SchedulerConfigError, match=field):
        EngineConfig(**kwargs)


def test_the_engine_and_the_router_share_one_config_type():
    from jevserve.serving import EngineConfig as ServingConfig
    from jevserve.serving import SchedulerLimits

    assert EngineConfig is ServingConfig is SchedulerLimits


def test_decision_delay_postpones_queueing_and_counts_in_ttft():
    entities, recorder = run([Request("r", 0.0, 10, 1)], decision_delay_s=0.05)
    assert entities[0].enqueue_s == pytest.approx(0.05)
    assert recorder.records[0].ttft_s == pytest.approx(0.051)


def _state(snapshot):
    return [(r.request.request_id, r.num_computed_tokens, r.num_generated_tokens) for r in snapshot.running]


def test_snapshot_mid_decode_run_matches_stepping_to_the_same_time():
    requests = make_requests(3, prompt_len=20, output_len=200, gap_s=0.0001)
    snapshots = []
    for fast in (True, False):
        engine = Engine(make_profile(decode_us=10), make_queue_policy("fcfs"), EngineConfig(fast_forward=fast))
        sim = Simulator([engine])
        for r in requests:
            sim.push(Arrival(r.arrival_s, 0, SimRequest(r)))
        sim.run(until_s=0.0505)
        snapshots.append(engine.snapshot(0.0505))
    fast, slow = snapshots
    assert _state(fast) == _state(slow)
    assert all(generated > 1 for _, _, generated in _state(fast))


def test_running_to_a_time_then_on_gives_the_same_result_as_one_run():
    requests = make_requests(20, prompt_len=50, output_len=30, gap_s=0.003)
    finishes = []
    for stops in ((), (0.01, 0.02, 0.0333)):
        engine = Engine(make_profile(decode_us=10), make_queue_policy("fcfs"), EngineConfig(max_num_seqs=3))
        sim = Simulator([engine])
        entities = [SimRequest(r) for r in requests]
        for e in entities:
            sim.push(Arrival(e.spec.arrival_s, 0, e))
        for t in stops:
            sim.run(until_s=t)
            assert sim.now_s == t
        sim.run()
        finishes.append([e.finish_s for e in entities])
    assert finishes[0] == finishes[1]
