import math

import pytest

from jevserve.serving import (
    ReplicaModel,
    ReplicaState,
    Request,
    ResidentRequest,
    SchedulerLimits,
    estimate_ttft,
    estimate_ttft_queued_prefill,
    make_queue_policy,
)


class LinearSteps:
    """A step-time model with round coefficients (seconds): 10 ms per step, 0.1 ms per prefill token, 1 ms per
    decode token."""

    def step_s(self, num_prefill_tokens, num_decode_tokens, decode_context_tokens=0, prefill_attention_pairs=0):
        return 0.010 + 0.0001 * num_prefill_tokens + 0.001 * num_decode_tokens


def make_model(**limits) -> ReplicaModel:
    return ReplicaModel(LinearSteps(), SchedulerLimits(**limits))


def decoding(request_id: str, prompt: int, generated: int, predicted: float | None, *, scheduled: int = 0):
    """A running request that has produced `generated` tokens and decodes next."""
    spec = Request(request_id, 0.0, prompt, 1000, predicted)
    return ResidentRequest(spec, prompt + generated - 1, generated, True, scheduled)


def make_state(running=(), waiting=(), *, now_s=1.0, busy_until_s=None, num_blocks=1000, in_transit=()):
    return ReplicaState(0, now_s, num_blocks, num_blocks, tuple(running), tuple(waiting), busy_until_s,
                        in_transit=tuple(in_transit))


def test_idle_replica_gives_one_prefill_step():
    ttft = estimate_ttft(Request("new", 1.0, 100), make_state(), make_model())
    assert ttft == pytest.approx(0.010 + 0.0001 * 100)


def test_busy_replica_adds_the_rest_of_the_step_in_flight_and_the_decodes_sharing_the_step():
    running = [decoding("a", 10, 3, 50, scheduled=1), decoding("b", 10, 5, 50, scheduled=1)]
    state = make_state(running, busy_until_s=1.004)
    ttft = estimate_ttft(Request("new", 1.0, 100), state, make_model())
    assert ttft == pytest.approx(0.004 + 0.010 + 0.0001 * 100 + 0.001 * 2)


def test_full_batch_waits_for_the_predicted_finish_of_a_running_request():
    # max_num_seqs=1: the new request starts after 'a' produces its 5th and last predicted token.
    state = make_state([decoding("a", 10, 2, 5)])
    ttft = estimate_ttft(Request("new", 1.0, 100), state, make_model(max_num_seqs=1))
    decode_step = 0.010 + 0.001
    assert ttft == pytest.approx(3 * decode_step + 0.010 + 0.0001 * 100)


def test_a_request_without_prediction_uses_the_model_default_length():
    state = make_state([decoding("a", 10, 2, None)])
    model = ReplicaModel(LinearSteps(), SchedulerLimits(max_num_seqs=1), default_output_tokens=12)
    ttft = estimate_ttft(Request("new", 1.0, 100), state, model)
    assert ttft == pytest.approx(10 * 0.011 + 0.010 + 0.0001 * 100)


def test_a_request_past_its_prediction_is_assumed_to_end_with_its_next_token():
    state = make_state([decoding("a", 10, 9, 5)])
    ttft = estimate_ttft(Request("new", 1.0, 100), state, make_model(max_num_seqs=1))
    assert ttft == pytest.approx(0.011 + 0.010 + 0.0001 * 100)


def test_too_short_predictions_underestimate_a_queued_request():
    exact = estimate_ttft(Request("new", 1.0, 10), make_state([decoding("a", 10, 2, 40)]), make_model(max_num_seqs=1))
    short = estimate_ttft(Request("new", 1.0, 10), make_state([decoding("a", 10, 2, 10)]), make_model(max_num_seqs=1))
    assert short < exact


def test_queue_order_decides_who_goes_first():
    waiting = [ResidentRequest(Request("long", 0.5, 2000), 0, 0, False)]
    state = make_state([], waiting)
    new = Request("new", 1.0, 10)
    limits = {"max_num_seqs": 1}
    fcfs = estimate_ttft(new, state, make_model(**limits))
    spf = estimate_ttft(new, state, ReplicaModel(LinearSteps(), SchedulerLimits(**limits),
                                                 make_queue_policy("spf")))
    assert spf == pytest.approx(0.010 + 0.001)  # admitted first, alone
    assert fcfs > 0.2  # behind a 2,000-token prompt and its whole reply


def test_decision_delay_counts_in_the_estimate():
    model = ReplicaModel(LinearSteps(), SchedulerLimits(), make_queue_policy("fcfs", decision_delay_s=0.05))
    assert estimate_ttft(Request("new", 1.0, 100), make_state(), model) == pytest.approx(0.05 + 0.020)


def test_a_prompt_larger_than_the_kv_cache_is_never_admitted():
    assert estimate_ttft(Request("new", 1.0, 100), make_state(num_blocks=2), make_model()) == math.inf


def test_queued_prefill_estimate_divides_queued_tokens_by_prefill_throughput():
    waiting = [ResidentRequest(Request("w", 0.5, 300), 0, 0, False)]
    running = [ResidentRequest(Request("p", 0.2, 500), 100, 0, True, 200)]  # 200 left after the step in flight
    state = make_state(running, waiting, busy_until_s=1.003)
    throughput = 8192 / (0.010 + 0.0001 * 8192)
    ttft = estimate_ttft_queued_prefill(Request("new", 1.0, 100), state, make_model())
    assert ttft == pytest.approx(0.003 + (200 + 300 + 100) / throughput)


def test_scheduler_limits_reject_bad_values_naming_the_field():
    with pytest.raises(ValueError, match="kv_admission='all'; expected one of: prompt, chunk"):
        SchedulerLimits(kv_admission="all")
    with pytest.raises(ValueError, match="max_num_seqs=0"):
        SchedulerLimits(max_num_seqs=0)
