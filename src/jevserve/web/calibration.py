"""A model's reliability plot: per-item P(positive) on the test sides, read from its bench answers cache.

Results files keep Brier and ECE per task but not the probabilities behind them; those live in the answers cache
`jevserve bench run` fills (one JSONL file per model). The plot bins them with scikit-learn's calibration_curve
(the same 10 equal-width bins as the bench's ECE) and draws an inline SVG: no image files, no JavaScript.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.calibration import calibration_curve

from jevserve.bench.answers_cache import request_key, safe_name
from jevserve.bench.stats import ECE_BINS


@dataclass(frozen=True)
class Reliability:
    """Binned calibration of one model over the tasks its cache covers."""

    mean_predicted: tuple[float, ...]  # per non-empty bin, mean P(positive)
    positive_share: tuple[float, ...]  # per non-empty bin, share of positives
    bin_counts: tuple[int, ...]
    tasks: tuple[str, ...]  # tasks whose test items were all found in the cache
    num_items: int
    cache_file: str


def cache_files(answers_dir: Path, model: str) -> list[Path]:
    """The model's answers cache files, newest first (embedded models add @<weights digest> to the name)."""
    name = safe_name(model)
    found = [*Path(answers_dir).glob(f"{name}.jsonl"), *Path(answers_dir).glob(f"{name}@*.jsonl")]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def read_answers(path: Path) -> dict[str, Any]:
    """Request key → answers of one answers cache file (torn lines skipped)."""
    answers = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of an interrupted run
            if "answers" in row:
                answers[row["key"]] = row["answers"]
    return answers


def task_probabilities(
    answers: dict[str, Any], model: str, loaded: Sequence[Any]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per thresholded task of `loaded` (bench LoadedTask) whose test items are all in `answers` (`read_answers`):
    (P(positive) per test item, 0/1 target per test item)."""
    from jevserve.bench.task import probability_of

    out = {}
    for entry in loaded:
        task = entry.task
        if not task.thresholded or not entry.test:
            continue
        found = [answers.get(request_key(model, task.request(i))) for i in entry.test]
        if any(a is None for a in found):
            continue  # a task only partly asked would bias the pool towards what was asked first
        p = np.array([probability_of(a.get(task.primary), task.positive_option) for a in found], dtype=np.float64)
        out[task.name] = (p, task.target(task.labels(entry.test)).astype(np.float64))
    return out


def reliability(answers_dir: Path, model: str, loaded: Sequence[Any]) -> Reliability | None:
    """Pool the model's cached test-side probabilities over `loaded` tasks (bench LoadedTask); None without any."""
    files = cache_files(answers_dir, model)
    if not files:
        return None
    per_task = task_probabilities(read_answers(files[0]), model, loaded)
    if not per_task:
        return None
    tasks = list(per_task)
    p = np.clip(np.concatenate([per_task[t][0] for t in tasks]), 0.0, 1.0)
    y = np.concatenate([per_task[t][1] for t in tasks]).astype(int)
    share, mean = calibration_curve(y, p, n_bins=ECE_BINS, strategy="uniform")
    counts = np.bincount(np.minimum((p * ECE_BINS).astype(int), ECE_BINS - 1), minlength=ECE_BINS)
    return Reliability(tuple(mean.tolist()), tuple(share.tolist()), tuple(int(c) for c in counts[counts > 0]),
                       tuple(tasks), len(p), files[0].name)


def reliability_svg(curve: Reliability, size: int = 280) -> str:
    """An inline SVG reliability diagram: the diagonal, and one dot per bin sized by its item count."""
    pad = 40
    inner = size - 2 * pad

    def x(v: float) -> float:
        return pad + v * inner

    def y(v: float) -> float:
        return size - pad - v * inner

    largest = max(curve.bin_counts)
    dots = "".join(
        f'<circle cx="{x(m):.1f}" cy="{y(s):.1f}" r="{3 + 7 * (c / largest) ** 0.5:.1f}" class="dot">'
        f"<title>mean P {m:.2f}, positive share {s:.2f}, {c} items</title></circle>"
        for m, s, c in zip(curve.mean_predicted, curve.positive_share, curve.bin_counts, strict=True)
    )
    line = " ".join(f"{x(m):.1f},{y(s):.1f}" for m, s in zip(curve.mean_predicted, curve.positive_share, strict=True))
    ticks = "".join(
        f'<text x="{x(t):.1f}" y="{size - pad + 14}" text-anchor="middle">{t:g}</text>'
        f'<text x="{pad - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>'
        for t in (0, 0.5, 1)
    )
    return (
        f'<svg class="reliability" role="img" viewBox="0 0 {size} {size}" width="{size}" height="{size}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>Reliability: mean predicted probability against the share '
        f'of positives per bin ({curve.num_items} test items)</title>'
        f'<rect x="{pad}" y="{pad}" width="{inner}" height="{inner}" class="frame"/>'
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" class="diagonal"/>'
        f'<polyline points="{line}" class="curve"/>{dots}{ticks}'
        f'<text x="{size / 2}" y="{size - 4}" text-anchor="middle">predicted P(positive)</text>'
        f'<text x="10" y="{size / 2}" text-anchor="middle" transform="rotate(-90 10 {size / 2})">share positive'
        "</text></svg>"
    )
