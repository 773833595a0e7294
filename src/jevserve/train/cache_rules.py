"""Cache pairs made by rule: the same question in other words (reuse: yes), and questions one rule away whose answer
differs (reuse: no): the direction swapped ("from A to B" → "from B to A"), a negation inserted, a number or an
entity changed.

The bench's cache pairs are few and mostly paraphrases; a cache that serves "flights from Paris to Rome" for
"flights from Rome to Paris" serves a wrong answer. Each group below is one question in two or more wordings with
typed slots; the labels follow from the construction. Groups are split between training and measuring by hash
(train/rules.py), so the measured pairs are about questions no training pair was made from.
"""

from __future__ import annotations

from dataclasses import dataclass

from jevserve.train.examples import Example
from jevserve.train.perturb import rewrite
from jevserve.train.rules import reuse, stable_pick, template_side

FAMILY = "rules:cache-pairs"
SLOTS: dict[str, tuple[str, ...]] = {
    "city": ("Paris", "Berlin", "Madrid", "Rome", "Lisbon", "Vienna", "Prague", "Dublin", "Oslo", "Athens"),
    "currency": ("US dollars", "euros", "British pounds", "Japanese yen", "Swiss francs", "Canadian dollars"),
    "language": ("English", "French", "German", "Spanish", "Italian", "Portuguese", "Dutch"),
    "code": ("Python", "Java", "JavaScript", "C++", "Go", "Rust"),
    "length": ("miles", "kilometres", "metres", "feet", "yards", "inches"),
    "animal": ("dogs", "cats", "rabbits", "parrots", "hamsters"),
    "food": ("grapes", "chocolate", "carrots", "onions", "apples", "cheese"),
    "country": ("Japan", "Canada", "Brazil", "Kenya", "Norway", "India", "Mexico"),
}
NUMBERS = ("2", "3", "5", "10", "12", "20", "45", "100")


@dataclass(frozen=True)
class Group:
    """One question in several wordings. `{a}`/`{b}`: slots of type `slot`; `{n}`: a number; `{not}`: the
    negation, empty in the plain question. `swap`: exchanging a and b changes the answer; `symmetric`: it keeps it."""

    wordings: tuple[str, ...]
    slot: str
    swap: bool = True
    symmetric: bool = False


GROUPS: tuple[Group, ...] = (
    Group(
        ("How long is the flight from {a} to {b}?", "What's the flying time between {a} and {b}, leaving from {a}?"),
        "city",
    ),
    Group(("How much is {n} {a} in {b}?", "If I exchange {n} {a}, how many {b} do I get?"), "currency"),
    Group(
        ("How do I say 'thank you' in {a} if I only speak {b}?", "I speak {b}; what is 'thank you' in {a}?"), "language"
    ),
    Group(
        ("Translate 'good morning' from {a} into {b}.", "What is the {b} for the {a} phrase 'good morning'?"),
        "language",
    ),
    Group(
        (
            "How do I port a small script from {a} to {b}?",
            "What should I watch for when rewriting a short {a} script in {b}?",
        ),
        "code",
    ),
    Group(("How many {b} are in {n} {a}?", "Convert {n} {a} to {b}."), "length"),
    Group(("Is {a} faster than {b} for web servers?", "For web servers, does {a} run faster than {b}?"), "code"),
    Group(("Can {a} safely eat {b}?", "Is it safe to give {b} to {a}?"), "animal", swap=False),
    Group(("Which foods are {not}safe for {a}?", "What can {a} {not}eat without getting sick?"), "animal", swap=False),
    Group(("What is the capital of {a}?", "Which city is {a}'s capital?"), "country", swap=False),
    Group(
        ("Do I {not}need a visa to travel from {a} to {b}?", "Is a visa {not}required for a trip from {a} to {b}?"),
        "country",
    ),
    Group(("What time is it in {a} when it is noon in {b}?", "If it's 12:00 in {b}, what's the time in {a}?"), "city"),
    Group(
        ("How do I cook rice for {n} people?", "What amount of rice should I cook to feed {n} people?"),
        "city",
        swap=False,
    ),
    Group(
        ("Is it {not}possible to get a refund after {n} days?", "Can I {not}return the item {n} days after buying it?"),
        "city",
        swap=False,
    ),
    Group(("Which is bigger, {a} or {b}, by area?", "By area, is {a} larger than {b}?"), "country"),
    Group(("What is {n} percent of 250?", "Calculate {n}% of 250."), "city", swap=False),
    Group(
        ("Should I {not}brush my {a}' teeth every day?", "Is daily tooth brushing {not}recommended for {a}?"),
        "animal",
        swap=False,
    ),
    Group(
        ("Is {a} {not}a good first programming language?", "Should a beginner {not}start with {a}?"), "code", swap=False
    ),
    Group(("Why are {b} toxic to {a}?", "What makes {b} poisonous for {a}?"), "animal", swap=False),
    Group(
        ("How far is {a} from {b} by train?", "What's the rail distance between {a} and {b}?"),
        "city",
        swap=False,
        symmetric=True,
    ),
)
_FOOD_GROUPS = {"Can {a} safely eat {b}?", "Why are {b} toxic to {a}?"}  # their b is a food, not another animal


