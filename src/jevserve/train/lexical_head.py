"""Fit the tuned reader's lexical heads (decide/lexical_head.py) on the recipe's own examples.

A head answers one question; it is fitted on every training example that asks exactly that question (the recipe's
fit rows: its validation states are left out, as for the readout), with the bench's learned baseline's fixed recipe
(bench/supervised.py: TF-IDF of word unigrams and bigrams + balanced logistic regression, C = 1), and stored as the
numpy head serving reads. Which questions get one: `HEAD_QUESTIONS`, the gateway's guard question only; the harm
guard's did not earn one (docs/training.md, "The readout and the lexical baseline together").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jevserve.decide.base import DecisionQuestion
from jevserve.decide.lexical_head import LexicalHead, save_heads
from jevserve.decide.trained import question_key
from jevserve.decide.tuned import lexical_file
from jevserve.train.examples import Example


def head_questions() -> tuple[DecisionQuestion, ...]:
    """The questions the tuned reader answers with a lexical head beside its readout: the gateway's guard question."""
    from jevserve.train.rules import injection

    return (injection(),)


def examples_asking(question: DecisionQuestion, examples: Sequence[Example]) -> tuple[list[str], np.ndarray]:
    """The states of the examples that ask exactly `question`, and their answers (True: yes)."""
    key = question_key(question)
    picked = [ex for ex in examples if question_key(ex.question) == key]
    return [ex.state for ex in picked], np.array([ex.answer == 0 for ex in picked], dtype=bool)  # noul: 0 is yes


def fit_head(question: DecisionQuestion, examples: Sequence[Example]) -> LexicalHead | None:
    """The head of `question` fitted on the examples that ask it (None when they hold one answer or too few words
    to learn from, as a tiny test recipe may)."""
    from jevserve.bench.supervised import TfidfClassifier

    texts, labels = examples_asking(question, examples)
    try:
        model = TfidfClassifier().fit(texts, labels)
    except ValueError:  # no term in at least two texts: scikit-learn's "empty vocabulary"
        return None
    if model.constant_ is not None:
        return None
    return LexicalHead(
        question=question_key(question),
        vocabulary={term: int(column) for term, column in model.vectorizer_.vocabulary_.items()},
        idf=np.asarray(model.vectorizer_.idf_, np.float64),
        coef=np.asarray(model.model_.coef_[0], np.float64),
        intercept=float(model.model_.intercept_[0]),
    )


def write_lexical_heads(weights: Path, examples: Sequence[Example], log=print) -> Path:
    """Fit a head for each of `head_questions()` on `examples` (the fit rows) and write them beside `weights`."""
    heads = [h for h in (fit_head(q, examples) for q in head_questions()) if h is not None]
    path = lexical_file(weights)
    save_heads(path, heads)
    log(f"lexical heads: {len(heads)} ({path.name}, {path.stat().st_size / 1e6:.2f} MB)")
    return path
