"""A lexical head for one question: TF-IDF of the state's words (or characters, or what its two texts do not
share), read by a logistic regression.

The tuned reader answers the gateway's guard question with the mean of its readout's P(yes) and a head over words
and word pairs (decide/tuned.py; docs/training.md, "One head per gateway question, and the lexical baseline beside
the readout"): the readout reads MiniLM's token states, which blur exact phrasings ("ignore all previous
instructions", "developer mode"), and the two together separate injections from everyday requests better than
either. The bench's own yes/no questions that no gateway default asks are answered the same way ("Heads on the
bench's own questions"). A head may instead read character 2–5-grams (`analyzer="chars"`, which see a tool
call's arguments: "/", "*", `recursive`) and answer alone (`combine="alone"`, no encoder run for its question);
the tool gate was measured that way and not served ("The tool gate read by a lexical head alone"). A cache question's
state holds two texts (the cached question or conversation and the new one), and what decides reuse is how they
differ, which a bag of the state's words cannot see: "Is the clinic open on Sundays?" against "… closed …" shares
every word but one. The pair analyzers read the difference instead (`pair_terms`; "The cache questions read by what
the two texts do not share"); the tuned reader answers both cache questions with a `pair+order+same` head and its
readout.

The transform is scikit-learn's `TfidfVectorizer` as the bench's baselines configure it (lower case; words: tokens
of two or more word characters, unigrams and bigrams; characters: `char_wb` 2–5-grams inside space-padded words;
sublinear term frequency, smoothed idf, unit length), re-done here in numpy from the fitted vocabulary and idf, so
that serving needs no scikit-learn; train/lexical_head.py fits it with scikit-learn, and the tests check the two
agree. A file holds one head per question, keyed by `decide.trained.question_key`.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token_pattern


# the cache studies' pair terms, in the order built; "+cos" adds the two texts' cosine (`cosine_terms`), and
# "+cos:differ" only for texts whose words differ; "+block" the `moved-block` term (`pair_terms`)
PAIR_ANALYZERS = (
    "pair",
    "pair+order",
    "pair+order+same",
    "pair+order+same+cos",
    "pair+order+same+cos:differ",
    "pair+order+same+block+cos:differ",
)
ANALYZERS = ("words", "chars", *PAIR_ANALYZERS)
COMBINES = ("mean", "alone")
# The cosine of the two texts' sentence vectors (the shipped encoder's, as the reader's text embedder gives them)
# enters a "+cos" head as one term per cut it reaches, so the regression weighs each step of similarity on its own;
# the cuts were fixed before any fit
COSINE_CUTS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)


def needs_cosine(analyzer: str) -> bool:
    """Whether an analyzer's terms include the two texts' cosine (`terms` then needs it)."""
    return "+cos" in analyzer


def cosine_terms(cosine: float) -> list[str]:
    """One term per cut of COSINE_CUTS that `cosine` reaches ("cos>=0.9")."""
    return [f"cos>={cut}" for cut in COSINE_CUTS if cosine >= cut]


def pair_cosine(state: str, embed: Callable[[list[str]], np.ndarray]) -> float:
    """The cosine of the unit sentence vectors `embed` gives the state's two texts (`pair_texts`, stripped)."""
    vectors = embed([part.strip() for part in pair_texts(state)])
    return float(np.dot(vectors[0], vectors[1]))


def terms(text: str, analyzer: str = "words", cosine: float | None = None) -> list[str]:
    """The terms of `text` as scikit-learn's analyzers make them: "words", unigrams and bigrams of the word
    analyzer with ngram_range=(1, 2); "chars", the `char_wb` analyzer's 2–5-grams of each space-padded word (a
    padded word no longer than n gives itself once, and no longer grams); a pair analyzer's, `pair_terms` (and
    `cosine_terms(cosine)` for a "+cos" one, which needs `cosine`)."""
    if analyzer in PAIR_ANALYZERS:
        found = pair_terms(
            text,
            order=analyzer != "pair",
            same_words=analyzer.startswith("pair+order+same"),
            moved_block="+block" in analyzer,
        )
        if needs_cosine(analyzer):
            if cosine is None:
                raise ValueError(f"a {analyzer!r} head reads the two texts' cosine: pass it")
            # two texts of the same words (`n:0`: no word in one only) differ only in order or symbols, which the
            # pair terms say; there a high cosine (a swapped direction's is near 1) would only argue for one answer
            if not analyzer.endswith(":differ") or "n:0" not in found:
                found += cosine_terms(cosine)
        return found
    lowered = text.lower()
    if analyzer == "words":
        tokens = _TOKEN.findall(lowered)
        return tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
    grams = []
    for word in lowered.split():
        padded = f" {word} "
        for n in range(2, 6):
            if len(padded) <= n:
                grams.append(padded)
                break
            grams.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
    return grams


