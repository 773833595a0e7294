"""An engine snapshot's running columns say exactly what its `running` tuple says, and the forward TTFT estimate
is the same, to the last bit, whether it reads the columns or walks the tuple."""

import dataclasses
import math

import numpy as np
import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.serving.replica_forward import ReplicaForward
from jevserve.serving.ttft_estimate import ReplicaModel, SchedulerLimits, estimate_ttft, estimate_ttft_queued_prefill
from jevserve.sim.engine import Engine, EngineConfig
from jevserve.sim.entities import SimRequest
from jevserve.sim.events import Arrival
from jevserve.sim.loop import Simulator
from jevserve.sim.workloads.synthetic import synthetic_requests
from tests.sim.builders import make_profile

PROFILE = make_profile(constant_us=2000, prefill_us=5, decode_us=20, context_us=0.05, pairs_us=0.001)


def snapshots(config: EngineConfig, n: int = 400, gap_s: float = 0.004):
    """Snapshots of one engine under a preempting load, every 10th arrival; a third of the requests have no
    prediction, the rest a noisy one."""
    rng = np.random.default_rng(5)
    base = synthetic_requests(n, "lognormal:60:1.0:400", "lognormal:80:1.0:400", seed=7)
    requests = [
        Request(r.request_id, i * gap_s, r.num_prompt_tokens, r.num_output_tokens,
                None if i % 3 == 0 else float(r.num_output_tokens * rng.lognormal(0, 0.5)))
        for i, r in enumerate(base)
    ]
    engine = Engine(PROFILE, make_queue_policy("fcfs"), config)
    sim = Simulator([engine])
    for request in requests:
        sim.push(Arrival(request.arrival_s, 0, SimRequest(request)))
    taken = []
    for request in requests[5::10]:
        sim.run(math.nextafter(request.arrival_s, -math.inf))
        taken.append((request, engine.snapshot(request.arrival_s)))
    return taken


@pytest.mark.parametrize("config", [
    EngineConfig(num_kv_blocks=120, max_num_seqs=12),  # KV-bound: preemptions
    EngineConfig(num_kv_blocks=200, max_num_seqs=40, max_num_batched_tokens=64),  # prompts prefilled in chunks
    EngineConfig(num_kv_blocks=400, max_num_seqs=40, kv_admission="chunk", max_num_batched_tokens=128),
])
def test_columns_match_the_running_tuple_and_the_estimate_does_not_depend_on_them(config):
    taken = snapshots(config)
    assert sum(len(state.running) for _, state in taken) > 100  # the replica was busy
    if config.max_num_batched_tokens < 256:  # some snapshots hold requests part-way through their prompts
        assert any(r.num_computed_tokens + r.num_scheduled_tokens < r.request.num_prompt_tokens
                   for _, state in taken for r in state.running)
    limits = SchedulerLimits(max_num_seqs=config.max_num_seqs, max_num_batched_tokens=config.max_num_batched_tokens,
                             kv_admission=config.kv_admission)
    compared = 0
    for request, state in taken:
        cols = state.running_columns
        running = state.running
        assert cols.num_prompt_tokens.tolist() == [r.request.num_prompt_tokens for r in running]
        assert cols.num_computed_tokens.tolist() == [r.num_computed_tokens for r in running]
        assert cols.num_generated_tokens.tolist() == [r.num_generated_tokens for r in running]
        assert cols.num_scheduled_tokens.tolist() == [r.num_scheduled_tokens for r in running]
        assert cols.requests.tolist() == [r.request for r in running]
        expected = [r.request.predicted_output_tokens for r in running]
        assert [None if math.isnan(p) else p for p in cols.predicted_output_tokens.tolist()] == expected
        plain = dataclasses.replace(state, running_columns=None)
        for default in (20.0, 256.0):
            for policy in ("fcfs", "tlf"):
                model = ReplicaModel(PROFILE.step_time, limits, make_queue_policy(policy),
                                     default_output_tokens=default)
                # a small prompt, and one that needs most of the KV cache, so free blocks decide when it starts
                for prompt in (90, 1200):
                    new = Request("new", request.arrival_s, prompt, 40, 35.0)
                    assert estimate_ttft(new, state, model) == estimate_ttft(new, plain, model)
                    assert estimate_ttft_queued_prefill(new, state, model) == \
                        estimate_ttft_queued_prefill(new, plain, model)
                    compared += 1
    assert compared == 8 * len(taken)


def loaded(state, config: EngineConfig, default: float) -> tuple:
    """What a forward pass starts from after reading the snapshot: free blocks and the running batch's rows."""
    forward = ReplicaForward(
        state, Request("new", state.now_s, 90, 40, 35.0), step_time=PROFILE.step_time,
        policy=make_queue_policy("fcfs"), config=config, default_output_tokens=default,
    )
    running = forward.planner.running
    columns = tuple(getattr(running, name)[: running.n].tolist() for name in running.INT_COLUMNS)
    return forward.planner.pool.num_free, running.specs, columns


@pytest.mark.parametrize("kv_admission", ["prompt", "chunk"])
def test_the_columns_load_the_same_forward_state_as_the_tuple(kv_admission):
    config = EngineConfig(num_kv_blocks=200, max_num_seqs=40, max_num_batched_tokens=64, kv_admission=kv_admission)
    for _, state in snapshots(config):
        plain = dataclasses.replace(state, running_columns=None)
        for default in (20.0, 256.0):
            assert loaded(state, config, default) == loaded(plain, config, default)


def test_columns_must_describe_the_running_requests():
    (_, state), *_ = snapshots(EngineConfig(num_kv_blocks=120, max_num_seqs=12), n=40)
    short = dataclasses.replace(state.running_columns, num_prompt_tokens=np.zeros(len(state.running) + 1))
    with pytest.raises(ValueError, match="running_columns has"):
        dataclasses.replace(state, running_columns=short)
