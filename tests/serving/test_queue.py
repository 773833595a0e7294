import math

import pytest

from jevserve.serving import (
    FirstComeFirstServed,
    MissingPredictionError,
    PredictedLengthFirst,
    Request,
    ShortestPromptFirst,
    TrueLengthFirst,
    make_queue_policy,
)


def make_request(request_id: str, arrival_s: float = 0.0, prompt: int = 10, output: int | None = 10,
                 predicted: float | None = None) -> Request:
    return Request(request_id, arrival_s, prompt, output, predicted)


def order(policy, requests, now_s: float = 100.0) -> list[str]:
    return [r.request_id for r in sorted(requests, key=lambda r: policy.sort_key(r, now_s))]


def test_fcfs_orders_by_arrival_then_id():
    requests = [make_request("b", 1.0), make_request("a", 1.0), make_request("c", 0.5, prompt=1)]
    assert order(FirstComeFirstServed(), requests) == ["c", "a", "b"]


def test_shortest_prompt_first_orders_by_prompt_then_arrival():
    requests = [make_request("long", 0.0, prompt=500), make_request("short-late", 2.0, prompt=5),
                make_request("short-early", 1.0, prompt=5)]
    assert order(ShortestPromptFirst(), requests) == ["short-early", "short-late", "long"]


def test_predicted_length_first_uses_the_prediction_not_the_truth():
    requests = [make_request("a", output=10, predicted=300.0), make_request("b", output=900, predicted=20.0)]
    assert order(PredictedLengthFirst(), requests) == ["b", "a"]


def test_true_length_first_uses_the_true_reply_length():
    requests = [make_request("a", output=300), make_request("b", output=20)]
    assert order(TrueLengthFirst(), requests) == ["b", "a"]


def test_predicted_length_first_rejects_a_request_without_prediction():
    with pytest.raises(MissingPredictionError, match=r"request 'x' has no predicted_output_tokens.*--predictions"):
        PredictedLengthFirst().sort_key(make_request("x"), 0.0)


def test_true_length_first_rejects_a_request_without_true_length():
    with pytest.raises(MissingPredictionError, match="'tlf' is an oracle"):
        TrueLengthFirst().sort_key(make_request("x", output=None), 0.0)


def test_aging_promotes_a_request_after_aging_s_ahead_of_shorter_ones():
    policy = ShortestPromptFirst(aging_s=10.0)
    old_long = make_request("old-long", 0.0, prompt=1000)
    new_short = make_request("new-short", 5.0, prompt=1)
    assert order(policy, [old_long, new_short], now_s=9.99) == ["new-short", "old-long"]
    assert order(policy, [old_long, new_short], now_s=10.0) == ["old-long", "new-short"]


def test_promoted_requests_are_served_first_come_first_served():
    policy = TrueLengthFirst(aging_s=1.0)
    requests = [make_request("later", 1.0, output=5), make_request("earlier", 0.0, output=500)]
    assert order(policy, requests, now_s=50.0) == ["earlier", "later"]


def test_key_valid_until_is_the_promotion_instant_then_never():
    policy = ShortestPromptFirst(aging_s=4.0)
    request = make_request("r", arrival_s=2.0)
    assert policy.key_valid_until_s(request, 3.0) == 6.0
    assert policy.key_valid_until_s(request, 6.0) == math.inf
    assert ShortestPromptFirst().key_valid_until_s(request, 3.0) == math.inf


def test_victim_is_the_request_ranked_last():
    requests = [make_request("a", 0.0, prompt=5), make_request("b", 1.0, prompt=500), make_request("c", 2.0, prompt=50)]
    assert ShortestPromptFirst().victim(requests, 3.0) == 1
    assert FirstComeFirstServed().victim(requests, 3.0) == 2


def test_victim_rejects_an_empty_list():
    with pytest.raises(ValueError, match="at least one candidate"):
        FirstComeFirstServed().victim([], 0.0)


@pytest.mark.parametrize(
    "kwargs, field", [({"aging_s": 0}, "aging_s=0"), ({"decision_delay_s": -1}, "decision_delay_s")]
)
def test_policy_rejects_bad_settings_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        FirstComeFirstServed(**kwargs)


def test_get_params_reports_the_settings():
    assert PredictedLengthFirst(aging_s=5.0, decision_delay_s=0.092).get_params() == {
        "name": "plf", "aging_s": 5.0, "decision_delay_s": 0.092}


def test_priority_admits_the_lowest_value_first_and_preempts_the_highest_latest():
    policy = make_queue_policy("priority")
    urgent, later, background = (Request("u", 2.0, 10, priority=-1), Request("l", 1.0, 10, priority=0),
                                 Request("b", 0.0, 10, priority=5))
    ordered = sorted([background, later, urgent], key=lambda r: policy.sort_key(r, 3.0))
    assert [r.request_id for r in ordered] == ["u", "l", "b"]
    assert policy.victim([urgent, background, Request("b2", 2.5, 10, priority=5)], 3.0) == 2
