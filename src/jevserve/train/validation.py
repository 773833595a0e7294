"""Scores of a decision model on held-out train examples, per family: what recipe studies compare (the bench's test
sides are never read here)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def family_scores(logits: list[np.ndarray], answers: np.ndarray, families: list[str]) -> dict[str, dict[str, float]]:
    """Per family (variants folded into their family): mean NLL and top-option accuracy at temperature 1."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for z, a, family in zip(logits, answers, families, strict=True):
        log_p = z - np.logaddexp.reduce(z)
        found[family.split("~")[0]].append((float(-log_p[a]), float(np.argmax(z) == a)))
    return {
        f: {
            "nll": float(np.mean([v[0] for v in rows])),
            "accuracy": float(np.mean([v[1] for v in rows])),
            "n": len(rows),
        }
        for f, rows in sorted(found.items())
    }


def summary(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """The mean over families of each family's NLL and accuracy."""
    return {
        "mean_nll": float(np.mean([s["nll"] for s in scores.values()])),
        "mean_accuracy": float(np.mean([s["accuracy"] for s in scores.values()])),
    }


def per_example(logits: list[np.ndarray], answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each example's negative log-likelihood and whether its top option is right, at temperature 1."""
    nll = np.array([float(np.logaddexp.reduce(z) - z[a]) for z, a in zip(logits, answers, strict=True)])
    right = np.array([float(np.argmax(z) == a) for z, a in zip(logits, answers, strict=True)])
    return nll, right


def resampled_family_means(values: np.ndarray, families: list[str], weights: np.ndarray) -> np.ndarray:
    """The mean over families of each family's weighted mean (question variants folded into their family), per
    resample (rows of `weights`); a family no resample drew is left out of that resample's mean."""
    names = sorted({f.split("~")[0] for f in families})
    onehot = np.zeros((len(families), len(names)))
    onehot[np.arange(len(families)), [names.index(f.split("~")[0]) for f in families]] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nanmean((weights * values) @ onehot / (weights @ onehot), axis=1)


def paired_difference(found: dict | None, measure: str) -> str:
    """A row's paired difference in `measure` ("nll" or "accuracy") with its interval, or a dash."""
    if not found:
        return "–"
    low, high = found[measure + "_interval"]
    return f"{found[measure]:+.3f} [{low:+.3f}, {high:+.3f}]"
