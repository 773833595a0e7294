"""Open yes/no questions: does a readout read the question, on texts and questions unlike any bench family?

Ten short texts, each asked four bare yes/no questions (instructions only, no criteria, the way most people write
one): two whose answer is yes and two whose answer is no. The set was written by hand before any readout was
scored on it (two of its questions are the `jevserve serve` curl line's) and is never trained on. It is small, so
it tells a readout that ignores the question (every answer near one value) from one that reads it, not fine
differences.

Reported per model: the share of (yes-question, no-question) pairs about the same text that the readout orders
right (0.5 = ignores the question), the pooled AUROC, and the mean P(yes) of each group.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from jevserve.decide.base import DecisionBackend, DecisionItem
from jevserve.train.variants import bare_question

RESULT = Path("benchmarks/results/open_questions.json")

# text -> (questions whose answer is yes, questions whose answer is no)
OPEN_QUESTIONS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "Hi, I was charged twice for my March invoice and want my money back.": (
        ("Is the customer asking for money back?", "Is this message about a payment?"),
        ("Is the customer asking about the weather?", "Is the customer reporting a software crash?"),
    ),
    "The app crashes every time I open the settings page on my Android phone.": (
        ("Is the user reporting a bug?", "Does the message mention a mobile device?"),
        ("Is the user asking for a refund?", "Is the message written in French?"),
    ),
    "Can you write me a short poem about autumn leaves?": (
        ("Is this a request for creative writing?", "Does the request mention a season?"),
        ("Is the user asking for code?", "Is the user angry?"),
    ),
    "def add(a, b): return a - b  # why does this return the wrong result?": (
        ("Is the user asking about programming?", "Does the text contain code?"),
        ("Is this a cooking question?", "Is the user asking for travel advice?"),
    ),
    "What are the best things to see in Rome if I only have two days?": (
        ("Is the user asking for travel advice?", "Is the question about a city?"),
        ("Is the user asking for medical advice?", "Does the text contain code?"),
    ),
    "I've had a headache and a fever for three days, should I see a doctor?": (
        ("Is the user asking for medical advice?", "Does the user describe symptoms?"),
        ("Is this about sports?", "Is the user asking for a poem?"),
    ),
    "Your product is garbage and your support team never answers. I'm furious.": (
        ("Is the customer angry?", "Is this a complaint?"),
        ("Is the customer praising the product?", "Is the user asking a math question?"),
    ),
    "Solve for x: 3x + 7 = 22.": (
        ("Is this a math problem?", "Does the user ask to solve an equation?"),
        ("Is this about cooking?", "Is the user complaining?"),
    ),
    "How long should I boil an egg to get a soft yolk?": (
        ("Is this a cooking question?", "Is the user asking for a time or duration?"),
        ("Is the user asking about programming?", "Is this message about a payment?"),
    ),
    "Thanks so much, the new dashboard is fantastic and saves me hours every week!": (
        ("Is the customer praising the product?", "Is the message positive?"),
        ("Is this a complaint?", "Is the user reporting a bug?"),
    ),
}


def score_open_questions(backend: DecisionBackend) -> dict[str, Any]:
    """P(yes) for every question of the set, and the three summary numbers."""
    rows, pairs_right, pairs = [], 0.0, 0
    for text, (yes_questions, no_questions) in OPEN_QUESTIONS.items():
        asked = [(q, True) for q in yes_questions] + [(q, False) for q in no_questions]
        answers = backend.decide([DecisionItem(text, bare_question(q)) for q, _ in asked])
        p_yes = {q: float(a[0]) for (q, _), a in zip(asked, answers, strict=True)}
        rows += [{"text": text, "question": q, "answer": truth, "p_yes": p_yes[q]} for q, truth in asked]
        for yes in yes_questions:
            for no in no_questions:
                pairs += 1
                pairs_right += 1.0 if p_yes[yes] > p_yes[no] else 0.5 if p_yes[yes] == p_yes[no] else 0.0
    truths = np.array([r["answer"] for r in rows])
    p = np.array([r["p_yes"] for r in rows])
    return {
        "pairs_ordered_right": pairs_right / pairs,
        "auroc": float(roc_auc_score(truths, p)),
        "mean_p_yes_when_yes": float(p[truths].mean()),
        "mean_p_yes_when_no": float(p[~truths].mean()),
        "questions": rows,
    }


def open_questions_result(backends: Sequence[DecisionBackend]) -> dict[str, Any]:
    """Every backend scored on the set, with provenance."""
    return {
        "created": dt.date.today().isoformat(),
        "command": "jevserve train --open-questions",
        "num_texts": len(OPEN_QUESTIONS),
        "num_questions": sum(len(y) + len(n) for y, n in OPEN_QUESTIONS.values()),
        "models": {backend.card.name: score_open_questions(backend) for backend in backends},
    }


def write_open_questions(result: dict[str, Any], path: Path = RESULT) -> None:
    """Write the result as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
