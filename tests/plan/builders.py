"""Builders for planner tests: a profile with chosen step-time coefficients and memory, and fixed workloads."""

from __future__ import annotations

from jevserve.serving import Request
from jevserve.sim.profile import Profile
from jevserve.sim.step_time import StepTimeModel


def make_profile(constant_us: float = 4000.0, prefill_us: float = 17.0, decode_us: float = 4.0, *,
                 gpu_memory_gib: float = 80.0) -> Profile:
    """A Qwen3-8B-shaped profile (144 KiB of KV per token) with these coefficients and GPU memory."""
    return Profile(
        name=f"test-{gpu_memory_gib:g}", gpu="test-gpu", model="test-model", sources=("test builder",),
        step_time=StepTimeModel(constant_us, prefill_us, decode_us),
        gpu_memory_gib=gpu_memory_gib, gpu_memory_utilization=0.9, weights_gib=16.0, non_kv_reserve_gib=0.0,
        num_layers=36, num_kv_heads=8, head_dim=128, kv_dtype_bytes=2,
    )


def make_workload(n: int = 200, *, prompt: int = 100, output: int = 200) -> list[Request]:
    """`n` requests whose prompt and reply lengths cycle around the given means (+-50%)."""
    return [Request(f"r{i}", 0.0, max(1, prompt // 2 + (i * 37) % prompt), max(1, output // 2 + (i * 53) % output))
            for i in range(n)]
