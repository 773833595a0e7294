"""Fit the tuned reader's lexical heads (decide/lexical_head.py) on the recipe's own examples.

A head answers one question; it is fitted on every training example that asks exactly that question (the recipe's
fit rows: its validation states are left out, as for the readout), with the bench's learned baseline's fixed recipe
(bench/supervised.py: TF-IDF + balanced logistic regression, C = 1), and stored as the numpy head serving reads.
Which questions get one (`head_specs`) is decided by rules written before measuring (docs/training.md): the
gateway's guard question (words, joined with the readout by their mean: "One head per gateway question, and the
lexical baseline beside the readout"), the same way every bench yes/no question no gateway default asks ("Heads on
the bench's own questions"), and the two cache questions, whose heads read what the state's two texts do not share
instead of its words (`PAIR_ANALYZER`: "The cache questions read by what the two texts do not share"). The harm
guard's did not earn one, nor did the tool gate's: a character head
answering alone (`tool_gate_head_spec`, fitted with the composed calls of the templates not held out for calibration
and with ordinary calls; with or without calibrated answers, with or without agent-action-risk's rows) failed its
serving rules on the bench's headline (docs/training.md, "The tool gate's head with ordinary calls, judged on a
second blind set" and the two sections after it); benchmarks/decide/tool_gate_head.py measures it through the same
`HeadSpec`. A head joins only a question the recipe's own rows ask: a recipe that never asks it (a tiny test recipe)
gets none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.decide.base import DecisionQuestion
from jevserve.decide.lexical_head import PAIR_ANALYZERS, LexicalHead, needs_cosine, pair_cosine, save_heads, terms
from jevserve.decide.trained import question_key
from jevserve.decide.tuned import lexical_file
from jevserve.train.examples import Example


@dataclass(frozen=True)
class HeadSpec:
    """One question the tuned reader answers with a lexical head, and how that head is made and read."""

    question: DecisionQuestion
    analyzer: str  # decide.lexical_head.ANALYZERS
    combine: str  # decide.lexical_head.COMBINES
    # train-side examples fitted on besides the recipe's, made from the bench data (a BenchData)
    extra_examples: Callable[[Any], Sequence[Example]] = lambda data: ()
    # whether its answers are calibrated on the recipe's validation rows (`calibrated`), as the readout's are
    calibrate: bool = False
    # sources whose recipe rows the head is not fitted on (a bench task whose threshold is tuned on its train side
    # reads a head out of sample there only if the head never saw those rows)
    leave_out_sources: tuple[str, ...] = ()
    # the logistic regression's inverse regularisation (the bench baseline's 1; the pair heads' 10, chosen by
    # cross-validation on the train side: docs/training.md, "The cache questions read by what the two texts do not
    # share")
    c: float = 1.0


def tool_gate_examples(data: Any) -> list[Example]:
    """What the studied tool-gate head is fitted on besides the recipe's rows: the composed calls of the templates not
    held out for the gateway's calibration, and ordinary calls (BFCL's, none in the calibration file)."""
    from jevserve.train.tool_calls_composed import fit_examples
    from jevserve.train.tool_calls_ordinary import ordinary_call_examples

    return [*fit_examples(), *ordinary_call_examples(data)]


def tool_gate_head_spec() -> HeadSpec:
    """The tool gate's head as studied (not served): over characters, answering alone, fitted with
    `tool_gate_examples` as well, its answers calibrated on the recipe's validation rows."""
    from jevserve.train.rules import unsafe_action

    return HeadSpec(unsafe_action(), "chars", "alone", tool_gate_examples, calibrate=True)


# The bench's own yes/no questions that no gateway default asks (each task's primary question; cache-chats and
# route-math word theirs apart from the gateway's cache and routing questions): (task, question id).
# tests/train/test_lexical_heads.py keeps this equal to every bench noul primary the gateway does not ask.
BENCH_ONLY_QUESTIONS = (
    ("guard-jailbreak", "jailbreak"),
    ("agent-web-policy", "deny"),
    ("agent-tool-fit", "fits"),
    ("verify-math-steps", "flawed"),
    ("verify-answer", "wrong"),
    ("route-math", "cheap_ok"),
    ("cache-chats", "reuse"),
    ("schedule-return", "continue"),
    ("schedule-continue", "follow_up"),
)


