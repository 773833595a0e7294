from __future__ import annotations

import numpy as np
import torch

from jevserve.decide.causal_prompt import QuestionPlan
from jevserve.decide.causal_tree import TreeRow, build_pass, lay_out, read_log_likelihoods


def two_question_row() -> TreeRow:
    """State (10, 11); question A with a two-token and a one-token answer; question B with one-token answers."""
    a = QuestionPlan("name", (20, 21), ((30, 31), (32,)))
    b = QuestionPlan("label", (40,), ((50,), (51,)))
    return TreeRow((10, 11), (a, b))


def one_question_row() -> TreeRow:
    return TreeRow((7,), (QuestionPlan("label", (8, 9), ((5,), (6,))),))


def test_layout_puts_read_tokens_last_with_positions_restarting_per_branch():
    lay = lay_out(two_question_row())
    assert lay.ids.tolist() == [10, 11, 20, 21, 30, 40]
    assert lay.positions.tolist() == [0, 1, 2, 3, 4, 2]
    assert lay.branch.tolist() == [-1, -1, 0, 0, 0, 1]
    assert lay.option.tolist() == [-1, -1, -1, -1, 0, -1]
    assert lay.zone_len == 3
    # Answer token -> the slot (from the row's end) whose logits predict it.
    assert lay.read_zone.tolist() == [-3, -2, -3, -1, -1]
    assert lay.read_token.tolist() == [30, 31, 32, 50, 51]
    assert lay.read_option.tolist() == [0, 0, 1, 2, 3]


def test_mask_lets_answers_see_the_state_and_their_own_question_only():
    inputs = build_pass([lay_out(two_question_row())], pad_id=0, dtype=torch.float32, device=torch.device("cpu"))
    allowed = (inputs.attention_mask[0, 0] == 0).int().tolist()
    assert allowed == [
        [1, 0, 0, 0, 0, 0],  # 10: state
        [1, 1, 0, 0, 0, 0],  # 11: state
        [1, 1, 1, 0, 0, 0],  # 20: question A
        [1, 1, 1, 1, 0, 0],  # 21: question A, last prompt token
        [1, 1, 1, 1, 1, 0],  # 30: answer of A
        [1, 1, 0, 0, 0, 1],  # 40: question B sees the state, not A
    ]
    assert inputs.attention_mask.min() == torch.finfo(torch.float32).min


def test_rows_are_left_padded_and_padding_attends_to_itself_only():
    layouts = [lay_out(two_question_row()), lay_out(one_question_row())]
    inputs = build_pass(layouts, pad_id=99, dtype=torch.float32, device=torch.device("cpu"))
    assert inputs.input_ids.tolist()[1] == [99, 99, 99, 7, 8, 9]
    assert inputs.position_ids.tolist()[1] == [0, 0, 0, 0, 1, 2]
    allowed = (inputs.attention_mask[1, 0] == 0).int().tolist()
    assert allowed[:3] == [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]]
    assert allowed[5] == [0, 0, 0, 1, 1, 1]
    assert inputs.zone_len == 3


def test_log_likelihoods_sum_the_log_softmax_of_each_answer_token():
    layouts = [lay_out(two_question_row()), lay_out(one_question_row())]
    logits = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(0))
    ls = logits.double().log_softmax(-1)
    got = read_log_likelihoods(logits, layouts)
    np.testing.assert_allclose(got[0][0], [ls[0, 0, 30] + ls[0, 1, 31], ls[0, 0, 32]], atol=1e-6)
    np.testing.assert_allclose(got[0][1], [ls[0, 2, 50], ls[0, 2, 51]], atol=1e-6)
    np.testing.assert_allclose(got[1][0], [ls[1, 2, 5], ls[1, 2, 6]], atol=1e-6)
