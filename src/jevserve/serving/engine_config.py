"""The settings of one engine replica, as vLLM v1 names them: ONE type for the step planner that the simulator's
engine (`jevserve.sim.engine`), the router's forward TTFT estimate (`replica_forward`) and the live engine run.

`SchedulerLimits`, the router-side twin this replaces, is kept as an alias of `EngineConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

from jevserve.serving.errors import SchedulerConfigError

KV_ADMISSION_MODES = ("prompt", "chunk")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Scheduler settings; defaults are vLLM v1's for an OpenAI server on a >= 70 GiB GPU, except prefix caching."""

    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192  # the per-step token budget (chunked prefill)
    block_size: int = 16
    # "prompt": a waiting request is admitted only if its whole prompt fits in free KV blocks, which are then
    # reserved; "chunk": only the chunk scheduled this step must fit (vLLM v1's allocate_slots).
    kv_admission: str = "prompt"
    head_of_line_blocking: bool = True  # stop admitting at the first waiting request that does not fit
    num_kv_blocks: int | None = None  # None: from the profile's memory figures
    fast_forward: bool = True  # the simulator runs identical decode steps in one go
    # vLLM v1's automatic prefix caching (`enable_prefix_caching`, on by default in vLLM): a preempted request's
    # full blocks stay cached until evicted (LRU), and its re-admission recomputes only what was evicted; see
    # `jevserve.serving.block_pool`. Off by default here: the router's TTFT estimator (ttft_estimate.py) models
    # recompute without it, and results stay comparable with runs made before it existed.
    prefix_caching: bool = False
    # vLLM's `long_prefill_token_threshold`: a prompt (or recompute) gets at most this many tokens per step, so
    # one long prompt cannot take the whole token budget from the others; 0 turns it off (vLLM's default when
    # one partial prefill runs at a time).
    long_prefill_token_threshold: int = 0

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SchedulerConfigError(f"{name}={value!r}; expected an integer >= 1")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM refuses this at start: a step's budget could not give every running request its decode token
            raise SchedulerConfigError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} is below max_num_seqs={self.max_num_seqs}; "
                "vLLM refuses that (every running request needs a token of each step's budget): raise the budget or "
                "lower max_num_seqs"
            )
        if self.kv_admission not in KV_ADMISSION_MODES:
            raise SchedulerConfigError(
                f"kv_admission={self.kv_admission!r}; expected one of: {', '.join(KV_ADMISSION_MODES)}"
            )
        threshold = self.long_prefill_token_threshold
        if not isinstance(threshold, int) or threshold < 0:
            raise SchedulerConfigError(f"long_prefill_token_threshold={threshold!r}; expected an integer >= 0 (0: off)")
        if self.num_kv_blocks is not None and (not isinstance(self.num_kv_blocks, int) or self.num_kv_blocks < 1):
            raise SchedulerConfigError(f"num_kv_blocks={self.num_kv_blocks!r}; expected an integer >= 1 or None")


SchedulerLimits = EngineConfig  # the former router-side twin's name, kept for callers that use it
