"""The simulator's engine and the router's forward estimate take their scheduling decisions from the same step planner
and its rules (`jevserve.serving.scheduling_rules`): change a rule there and both follow, so the estimate stays
exact."""

import dataclasses

import pytest

from jevserve.serving import make_queue_policy
from jevserve.serving import scheduling_rules as rules
from jevserve.sim.engine import EngineConfig
from tests.sim.test_cluster import estimate_and_realize_last, make_workload

_original = {name: getattr(rules, name) for name in ("can_admit", "admission_reserve_tokens", "preemption_victim",
                                                      "admission_action")}


def at_most_three_running(budget, num_running, max_num_seqs):
    return _original["can_admit"](budget, num_running, min(max_num_seqs, 3))


def reserve_only_this_step(num_tokens, num_computed, num_new, kv_admission):
    # "prompt" admission made to reserve what "chunk" does. (A rule reserving more than a request's context would
    # not do: the estimate's aggregated decoders hold exactly the blocks their computed tokens fill.)
    return _original["admission_reserve_tokens"](num_tokens, num_computed, num_new, "chunk")


def preempt_the_oldest(policy, running, now_s):
    return 0


def skip_instead_of_stopping(need, num_free, head_of_line_blocking):
    return _original["admission_action"](need, num_free, False)


CHANGED_RULES = {
    "can_admit": at_most_three_running,
    "admission_reserve_tokens": reserve_only_this_step,
    "preemption_victim": preempt_the_oldest,
    "admission_action": skip_instead_of_stopping,
}


def outcomes(config, policy):
    return [estimate_and_realize_last(make_workload(seed), config, policy) for seed in range(8)]


CASES = [(rule, mode) for rule in CHANGED_RULES for mode in ("prompt", "chunk")
         if (rule, mode) != ("admission_reserve_tokens", "chunk")]  # a no-op there


@pytest.mark.parametrize(("rule", "kv_admission"), CASES)
def test_a_changed_rule_changes_the_engine_and_the_estimate_alike(rule, kv_admission, monkeypatch):
    # A small token budget chunks prompts, so reserving a whole prompt differs from reserving a chunk.
    config = EngineConfig(num_kv_blocks=60, max_num_seqs=8, max_num_batched_tokens=128, kv_admission=kv_admission)
    policy = make_queue_policy("fcfs")
    before = outcomes(config, policy)
    monkeypatch.setattr(rules, rule, CHANGED_RULES[rule])
    after = outcomes(config, policy)
    for seed, (estimate, realized) in enumerate(after):
        assert estimate == pytest.approx(realized, rel=1e-9, abs=1e-12), f"seed {seed}"
    # The changed rule must have changed what the engine did, else the agreement above proves nothing.
    assert [r for _, r in after] != [r for _, r in before]


@pytest.mark.parametrize("kv_admission", ["prompt", "chunk"])
def test_a_rule_added_to_the_planner_reaches_the_engine_and_the_estimate_alike(kv_admission):
    # long_prefill_token_threshold lives in the planner only; with it on, a short prompt admitted after a long one
    # finishes its prefill first, so running requests are no longer "decoding before prefilling".
    base = EngineConfig(num_kv_blocks=60, max_num_seqs=8, max_num_batched_tokens=128, kv_admission=kv_admission)
    policy = make_queue_policy("fcfs")
    before = outcomes(base, policy)
    after = outcomes(dataclasses.replace(base, long_prefill_token_threshold=24), policy)
    for seed, (estimate, realized) in enumerate(after):
        assert estimate == pytest.approx(realized, rel=1e-9, abs=1e-12), f"seed {seed}"
    assert [r for _, r in after] != [r for _, r in before]
