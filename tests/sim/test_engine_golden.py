"""Golden timelines: the engine's results, bit for bit, on fixed scenarios.

The digests were computed with the engine as committed before its step was vectorised (commit b9822f1, per-request
Python loops): every request's admission, first-token and finish times and every token time as IEEE-754 bits,
its preemption count, and the number of engine steps. A change that alters any simulated number, even in the
last bit, fails here; a deliberate change of the model must bump `SIM_MODEL_VERSION` and the digests together.
"""

import hashlib

import numpy as np
import pytest

from jevserve.serving import Request, make_queue_policy, make_router
from jevserve.sim.cluster import Cluster, ReplicaSpec
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import token_times_array
from jevserve.sim.run import simulate
from jevserve.sim.workloads.lengths import scale_output_lengths
from jevserve.sim.workloads.sharegpt import sample_sharegpt
from jevserve.sim.workloads.synthetic import synthetic_requests
from tests.sim.builders import make_profile


def timeline_digest(entities, num_steps: int) -> str:
    """SHA-256 over every request's timeline, floats as their exact bits."""
    h = hashlib.sha256(str(num_steps).encode())
    for e in entities:
        h.update(e.spec.request_id.encode())
        h.update(np.array([e.first_admit_s, e.first_token_s, e.finish_s], dtype=np.float64).tobytes())
        h.update(str(e.num_preemptions).encode())
        h.update(token_times_array(e.token_times).tobytes())
    return h.hexdigest()[:16]


def spaced(requests, gap_s):
    """The requests sent `gap_s` apart, in order."""
    return [Request(r.request_id, i * gap_s, r.num_prompt_tokens, r.num_output_tokens, r.predicted_output_tokens)
            for i, r in enumerate(requests)]


def synthetic(n=300, seed=3, gap_s=0.004):
    return spaced(synthetic_requests(n, "lognormal:60:1.0:400", "lognormal:80:1.0:400", seed=seed), gap_s)


def thinking_like(n=400, gap_s=0.01):
    """ShareGPT requests with replies x 19.3 (the `thinking` scenario's workload) at a high rate."""
    base = sample_sharegpt(n, seed=0, split="test")
    return spaced(scale_output_lengths(base, 19.3, max_model_len=40960), gap_s)


PROFILE = make_profile(constant_us=2000, prefill_us=5, decode_us=20, context_us=0.05, pairs_us=0.001)
# (workload builder, engine settings, policy options); each one preempts and exercises a different path.
CASES = {
    "spf-aging-delay-kv-tight": (synthetic, EngineConfig(num_kv_blocks=120, max_num_seqs=12),
                                 {"name": "spf", "aging_s": 0.5, "decision_delay_s": 0.003}),
    "fcfs-small-budget": (synthetic, EngineConfig(num_kv_blocks=200, max_num_seqs=40, max_num_batched_tokens=256),
                          {"name": "fcfs"}),
    "tlf-chunk-admission-no-hol": (synthetic, EngineConfig(num_kv_blocks=90, max_num_seqs=64, kv_admission="chunk",
                                                           head_of_line_blocking=False), {"name": "tlf"}),
    "no-fast-forward": (synthetic, EngineConfig(num_kv_blocks=120, max_num_seqs=12, fast_forward=False),
                        {"name": "tlf", "aging_s": 0.3}),
    "thinking-like-small-kv-spf": (thinking_like, EngineConfig(num_kv_blocks=3000), {"name": "spf"}),
    # ~100 running requests, the batch sizes the queue-order experiment's `thinking` scenario runs at
    "thinking-like-large-batch-fcfs-aging": (thinking_like, EngineConfig(num_kv_blocks=12000),
                                             {"name": "fcfs", "aging_s": 10.0}),
}
GOLDEN = {
    "spf-aging-delay-kv-tight": "66b097bcf9081152",
    "fcfs-small-budget": "6a824055ee88487e",
    "tlf-chunk-admission-no-hol": "4ef835db1a409d28",
    "no-fast-forward": "561eff46bf3061df",
    "thinking-like-small-kv-spf": "8e5d9d2970b21356",
    "thinking-like-large-batch-fcfs-aging": "d1786daf2a5dd3ef",
}
GOLDEN_CLUSTER = "376a5fe32f7ba5f5"


@pytest.mark.parametrize("case", CASES)
def test_engine_reproduces_the_golden_timeline(case):
    build, config, options = CASES[case]
    options = dict(options)
    policy = make_queue_policy(options.pop("name"), **options)
    entities, recorder = simulate(build(), PROFILE, policy, config)
    assert recorder.num_preemptions > 0  # every case must exercise preemption to guard it
    assert timeline_digest(entities, recorder.num_steps) == GOLDEN[case]


def cluster_digest() -> str:
    """Two replicas behind the latency-aware router, which reads a snapshot of each replica for every request."""
    config = EngineConfig(num_kv_blocks=90, max_num_seqs=16)
    policy = make_queue_policy("tlf", aging_s=0.4)
    specs = [ReplicaSpec(PROFILE, config), ReplicaSpec(make_profile(constant_us=3000, decode_us=30), config)]
    models = [s.model(policy, 80.0) for s in specs]
    cluster = Cluster(specs, make_router("latency", models=models), policy, default_output_tokens=80.0)
    result = cluster.run(synthetic(n=150, gap_s=0.002))
    h = hashlib.sha256()
    for r in result.records:
        h.update(f"{r.request_id}|{r.replica_id}|{r.num_running}|{r.num_waiting}".encode())
        h.update(np.array([r.estimated_ttft_s, r.queued_prefill_ttft_s, r.realized_ttft_s]).tobytes())
    assert result.metrics.num_preemptions > 0
    return h.hexdigest()[:16]


def test_cluster_with_snapshot_routing_reproduces_the_golden_routes_and_estimates():
    assert cluster_digest() == GOLDEN_CLUSTER
