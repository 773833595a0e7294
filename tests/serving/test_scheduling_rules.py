import random
from types import SimpleNamespace

import numpy as np
import pytest

from jevserve.serving import Request, make_queue_policy
from jevserve.serving import scheduling_rules as rules


@pytest.mark.parametrize(("tokens", "blocks"), [(0, 0), (1, 1), (15, 1), (16, 1), (17, 2), (160, 10), (161, 11)])
def test_blocks_for_rounds_tokens_up_to_whole_blocks(tokens, blocks):
    assert rules.blocks_for(tokens, 16) == blocks
    assert rules.blocks_for(np.array([tokens], dtype=np.int64), 16).tolist() == [blocks]


def test_new_blocks_counts_only_blocks_the_request_does_not_hold_yet():
    assert rules.new_blocks(15, 2, 1, 16) == 1  # 17 tokens need 2 blocks, it holds 1
    assert rules.new_blocks(15, 1, 1, 16) == 0  # 16 tokens fill its one block
    assert rules.new_blocks(0, 20, 5, 16) == 0  # it reserved more than it needs (prompt admission): never negative
    assert rules.new_blocks(0, 100, 0, 16) == 7


def test_new_blocks_array_is_new_blocks_row_by_row():
    rng = random.Random(0)
    rows = [(rng.randint(0, 500), rng.randint(0, 300), rng.randint(0, 40)) for _ in range(300)]
    computed, new, held = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    assert rules.new_blocks_array(computed, new, held, 16).tolist() == [rules.new_blocks(c, n, h, 16)
                                                                        for c, n, h in rows]


def test_chunk_tokens_cuts_a_prefill_to_the_budget_left():
    assert rules.chunk_tokens(100, 30, 50) == 50  # chunked prefill
    assert rules.chunk_tokens(100, 90, 50) == 10  # the rest of its prompt
    assert rules.chunk_tokens(101, 100, 50) == 1  # a decode step


def test_budget_split_is_chunk_tokens_applied_row_after_row():
    rng = random.Random(1)
    for _ in range(300):
        want = np.array([rng.choice([1, 1, 1, rng.randint(1, 900)]) for _ in range(rng.randint(1, 30))], np.int64)
        budget = rng.randint(1, 3000)
        expected, left = [], budget
        for w in want.tolist():
            if left <= 0:
                break
            expected.append(rules.chunk_tokens(w, 0, left))
            left -= expected[-1]
        before = want.copy()
        m, new, cum = rules.budget_split(want, budget)
        assert (m, new.tolist()) == (len(expected), expected)
        assert cum.tolist() == np.cumsum(before).tolist() and want.tolist() == before.tolist()


def test_a_request_decodes_when_only_its_last_sampled_token_is_left():
    assert rules.is_decoding(1, 9, 10)
    assert not rules.is_decoding(0, 9, 10)  # a prompt's last token: still prefilling
    assert not rules.is_decoding(3, 5, 10)  # recomputing after a preemption
    assert rules.is_decoding(np.array([1, 0, 2]), np.array([9, 9, 5]), np.array([10, 10, 10])).tolist() == [
        True, False, False]


def test_a_token_is_sampled_when_every_token_is_computed_and_the_reply_ends_at_its_length():
    assert rules.samples_token(10, 10) and not rules.samples_token(9, 10)
    assert rules.is_finished(40, 40) and not rules.is_finished(39, 40)
    assert rules.is_finished(3, 2.5)  # a fractional predicted length ends at the next whole token


def test_prefill_attention_pairs_counts_each_new_token_against_its_context():
    assert rules.prefill_attention_pairs(10, 5) == 75
    assert rules.prefill_attention_pairs(0, 4) == 16


def test_admission_needs_budget_and_a_free_seat():
    assert rules.can_admit(1, 3, 4)
    assert not rules.can_admit(0, 3, 4)
    assert not rules.can_admit(100, 4, 4)


def test_admission_reserves_the_whole_context_or_only_this_step():
    assert rules.admission_reserve_tokens(500, 0, 200, "prompt") == 500
    assert rules.admission_reserve_tokens(500, 0, 200, "chunk") == 200
    assert rules.admission_reserve_tokens(500, 64, 200, "chunk") == 264  # a cached prefix counts as computed


def test_a_request_that_does_not_fit_stops_or_is_skipped():
    assert rules.admission_action(5, 5, True) == rules.ADMIT
    assert rules.admission_action(6, 5, True) == rules.STOP
    assert rules.admission_action(6, 5, False) == rules.SKIP


def test_the_victim_is_the_request_the_queue_policy_ranks_last():
    running = [Request("a", 0.0, 50, 10, 10.0), Request("b", 1.0, 50, 10, 900.0), Request("c", 2.0, 50, 10, 5.0)]
    assert rules.preemption_victim(make_queue_policy("fcfs"), running, 3.0) == 2  # the latest arrival
    assert rules.preemption_victim(make_queue_policy("plf"), running, 3.0) == 1  # the longest predicted reply


def test_preemption_by_recompute_frees_every_block_and_forgets_computed_tokens():
    request = SimpleNamespace(num_blocks=7, num_computed=100, num_generated=4)
    assert rules.preempt_by_recompute(request) == 7
    assert (request.num_blocks, request.num_computed, request.num_generated) == (0, 0, 4)
