"""Task metrics, each computable on the test items as they are and on bootstrap resamples given as count weights.

A resample is a row of non-negative integer weights (how often each test item was drawn), so every model is scored
on exactly the same draw (paired) and a weighted metric replaces building resampled arrays.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score


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


class KendallTau(Metric):
    """Kendall's τ-b between predicted and true values (scipy), the rank agreement a queue order needs."""

    name = "kendall_tau_b"
    description = "Kendall's τ-b between predicted and true reply lengths (scipy.stats.kendalltau), 1 = same order"

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """τ-b per resample, on the items repeated as often as drawn; a constant prediction has τ = 0."""
        out = np.empty(len(weights))
        index = np.arange(len(labels))
        for row, w in enumerate(weights):
            picked = np.repeat(index, w)
            tau = stats.kendalltau(values[picked], labels[picked]).statistic
            # A constant predictor ranks nothing: scipy returns NaN, which is τ = 0 for a ranking.
            out[row] = 0.0 if np.isnan(tau) else tau
        return out


class Auroc(Metric):
    """Area under the ROC curve of a score against a yes/no label (scikit-learn), for decisions whose operating
    point belongs to the deployment (a cache's size), as published work reports prefix-cache retention."""

    name = "auroc"
    description = "AUROC: the chance that a random positive scores above a random negative (0.5 = chance, 1 = perfect)"

    def weighted(self, labels: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """AUROC per resample with the draw counts as sample weights; NaN for a resample without both classes."""
        y = labels.astype(bool)
        out = np.full(len(weights), np.nan)
        for row, w in enumerate(weights):
            if (w @ y) > 0 and (w @ ~y) > 0:
                out[row] = roc_auc_score(y, values.astype(np.float64), sample_weight=w)
        return out


METRICS: dict[str, Metric] = {
    m.name: m for m in (BalancedAccuracy(), Accuracy(), RouteUtility(), KendallTau(), Auroc())
}


def metric_by_name(name: str) -> Metric:
    """The metric registered under `name`; unknown names list the known ones."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; expected one of: {', '.join(sorted(METRICS))}") from None
