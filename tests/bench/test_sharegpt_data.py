"""ShareGPT sides for bench tasks keep every test request and drop train copies of test texts."""

from __future__ import annotations

from jevserve.bench.sharegpt_data import SharegptRequest, _next_part, bench_side


def make_request(split: str, text_in_test: bool) -> SharegptRequest:
    return SharegptRequest(request_id="x_0", prompt="p", num_prompt_tokens=5, num_output_tokens=9, valid=True,
                           split=split, text_in_test=text_in_test, follow_up=False, first_part=True)


def test_a_train_request_whose_text_is_also_a_test_text_is_left_out():
    assert bench_side(make_request("test", True)) == "test"
    assert bench_side(make_request("train", False)) == "train"
    assert bench_side(make_request("train", True)) is None


def test_the_next_part_of_a_split_conversation_is_its_number_plus_one():
    assert _next_part("QWJhYvA_0") == "QWJhYvA_1"
    assert _next_part("no-part") is None