def _fill(wording: str, a: str, b: str, n: str, negated: bool) -> str:
    return wording.replace("{not}", "not " if negated else "").format(a=a, b=b, n=n)


def _values(group: Group, key: str) -> tuple[str, str, str, str, str]:
    """a, b, another a, n, another n: picked by hash of `key`."""
    kind = group.slot
    pool = SLOTS[kind]
    b_pool = SLOTS["food"] if group.wordings[0] in _FOOD_GROUPS else pool
    a = pool[stable_pick(key + "a", len(pool))]
    b_choices = [v for v in b_pool if v != a]
    b = b_choices[stable_pick(key + "b", len(b_choices))]
    others = [v for v in pool if v not in (a, b)]
    other = others[stable_pick(key + "o", len(others))]
    n = NUMBERS[stable_pick(key + "n", len(NUMBERS))]
    other_ns = [m for m in NUMBERS if m != n]
    return a, b, other, n, other_ns[stable_pick(key + "m", len(other_ns))]


def pair_state(cached: str, new: str) -> str:
    """What the cache question reads (bench cache-pairs' state)."""
    return f"Cached question: {cached}\nNew question: {new}"


def group_pairs(group: Group, draws: int = 6) -> list[tuple[str, str, bool, str]]:
    """(cached, new, same answer, rule) pairs of one group: paraphrases, and each rule that applies."""
    out = []
    for draw in range(draws):
        key = f"{group.wordings[0]}\x1f{draw}"
        a, b, other, n, other_n = _values(group, key)
        first, second = (group.wordings[i % len(group.wordings)] for i in (draw, draw + 1))
        base = _fill(first, a, b, n, False)
        out.append((base, _fill(second, a, b, n, False), True, "other words"))
        surface = rewrite(base)
        if surface:
            out.append((base, surface, True, "casing or punctuation"))
        if group.symmetric:
            out.append((base, _fill(second, b, a, n, False), True, "symmetric swap"))
        if group.swap:
            out.append((base, _fill(second if draw % 2 else first, b, a, n, False), False, "direction swapped"))
        if "{a}" in first:
            out.append((base, _fill(second if draw % 2 else first, other, b, n, False), False, "other entity"))
        if "{n}" in first:
            out.append((base, _fill(second if draw % 2 else first, a, b, other_n, False), False, "other number"))
        if "{not}" in first:
            out.append((base, _fill(second if draw % 2 else first, a, b, n, True), False, "negation"))
    return [(c, w, same, rule) for c, w, same, rule in out if c != w or same]


def cache_rule_pairs(side: str = "train") -> list[tuple[str, bool, str]]:
    """(state, same answer, rule) of every group on `side`, each pair in both orders."""
    out = []
    for group in GROUPS:
        if template_side(group.wordings[0]) != side:
            continue
        for cached, new, same, rule in group_pairs(group):
            out.append((pair_state(cached, new), same, rule))
            out.append((pair_state(new, cached), same, rule))
    return list(dict.fromkeys(out))


def cache_rule_examples(side: str = "train") -> list[Example]:
    """The pairs of `side` asked the cache's reuse question (yes: same answer)."""
    return [Example(state, reuse(), 0 if same else 1, FAMILY, ("rules",)) for state, same, _ in cache_rule_pairs(side)]
