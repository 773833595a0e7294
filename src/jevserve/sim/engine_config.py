"""The settings of one engine replica: scheduler limits, KV admission, prefix caching and fast-forward."""

from __future__ import annotations

from dataclasses import dataclass

from jevserve.sim.errors import EngineConfigError

KV_ADMISSION_MODES = ("prompt", "chunk")
# Bump when a change alters simulated results, so cached experiment results are not reused across versions.
SIM_MODEL_VERSION = 1


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
    fast_forward: bool = True  # run identical decode steps in one go
    # vLLM v1's automatic prefix caching (`enable_prefix_caching`, on by default in vLLM): a preempted request's
    # full blocks stay cached until evicted (LRU), and its re-admission recomputes only what was evicted; see
    # `jevserve.sim.block_pool`. Off by default here: the router's TTFT estimator (serving/ttft_estimate.py)
    # models recompute without it, and results stay comparable with runs made before it existed.
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, name) < 1:
                raise EngineConfigError(f"{name}={getattr(self, name)!r}; expected an integer >= 1")
        if self.kv_admission not in KV_ADMISSION_MODES:
            raise EngineConfigError(
                f"kv_admission={self.kv_admission!r}; expected one of: {', '.join(KV_ADMISSION_MODES)}"
            )
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise EngineConfigError(f"num_kv_blocks={self.num_kv_blocks!r}; expected an integer >= 1 or None")
