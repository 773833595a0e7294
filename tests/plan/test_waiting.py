import pytest

from jevserve.plan.demand import request_demand
from jevserve.plan.waiting import erlang_c, max_rate_meeting_slo, prefill_queue_wait, slo_attainment
from jevserve.sim.step_time import StepTimeModel
from tests.plan.builders import make_workload


@pytest.mark.parametrize("servers, load, expected", [(1, 0.5, 0.5), (2, 1.0, 1 / 3), (10, 8.0, 0.409)])
def test_erlang_c_matches_textbook_values(servers, load, expected):
    assert erlang_c(servers, load) == pytest.approx(expected, abs=1e-3)


def test_erlang_c_is_one_at_or_past_saturation_and_zero_without_load():
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(4, 0.0) == 0.0


def attainment_at(rate, *, slo_s=1.0):
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = request_demand(make_workload(output=400), st, max_num_batched_tokens=8192, block_size=16)
    return slo_attainment(rate, d, constant_s=0.004, per_prefill_token_s=17e-6, max_num_seqs=16,
                          num_kv_blocks=10**6, max_num_batched_tokens=8192, ttft_slo_s=slo_s)


def test_attainment_falls_with_rate_and_is_zero_when_unstable():
    values = [attainment_at(r) for r in (1, 5, 8, 9, 9.5)]
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(1.0) and values[-1] < 0.9
    assert attainment_at(100) == 0.0


def test_a_target_unreachable_even_unloaded_gives_rate_zero():
    assert max_rate_meeting_slo(0.9, 10.0, lambda r: attainment_at(r, slo_s=0.001)) == 0.0


def test_max_rate_meeting_slo_finds_the_crossing():
    rate = max_rate_meeting_slo(0.9, 10.0, attainment_at)
    assert attainment_at(rate * 0.999) >= 0.9 - 1e-6 and attainment_at(rate * 1.01) < 0.9


def test_long_prompts_wait_for_the_token_budget_even_with_free_slots():
    st = StepTimeModel(4000.0, 17.0, 4.0)
    d = request_demand(make_workload(prompt=3000, output=20), st, max_num_batched_tokens=8192, block_size=16)
    p_wait, mean_wait = prefill_queue_wait(15.0, d, constant_s=0.004, per_prefill_token_s=17e-6,
                                           max_num_batched_tokens=8192)
    assert 0.7 < p_wait < 1 and mean_wait > 0.05
    light = request_demand(make_workload(prompt=100, output=20), st, max_num_batched_tokens=8192, block_size=16)
    assert prefill_queue_wait(15.0, light, constant_s=0.004, per_prefill_token_s=17e-6,
                              max_num_batched_tokens=8192)[1] < 1e-4
