"""verify-answer: flag a model's final answer to a math problem that is wrong (CHAMP, judged by rule)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.task import Item, Task, noul
from jevserve.bench.tasks.champ_judge import is_right, reference_key
from jevserve.bench.tasks.common import record_item

PROMPT_MODE = "0-Shot"  # the plain prompt: how a served model is usually asked

QUESTIONS = {
    "wrong": noul(
        "Is this final answer to the problem wrong?",
        true="The proposed answer does not solve the problem correctly",
        false="The proposed answer is the correct answer to the problem",
    ),
}


def answer_state(problem: str, final_answer: str) -> str:
    """What the verifier reads: the problem and the model's one-sentence answer (never the reference)."""
    return f"Problem: {problem}\n\nProposed answer: {final_answer}"


class VerifyAnswer(Task):
    """Re-check a final answer the judge marks wrong; four models' 0-shot answers per problem, one group each."""

    name = "verify-answer"
    category = "verify"
    sources = ("champ-answers",)
    summary = "flag wrong final answers of 4 models to competition math problems (CHAMP, judged by rule)"
    questions = QUESTIONS
    primary = "wrong"
    metric = BalancedAccuracy()
    rule_text = "flag when P(wrong) ≥ t; t tuned on train for balanced accuracy"
    default_text = "no verifier: every answer is served as it is"
    cap_text = (
        f"only the {PROMPT_MODE} answers of problems whose reference is an integer or Yes/No (tasks/champ_judge.py), "
        "and only answers that were not cut at the length limit"
    )

    default_why = (
        "As verify-math-steps: without a verifier model every answer is served (chance)."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """One item per judged answer; label True when the judge finds it wrong."""
        items = []
        for r in data.source("champ-answers"):
            key = reference_key(r.reference_answer)
            if r.prompt_mode != PROMPT_MODE or key is None or r.truncated or not r.final_answer:
                continue
            items.append(
                record_item(r, answer_state(r.problem, r.final_answer), not is_right(key, r.final_answer),
                            f"champ:{r.model}")
            )
        return tuple(items)

    def supervision(self, item: Item) -> dict[str, Any]:
        """The wrong question's answer is the label."""
        return {"wrong": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """A constant: nothing is flagged."""
        return np.zeros(len(items))
