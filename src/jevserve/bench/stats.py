"""Statistics of the bench: bootstrap intervals, normalised scores, averages and paired ranks, calibration and
automation share. numpy, scipy and scikit-learn do the arithmetic; this module only arranges it.

Resampling. A resample draws the test items' clusters (an item, or a group such as both halves of a matched pair)
with replacement, as many as there are; an item's weight is how often its cluster was drawn. Every model of a task
is scored on the same weights (paired), thresholds stay as tuned on train, and the interval is the 2.5th and 97.5th
percentile of the resampled values (percentile bootstrap).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import sparse
from scipy import stats as scipy_stats
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import brier_score_loss

from jevserve.bench.metrics import Metric

NUM_RESAMPLES = 1000
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


def joint_bootstrap_weights(
    keys: Mapping[str, Sequence[Sequence[str]]], num_resamples: int, seed: int = BOOTSTRAP_SEED
) -> dict[str, np.ndarray]:
    """Count weights per task (resamples × items) from ONE cluster bootstrap over all tasks' items together.

    `keys[task][i]` are the cluster keys of item i (its group, its text): items that share a key, in one task or
    across tasks (a CHAMP problem, a ShareGPT prompt), are one cluster (connected components, scipy) and are drawn
    together, so an average over tasks does not count a shared problem as independent evidence.
    """
    names = sorted({k for per_task in keys.values() for item in per_task for k in item})
    index = {k: i for i, k in enumerate(names)}
    rows, cols, offsets, total = [], [], {}, 0
    for task, per_task in keys.items():
        offsets[task] = total
        for i, item in enumerate(per_task):
            for k in item:
                rows.append(total + i)
                cols.append(index[k])
        total += len(per_task)
    # Bipartite graph items × keys, as one square graph over (items, keys).
    size = total + len(names)
    graph = sparse.coo_matrix((np.ones(len(rows)), (rows, np.asarray(cols, dtype=np.int64) + total)), (size, size))
    _, component = connected_components(graph, directed=False)
    # Number the components in the order of their smallest key (stable across rows that share the same items).
    first_key: dict[int, str] = {}
    for k, i in index.items():
        c = int(component[total + i])
        first_key[c] = min(first_key.get(c, k), k)
    order = {c: n for n, c in enumerate(sorted(first_key, key=first_key.__getitem__))}
    cluster = np.array([order[int(c)] for c in component[:total]], dtype=np.int64)
    rng = np.random.default_rng(seed)
    num_clusters = len(order)
    draws = rng.multinomial(num_clusters, np.full(num_clusters, 1.0 / num_clusters), size=num_resamples)
    return {
        task: draws[:, cluster[offsets[task] : offsets[task] + len(per_task)]].astype(np.int64)
        for task, per_task in keys.items()
    }


def interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of resampled values, ignoring undefined (NaN) resamples."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high))


def normalised(m: np.ndarray | float, m_default: np.ndarray | float, m_oracle: np.ndarray | float) -> np.ndarray:
    """100 × (m − m_default) / (m_oracle − m_default); NaN where the oracle is no better than the default."""
    m, d, o = (np.asarray(x, dtype=np.float64) for x in (m, m_default, m_oracle))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(o - d > 1e-12, 100.0 * (m - d) / (o - d), np.nan)


def resampled_scores(
    metric: Metric, labels: np.ndarray, values: np.ndarray, default: np.ndarray, oracle: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """The normalised score of `values` on every resample (default and oracle scored on the same draw)."""
    return normalised(
        metric.weighted(labels, values, weights),
        metric.weighted(labels, default, weights),
        metric.weighted(labels, oracle, weights),
    )


def mean_with_interval(per_task: Sequence[np.ndarray]) -> tuple[np.ndarray, tuple[float, float]]:
    """Average resampled scores over tasks (column j of every task from draw j: joint draws when the tasks were
    resampled together, see joint_bootstrap_weights); returns per-resample means and the 95% interval."""
    stacked = np.vstack(per_task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw where every task is undefined averages to NaN
        means = np.nanmean(stacked, axis=0) if stacked.size else np.array([np.nan])
    return means, interval(means)


def paired_ranks(resampled: Mapping[str, np.ndarray], point: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Rank models (1 = best) on every resample of the SAME draws, and on the point estimates.

    `resampled[model]` holds the model's average score per resample; all models must use the same draws. Returns,
    per model, its rank on the point estimates and the 2.5th–97.5th percentile of its ranks over resamples.
    """
    names = list(resampled)
    matrix = np.vstack([resampled[n] for n in names])  # models × resamples
    matrix = np.where(np.isfinite(matrix), matrix, -np.inf)
    ranks = scipy_stats.rankdata(-matrix, axis=0, method="min")
    point_ranks = scipy_stats.rankdata([-point[n] for n in names], method="min")
    out = {}
    for row, name in enumerate(names):
        low, high = np.percentile(ranks[row], [2.5, 97.5], method="nearest")
        out[name] = {"rank": int(point_ranks[row]), "low": int(low), "high": int(high)}
    return out


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
