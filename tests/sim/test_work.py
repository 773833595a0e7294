import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.sim.engine import EngineConfig
from jevserve.sim.run import simulate
from jevserve.sim.work import WorkCounter
from tests.sim.builders import make_profile


def test_one_request_splits_its_time_over_the_step_model_terms():
    # 100-token prompt, 4 reply tokens: one prefill step, then decodes at contexts 101, 102, 103.
    profile = make_profile(constant_us=1000, prefill_us=10, decode_us=5, context_us=0.1, pairs_us=0.001)
    work = WorkCounter(profile.step_time)
    (entity,), _ = simulate([Request("r", 0.0, 100, 4)], profile, make_queue_policy("fcfs"), EngineConfig(),
                            observers=(work,))
    assert work.busy_us == pytest.approx({"constant": 4000, "per_prefill_token": 1000, "per_decode_token": 15,
                                          "per_decode_context_token": 0.1 * (101 + 102 + 103),
                                          "per_prefill_attention_pair": 0.001 * 100 * 100})
    summary = work.summary()
    assert summary["busy_s"] == pytest.approx(entity.finish_s, rel=1e-12)
    assert (summary["num_prefill_tokens"], summary["num_decode_tokens"], summary["num_readmissions"]) == (100, 3, 0)


def test_decode_runs_count_the_same_work_as_single_steps():
    requests = [Request(f"r{i}", 0.001 * i, 30 + i, 40 + 7 * i) for i in range(6)]
    profile = make_profile(constant_us=500, decode_us=3, context_us=0.2)
    summaries = []
    for fast in (True, False):
        work = WorkCounter(profile.step_time)
        simulate(requests, profile, make_queue_policy("fcfs"), EngineConfig(fast_forward=fast), observers=(work,))
        summaries.append(work.summary())
    fast, slow = summaries
    assert fast["num_decode_tokens"] == slow["num_decode_tokens"]
    assert fast["busy_s"] == pytest.approx(slow["busy_s"], rel=1e-12)


def test_readmissions_count_their_context_and_the_tokens_the_cache_gave_back():
    # Two requests in 7 blocks: B is preempted at 48 computed tokens and comes back with 2 of 3 blocks cached.
    requests = [Request("A", 0.0, 40, 30), Request("B", 0.0001, 40, 60)]
    counts = {}
    for caching in (False, True):
        work = WorkCounter(make_profile().step_time)
        simulate(requests, make_profile(), make_queue_policy("fcfs"),
                 EngineConfig(num_kv_blocks=7, prefix_caching=caching), observers=(work,))
        counts[caching] = (work.num_readmissions, work.num_readmitted_context_tokens, work.num_cache_hit_tokens)
    assert counts == {False: (1, 49, 0), True: (1, 49, 32)}
