"""verify-math-steps: flag a model's math solution that contains a mistake (CHAMP, human first-wrong-step labels)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.task import Item, Task, noul
from jevserve.bench.tasks.common import record_item

QUESTIONS = {
    "flawed": noul(
        "Does this solution contain a mistake: a wrong step, a wrong calculation or an unjustified claim?",
        true="At least one step of the solution is wrong",
        false="Every step of the solution is correct",
    ),
}


def solution_state(problem: str, solution: str) -> str:
    """What the verifier reads: the problem and the model's full solution (never the reference answer)."""
    return f"Problem: {problem}\n\nSolution:\n{solution}"


class VerifyMathSteps(Task):
    """Send a solution back for a re-check when it has a wrong step; annotators marked each first wrong step."""

    name = "verify-math-steps"
    category = "verify"
    sources = ("champ-steps",)
    summary = "flag math solutions with a wrong step before they are served (CHAMP, annotated by hand)"
    questions = QUESTIONS
    primary = "flawed"
    metric = BalancedAccuracy()
    rule_text = "flag when P(flawed) ≥ t; t tuned on train for balanced accuracy"
    default_text = "no verifier: every solution is served as it is"

    default_why = (
        "Serving stacks do not check a solution's steps without a verifier model: every solution is served, "
        "which is chance on balanced accuracy."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Every annotated solution (one group per problem); label True when a step is wrong."""
        return tuple(
            record_item(r, solution_state(r.problem, r.text), not r.is_correct, "champ-steps")
            for r in data.source("champ-steps")
        )

    def supervision(self, item: Item) -> dict[str, Any]:
        """The flawed question's answer is the label."""
        return {"flawed": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """A constant: nothing is flagged."""
        return np.zeros(len(items))
