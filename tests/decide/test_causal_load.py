from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, LlamaConfig, MistralConfig, PretrainedConfig, Qwen2Config

from jevserve.decide.causal_load import context_window, parse_device, parse_dtype, parse_spec


def test_window_is_the_position_limit_of_llama_and_gpt2_configs():
    assert context_window(LlamaConfig(max_position_embeddings=2048)) == 2048
    assert context_window(GPT2Config(n_positions=1024)) == 1024


def test_window_stays_inside_an_active_sliding_window():
    assert context_window(MistralConfig(max_position_embeddings=32768, sliding_window=4096)) == 4096
    off = Qwen2Config(max_position_embeddings=32768, sliding_window=4096, use_sliding_window=False)
    assert context_window(off) == 32768


def test_window_override_may_lower_but_not_raise_the_limit():
    config = LlamaConfig(max_position_embeddings=2048)
    assert context_window(config, 512) == 512
    with pytest.raises(ValueError, match=r"max_context_tokens=4096 must be between 1 and the model's window \(2048\)"):
        context_window(config, 4096)


def test_config_without_a_position_limit_asks_for_max_context():
    with pytest.raises(ValueError, match="max_context=N"):
        context_window(PretrainedConfig())
    assert context_window(PretrainedConfig(), 300) == 300


def test_spec_splits_model_and_typed_options():
    model, options = parse_spec("causal:Org/Model-1B?device=cpu&dtype=bf16&network=yes&max_context=512&attn=eager")
    assert model == "Org/Model-1B"
    assert options == {
        "device": "cpu",
        "dtype": "bf16",
        "allow_network": True,
        "max_context_tokens": 512,
        "attn_implementation": "eager",
    }
    assert parse_spec("causal:/models/tiny") == ("/models/tiny", {})


def test_spec_rejects_unknown_options_and_bad_values_with_what_is_accepted():
    with pytest.raises(ValueError, match=r"'gpu=1'.*expected one of: attn, device, dtype"):
        parse_spec("causal:m?gpu=1")
    with pytest.raises(ValueError, match="network='maybe' is not a boolean"):
        parse_spec("causal:m?network=maybe")
    with pytest.raises(ValueError, match="max_context='big' is not an integer"):
        parse_spec("causal:m?max_context=big")
    with pytest.raises(ValueError, match="names no model"):
        parse_spec("causal:?device=cpu")


def test_dtype_and_device_names_are_checked():
    assert parse_dtype("bf16") == torch.bfloat16
    with pytest.raises(ValueError, match="dtype='int8' is not supported; expected one of: float32"):
        parse_dtype("int8")
    with pytest.raises(ValueError, match="device='gpu0' is not a torch device"):
        parse_device("gpu0")
