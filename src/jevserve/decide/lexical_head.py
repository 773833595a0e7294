"""A lexical head for one question: TF-IDF of the state's words and word pairs, read by a logistic regression.

The tuned reader answers the gateway's guard question with the mean of its readout's P(yes) and this head's
(decide/tuned.py; docs/training.md, "One head per gateway question, and the lexical baseline beside the readout"):
the readout reads MiniLM's token states, which blur exact phrasings ("ignore all previous instructions",
"developer mode"), and the bench's TF-IDF + logistic regression baseline trained on the same examples catches many
of the injections the readout ranks below everyday requests; their mean separates the two better than either
(measured, not assumed: that section).

The transform is scikit-learn's `TfidfVectorizer` as the bench's baseline configures it (lower case, tokens of two
or more word characters, unigrams and bigrams, sublinear term frequency, smoothed idf, unit length), re-done here
in numpy from the fitted vocabulary and idf, so that serving needs no scikit-learn; train/lexical_head.py fits it
with scikit-learn, and the tests check the two agree. A file holds one head per question, keyed by
`decide.trained.question_key`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token_pattern


def terms(text: str) -> list[str]:
    """The unigrams and bigrams of `text`, as scikit-learn's word analyzer with ngram_range=(1, 2) makes them."""
    tokens = _TOKEN.findall(text.lower())
    return tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]


@dataclass(frozen=True)
class LexicalHead:
    """P(yes) of one question from the state's words: sigmoid(tfidf(state) · coef + intercept)."""

    question: str  # decide.trained.question_key of the question it answers
    vocabulary: Mapping[str, int]  # term → column
    idf: np.ndarray  # (columns,) float64
    coef: np.ndarray  # (columns,) float64
    intercept: float

    def probability(self, text: str) -> float:
        """P(yes) for `text` (a text with no known term reads as the intercept alone)."""
        counts = Counter(self.vocabulary[t] for t in terms(text) if t in self.vocabulary)
        logit = self.intercept
        if counts:
            columns = np.array(sorted(counts), np.int64)  # sorted: the sum runs in one order everywhere
            values = np.array([1.0 + math.log(counts[c]) for c in columns]) * self.idf[columns]
            logit += float(values @ self.coef[columns]) / float(np.linalg.norm(values))
        if logit >= 0:  # the logistic in the form that cannot overflow for either sign
            return 1.0 / (1.0 + math.exp(-logit))
        return math.exp(logit) / (1.0 + math.exp(logit))


def save_heads(path: Path, heads: Sequence[LexicalHead]) -> None:
    """Write heads to one compressed .npz (terms as fixed-width unicode, numbers as float32)."""
    arrays: dict[str, np.ndarray] = {"questions": np.array([h.question for h in heads])}
    for i, head in enumerate(heads):
        ordered = sorted(head.vocabulary, key=head.vocabulary.__getitem__)
        arrays[f"{i}.terms"] = np.array(ordered)
        arrays[f"{i}.idf"] = np.asarray(head.idf, np.float32)
        arrays[f"{i}.coef"] = np.asarray(head.coef, np.float32)
        arrays[f"{i}.intercept"] = np.array([head.intercept], np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def load_heads(path: Path) -> dict[str, LexicalHead]:
    """question key → head, from a file save_heads wrote ({} when there is none)."""
    if not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as stored:
        heads = {}
        for i, question in enumerate(stored["questions"].tolist()):
            vocabulary = {term: column for column, term in enumerate(stored[f"{i}.terms"].tolist())}
            heads[question] = LexicalHead(
                question=question,
                vocabulary=vocabulary,
                idf=stored[f"{i}.idf"].astype(np.float64),
                coef=stored[f"{i}.coef"].astype(np.float64),
                intercept=float(stored[f"{i}.intercept"][0]),
            )
    return heads
