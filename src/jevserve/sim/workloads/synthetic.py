"""Synthetic workloads: prompt and reply lengths drawn from named distributions with a seed.

A distribution is a spec string: `const:N`, `uniform:LOW:HIGH` (inclusive) or `lognormal:MEDIAN:SIGMA[:MAX]`
(log-normal with the given median and log-space sigma, clipped to [1, MAX], MAX default 4096).
"""

from __future__ import annotations

import numpy as np

from jevserve.serving.types import Request
from jevserve.sim.errors import WorkloadError

DISTRIBUTION_FORMS = "const:N, uniform:LOW:HIGH or lognormal:MEDIAN:SIGMA[:MAX]"


def sample_lengths(spec: str, num: int, rng: np.random.Generator, *, field: str = "length") -> np.ndarray:
    """`num` integer token counts >= 1 drawn from the distribution `spec`."""
    kind, _, rest = spec.partition(":")
    try:
        params = [float(p) for p in rest.split(":")] if rest else []
    except ValueError:
        raise WorkloadError(f"{field}={spec!r}: parameters must be numbers; expected {DISTRIBUTION_FORMS}") from None
    if kind == "const" and len(params) == 1 and params[0] >= 1:
        return np.full(num, int(params[0]), dtype=np.int64)
    if kind == "uniform" and len(params) == 2 and 1 <= params[0] <= params[1]:
        return rng.integers(int(params[0]), int(params[1]) + 1, size=num)
    if kind == "lognormal" and len(params) in (2, 3) and params[0] >= 1 and params[1] >= 0:
        high = params[2] if len(params) == 3 else 4096
        draws = np.exp(np.log(params[0]) + params[1] * rng.standard_normal(num))
        return np.clip(np.rint(draws), 1, high).astype(np.int64)
    raise WorkloadError(f"{field}={spec!r}; expected {DISTRIBUTION_FORMS} with positive sizes")


def synthetic_requests(num_requests: int, prompt: str, output: str, *, seed: int) -> list[Request]:
    """`num_requests` requests (arrival_s = 0) with prompt and reply lengths from the given distributions."""
    if num_requests < 1:
        raise WorkloadError(f"num_requests={num_requests}; expected an integer >= 1")
    rng = np.random.default_rng(seed)
    prompts = sample_lengths(prompt, num_requests, rng, field="prompt")
    outputs = sample_lengths(output, num_requests, rng, field="output")
    return [Request(f"syn-{i}", 0.0, int(p), int(o)) for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]
