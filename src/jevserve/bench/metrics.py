"""Task metrics, each computable on the test items as they are and on bootstrap resamples given as count weights.

A resample is a row of non-negative integer weights (how often each test item was drawn), so every model is scored
on exactly the same draw (paired) and a weighted metric replaces building resampled arrays.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy import sparse


class Metric(ABC):
    """A number that says how good decisions are; higher is better."""

    name: str  # short key, e.g. "balanced_accuracy"
    description: str  # one sentence for the docs and the board

    def __call__(self, labels: np.ndarray, values: np.ndarray) -> float:
        """The metric on all items (every weight 1)."""
        return float(self.weighted(labels, values, np.ones((1, len(labels)), dtype=np.int64))[0])

    @abstractmethod
    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """One metric value per row of `weights` (shape: resamples × items); NaN where it is undefined."""

    def chance(self, labels: np.ndarray) -> float:
        """The metric's expected value for decisions that ignore the item (a coin flip, a constant ranking)."""
        return 0.5


class BalancedAccuracy(Metric):
    """Mean of the true-positive and true-negative rates: 0.5 for any constant rule, whatever the class balance."""

    name = "balanced_accuracy"
    description = (
        "balanced accuracy: the mean of the hit rate on positives and on negatives, so a constant rule scores 0.5 "
        "whatever the share of positives"
    )

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Weighted TPR and TNR per resample; NaN for a resample without one of the classes."""
        y = labels.astype(bool)
        d = values.astype(bool)
        w = weights.astype(np.float64)
        positives = w @ y
        negatives = w @ ~y
        with np.errstate(invalid="ignore", divide="ignore"):
            tpr = (w @ (y & d)) / positives
            tnr = (w @ (~y & ~d)) / negatives
        return (tpr + tnr) / 2.0


class Accuracy(Metric):
    """Share of items decided right."""

    name = "accuracy"
    description = "accuracy: the share of items decided right"

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Weighted share of agreements per resample."""
        w = weights.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w @ (labels.astype(bool) == values.astype(bool))) / w.sum(axis=1)

    def chance(self, labels: np.ndarray) -> float:
        """A coin flip is right half the time."""
        return 0.5


@dataclass(frozen=True)
class RouteUtility(Metric):
    """Accuracy of the answers served minus a price per call sent to the strong model.

    labels: (n, 2) booleans (cheap model right, strong model right); values: True = send to the cheap model.
    """

    strong_cost: float = 0.2  # cost of one strong-model call, in units of the value of one right answer
    name: str = "route_utility"
    description: str = (
        "cost-weighted accuracy: share of right answers served minus 0.2 per request sent to the strong model"
    )

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Weighted mean utility per resample."""
        cheap = values.astype(bool)
        right = np.where(cheap, labels[:, 0], labels[:, 1]).astype(np.float64)
        utility = right - self.strong_cost * (~cheap)
        w = weights.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w @ utility) / w.sum(axis=1)

    def chance(self, labels: np.ndarray) -> float:
        """A coin-flip router: each problem to either model with probability 1/2."""
        right = labels.astype(np.float64)
        return float(np.mean(0.5 * right[:, 0] + 0.5 * (right[:, 1] - self.strong_cost)))


def _tie_groups(values: np.ndarray) -> sparse.csr_matrix:
    """One-hot (items × distinct values, ascending) matrix: which items share a value."""
    _, group = np.unique(values, return_inverse=True)
    return sparse.csr_matrix((np.ones(len(values)), (np.arange(len(values)), group)),
                             shape=(len(values), int(group.max()) + 1 if len(values) else 0))


def _tied_pairs(weights: np.ndarray, groups: sparse.csr_matrix) -> np.ndarray:
    """Per resample, the pairs of drawn copies that share a value: Σ over values of W(W − 1) / 2."""
    per_value = np.asarray((groups.T @ weights.T).T)
    return (per_value * (per_value - 1)).sum(axis=1) / 2.0


class KendallTau(Metric):
    """Kendall's τ-b between predicted and true values (scipy's definition), the rank agreement a queue order needs."""

    name = "kendall_tau_b"
    description = "Kendall's τ-b between predicted and true reply lengths (scipy.stats.kendalltau), 1 = same order"

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """τ-b per resample, as scipy computes it on the items repeated as often as drawn; a constant prediction
        has τ = 0.

        Vectorised over resamples: with s_ij = sign(x_i − x_j)·sign(y_i − y_j), the concordant minus discordant
        pairs of a draw are wᵀ S w / 2 (copies of one item tie in both and add nothing), and the ties of x and of y
        are Σ W_v(W_v − 1)/2 over each distinct value's drawn weight W_v.
        """
        x = np.asarray(values, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64)
        w = np.asarray(weights, dtype=np.float64)
        # Every partial sum is an integer below (Σw)²; below 2^24 float32 holds them exactly, at twice the speed.
        exact32 = len(x) and float(w.sum(axis=1).max()) ** 2 < 2**24
        kind = np.float32 if exact32 else np.float64
        signs = (np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])).astype(kind)
        net = np.einsum("ri,ri->r", (w.astype(kind) @ signs).astype(np.float64), w) / 2.0
        total = w.sum(axis=1)
        pairs = total * (total - 1) / 2.0
        denominator = (pairs - _tied_pairs(w, _tie_groups(x))) * (pairs - _tied_pairs(w, _tie_groups(y)))
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = net / np.sqrt(denominator)
        # A constant predictor ranks nothing: τ is undefined there, which is τ = 0 for a ranking.
        return np.where(denominator > 0, tau, 0.0)

    def chance(self, labels: np.ndarray) -> float:
        """A prediction unrelated to the truth has τ = 0."""
        return 0.0


class Auroc(Metric):
    """Area under the ROC curve of a score against a yes/no label (scikit-learn's definition), for decisions whose
    operating point belongs to the deployment (a cache's size), as published work reports prefix-cache retention."""

    name = "auroc"
    description = "AUROC: the chance that a random positive scores above a random negative (0.5 = chance, 1 = perfect)"

    def __call__(self, labels: np.ndarray, values: np.ndarray) -> float:
        """scikit-learn's AUROC on all items (NaN without both classes)."""
        from sklearn.metrics import roc_auc_score  # here: importing scikit-learn costs seconds at start-up

        y = np.asarray(labels).astype(bool)
        if y.all() or not y.any():
            return float("nan")
        return float(roc_auc_score(y, np.asarray(values, dtype=np.float64)))

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """AUROC per resample with the draw counts as weights, vectorised over resamples: each positive counts the
        negative weight below its score, and half the negative weight tied with it; NaN without both classes."""
        y = np.asarray(labels).astype(bool)
        groups = _tie_groups(np.asarray(values, dtype=np.float64))
        w = np.asarray(weights, dtype=np.float64)
        positive = np.asarray((groups.T @ (w * y).T).T)
        negative = np.asarray((groups.T @ (w * ~y).T).T)
        below = np.cumsum(negative, axis=1) - negative
        area = (positive * (below + 0.5 * negative)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = area / (positive.sum(axis=1) * negative.sum(axis=1))
        return np.where((positive.sum(axis=1) > 0) & (negative.sum(axis=1) > 0), out, np.nan)


METRICS: dict[str, Metric] = {
    m.name: m for m in (BalancedAccuracy(), Accuracy(), RouteUtility(), KendallTau(), Auroc())
}


def metric_by_name(name: str) -> Metric:
    """The metric registered under `name`; unknown names list the known ones."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; expected one of: {', '.join(sorted(METRICS))}") from None
