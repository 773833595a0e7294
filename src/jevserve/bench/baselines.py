"""Source-only baselines: what can be predicted from where a text came from or what it looks like, not what it says.

When a task pools positives and negatives from different packages, a model could win by spotting the source (its
length, formatting, language) instead of the decision. Two baselines measure that risk, both trained on the train
side only:

- `source-style`: logistic regression (scikit-learn) on surface features of the state: length in characters,
  words and lines (log), and the shares of upper-case letters, digits, punctuation, whitespace and non-ASCII
  characters, mean word length, question and exclamation marks, bullet-like line starts and brackets.
- `source-majority`: the majority label of each item's source on the train side (the item's source is the one
  thing it knows).

A task whose source-only scores are near 100 measures style, not the decision; docs/bench.md reports both.
"""

from __future__ import annotations

import math
import re
import string
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

_PUNCT = set(string.punctuation)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s", re.MULTILINE)
STYLE_FEATURES = (
    "log_chars", "log_words", "log_lines", "upper_share", "digit_share", "punct_share", "space_share",
    "non_ascii_share", "mean_word_len", "log_question_marks", "log_exclamations", "log_bullets", "log_brackets",
)  # fmt: skip


def style_features(text: str) -> np.ndarray:
    """Surface features of a text (see STYLE_FEATURES), none of which reads a word's meaning."""
    n = max(len(text), 1)
    words = text.split()
    letters = sum(c.isalpha() for c in text) or 1
    return np.array(
        [
            math.log1p(len(text)),
            math.log1p(len(words)),
            math.log1p(text.count("\n")),
            sum(c.isupper() for c in text) / letters,
            sum(c.isdigit() for c in text) / n,
            sum(c in _PUNCT for c in text) / n,
            sum(c.isspace() for c in text) / n,
            sum(ord(c) > 127 for c in text) / n,
            (sum(len(w) for w in words) / len(words)) if words else 0.0,
            math.log1p(text.count("?")),
            math.log1p(text.count("!")),
            math.log1p(len(_BULLET.findall(text))),
            math.log1p(sum(text.count(c) for c in "[]{}()<>")),
        ],
        dtype=np.float64,
    )


class StyleBaseline:
    """Logistic regression on `style_features` of the state (estimator convention: fit returns self)."""

    def __init__(self, *, c: float = 1.0, seed: int = 0) -> None:
        self.c = c
        self.seed = seed

    def fit(self, texts: Sequence[str], labels: np.ndarray) -> StyleBaseline:
        """Fit on train texts and their 0/1 labels; sets `pipeline_`."""
        features = np.vstack([style_features(t) for t in texts])
        self.pipeline_ = make_pipeline(
            StandardScaler(), LogisticRegression(C=self.c, max_iter=2000, random_state=self.seed)
        ).fit(features, labels.astype(int))
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(positive) per text."""
        features = np.vstack([style_features(t) for t in texts])
        return self.pipeline_.predict_proba(features)[:, 1]

    def get_params(self) -> dict[str, float | int]:
        """The settings, for results files."""
        return {"c": self.c, "seed": self.seed}


class SourceMajority:
    """P(positive) = the positive share of the item's source on the train side (0.5 for a source never seen)."""

    def fit(self, sources: Sequence[str], labels: np.ndarray) -> SourceMajority:
        """Count positives per source; sets `rates_`."""
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for source, label in zip(sources, labels, strict=True):
            totals[source][0] += int(bool(label))
            totals[source][1] += 1
        self.rates_ = {s: pos / n for s, (pos, n) in totals.items()}
        return self

    def predict_proba(self, sources: Sequence[str]) -> np.ndarray:
        """The train positive share of each item's source."""
        return np.array([self.rates_.get(s, 0.5) for s in sources], dtype=np.float64)
