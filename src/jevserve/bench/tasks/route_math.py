"""route-math: send a math problem to a cheap model only when it will get it right (CHAMP answers of 2 models)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import RouteUtility
from jevserve.bench.sources import content_id, split_of
from jevserve.bench.task import Item, Task, frozen, noul
from jevserve.bench.tasks.champ_judge import is_right, reference_key

CHEAP, STRONG = "GPT-3.5", "GPT-4 Turbo"
PROMPT_MODE = "0-Shot"

QUESTIONS = {
    "cheap_ok": noul(
        "Can a small, inexpensive language model solve this math problem correctly on its own?",
        true="A routine problem that a small model gets right",
        false="A hard problem that needs a stronger model",
    ),
}


class RouteMath(Task):
    """Route each problem to GPT-3.5 (cheap) or GPT-4 Turbo (strong); both models' 0-shot answers are judged."""

    name = "route-math"
    category = "route"
    sources = ("champ-answers",)
    summary = f"route competition math to {CHEAP} or {STRONG}: right answers minus 0.2 per strong call (CHAMP)"
    questions = QUESTIONS
    primary = "cheap_ok"
    metric = RouteUtility(strong_cost=0.2)
    rule_text = f"send to {CHEAP} when P(cheap_ok) ≥ t, else to {STRONG}; t tuned on train for the utility"
    default_text = (
        f"route by problem length, long to {STRONG}: {CHEAP} below a length, the cut tuned on train; on this "
        f"data the tuned cut sends every problem to {STRONG}, so the zero-point is 'always strong'"
    )
    oracle_text = f"sends a problem to {CHEAP} when it is right there (or when neither model is), else to {STRONG}"
    cap_text = (
        f"problems whose reference is an integer or Yes/No and that have both models' {PROMPT_MODE} answers "
        "(tasks/champ_judge.py)"
    )

    default_why = (
        "Routers without a learned model route by a request feature, most often its length (long prompts to "
        "the strong model). Here the direction is fixed as routers use it and only the cut is tuned on train, "
        "where no cut beats sending everything to the strong model: the rule a router would deploy is 'always "
        "strong'."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """One item per judged problem; label (cheap right, strong right)."""
        by_problem: dict[str, dict[str, Any]] = {}
        for r in data.source("champ-answers"):
            if r.prompt_mode == PROMPT_MODE and r.model in (CHEAP, STRONG):
                by_problem.setdefault(r.group, {})[r.model] = r
        items = []
        for group, answers in by_problem.items():
            if len(answers) < 2:
                continue
            problem, reference = answers[CHEAP].problem, answers[CHEAP].reference_answer
            key = reference_key(reference)
            if key is None:
                continue
            right = tuple(
                bool(answers[m].final_answer) and is_right(key, answers[m].final_answer) for m in (CHEAP, STRONG)
            )
            items.append(
                Item(item_id=content_id("text", problem), state=problem, label=right, split=split_of(group),
                     source="champ-answers", group=group, extra=frozen({"chars": len(problem)}))
            )
        return tuple(items)

    def labels(self, items: Sequence[Item]) -> np.ndarray:
        """(n, 2) booleans: the cheap model right, the strong model right."""
        return np.array([item.label for item in items], dtype=bool).reshape(len(items), 2)

    def oracle(self, labels: np.ndarray) -> np.ndarray:
        """Cheap when the cheap model is right or when neither is (it costs less to be wrong)."""
        return labels[:, 0] | ~labels[:, 1]

    def target(self, labels: np.ndarray) -> np.ndarray:
        """P(cheap_ok) predicts whether the cheap model is right."""
        return labels[:, 0].astype(bool)

    def supervision(self, item: Item) -> dict[str, Any]:
        """cheap_ok is whether the cheap model's answer was judged right."""
        return {"cheap_ok": bool(item.label[0])}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Minus the problem length in characters: the shorter, the more the rule leans to the cheap model."""
        return -np.array([float(i.extra["chars"]) for i in items])
