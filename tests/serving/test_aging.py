import pytest

from jevserve.serving import (
    MissingPredictionError,
    PredictedLengthFirst,
    RelativeAgingFirst,
    Request,
    ServingError,
    VirtualDeadlineFirst,
    make_queue_policy,
)
from jevserve.sim.engine import EngineConfig
from jevserve.sim.run import simulate
from tests.sim.builders import make_profile


def _req(request_id: str, arrival_s: float, predicted: float) -> Request:
    return Request(request_id, arrival_s, 10, 10, predicted)


def test_virtual_deadline_is_linear_aging_and_does_not_change_with_time():
    policy = VirtualDeadlineFirst(stretch=1.0, seconds_per_token=0.01)
    long_early, short_late = _req("long", 0.0, 1000.0), _req("short", 5.0, 100.0)
    # deadlines 10 s and 6 s: the short one goes first at every instant, as predicted - w * waited says
    for now in (5.0, 50.0, 5000.0):
        assert policy.sort_key(short_late, now) < policy.sort_key(long_early, now)
    late_short = _req("late", 10.5, 1.0)  # arrives after the long request's deadline: never ahead of it
    assert policy.sort_key(long_early, 11.0) < policy.sort_key(late_short, 11.0)
    assert policy.key_valid_until_s(long_early, 0.0) == float("inf")


def test_relative_aging_promotes_after_the_requests_own_expected_time():
    policy = RelativeAgingFirst(stretch=2.0, seconds_per_token=0.01)
    long_req, short_req = _req("long", 0.0, 1000.0), _req("short", 15.0, 10.0)
    assert policy.key_valid_until_s(long_req, 0.0) == pytest.approx(20.0)  # 2 x 1000 tokens x 10 ms
    assert policy.sort_key(short_req, 19.0) < policy.sort_key(long_req, 19.0)
    assert policy.sort_key(long_req, 20.0) < policy.sort_key(short_req, 20.0)


def test_own_time_aging_needs_a_prediction_and_valid_settings():
    with pytest.raises(MissingPredictionError):
        VirtualDeadlineFirst().sort_key(Request("r", 0.0, 10, 10), 0.0)
    with pytest.raises(ServingError, match="stretch=-1"):
        make_queue_policy("plf-edf", stretch=-1)
    with pytest.raises(ServingError, match="cannot take these options"):
        make_queue_policy("fcfs", stretch=1.0)


def _starvation_case() -> list[Request]:
    """One long request at t=0 and a stream of short ones, each arriving before the one in service ends, so a
    length-first order with one sequence always has a shorter request waiting."""
    long_req = Request("long", 0.0005, 10, 200, 200.0)
    shorts = [Request(f"s{i}", 0.009 * i, 10, 10, 10.0) for i in range(400)]
    return [long_req, *shorts]


@pytest.mark.parametrize("policy", [VirtualDeadlineFirst(stretch=1.0, seconds_per_token=0.005),
                                    RelativeAgingFirst(stretch=1.0, seconds_per_token=0.005)])
def test_own_time_aging_bounds_the_longest_wait_where_plain_length_first_starves(policy):
    # 1 ms steps, one sequence at a time: a short request takes ~11 ms and a new one arrives every 9 ms
    profile, config = make_profile(constant_us=1000.0), EngineConfig(max_num_seqs=1)
    entities, _ = simulate(_starvation_case(), profile, PredictedLengthFirst(), config)
    starved = next(e for e in entities if e.spec.request_id == "long").first_admit_s
    assert starved > 3.0  # waits for the whole stream (400 x 9 ms) under plain predicted-length-first
    entities, _ = simulate(_starvation_case(), profile, policy, config)
    long_req = next(e for e in entities if e.spec.request_id == "long")
    # allowance: 200 predicted tokens x 5 ms = 1 s after its arrival; the stream overloads the engine (11 ms of
    # work every 9 ms), so the short requests already owed service by then still go first, but none sent later
    deadline = long_req.spec.arrival_s + 1.0
    later = [e.first_admit_s for e in entities if e.spec.arrival_s > deadline]
    assert long_req.first_admit_s < min(later)
    assert long_req.first_admit_s < 1.5
