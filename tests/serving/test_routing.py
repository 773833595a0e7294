import pytest

from jevserve.serving import (
    ROUTERS,
    DuplicatePolicyError,
    ReplicaModel,
    ReplicaState,
    Request,
    ResidentRequest,
    RoundRobin,
    SchedulerLimits,
    ServingError,
    UnknownPolicyError,
    make_router,
    register_router,
    router_names,
)
from jevserve.serving.routing import outstanding_tokens


class Steps:
    """Step time (s) = constant + per-token cost, for a fast or a slow replica."""

    def __init__(self, constant_s: float, per_token_s: float):
        self.constant_s, self.per_token_s = constant_s, per_token_s

    def step_s(self, num_prefill_tokens, num_decode_tokens, decode_context_tokens=0, prefill_attention_pairs=0):
        return self.constant_s + self.per_token_s * (num_prefill_tokens + num_decode_tokens)


def resident(request_id: str, prompt: int = 100, *, generated: int = 0, predicted: float | None = None,
             running: bool = True) -> ResidentRequest:
    spec = Request(request_id, 0.0, prompt, 500, predicted)
    computed = prompt + generated - 1 if generated else 0
    return ResidentRequest(spec, computed, generated, running)


def replica(replica_id: int, *, running=(), waiting=(), num_routed: int = 0, in_transit=()) -> ReplicaState:
    return ReplicaState(replica_id, 1.0, 10_000, 10_000, tuple(running), tuple(waiting), None, num_routed,
                        tuple(in_transit))


NEW = Request("new", 1.0, 50)


def test_round_robin_cycles_through_replicas_by_requests_sent():
    router = make_router("rr")
    routed = [0, 0, 0]
    picks = []
    for _ in range(5):
        decision = router.route(NEW, [replica(i, num_routed=n) for i, n in enumerate(routed)])
        routed[decision.replica_id] += 1
        picks.append(decision.replica_id)
    assert picks == [0, 1, 2, 0, 1]


def test_join_shortest_queue_counts_waiting_and_in_transit_then_running():
    replicas = [
        replica(0, waiting=[resident("w", running=False)]),
        replica(1, in_transit=[Request("t", 0.9, 10)]),
        replica(2, running=[resident("a", generated=3), resident("b", generated=3)]),
        replica(3, running=[resident("c", generated=3)]),
    ]
    assert make_router("jsq").route(NEW, replicas).replica_id == 3


def test_least_outstanding_tokens_uses_predicted_remaining_decode():
    # Replica 0: one request with 400 predicted tokens left; replica 1: two requests with 10 left each.
    long_one = replica(0, running=[resident("a", 100, generated=100, predicted=500)])
    short_two = replica(1, running=[resident("b", 100, generated=10, predicted=20),
                                    resident("c", 100, generated=10, predicted=20)])
    assert outstanding_tokens(long_one) == 400
    assert make_router("lot").route(NEW, [long_one, short_two]).replica_id == 1
    assert make_router("jsq").route(NEW, [long_one, short_two]).replica_id == 0


def test_latency_aware_prefers_a_busier_but_faster_replica():
    slow = ReplicaModel(Steps(0.050, 0.0001))
    fast = ReplicaModel(Steps(0.010, 0.0001))
    replicas = [replica(0), replica(1, running=[resident("a", generated=5, predicted=100)] * 3)]
    decision = make_router("latency", models=[slow, fast]).route(NEW, replicas)
    assert decision.replica_id == 1
    assert "estimated TTFT" in decision.reason


def test_latency_aware_breaks_ties_by_lowest_id():
    model = ReplicaModel(Steps(0.010, 0.0001))
    assert make_router("latency", models=[model] * 3).route(NEW, [replica(2), replica(1), replica(0)]).replica_id == 0


def test_latency_aware_avoids_a_replica_whose_batch_is_full():
    model = ReplicaModel(Steps(0.010, 0.0001), SchedulerLimits(max_num_seqs=2))
    full = replica(0, running=[resident("a", generated=1, predicted=400), resident("b", generated=1, predicted=400)])
    queued = replica(1, running=[resident("c", generated=1, predicted=3)], waiting=[resident("w", running=False)])
    assert make_router("latency", models=[model, model]).route(NEW, [full, queued]).replica_id == 1


def utility_router(target_s: float):
    small = ReplicaModel(Steps(0.010, 0.0001))
    large = ReplicaModel(Steps(0.040, 0.0004))
    return make_router("utility", models=[small, large], qualities=[0.6, 0.9], costs=[0.1, 0.3],
                       ttft_target_s=target_s)


def test_utility_router_picks_the_better_model_while_it_meets_the_target():
    assert utility_router(1.0).route(NEW, [replica(0), replica(1)]).replica_id == 1


def test_utility_router_falls_back_to_the_model_that_meets_the_target():
    busy_large = replica(1, running=[resident(f"r{i}", generated=1, predicted=300) for i in range(50)])
    assert utility_router(0.05).route(NEW, [replica(0), busy_large]).replica_id == 0


def test_utility_router_picks_the_fastest_when_no_replica_meets_the_target():
    decision = utility_router(0.001).route(NEW, [replica(0), replica(1)])
    assert decision.replica_id == 0 and "no replica meets the TTFT target" in decision.reason


def test_utility_router_rejects_mismatched_lengths():
    with pytest.raises(ServingError, match="lengths 1, 2, 2; expected one of each per replica"):
        make_router("utility", models=[ReplicaModel(Steps(0.01, 0.0))], qualities=[1, 2], costs=[1, 2],
                    ttft_target_s=1.0)


def test_route_rejects_empty_replica_list():
    with pytest.raises(ServingError, match="at least one replica snapshot"):
        RoundRobin().route(NEW, [])


def test_latency_router_names_a_replica_without_model():
    with pytest.raises(ServingError, match="replica_id=1 has no ReplicaModel"):
        make_router("latency", models=[ReplicaModel(Steps(0.01, 0.0))]).route(NEW, [replica(0), replica(1)])


def test_router_registry_lists_names_and_rejects_unknown_and_duplicate():
    assert router_names() == ["jsq", "latency", "lot", "rr", "utility"]
    with pytest.raises(UnknownPolicyError, match="unknown router 'random'; expected one of: jsq, latency, lot, rr"):
        make_router("random")
    with pytest.raises(DuplicatePolicyError, match="router 'rr' is already registered"):
        register_router("rr", RoundRobin)
    assert set(ROUTERS) == set(router_names())


def test_make_router_reports_options_a_router_does_not_take():
    with pytest.raises(ServingError, match="router 'rr' cannot take these options"):
        make_router("rr", ttft_target_s=1.0)
