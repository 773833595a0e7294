import math

import numpy as np
import pytest

from jevserve.plan.demand import _sum_blocks, request_demand
from jevserve.serving import Request
from jevserve.sim.step_time import StepTimeModel


def test_one_request_demand_in_closed_form():
    # p=20, o=5, blocks of 16: prefill holds 2 blocks; decode steps hold blocks(21..24) = 2 each.
    st = StepTimeModel(1000.0, 10.0, 5.0, per_decode_context_token=0.1, per_prefill_attention_pair=0.01)
    d = request_demand([Request("r", 0.0, 20, 5)], st, max_num_batched_tokens=8192, block_size=16)
    assert d.steps[0] == 1 + 4
    assert d.kv_block_steps[0] == 2 + 4 * 2
    context = sum(20 + k for k in range(1, 5))
    assert d.work_s[0] == pytest.approx((10 * 20 + 5 * 4 + 0.1 * context + 0.01 * 20 * 20) * 1e-6)


def test_a_prompt_over_the_token_budget_takes_several_chunks():
    st = StepTimeModel(1000.0, 10.0, 5.0, per_prefill_attention_pair=1.0)
    d = request_demand([Request("r", 0.0, 100, 1)], st, max_num_batched_tokens=64, block_size=16)
    assert d.steps[0] == 2
    assert d.kv_block_steps[0] == 2 * 7  # both prefill steps hold the whole prompt (prompt admission)
    assert d.work_s[0] == pytest.approx((10 * 100 + 64 * 64 + 36 * 100) * 1e-6)


def test_block_sums_match_a_loop():
    rng = np.random.default_rng(0)
    first = rng.integers(1, 200, size=300)
    last = first + rng.integers(-3, 300, size=300)
    expected = [sum(math.ceil(t / 16) for t in range(a, b + 1)) for a, b in zip(first, last, strict=True)]
    assert _sum_blocks(first, last, 16).tolist() == expected
