"""Statistics of the bench: per-task bootstrap weights and intervals, calibration and automation share (the
shared draws of scores, averages and ranks are bench.paired's). numpy and scikit-learn do the arithmetic.

Resampling. A resample draws the test items' clusters (an item, or a group such as both halves of a matched pair)
with replacement, as many as there are; an item's weight is how often its cluster was drawn. Every model of a task
is scored on the same weights (paired), thresholds stay as tuned on train, and the interval is the 2.5th and 97.5th
percentile of the resampled values (percentile bootstrap).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from sklearn.metrics import brier_score_loss

NUM_RESAMPLES = 10_000  # committed rows; `--resamples` can ask for fewer in a quick look
BOOTSTRAP_SEED = 20261129
ECE_BINS = 10
ERROR_BUDGET = 0.05


def task_seed(task_name: str, seed: int = BOOTSTRAP_SEED) -> int:
    """A seed per task, so each task's resamples are fixed and independent of the others'."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{task_name}".encode()).digest()[:8], "big")


def bootstrap_weights(clusters: Sequence[int | str], num_resamples: int, seed: int) -> np.ndarray:
    """Count weights (resamples × items) of a cluster bootstrap: clusters drawn with replacement."""
    _, cluster_of_item = np.unique(np.asarray(clusters), return_inverse=True)
    num_clusters = int(cluster_of_item.max()) + 1 if len(cluster_of_item) else 0
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(num_clusters, np.full(num_clusters, 1.0 / num_clusters), size=num_resamples)
    return draws[:, cluster_of_item]


def interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of resampled values, ignoring undefined (NaN) resamples."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high))


def brier(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """Mean squared error of P(positive) against the 0/1 label (scikit-learn's Brier score)."""
    return float(brier_score_loss(labels.astype(int), np.clip(probabilities, 0.0, 1.0)))


def expected_calibration_error(probabilities: np.ndarray, labels: np.ndarray, num_bins: int = ECE_BINS) -> float:
    """ECE over `num_bins` equal-width bins of P(positive): Σ_b (n_b / n) · |mean p_b − positive share_b|."""
    p = np.clip(probabilities, 0.0, 1.0)
    y = labels.astype(np.float64)
    bins = np.minimum((p * num_bins).astype(int), num_bins - 1)  # p = 1 belongs to the top bin
    gap = np.abs(np.bincount(bins, weights=p, minlength=num_bins) - np.bincount(bins, weights=y, minlength=num_bins))
    return float(gap.sum() / max(len(p), 1))


def confidence_cutoff(
    scores: np.ndarray, labels: np.ndarray, threshold: float, budget: float = ERROR_BUDGET
) -> float | None:
    """The smallest distance from the threshold at which the items at least that far have error ≤ `budget`,
    keeping as many items as possible (most confident first); None when not even the most confident item is right.
    """
    margin = np.abs(scores - threshold)
    wrong = (scores >= threshold) != labels.astype(bool)
    order = np.argsort(-margin, kind="stable")
    errors = np.cumsum(wrong[order]) / np.arange(1, len(order) + 1)
    # Only cut between distinct margins: items at the same distance are decided alike.
    distinct = np.r_[margin[order][1:] != margin[order][:-1], True]
    ok = np.flatnonzero((errors <= budget) & distinct)
    return float(margin[order][ok[-1]]) if ok.size else None


def automation_share(
    train_scores: np.ndarray, train_labels: np.ndarray, threshold: float, test_scores: np.ndarray,
    test_labels: np.ndarray, budget: float = ERROR_BUDGET,
) -> dict[str, float | None]:
    """Share of test items decided without a human at a cutoff chosen on train for ≤ `budget` error, and the
    error those test items then have."""
    cutoff = confidence_cutoff(train_scores, train_labels, threshold, budget)
    if cutoff is None:
        return {"share": 0.0, "error": None, "cutoff": None, "budget": budget}
    automated = np.abs(test_scores - threshold) >= cutoff
    wrong = (test_scores >= threshold) != test_labels.astype(bool)
    error = float(wrong[automated].mean()) if automated.any() else None
    return {"share": float(automated.mean()), "error": error, "cutoff": cutoff, "budget": budget}