# The cache questions' heads read what the two texts do not share, not the state's words (docs/training.md, "The
# cache questions read by what the two texts do not share"); C = 10 was chosen by cross-validation on the train side.
PAIR_ANALYZER, PAIR_C = "pair+order+same", 10.0
# The gateway's reuse question also reads a term for one run of words moved and, where the two texts' words differ,
# their cosine (docs/training.md, "The moved-block pair head at the gateway's rate-set cache point"); cache-chats'
# question keeps the pair terms alone, since the cosine of two conversations reads the other way round on its train
# side.
REUSE_ANALYZER = "pair+order+same+block+cos:differ"


def head_specs() -> tuple[HeadSpec, ...]:
    """The heads the tuned reader serves, each averaged with the readout: the gateway's guard question (words), its
    cache question (the pair terms, the moved-block term and the cosine), and the bench's own yes/no questions no
    gateway default asks (`BENCH_ONLY_QUESTIONS`; words, but the pair terms for cache-chats' question), so no other
    gateway answer moves."""
    from jevserve.train.rules import injection, question, reuse

    def bench_only(task: str, qid: str) -> HeadSpec:
        if task == "cache-chats":
            return HeadSpec(question(task, qid), PAIR_ANALYZER, "mean", c=PAIR_C)
        return HeadSpec(question(task, qid), "words", "mean")

    return (
        HeadSpec(injection(), "words", "mean"),
        HeadSpec(reuse(), REUSE_ANALYZER, "mean", c=PAIR_C),
        *(bench_only(task, qid) for task, qid in BENCH_ONLY_QUESTIONS),
    )


def head_questions() -> tuple[DecisionQuestion, ...]:
    """The questions the tuned reader answers with a lexical head."""
    return tuple(spec.question for spec in head_specs())


def examples_asking(question: DecisionQuestion, examples: Sequence[Example]) -> tuple[list[str], np.ndarray]:
    """The states of the examples that ask exactly `question`, and their answers (True: yes)."""
    key = question_key(question)
    picked = [ex for ex in examples if question_key(ex.question) == key]
    return [ex.state for ex in picked], np.array([ex.answer == 0 for ex in picked], dtype=bool)  # noul: 0 is yes


def pair_vectorizer(analyzer: str = "pair", cosines: Mapping[str, float] | None = None):
    """TF-IDF over the terms of what a cache state's two texts do not share (`decide.lexical_head.terms` of a pair
    `analyzer`), every term kept (min_df 1: a word that tells one pair's answers apart may occur in no
    other pair); a "+cos" analyzer reads each state's cosine from `cosines` (`pair_cosines`)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if needs_cosine(analyzer):
        if cosines is None:
            raise ValueError(f"a {analyzer!r} vectorizer needs the states' cosines")
        return TfidfVectorizer(
            analyzer=lambda text: terms(text, analyzer, cosines[text]), min_df=1, sublinear_tf=True
        )
    return TfidfVectorizer(analyzer=partial(terms, analyzer=analyzer), min_df=1, sublinear_tf=True)


@cache
def _text_embedder():
    """The shipped encoder's token-graph embedder, as the tuned reader embeds question texts (decide/tuned.py)."""
    from jevserve.decide.token_embedder import TokenEmbedder

    return TokenEmbedder("int8")


def pair_cosines(states: Sequence[str], embed: Callable[[list[str]], np.ndarray] | None = None) -> dict[str, float]:
    """state → the cosine of its two texts' sentence vectors (`decide.lexical_head.pair_cosine`), by `embed` (the
    reader's text embedder by default, which serving reads them with)."""
    embed = embed or _text_embedder().embed
    return {state: pair_cosine(state, embed) for state in dict.fromkeys(states)}


