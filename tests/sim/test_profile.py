import dataclasses
import math
import tomllib

import pytest

from jevserve.sim.errors import ProfileError
from jevserve.sim.profile import load_profile, parse_profile, profile_to_toml, shipped_profile_names


def test_shipped_profiles_load_and_cite_sources():
    assert shipped_profile_names() == ["qwen3-8b-h100", "qwen3-8b-h200", "qwen3-8b-h200-attn"]
    for name in shipped_profile_names():
        profile = load_profile(name)
        assert profile.sources and all(s != "" for s in profile.sources)


def test_h200_profile_scales_memory_bound_terms_by_bandwidth_ratio():
    h100, h200 = load_profile("qwen3-8b-h100"), load_profile("qwen3-8b-h200")
    ratio = 3.35 / 4.8
    assert h200.step_time.constant == pytest.approx(h100.step_time.constant * ratio, rel=1e-4)
    assert h200.step_time.per_decode_token == pytest.approx(h100.step_time.per_decode_token * ratio, rel=1e-4)
    assert h200.step_time.per_prefill_token == h100.step_time.per_prefill_token


def test_attention_profile_adds_datasheet_context_terms_to_the_h200_profile():
    h200, attn = load_profile("qwen3-8b-h200"), load_profile("qwen3-8b-h200-attn")
    for name in ("constant", "per_prefill_token", "per_decode_token"):
        assert getattr(attn.step_time, name) == getattr(h200.step_time, name)
    # a decode step reads each cached token's K and V once at 4.8 TB/s
    assert attn.step_time.per_decode_context_token == pytest.approx(attn.kv_bytes_per_token / 4.8e12 * 1e6, rel=1e-3)
    # QK^T and AV: 2 x 2 x 32 heads x 128 dims FLOP per pair per layer, 36 layers, at 989 TFLOP/s
    assert attn.step_time.per_prefill_attention_pair == pytest.approx(2 * 2 * 32 * 128 * 36 / 989e12 * 1e6, rel=1e-3)
    assert attn.num_kv_blocks() == h200.num_kv_blocks()


def test_qwen3_8b_kv_bytes_per_token_from_its_shape():
    assert load_profile("qwen3-8b-h200").kv_bytes_per_token == 2 * 36 * 8 * 128 * 2  # 144 KiB


def test_kv_capacity_formula_reproduces_blis_block_count_for_llama_within_one_percent():
    # BLIS lists total_kv_blocks = 29205 for llama-3.1-8b on one H100 (32 layers, 8 KV heads, 14.96 GiB weights).
    llama = dataclasses.replace(load_profile("qwen3-8b-h100"), num_layers=32, weights_gib=14.96)
    assert llama.num_kv_blocks() == pytest.approx(29205, rel=0.01)


def test_profile_round_trips_through_toml():
    profile = load_profile("qwen3-8b-h200")
    assert parse_profile(tomllib.loads(profile_to_toml(profile))) == profile


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(ProfileError, match="unknown profile 'a100'; expected one of: qwen3-8b-h100, qwen3-8b-h200"):
        load_profile("a100")


def _data():
    return tomllib.loads(profile_to_toml(load_profile("qwen3-8b-h200")))


@pytest.mark.parametrize(
    "section, key, value, message",
    [("step_time_us", "per_decode_token", -1.0,
      r"\[step_time_us\] per_decode_token = -1.0; expected a finite number in \[0, 1e\+07\]"),
     ("memory", "gpu_memory_utilization", 1.5, r"gpu_memory_utilization = 1.5; expected a fraction in \(0, 1\]"),
     ("model_shape", "num_layers", 2.5, r"\[model_shape\] num_layers = 2.5; expected a finite integer"),
     # TOML's inf and nan: an infinite step time or memory failed in the simulator with a traceback
     ("step_time_us", "constant", math.inf, r"\[step_time_us\] constant = inf; expected a finite number"),
     ("memory", "gpu_memory_gib", math.inf, r"\[memory\] gpu_memory_gib = inf; expected a finite number"),
     ("step_time_us", "per_decode_token", math.nan, r"per_decode_token = nan; expected a finite number"),
     # huge but finite: 1e300 GiB overflowed the KV block count, a 1e308 us term the step time (tracebacks)
     ("memory", "gpu_memory_gib", 1e300, r"gpu_memory_gib = 1e\+300; expected a finite number in \[0, 1e\+06\]"),
     ("step_time_us", "per_decode_token", 1e308, r"per_decode_token = 1e\+308; expected a finite number in"),
     ("model_shape", "num_layers", 10**30, r"num_layers = 10{30}; expected a finite integer in \[1, 1e\+06\]"),
     ("memory", "weights_gib", 500.0, "no KV cache fits")],
)
def test_bad_profile_fields_are_named_with_value_and_range(section, key, value, message):
    data = _data()
    data[section][key] = value
    with pytest.raises(ProfileError, match=message):
        parse_profile(data, "bad.toml")


def test_missing_profile_field_says_which_and_where():
    data = _data()
    del data["memory"]["weights_gib"]
    with pytest.raises(ProfileError, match=r"bad.toml: missing field \[memory\] weights_gib"):
        parse_profile(data, "bad.toml")


def test_profile_path_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "nope.toml")


def test_profile_file_with_bad_toml_is_an_error(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("[profile\n")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(path)
