"""The scheduling rules of vLLM v1, ONE copy: the step planner (`jevserve.serving.vllm_planner`) applies them, and
through it the simulator's engine, the router's forward TTFT estimate and the live engine.

Each rule is a small pure function over token and block counts. The ones marked "int or array" are written with
operators numpy broadcasts, so the planner applies them to the running batch's columns in one array operation
and to one waiting request at a time with the same code. The rules follow `Scheduler.schedule()` in vLLM's
`vllm/v1/core/sched/scheduler.py` and `KVCacheManager.allocate_slots()` in `vllm/v1/core/kv_cache_manager.py`.
"""

from __future__ import annotations

import numpy as np

from jevserve.serving.types import QueuePolicy, Request

__all__ = [
    "ADMIT",
    "SKIP",
    "STOP",
    "admission_action",
    "admission_reserve_tokens",
    "blocks_for",
    "blocks_held",
    "budget_split",
    "can_admit",
    "chunk_tokens",
    "is_decoding",
    "is_finished",
    "new_blocks",
    "new_blocks_array",
    "preempt_by_recompute",
    "preemption_victim",
    "prefill_attention_pairs",
    "samples_token",
]

# What admission does with the waiting request at the head of the queue (`admission_action`).
ADMIT, STOP, SKIP = 0, 1, 2


def blocks_for(num_tokens, block_size: int):
    """KV blocks that hold `num_tokens` (>= 0) tokens: ceil(num_tokens / block_size) (vLLM's `cdiv`). Int or
    array."""
    return (num_tokens + (block_size - 1)) // block_size


def new_blocks(num_computed: int, num_new: int, num_blocks_held: int, block_size: int) -> int:
    """Blocks a request must be given before computing `num_new` more tokens: what its computed tokens plus the
    new ones fill, less what it holds, never negative (`allocate_slots`: num_computed + num_new tokens)."""
    return max(0, -(-(num_computed + num_new) // block_size) - num_blocks_held)


def new_blocks_array(num_computed: np.ndarray, num_new: np.ndarray, num_blocks_held: np.ndarray,
                     block_size: int) -> np.ndarray:
    """`new_blocks` for every row of a batch at once."""
    need = blocks_for(num_computed + num_new, block_size) - num_blocks_held
    np.maximum(need, 0, out=need)
    return need


def chunk_tokens(num_tokens: int, num_computed: int, budget: int) -> int:
    """Tokens a request is scheduled in a step: all it has not computed yet, cut to what is left of the step's
    token budget (chunked prefill; a decoding request needs exactly one)."""
    return min(num_tokens - num_computed, budget)


def budget_split(want: np.ndarray, budget: int) -> tuple[int, np.ndarray, np.ndarray]:
    """`chunk_tokens` applied row after row while budget is left, for a batch at once: returns how many rows the
    budget reaches, their tokens (the last one cut to what is left) and the cumulative sum of `want` over them.
    `want` (tokens each row still needs, > 0) is not changed; it is returned as the tokens when all of it fits."""
    cum = want.cumsum()
    if int(cum[-1]) <= budget:  # the common case under load: every row gets what it needs
        return want.size, want, cum
    m = min(int(cum.searchsorted(budget, side="left")) + 1, want.size)
    new = want[:m].copy()
    last = int(cum[m - 1])
    if last > budget:
        new[m - 1] -= last - budget
    return m, new, cum


def is_decoding(num_generated, num_computed, num_tokens):
    """True when a request's next step computes only its last sampled token: it has produced a token and every
    token before that one is computed. Int or array (scalars give a bool)."""
    return (num_generated > 0) & (num_computed == num_tokens - 1)


def samples_token(num_computed, num_tokens):
    """True when a step leaves every token of a request computed, so it samples the next one (the end of a
    prefill, a recompute, or a decode step). Int or array."""
    return num_computed >= num_tokens


def is_finished(num_generated, reply_length):
    """True when a request has produced its whole reply. Int or array."""
    return num_generated >= reply_length


def prefill_attention_pairs(num_computed, num_new):
    """Query-key pairs a prefill chunk's attention computes: each of its `num_new` tokens attends to the tokens
    before it and itself, counted as num_new * (num_computed + num_new) (the step-time model's term). Int or
    array."""
    return num_new * (num_computed + num_new)


def can_admit(budget: int, num_running: int, max_num_seqs: int) -> bool:
    """Whether admission may try another waiting request: token budget left and fewer than `max_num_seqs`
    requests running (vLLM's `len(self.running) < self.max_num_running_reqs`)."""
    return budget > 0 and num_running < max_num_seqs


def admission_reserve_tokens(num_tokens: int, num_computed: int, num_new: int, kv_admission: str) -> int:
    """Tokens whose KV blocks a waiting request must be given to be admitted: its whole context with
    `kv_admission="prompt"` (reserved up front), or only what it computes this step with "chunk" (vLLM v1)."""
    return num_tokens if kv_admission == "prompt" else num_computed + num_new


def blocks_held(num_tokens, num_computed, kv_admission: str, block_size: int):
    """KV blocks a running request that is still prefilling holds, from its token counts (`num_computed`: after
    the step in flight): what its admission reserved (`admission_reserve_tokens` with nothing left to schedule)
    or what it has computed, whichever is more. Int or array."""
    reserved = admission_reserve_tokens(num_tokens, num_computed, 0, kv_admission)
    if isinstance(num_computed, np.ndarray):
        return blocks_for(np.maximum(reserved, num_computed), block_size)
    return blocks_for(max(reserved, num_computed), block_size)


def admission_action(need: int, num_free: int, head_of_line_blocking: bool) -> int:
    """ADMIT when the request's blocks are free; else STOP admitting (head-of-line blocking, vLLM's behaviour:
    `break` when `allocate_slots` fails) or SKIP it so a smaller request behind it can start."""
    if need <= num_free:
        return ADMIT
    return STOP if head_of_line_blocking else SKIP


def preemption_victim(policy: QueuePolicy, running: list[Request], now_s: float) -> int:
    """Index, in `running` (admission order), of the request preempted when a running request cannot get its KV
    blocks: the one the queue policy ranks last (vLLM: the last of `self.running`, or the lowest priority)."""
    return policy.victim(running, now_s)


def preempt_by_recompute(request) -> int:
    """Preempt by recompute: the request drops its KV blocks and its computed tokens, and is queued again to
    compute its whole context (prompt and sampled tokens) anew. Sets `num_blocks` and `num_computed` of any
    object that has them to 0; returns the blocks freed."""
    freed = request.num_blocks
    request.num_blocks = 0
    request.num_computed = 0
    return freed