# The two-text states the cache questions ask about: gateway.questions.cache_pair_state and the bench's
# cache-pairs pair_state ("Cached question: …\nNew question: …"), and cache-chats' chats_state ("Cached
# conversation:\n…\n\nNew conversation:\n…"). A state in neither form reads as a first text with an empty second.
_PAIR_FORMS = (
    re.compile(r"Cached question:(.*?)\nNew question:(.*)", re.S),
    re.compile(r"Cached conversation:\n(.*?)\n\nNew conversation:\n(.*)", re.S),
)
# A word of any script (letters and digits, no underscore), keeping "don't" whole so that a negation is one term: a
# pattern of ASCII letters alone read two questions in Chinese or Russian as no words at all, the same pair ("n:0").
# A script written without spaces reads a run of its characters as one word, so two such questions that differ
# anywhere differ in their words.
_PAIR_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "cannot", "without"})


def pair_texts(state: str) -> tuple[str, str]:
    """The cached text and the new one of a cache question's state."""
    for form in _PAIR_FORMS:
        found = form.match(state)
        if found:
            return found.group(1), found.group(2)
    return state, ""


def pair_terms(state: str, *, order: bool = False, same_words: bool = False, moved_block: bool = False) -> list[str]:
    """What tells two texts' answers apart, as terms: each word in one text only (`d:` word), each word pair in one
    only (`b:`; `o:` when both hold the same words in another order, "from Paris to Rome" against "from Rome to
    Paris"), `swap` when exactly one word was replaced, the number of words in one only (`n:0` … `n:6`, 6 for six or
    more), `digits` when the words holding a digit differ and `negation` when one text negates and the other does
    not; with `order` also `reordered` when the words both hold come in another order (by first occurrence), which
    no word-specific term says for words never seen in training; with `same_words` also `reordered:same-words` when
    in addition both hold the same words ("from Paris to Rome" against "from Rome to Paris"), the conjunction a linear
    head cannot make of `n:0` (mostly casing and punctuation, one answer) and `reordered` (mostly rewordings, one
    answer); with `moved_block` also `moved-block` when the one text's words are the other's with one run of words
    moved elsewhere ("On my phone, how do I set up voicemail?" against "How do I set up voicemail on my phone?"), which
    on the train side tells every same-answer reorder from every swapped direction ("from Paris to Rome" against
    "from Rome to Paris" exchanges two words around the ones between them). Sorted, each once: a pair's terms do not
    depend on which text is the cached one."""
    first, second = (_words(text) for text in pair_texts(state))
    words_a, words_b = set(first), set(second)
    changed = words_a ^ words_b
    pairs_changed = set(itertools.pairwise(first)) ^ set(itertools.pairwise(second))
    marker = "b" if changed else "o"
    found = [f"d:{w}" for w in sorted(changed)] + [f"{marker}:{a} {b}" for a, b in sorted(pairs_changed)]
    if len(words_a - words_b) == 1 and len(words_b - words_a) == 1:
        found.append("swap")
    found.append(f"n:{min(len(changed), 6)}")
    if {w for w in words_a if any(c.isdigit() for c in w)} != {w for w in words_b if any(c.isdigit() for c in w)}:
        found.append("digits")
    if _negates(first) != _negates(second):
        found.append("negation")
    if order and _shared_order(first, words_b) != _shared_order(second, words_a):
        found.append("reordered")
        if same_words and not changed:
            found.append("reordered:same-words")
            if moved_block and _moved_block(first, second):
                found.append("moved-block")
    return found


