"""Reply-length predictions: read from a JSONL file, or a seeded noisy oracle with a target Kendall tau."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from jevserve.json_report import jsonl_lines
from jevserve.serving.types import Request
from jevserve.sim.errors import WorkloadError


def read_predictions(path: Path) -> dict[str, float]:
    """`{request_id: predicted_tokens}` from JSONL lines `{"request_id": ..., "predicted_tokens": ...}`."""
    if not path.is_file():
        what = "is a folder; give a .jsonl file" if path.is_dir() else "does not exist"
        raise WorkloadError(f"predictions file {str(path)!r} {what}")
    out: dict[str, float] = {}
    for line_no, line in enumerate(jsonl_lines(path.read_text()), start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not valid JSON ({exc.msg}); expected "
                                '{"request_id": ..., "predicted_tokens": ...} per line') from None
        if not isinstance(row, dict) or "request_id" not in row or "predicted_tokens" not in row:
            raise WorkloadError(f"{where}: {line.strip()[:80]}; expected the fields request_id and predicted_tokens")
        value = row["predicted_tokens"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise WorkloadError(f"{where}: predicted_tokens = {value!r}; expected a number >= 0")
        out[str(row["request_id"])] = float(value)
    if not out:
        raise WorkloadError(f"predictions file {str(path)!r} has no rows")
    return out


def attach_predictions(requests: list[Request], predictions: dict[str, float]) -> list[Request]:
    """The requests with `predicted_output_tokens` set; every request must have a prediction."""
    missing = [r.request_id for r in requests if r.request_id not in predictions]
    if missing:
        raise WorkloadError(
            f"{len(missing)} of {len(requests)} requests have no prediction (e.g. {', '.join(missing[:3])}); "
            "predict every request of the workload (the queue-order experiment uses the ShareGPT 'test' split)"
        )
    return [dataclasses.replace(r, predicted_output_tokens=predictions[r.request_id]) for r in requests]


def noisy_oracle(requests: list[Request], *, kendall_tau: float = 0.6, seed: int = 0) -> tuple[list[Request], float]:
    """Predictions = true length x exp(sigma * N(0, 1)), with sigma solved so that Kendall's tau between
    prediction and truth is `kendall_tau` on these requests; returns the requests and the tau achieved."""
    if not 0 < kendall_tau <= 1:
        raise WorkloadError(f"kendall_tau={kendall_tau!r}; expected a number in (0, 1]")
    true = np.array([r.num_output_tokens for r in requests], dtype=np.float64)
    if kendall_tau == 1:  # a perfect oracle: the true lengths (no noise level reaches tau 1 exactly)
        exact = [dataclasses.replace(r, predicted_output_tokens=float(t)) for r, t in zip(requests, true, strict=True)]
        return exact, 1.0
    if np.unique(true).size < 2:
        raise WorkloadError(
            f"every request's output length is {true[0]:g} tokens, so no prediction can rank them (Kendall's tau is "
            "undefined); pass an oracle tau of 1 (`--oracle-tau 1`: predictions equal the true lengths; in `sim "
            "cluster` also `--length-predictions true`) or a workload whose output lengths vary"
        )
    noise = np.random.default_rng(seed).standard_normal(true.size)  # drawn once: tau falls as sigma grows

    def tau_at(sigma: float) -> float:
        return float(stats.kendalltau(true, np.log(true) + sigma * noise).statistic)

    highest = tau_at(1e-6)  # tied true lengths cap tau-b below 1 however little noise there is
    if highest < kendall_tau:
        raise WorkloadError(
            f"kendall_tau={kendall_tau:g} is out of reach on these requests: {true.size - np.unique(true).size} of "
            f"{true.size} share an output length with another, and the highest tau a noisy oracle reaches is "
            f"{highest:.3f}; ask for at most that, or 1 (predictions equal the true lengths)"
        )
    sigma = optimize.brentq(lambda s: tau_at(s) - kendall_tau, 1e-6, 50.0, xtol=1e-6)
    predicted = true * np.exp(sigma * noise)
    out = [dataclasses.replace(r, predicted_output_tokens=float(p)) for r, p in zip(requests, predicted, strict=True)]
    return out, tau_at(sigma)
