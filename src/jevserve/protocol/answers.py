"""Answer and response shapes of `POST /v1/systemone` (SYSTEMONE_API.md §4), and how answers are built.

`build_answer` derives every field (`choice`, `score`, `confidence`) from the same final probability vector it
returns, as the contract requires. The pydantic models parse responses on the client side; extension fields
(`x_*`) are kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from jevserve.protocol.confidence import choice_confidence, expected_level, score_confidence
from jevserve.protocol.request import ChoiceQuestion, NoulQuestion, Question, ScoreQuestion


class NoulAnswer(BaseModel):
    """`{"type": "noul", "noul": p}`: p is the probability of true."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["noul"]
    noul: float


class ChoiceAnswer(BaseModel):
    """The chosen option, a probability per option name and the reference confidence."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["choice"]
    choice: str
    probabilities: dict[str, float]
    confidence: float


class ScoreAnswer(BaseModel):
    """The expected level, the request's levels as a legend, a probability per level and the confidence."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: Literal["score"]
    score: float
    legend: dict[str, Any]
    probabilities: dict[str, float]
    confidence: float


Answer = Annotated[NoulAnswer | ChoiceAnswer | ScoreAnswer, Field(discriminator="type")]


class Usage(BaseModel):
    """Token counts; both are JSON integers (the SDK rejects 12.0)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    input_tokens: StrictInt
    output_tokens: StrictInt


class SystemOneResponse(BaseModel):
    """The 200 body: the model that answered, one answer per question id, and usage."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str
    answers: dict[str, Answer]
    usage: Usage


def normalise(probabilities: Sequence[float]) -> list[float]:
    """Clip to finite non-negative values and rescale to sum 1; a degenerate vector becomes uniform."""
    clean = [p if math.isfinite(p) and p > 0.0 else 0.0 for p in (float(x) for x in probabilities)]
    total = math.fsum(clean)
    if total <= 0.0:
        return [1.0 / len(clean)] * len(clean)
    return [p / total for p in clean]


def _argmax(values: Sequence[float]) -> int:
    # First index of the maximum, so ties resolve by option order, never by anything outside the question.
    return max(range(len(values)), key=lambda i: (values[i], -i))


def build_answer(question: Question, probabilities: Sequence[float]) -> dict[str, Any]:
    """Turn one probability per option (in the question's option order) into the wire answer object."""
    probs = normalise(probabilities)
    if isinstance(question, NoulQuestion):
        return {"type": "noul", "noul": probs[0]}
    if isinstance(question, ChoiceQuestion):
        names = list(question.criteria)
        if len(names) != len(probs):
            raise ValueError(f"{len(probs)} probabilities for {len(names)} options")
        return {
            "type": "choice",
            "choice": names[_argmax(probs)],
            "probabilities": dict(zip(names, probs, strict=True)),
            "confidence": choice_confidence(probs),
        }
    if isinstance(question, ScoreQuestion):
        if len(question.criteria) != len(probs):
            raise ValueError(f"{len(probs)} probabilities for {len(question.criteria)} levels")
        return {
            "type": "score",
            "score": expected_level(probs),
            "legend": {str(i): level for i, level in enumerate(question.criteria)},
            "probabilities": {str(i): p for i, p in enumerate(probs)},
            "confidence": score_confidence(probs),
        }
    raise TypeError(f"unknown question class {type(question).__name__}")
