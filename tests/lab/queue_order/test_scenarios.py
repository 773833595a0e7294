import pytest

from jevserve.lab.queue_order.scenarios import DEFAULT_SCENARIOS, SCENARIOS, get_scenario
from jevserve.serving import Request
from jevserve.sim.engine import EngineConfig
from jevserve.sim.errors import WorkloadError
from jevserve.sim.profile import load_profile


def test_default_scenario_keeps_vllm_default_engine_settings_and_scales_reply_lengths():
    thinking = get_scenario(DEFAULT_SCENARIOS[0])
    assert thinking.name == "thinking" and thinking.knob == "output_scale"
    # vLLM v1 defaults: 1,024 sequences, 8,192 batched tokens, automatic prefix caching
    assert thinking.config == EngineConfig(prefix_caching=True)
    assert thinking.config.max_num_seqs == 1024 and thinking.config.max_num_batched_tokens == 8192
    assert load_profile(thinking.profile).step_time.per_decode_context_token > 0


def test_recompute_scenario_differs_from_the_default_only_in_prefix_caching():
    thinking, recompute = get_scenario("thinking"), get_scenario("thinking-recompute")
    assert recompute.config == EngineConfig() and not recompute.config.prefix_caching
    assert (recompute.profile, recompute.knob, recompute.bracket) == (thinking.profile, thinking.knob,
                                                                       thinking.bracket)


def test_first_version_stays_reachable_with_two_sequences_and_a_step_scale():
    two = get_scenario("two-seqs")
    assert two.config.max_num_seqs == 2 and two.knob == "step_scale" and two.profile == "qwen3-8b-h200"
    assert DEFAULT_SCENARIOS == ("thinking", "two-seqs") and "thinking-recompute" in SCENARIOS


def test_output_scale_changes_the_requests_and_leaves_the_profile():
    profile = load_profile("qwen3-8b-h200-attn")
    requests = [Request("a", 0.0, 10, 100), Request("b", 0.0, 20, 7)]
    same, scaled = get_scenario("thinking").apply(3.0, profile, requests)
    assert same is profile and [r.num_output_tokens for r in scaled] == [300, 21]


def test_step_scale_changes_the_profile_and_leaves_the_requests():
    profile = load_profile("qwen3-8b-h200")
    requests = [Request("a", 0.0, 10, 100)]
    scaled, same = get_scenario("two-seqs").apply(0.5, profile, requests)
    assert same == requests and scaled.step_time.constant == pytest.approx(profile.step_time.constant / 2)
    with pytest.raises(WorkloadError, match=r"step_scale=0; expected a number > 0"):
        get_scenario("two-seqs").apply(0, profile, requests)


def test_unknown_scenario_lists_the_known_ones():
    known = "thinking, thinking-recompute, two-seqs"
    with pytest.raises(WorkloadError, match=f"unknown scenario 'big'; expected one of: {known}"):
        get_scenario("big")
