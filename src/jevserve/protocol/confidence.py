"""The reference confidence formulas of the System One contract (SYSTEMONE_API.md §5)."""

from __future__ import annotations

from collections.abc import Sequence

# Levels within this much of the maximum count as a tied mode (§5, step 1).
MODE_TIE_TOLERANCE = 0.005


def choice_confidence(probabilities: Sequence[float]) -> float:
    """(max − 1/n) / (1 − 1/n): 0 for a uniform distribution, 1 for a one-hot one, 1 when n = 1."""
    n = len(probabilities)
    if n <= 1:
        return 1.0
    top = max(probabilities)
    return min(1.0, max(0.0, (top - 1.0 / n) / (1.0 - 1.0 / n)))


def uniform_spread(num_levels: int) -> float:
    """D(n): the mean distance from the centre of a uniform distribution over n levels (n/4 even, (n²−1)/4n odd)."""
    n = num_levels
    return n / 4.0 if n % 2 == 0 else (n * n - 1) / (4.0 * n)


def score_confidence(probabilities: Sequence[float]) -> float:
    """max(0, 1 − S/D(n)) with S = Σ pᵢ·|i − k| around the mode k (the first level of highest probability)."""
    n = len(probabilities)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: (probabilities[i], -i))
    spread = sum(p * abs(i - mode) for i, p in enumerate(probabilities))
    return min(1.0, max(0.0, 1.0 - spread / uniform_spread(n)))


def expected_level(probabilities: Sequence[float]) -> float:
    """Σ i·pᵢ: the `score` field of a score answer."""
    return float(sum(i * p for i, p in enumerate(probabilities)))
