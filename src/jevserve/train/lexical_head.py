"""Fit the tuned reader's lexical heads (decide/lexical_head.py) on the recipe's own examples.

A head answers one question; it is fitted on every training example that asks exactly that question (the recipe's
fit rows: its validation states are left out, as for the readout), with the bench's learned baseline's fixed recipe
(bench/supervised.py: TF-IDF + balanced logistic regression, C = 1), and stored as the numpy head serving reads.
Which questions get one (`head_specs`) is decided by rules written before measuring (docs/training.md): the
gateway's guard question (words, joined with the readout by their mean: "One head per gateway question, and the
lexical baseline beside the readout"). The harm guard's did not earn one, nor did the tool gate's (a character head
answering alone, fitted with the composed calls as well: "The tool gate read by a lexical head alone"), which
benchmarks/decide/tool_gate_head.py measures through the same `HeadSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jevserve.decide.base import DecisionQuestion
from jevserve.decide.lexical_head import LexicalHead, save_heads
from jevserve.decide.trained import question_key
from jevserve.decide.tuned import lexical_file
from jevserve.train.examples import Example


@dataclass(frozen=True)
class HeadSpec:
    """One question the tuned reader answers with a lexical head, and how that head is made and read."""

    question: DecisionQuestion
    analyzer: str  # decide.lexical_head.ANALYZERS
    combine: str  # decide.lexical_head.COMBINES
    extra_examples: Callable[[], Sequence[Example]] = tuple  # train-side examples fitted on besides the recipe's


def head_specs() -> tuple[HeadSpec, ...]:
    """The heads the tuned reader serves: the gateway's guard question, over words, averaged with the readout."""
    from jevserve.train.rules import injection

    return (HeadSpec(injection(), "words", "mean"),)


def head_questions() -> tuple[DecisionQuestion, ...]:
    """The questions the tuned reader answers with a lexical head."""
    return tuple(spec.question for spec in head_specs())


def examples_asking(question: DecisionQuestion, examples: Sequence[Example]) -> tuple[list[str], np.ndarray]:
    """The states of the examples that ask exactly `question`, and their answers (True: yes)."""
    key = question_key(question)
    picked = [ex for ex in examples if question_key(ex.question) == key]
    return [ex.state for ex in picked], np.array([ex.answer == 0 for ex in picked], dtype=bool)  # noul: 0 is yes


def fit_head(
    question: DecisionQuestion, examples: Sequence[Example], *, analyzer: str = "words", combine: str = "mean"
) -> LexicalHead | None:
    """The head of `question` fitted on the examples that ask it (None when they hold one answer or too few terms
    to learn from, as a tiny test recipe may)."""
    from jevserve.bench.supervised import TfidfClassifier, char_vectorizer

    texts, labels = examples_asking(question, examples)
    classifier = TfidfClassifier(vectorizer=char_vectorizer) if analyzer == "chars" else TfidfClassifier()
    try:
        model = classifier.fit(texts, labels)
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
        analyzer=analyzer,
        combine=combine,
    )


def fit_spec(spec: HeadSpec, examples: Sequence[Example]) -> LexicalHead | None:
    """The head `spec` describes, fitted on `examples` (the recipe's fit rows) and its own extra examples."""
    return fit_head(
        spec.question, [*examples, *spec.extra_examples()], analyzer=spec.analyzer, combine=spec.combine
    )


def write_lexical_heads(weights: Path, examples: Sequence[Example], log=print) -> Path:
    """Fit a head for each of `head_specs()` on `examples` (the fit rows) and write them beside `weights`."""
    heads = [h for h in (fit_spec(spec, examples) for spec in head_specs()) if h is not None]
    path = lexical_file(weights)
    save_heads(path, heads)
    log(f"lexical heads: {len(heads)} ({path.name}, {path.stat().st_size / 1e6:.2f} MB)")
    return path
