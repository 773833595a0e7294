"""The engine with prefix caching on (vLLM v1's automatic prefix caching), on hand-made scenarios."""

import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.sim.engine import EngineConfig
from jevserve.sim.observer import Observer
from jevserve.sim.run import simulate
from jevserve.sim.workloads.synthetic import synthetic_requests
from tests.sim.builders import EventLog, make_profile, run_under_kv_pressure


class Record(Observer):
    """Admissions as (request id, tokens already computed, context), and the prefill tokens of every step."""

    def __init__(self):
        self.admits: list[tuple[str, int, int]] = []
        self.prefills: list[int] = []

    def on_admit(self, request, now_s):
        self.admits.append((request.spec.request_id, request.num_computed, request.num_tokens))

    def on_step(self, replica_id, batch, num_steps):
        if batch.num_prefill_tokens:
            self.prefills.append(batch.num_prefill_tokens)


def two_requests_sharing_seven_blocks(prefix_caching: bool):
    """A (40 + 30 tokens) and B (40 + 60) in 7 blocks of 16 tokens under FCFS.

    Both hold 3 blocks after their prompts and take a 4th at 48 computed tokens: A gets the last free block, B
    (the later arrival) is preempted with 48 computed tokens = 3 full blocks, and 3 blocks are free. B's context
    is 49 tokens (4 blocks), so it waits. A takes a 5th block at 64 tokens: with prefix caching that evicts B's
    last cached block. A finishes, B comes back with 2 of its 3 blocks cached and recomputes 49 - 32 tokens.
    """
    record, log = Record(), EventLog()
    config = EngineConfig(num_kv_blocks=7, prefix_caching=prefix_caching)
    requests = [Request("A", 0.0, 40, 30), Request("B", 0.0001, 40, 60)]
    entities, recorder = simulate(requests, make_profile(prefill_us=10), make_queue_policy("fcfs"), config,
                                  observers=(record, log))
    return entities, recorder, record, log


# Two prompt steps of 1 ms + 40 x 10 us, then 8 decode steps of 1 ms: B needs its 4th block at 48 tokens.
PREEMPTED_AT_S = 0.0108


def test_a_readmitted_request_recomputes_only_what_was_evicted_from_its_cached_prefix():
    _, _, record, log = two_requests_sharing_seven_blocks(prefix_caching=True)
    assert [e for e in log.events if e[0] == "preempt"] == [("preempt", "B", PREEMPTED_AT_S)]
    assert record.admits == [("A", 0, 40), ("B", 0, 40), ("B", 32, 49)]  # 2 cached blocks = 32 tokens reused
    assert record.prefills == [40, 40, 49 - 32]


def test_without_prefix_caching_a_readmitted_request_recomputes_its_whole_context():
    _, _, record, log = two_requests_sharing_seven_blocks(prefix_caching=False)
    assert [e for e in log.events if e[0] == "preempt"] == [("preempt", "B", PREEMPTED_AT_S)]
    assert record.admits == [("A", 0, 40), ("B", 0, 40), ("B", 0, 49)]
    assert record.prefills == [40, 40, 49]


def test_prefix_caching_shortens_the_recompute_step_by_the_reused_tokens():
    (_, b_off), _, _, _ = two_requests_sharing_seven_blocks(prefix_caching=False)
    (_, b_on), _, _, _ = two_requests_sharing_seven_blocks(prefix_caching=True)
    # The only difference is B's recompute step: 32 fewer prefill tokens at 10 us each, and fewer attention
    # pairs (none in this profile).
    assert b_off.finish_s - b_on.finish_s == pytest.approx(32 * 10e-6, rel=1e-9)


class KvAccounting(Observer):
    """After every step: held + free blocks = capacity, cached blocks are a part of the free ones."""

    def __init__(self):
        self.engine = None
        self.max_cached = 0

    def on_step(self, replica_id, batch, num_steps):
        e = self.engine
        held = sum(r.num_blocks for r in e.running) + sum(r.num_blocks for r in e.waiting.ordered(0.0))
        assert held + e.num_free_blocks == e.num_total_blocks
        assert 0 <= e.pool.num_cached <= e.num_free_blocks
        self.max_cached = max(self.max_cached, e.pool.num_cached)


@pytest.mark.parametrize("kv_admission", ["prompt", "chunk"])
def test_kv_accounting_never_exceeds_capacity_with_prefix_caching(kv_admission):
    checker = KvAccounting()
    config = EngineConfig(num_kv_blocks=60, max_num_seqs=16, max_num_batched_tokens=256, kv_admission=kv_admission,
                          prefix_caching=True)
    engine, entities = run_under_kv_pressure(config, checker)
    assert all(e.num_generated == e.spec.num_output_tokens and e.finish_s is not None for e in entities)
    assert sum(e.num_preemptions for e in entities) > 0 and checker.max_cached > 0  # the cache was exercised
    assert engine.num_free_blocks == engine.num_total_blocks


def test_prefix_caching_cuts_the_tokens_recomputed_after_preemption():
    requests = synthetic_requests(300, "lognormal:60:1.0:400", "lognormal:80:1.0:400", seed=3)
    requests = [Request(r.request_id, i * 0.004, r.num_prompt_tokens, r.num_output_tokens)
                for i, r in enumerate(requests)]
    prefill = {}
    for caching in (False, True):
        record = Record()
        simulate(requests, make_profile(constant_us=2000, prefill_us=5, decode_us=20), make_queue_policy("fcfs"),
                 EngineConfig(num_kv_blocks=120, max_num_seqs=12, prefix_caching=caching), observers=(record,))
        readmits = [(computed, tokens) for _, computed, tokens in record.admits if tokens > 0 and computed > 0]
        prefill[caching] = (sum(record.prefills), len(readmits))
    assert prefill[True][1] > 0  # some re-admissions hit the cache
    assert prefill[True][0] < prefill[False][0]


def test_the_ttft_estimator_models_full_recompute_so_prefix_caching_stays_off_by_default():
    # serving/ttft_estimate.py replays a preempted request's whole context; with the cache on, a re-admitted
    # request recomputes less, so the estimate comes out late. Clusters (and EngineConfig) keep it off.
    import dataclasses

    from tests.sim.test_cluster import CONFIGS, estimate_and_realize_last, make_workload

    assert not EngineConfig().prefix_caching
    config = dataclasses.replace(CONFIGS["kv-tight-preempting"], prefix_caching=True)
    gaps = [estimate_and_realize_last(make_workload(seed), config, make_queue_policy("fcfs")) for seed in range(12)]
    assert any(estimate > realized * (1 + 1e-6) for estimate, realized in gaps)