def _moved_block(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether `second` is `first` with one contiguous run of words moved elsewhere: with the common start and end
    stripped, what is left of the one is a rotation of what is left of the other (P B Q R against P Q B R)."""
    if len(first) != len(second) or list(first) == list(second):
        return False
    start = 0
    while first[start] == second[start]:
        start += 1
    end = len(first)
    while first[end - 1] == second[end - 1]:
        end -= 1
    a, b = list(first[start:end]), list(second[start:end])
    doubled = a + a
    return any(doubled[i : i + len(b)] == b for i in range(1, len(a)))


def only_symbols_differ(state: str) -> bool:
    """Whether a cache state's two texts hold the same words in the same order and differ in their symbols (math
    operators, currency signs, emoji: Unicode's symbol categories, not punctuation): "3+3=?" against "3*3=?", "👍"
    against "👎". The terms read words only, so such a pair reads as one text repeated (`n:0`), which training taught
    means one answer; a pair head answers it as two questions (P(yes) 0), which can only keep a cached answer from
    being served."""
    first, second = pair_texts(state)
    if _words(first) != _words(second):
        return False
    return _symbols(first) != _symbols(second)


def _words(text: str) -> list[str]:
    return _PAIR_TOKEN.findall(text.lower().replace("\u2019", "'"))


def _symbols(text: str) -> list[str]:
    return [c for c in text if not c.isalnum() and not c.isspace() and unicodedata.category(c).startswith("S")]


def _shared_order(words: Sequence[str], other: set[str]) -> list[str]:
    """The words of `words` that `other` holds too, each at its first occurrence."""
    return list(dict.fromkeys(w for w in words if w in other))


def _negates(words: Sequence[str]) -> bool:
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


@dataclass(frozen=True)
class LexicalHead:
    """P(yes) of one question from the state's terms: sigmoid(tfidf(state) · coef + intercept)."""

    question: str  # decide.trained.question_key of the question it answers
    vocabulary: Mapping[str, int]  # term → column
    idf: np.ndarray  # (columns,) float64
    coef: np.ndarray  # (columns,) float64
    intercept: float
    analyzer: str = "words"  # one of ANALYZERS
    combine: str = "mean"  # one of COMBINES: how the reader joins the head's P(yes) with its readout's

    def __post_init__(self) -> None:
        if self.analyzer not in ANALYZERS or self.combine not in COMBINES:
            raise ValueError(f"analyzer must be one of {ANALYZERS} and combine one of {COMBINES}")

    @property
    def needs_cosine(self) -> bool:
        """Whether its answer reads the state's two texts' cosine (pass it to `logit` and `probability`)."""
        return needs_cosine(self.analyzer)

    def logit(self, text: str, cosine: float | None = None) -> float:
        """The logit of P(yes) for `text` (a text with no known term reads as the intercept alone); `cosine`: the
        two texts' (`pair_cosine`), for a head that `needs_cosine`."""
        found = terms(text, self.analyzer, cosine)
        counts = Counter(self.vocabulary[t] for t in found if t in self.vocabulary)
        logit = self.intercept
        if counts:
            columns = np.array(sorted(counts), np.int64)  # sorted: the sum runs in one order everywhere
            values = np.array([1.0 + math.log(counts[c]) for c in columns]) * self.idf[columns]
            logit += float(values @ self.coef[columns]) / float(np.linalg.norm(values))
        return logit

    def probability(self, text: str, cosine: float | None = None) -> float:
        """P(yes) for `text`: the logistic of `logit`; 0 from a pair head when the two texts hold the same words and
        differ in their symbols (`only_symbols_differ`)."""
        if self.analyzer in PAIR_ANALYZERS and only_symbols_differ(text):
            return 0.0
        logit = self.logit(text, cosine)
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
        arrays[f"{i}.kind"] = np.array([head.analyzer, head.combine])
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
                **_kind(stored, i),
            )
    return heads


def _kind(stored, i: int) -> dict[str, str]:
    """A head's analyzer and combine; a file that names none holds word heads read as a mean (the committed
    guard head's file is one)."""
    if f"{i}.kind" not in stored.files:
        return {}
    analyzer, combine = stored[f"{i}.kind"].tolist()
    return {"analyzer": analyzer, "combine": combine}
