import math

import pytest

from jevserve.serving import Request
from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.lengths import count_capped, scale_output_lengths


def make_request(prompt: int, output: int | None, request_id: str = "r") -> Request:
    return Request(request_id, 0.0, prompt, output)


def test_scaling_multiplies_rounds_half_up_and_keeps_at_least_one_token():
    scaled = scale_output_lengths([make_request(10, 3), make_request(10, 5), make_request(10, 2)], 1.5,
                                  max_model_len=1000)
    assert [r.num_output_tokens for r in scaled] == [5, 8, 3]  # 4.5 -> 5, 7.5 -> 8, 3.0 -> 3
    assert scale_output_lengths([make_request(10, 3)], 0.1, max_model_len=1000)[0].num_output_tokens == 1


def test_scaling_keeps_everything_but_the_reply_length():
    original = Request("a", 2.5, 40, 7, predicted_output_tokens=9.0)
    (scaled,) = scale_output_lengths([original], 3.0, max_model_len=1000)
    assert (scaled.request_id, scaled.arrival_s, scaled.num_prompt_tokens, scaled.predicted_output_tokens) == (
        "a", 2.5, 40, 9.0)
    assert scaled.num_output_tokens == 21


def test_scaling_caps_prompt_plus_reply_at_max_model_len_and_counts_the_capped():
    scaled = scale_output_lengths([make_request(100, 500), make_request(100, 10)], 4.0, max_model_len=1100)
    assert [r.num_output_tokens for r in scaled] == [1000, 40]
    assert count_capped(scaled, 1100) == 1


@pytest.mark.parametrize("factor", [0, -2.0, math.nan, math.inf, True])
def test_bad_factor_names_the_field_and_what_is_accepted(factor):
    with pytest.raises(WorkloadError, match=r"output length factor=.*expected a finite number > 0"):
        scale_output_lengths([make_request(10, 3)], factor, max_model_len=100)


def test_request_without_true_length_or_room_for_a_reply_is_rejected():
    with pytest.raises(WorkloadError, match="request 'x': num_output_tokens is None"):
        scale_output_lengths([make_request(10, None, "x")], 2.0, max_model_len=100)
    with pytest.raises(WorkloadError, match="request 'y': prompt of 100 tokens leaves no room"):
        scale_output_lengths([make_request(100, 5, "y")], 2.0, max_model_len=100)
