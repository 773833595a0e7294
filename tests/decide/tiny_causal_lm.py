"""Build a tiny random-weight Llama and a byte-level BPE tokenizer on disk, so causal-backend tests need no hub."""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    PreTrainedTokenizerFast,
)

SPECIALS = ["<pad>", "<s>", "</s>"]
_SENTENCES = [
    "Hi, I was charged twice for my March invoice and I want my money back.",
    "The app crashes every time I open the settings page.",
    "Which team should handle this ticket? Billing, Technical or Sales.",
    "How frustrated is the customer? Calm, annoyed or very angry.",
    "Question: Does the text fit the description?",
    "Answer with the letter of one option.",
    "Answer with the number of one level.",
    "Levels, from lowest to highest.",
]


def _corpus() -> list[str]:
    """Sentences plus the answer labels with a leading space, so " A"…" Z", " 0"…" 9", " yes", " no" are tokens."""
    labels = [*string.ascii_uppercase, *string.digits, "yes", "no"]
    return _SENTENCES * 3 + [f"Answer: {label}" for label in labels for _ in range(4)]


def build_tokenizer(vocab_size: int = 600) -> PreTrainedTokenizerFast:
    """A GPT-2-style byte-level BPE tokenizer trained on a few sentences; it adds BOS like Llama's does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    bos = ("<s>", tok.token_to_id("<s>"))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[bos])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def tiny_config(arch: str, vocab_size: int, max_positions: int, **special_ids: int) -> PretrainedConfig:
    """A 2-layer config of hidden size 32 for one of: llama, gpt2 (learned positions), mistral (sliding window)."""
    # Wide random weights give peaked, item-specific distributions; near-uniform ones would make the
    # invariance tests pass for any backend.
    common = dict(vocab_size=vocab_size, initializer_range=0.5, tie_word_embeddings=False, **special_ids)
    if arch == "gpt2":
        return GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=max_positions, **common)
    sizes = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
    )
    if arch == "llama":
        return LlamaConfig(**sizes, **common)
    if arch == "mistral":
        return MistralConfig(**sizes, sliding_window=max_positions // 2, **common)
    raise ValueError(f"arch={arch!r}; expected one of: llama, gpt2, mistral")


def save_tiny_causal_lm(directory: Path, *, arch: str = "llama", seed: int = 0, max_positions: int = 4096) -> Path:
    """Write a tiny random-weight causal LM and its tokenizer to `directory` with save_pretrained; returns it."""
    tokenizer = build_tokenizer()
    config = tiny_config(
        arch,
        len(tokenizer),
        max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
