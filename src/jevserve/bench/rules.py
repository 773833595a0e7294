"""Rules that turn scores into actions, tuned on the train side only, and the keyword counts default rules use."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.bench.metrics import Metric


@dataclass(frozen=True)
class ThresholdRule:
    """Act (True) when direction × score ≥ direction × threshold."""

    threshold: float  # in score units; ±inf makes the rule constant
    direction: int = 1  # +1: high scores act; −1: low scores act

    def apply(self, scores: np.ndarray) -> np.ndarray:
        """The actions for `scores`."""
        return self.direction * scores >= self.direction * self.threshold

    def as_dict(self) -> dict[str, float | int]:
        """The rule for a results file (±inf written as strings by the caller's JSON encoder)."""
        return {"threshold": self.threshold, "direction": self.direction}


def _candidates(scores: np.ndarray) -> np.ndarray:
    # Midpoints between distinct scores, plus one threshold below all (always act) and one above all (never).
    distinct = np.unique(scores[np.isfinite(scores)])
    if distinct.size == 0:
        return np.array([np.inf])
    middle = (distinct[1:] + distinct[:-1]) / 2.0
    return np.concatenate([[-np.inf], middle, [np.inf]])


def tune_threshold(
    scores: np.ndarray, labels: np.ndarray, metric: Metric, *, both_directions: bool = False
) -> ThresholdRule:
    """The threshold (and, if allowed, direction) with the best metric on these (train) items.

    Ties go to the candidate nearest the middle of the tied run, so a flat optimum does not hug its edge.
    """
    candidates = _candidates(scores)
    directions = (1, -1) if both_directions else (1,)
    best: tuple[float, ThresholdRule] | None = None
    ones = np.ones((1, len(scores)), dtype=np.int64)
    for direction in directions:
        decisions = direction * scores[None, :] >= direction * candidates[:, None]  # candidates × items
        values = np.array([metric.weighted(labels, row, ones)[0] for row in decisions])
        values = np.where(np.isfinite(values), values, -np.inf)
        top = np.flatnonzero(values >= values.max() - 1e-12)
        pick = top[len(top) // 2]
        if best is None or values[pick] > best[0] + 1e-12:
            best = (float(values[pick]), ThresholdRule(float(candidates[pick]), direction))
    assert best is not None
    return best[1]


def keyword_pattern(keywords: Iterable[str]) -> re.Pattern[str]:
    """One case-insensitive pattern matching any keyword as whole words."""
    alternatives = sorted({re.escape(k.lower()) for k in keywords}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


def keyword_counts(texts: Sequence[str], keywords: Iterable[str]) -> np.ndarray:
    """How many keyword occurrences each text has (whole words, any case)."""
    pattern = keyword_pattern(keywords)
    return np.array([len(pattern.findall(t)) for t in texts], dtype=np.float64)
