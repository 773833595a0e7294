"""The model-facing form of a question: only what may influence an answer.

A `DecisionQuestion` is built from a question's type, instructions and criteria alone. The question id, its
position, its companions and unknown request fields never enter it, which is what makes answers independent of
them (SYSTEMONE_API.md §8). Backends receive `(state_text, DecisionQuestion)` pairs and return one probability per
option, in option order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from jevserve.protocol.request import ChoiceQuestion, NoulQuestion, Question, ScoreQuestion
from jevserve.protocol.text import render_text

Kind = Literal["noul", "choice", "score"]

# A noul is read as a two-option choice in this order: probabilities[0] is the answer's `noul` value.
NOUL_LABELS = ("yes", "no")


@dataclass(frozen=True, slots=True)
class DecisionOption:
    """One option as a model reads it."""

    label: str  # the option's name (choice), "yes"/"no" (noul) or the level text (score)
    description: str  # rendered description; "" when the request gave none


@dataclass(frozen=True, slots=True)
class DecisionQuestion:
    """A question reduced to what a model may read; hashable, so backends can cache per question."""

    kind: Kind
    instructions: str  # rendered instructions; "" when absent
    options: tuple[DecisionOption, ...]

    @property
    def num_options(self) -> int:
        """How many probabilities an answer to this question has."""
        return len(self.options)


def to_decision(question: Question) -> DecisionQuestion:
    """Reduce a validated wire question to its model-facing form."""
    instructions = render_text(question.instructions)
    if isinstance(question, NoulQuestion):
        criteria = question.criteria
        true_text = render_text(criteria.true) if criteria else ""
        false_text = render_text(criteria.false) if criteria else ""
        options = (DecisionOption(NOUL_LABELS[0], true_text), DecisionOption(NOUL_LABELS[1], false_text))
        return DecisionQuestion("noul", instructions, options)
    if isinstance(question, ChoiceQuestion):
        options = tuple(DecisionOption(name, render_text(desc)) for name, desc in question.criteria.items())
        return DecisionQuestion("choice", instructions, options)
    if isinstance(question, ScoreQuestion):
        options = tuple(DecisionOption(render_text(level), "") for level in question.criteria)
        return DecisionQuestion("score", instructions, options)
    raise TypeError(f"unknown question class {type(question).__name__}")


def to_wire(question: DecisionQuestion) -> dict:
    """A wire question equivalent to `question` (structured texts arrive as their rendered strings)."""
    wire: dict = {"type": question.kind}
    if question.instructions:
        wire["instructions"] = question.instructions
    if question.kind == "noul":
        yes, no = question.options
        criteria = {k: v for k, v in (("true", yes.description), ("false", no.description)) if v}
        if criteria:
            wire["criteria"] = criteria
    elif question.kind == "choice":
        wire["criteria"] = {o.label: (o.description or None) for o in question.options}
    else:
        wire["criteria"] = [o.label for o in question.options]
    return wire
