"""Reply-length transforms applied to a workload before a run, the same for every policy and arrival seed.

`scale_output_lengths` stands in for a model that writes longer replies than the recorded ones: Qwen3 in its
default thinking mode writes its reasoning before the answer, so its replies to ShareGPT prompts are far longer
than ShareGPT's human-era replies. Scaling keeps which requests are long (the order a length predictor must
recover) and caps each reply so prompt + reply fits the model's context, as vLLM stops a request at
`max_model_len`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from jevserve.serving.types import Request
from jevserve.sim.errors import WorkloadError

QWEN3_8B_MAX_MODEL_LEN = 40960  # Qwen3-8B config.json max_position_embeddings: vLLM's default max_model_len


def scale_output_lengths(requests: Sequence[Request], factor: float, *, max_model_len: int) -> list[Request]:
    """Each reply length times `factor`, rounded half up, at least 1 and at most max_model_len - prompt."""
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not math.isfinite(factor) or factor <= 0:
        raise WorkloadError(f"output length factor={factor!r}; expected a finite number > 0 (1 keeps the lengths)")
    if max_model_len < 2:
        raise WorkloadError(f"max_model_len={max_model_len!r}; expected an integer >= 2 (prompt and reply tokens)")
    out = []
    for r in requests:
        if r.num_output_tokens is None:
            raise WorkloadError(f"request {r.request_id!r}: num_output_tokens is None; scaling needs the true "
                                "reply length of every request")
        room = max_model_len - r.num_prompt_tokens
        if room < 1:
            raise WorkloadError(f"request {r.request_id!r}: prompt of {r.num_prompt_tokens} tokens leaves no room "
                                f"for a reply within max_model_len={max_model_len}; raise max_model_len")
        scaled = max(1, math.floor(r.num_output_tokens * factor + 0.5))
        out.append(dataclasses.replace(r, num_output_tokens=min(scaled, room)))
    return out


def fit_context(requests: Sequence[Request], max_model_len: int, *,
                remedy: str = "raise --max-model-len or leave the request out") -> list[Request]:
    """The requests as an engine with context `max_model_len` runs them: a reply that would run past the context is
    cut where the context ends (vLLM stops it there), and a prompt that leaves no room for a reply is refused
    (vLLM answers it 400) with a WorkloadError naming it and `remedy`, rather than simulated as if it fitted."""
    if max_model_len < 2:
        raise WorkloadError(f"max_model_len={max_model_len!r}; expected an integer >= 2 (prompt and reply tokens)")
    out = []
    for r in requests:
        room = max_model_len - r.num_prompt_tokens
        if room < 1:
            raise WorkloadError(f"request {r.request_id!r}: prompt of {r.num_prompt_tokens} tokens leaves no room "
                                f"for a reply within max_model_len={max_model_len} (an engine refuses it); {remedy}")
        too_long = r.num_output_tokens is not None and r.num_output_tokens > room
        out.append(dataclasses.replace(r, num_output_tokens=room) if too_long else r)
    return out


def count_capped(scaled: Sequence[Request], max_model_len: int) -> int:
    """How many requests reach max_model_len exactly (their reply was cut by the context limit, or just fits)."""
    return sum(r.num_prompt_tokens + (r.num_output_tokens or 0) == max_model_len for r in scaled)