def fit_head(
    question: DecisionQuestion,
    examples: Sequence[Example],
    *,
    analyzer: str = "words",
    combine: str = "mean",
    c: float = 1.0,
) -> LexicalHead | None:
    """The head of `question` fitted on the examples that ask it (None when they hold one answer or too few terms
    to learn from, as a tiny test recipe may)."""
    from jevserve.bench.supervised import TfidfClassifier, char_vectorizer

    texts, labels = examples_asking(question, examples)
    cosines = pair_cosines(texts) if needs_cosine(analyzer) else None
    vectorizers = {"chars": char_vectorizer, **{a: partial(pair_vectorizer, a, cosines) for a in PAIR_ANALYZERS}}
    classifier = (
        TfidfClassifier(c=c, vectorizer=vectorizers[analyzer]) if analyzer in vectorizers else TfidfClassifier(c=c)
    )
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


def platt_map(head: LexicalHead, examples: Sequence[Example]) -> tuple[float, float] | None:
    """(a, b) of the Platt map P' = sigmoid(a * logit + b) for `head`, fitted by (nearly unregularised) logistic
    regression on the examples that ask its question (held-out rows: the recipe's validation rows); None when they
    hold one answer."""
    from sklearn.linear_model import LogisticRegression

    picked = [ex for ex in examples if question_key(ex.question) == head.question]
    labels = np.array([ex.answer == 0 for ex in picked], dtype=bool)  # noul: 0 is yes
    if labels.all() or not labels.any():
        return None
    platt = LogisticRegression(C=1e6).fit(np.array([[head.logit(ex.state)] for ex in picked]), labels)
    return float(platt.coef_[0][0]), float(platt.intercept_[0])


def calibrated(head: LexicalHead, examples: Sequence[Example]) -> LexicalHead:
    """`head` with its answers Platt-scaled on `examples` (`platt_map`). A monotone map: every threshold set by a
    rate moves with it. Stored in the head's own form (coef scaled by a, intercept a * intercept + b); unchanged when
    the rows hold one answer."""
    found = platt_map(head, examples)
    if found is None:
        return head
    a, b = found
    return replace(head, coef=head.coef * a, intercept=a * head.intercept + b)


def fit_spec(
    spec: HeadSpec, examples: Sequence[Example], data: Any = None, validation: Sequence[Example] = ()
) -> LexicalHead | None:
    """The head `spec` describes, fitted on `examples` (the recipe's fit rows, less those of its left-out sources) and
    its own extra examples (made from `data`), calibrated on `validation` where the spec asks; None when no row asks
    its question."""
    key = question_key(spec.question)
    if not any(question_key(ex.question) == key for ex in examples):
        return None
    rows = [ex for ex in examples if not set(ex.sources) & set(spec.leave_out_sources)]
    head = fit_head(
        spec.question, [*rows, *spec.extra_examples(data)], analyzer=spec.analyzer, combine=spec.combine, c=spec.c
    )
    return calibrated(head, validation) if head is not None and spec.calibrate else head


def _by_question(examples: Sequence[Example]) -> dict[str, list[Example]]:
    """The examples grouped by the key of the question they ask, in their order."""
    grouped: dict[str, list[Example]] = {}
    for ex in examples:
        grouped.setdefault(question_key(ex.question), []).append(ex)
    return grouped


def write_lexical_heads(
    weights: Path, examples: Sequence[Example], data: Any = None, log=print, validation: Sequence[Example] = ()
) -> Path:
    """Fit a head for each of `head_specs()` on `examples` (the fit rows) and `data`'s extras, calibrated on
    `validation` (the recipe's validation rows) where its spec asks; write them beside `weights`."""
    # each spec reads only the rows that ask its question: group them by key once, not once per spec
    asking, held = _by_question(examples), _by_question(validation)
    specs = [(spec, question_key(spec.question)) for spec in head_specs()]
    fitted = (fit_spec(spec, asking.get(key, []), data, held.get(key, [])) for spec, key in specs)
    heads = [h for h in fitted if h is not None]
    path = lexical_file(weights)
    save_heads(path, heads)
    log(f"lexical heads: {len(heads)} ({path.name}, {path.stat().st_size / 1e6:.2f} MB)")
    return path
