"""The one step planner: what each plan holds, and how applying it moves requests along."""

import numpy as np
import pytest

from jevserve.serving import EngineConfig, Request, make_queue_policy
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.vllm_planner import VllmStepPlanner


def make_planner(num_kv_blocks=100, policy="fcfs", **config) -> VllmStepPlanner:
    return VllmStepPlanner(EngineConfig(**config), make_queue_policy(policy), num_kv_blocks)


def make_request(request_id: str, prompt: int, output: int = 4, arrival_s: float = 0.0) -> EngineRequest:
    return EngineRequest(Request(request_id, arrival_s, prompt, output))


def ids(requests) -> list[str]:
    return [r.spec.request_id for r in requests]


def test_an_idle_planner_plans_an_empty_step():
    plan = make_planner().plan_step(0.0)
    assert plan.is_empty and not plan.is_decode_only and plan.num_new_tokens.size == 0
    assert plan == plan and StepPlan.make_empty().admitted == ()


def test_admission_follows_the_queue_policy_and_the_batch_cap():
    planner = make_planner(policy="spf", max_num_seqs=2)
    for request in (make_request("long", 50), make_request("short", 10), make_request("mid", 30)):
        planner.add_request(request, 0.0)
    plan = planner.plan_step(0.0)
    assert ids(plan.admitted) == ["short", "mid"] and plan.num_rows == 2
    assert plan.num_new_tokens.tolist() == [10, 30] and plan.num_prefill_tokens == 40
    assert plan.prefill_attention_pairs == 10 * 10 + 30 * 30
    assert planner.num_running == 2 and planner.num_waiting == 1
    assert not plan.is_repeatable  # it admitted: the next step must be planned again


def test_the_token_budget_chunks_the_last_prompt_admitted():
    planner = make_planner(max_num_seqs=64, max_num_batched_tokens=64)
    for request in (make_request("a", 40), make_request("b", 100)):
        planner.add_request(request, 0.0)
    plan = planner.plan_step(0.0)
    assert plan.num_new_tokens.tolist() == [40, 24]
    planner.apply_step(plan)
    second = planner.plan_step(0.0)  # a decodes one token, b gets the rest of the budget
    assert second.num_new_tokens.tolist() == [1, 63]
    assert (second.num_decode_tokens, second.num_prefill_tokens) == (1, 63)
    assert second.decode_context_tokens == 41


def test_applying_a_step_samples_tokens_and_removes_finished_requests():
    planner = make_planner()
    short, longer = make_request("short", 16, output=1), make_request("longer", 16, output=3)
    for request in (short, longer):
        planner.add_request(request, 0.0)
    finished = planner.apply_step(planner.plan_step(0.0))
    assert finished == [short] and short.num_generated == 1 and short.num_blocks == 0
    assert planner.num_running == 1 and planner.pool.num_free == 100 - 1  # longer holds its prompt's block
    plan = planner.plan_step(0.0)
    assert plan.is_decode_only and plan.is_repeatable


def test_a_repeatable_decode_step_applied_several_times_allocates_the_blocks_its_tokens_fill():
    planner = make_planner()
    request = make_request("r", 16, output=40)
    planner.add_request(request, 0.0)
    planner.apply_step(planner.plan_step(0.0))  # prefill: 16 tokens in 1 block, first token sampled
    plan = planner.plan_step(0.0)  # computes token 17: a second block
    assert plan.is_repeatable and planner.pool.num_free == 98
    assert planner.apply_step(plan, num_steps=20) == []
    assert planner.running.computed[0] == 36 and planner.running.generated[0] == 21
    assert planner.running.blocks[0] == 3 and planner.pool.num_free == 97


def test_a_step_short_of_blocks_preempts_and_the_victim_waits_for_its_recompute():
    planner = make_planner(num_kv_blocks=4)
    first, second = make_request("first", 31, output=8, arrival_s=0.0), make_request("second", 31, 8, 0.1)
    for request in (first, second):
        planner.add_request(request, 0.2)
    planner.apply_step(planner.plan_step(0.2))  # both prompts: 2 blocks each, all 4 blocks held
    plan = planner.plan_step(0.2)  # each now computes token 32 in its second block: no new block yet
    planner.apply_step(plan)
    plan = planner.plan_step(0.2)  # token 33 needs a third block each: FCFS preempts the newest, second
    assert ids(plan.preempted) == ["second"] and plan.num_rows == 1 and not plan.is_repeatable
    assert second.num_computed == 0 and second.num_blocks == 0 and second.num_preemptions == 1
    assert planner.num_waiting == 1 and planner.pool.num_free == 4 - 3


def test_when_a_pass_preempts_everything_it_scheduled_the_planner_plans_again():
    # One running request needs a block that only its own preemption frees; planned again, it is re-admitted.
    planner = make_planner(num_kv_blocks=2)
    request = make_request("r", 32, output=8)
    planner.add_request(request, 0.0)
    planner.apply_step(planner.plan_step(0.0))  # 32 prompt tokens: both blocks
    plan = planner.plan_step(0.0)  # token 33 needs a third block: r preempts itself, then cannot be admitted
    assert ids(plan.preempted) == ["r"] and plan.is_empty and planner.num_waiting == 1


def test_abort_frees_a_running_requests_blocks_and_drops_a_waiting_one():
    planner = make_planner(max_num_seqs=1)
    running, waiting = make_request("running", 40), make_request("waiting", 40)
    for request in (running, waiting):
        planner.add_request(request, 0.0)
    planner.apply_step(planner.plan_step(0.0))
    assert planner.kv_cache_usage() == pytest.approx(3 / 100)
    assert planner.abort(running) and planner.num_running == 0 and planner.kv_cache_usage() == 0.0
    assert planner.abort(waiting) and planner.num_waiting == 0 and not planner.has_unfinished_requests()
    assert not planner.abort(waiting)
    assert planner.plan_step(0.0).is_empty


def test_plans_are_read_only():
    planner = make_planner()
    planner.add_request(make_request("r", 10), 0.0)
    plan = planner.plan_step(0.0)
    with pytest.raises(ValueError):
        plan.num_new_tokens[0] = 3
    assert isinstance(plan.num_new_tokens, np.ndarray)


def test_long_prefill_token_threshold_caps_each_prompt_chunk_so_short_prompts_start_alongside():
    planner = make_planner(long_prefill_token_threshold=32)
    for request in (make_request("long", 100), make_request("short", 20)):
        planner.add_request(request, 0.0)
    plan = planner.plan_step(0.0)
    assert plan.num_new_tokens.tolist() == [32, 20]  # off, "long" would take 100 and "short" 20 as well
    planner.apply_step(plan)
    plan = planner.plan_step(0.0)  # "short" decodes; "long" gets its next 32 tokens, behind it in admission order
    assert plan.num_new_tokens.tolist() == [32, 1] and plan.num_decode_tokens == 1


def test_long_prefill_token_threshold_is_off_by_default_and_checked():
    assert EngineConfig().long_prefill_token_threshold == 0
    with pytest.raises(ValueError, match="long_prefill_token_threshold=-1"):
        EngineConfig(long_prefill_token_threshold=-1)
