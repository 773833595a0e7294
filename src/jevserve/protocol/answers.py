"""Answer and response shapes of `POST /v1/systemone` (SYSTEMONE_API.md §4), and how answers are built.

`build_answer` derives every field (`choice`, `score`, `confidence`) from the same final probability vector it
returns, as the contract requires. It refuses a vector that is not a probability distribution (a non-finite or
negative value, the wrong length, a sum away from 1) with InvalidProbabilitiesError rather than repairing it: a
uniform answer made from a NaN would look like a real one. The pydantic models parse responses on the client side;
extension fields (`x_*`) are kept.
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
    """Token counts; both are JSON integers >= 0 (the SDK rejects 12.0)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    input_tokens: StrictInt = Field(ge=0)
    output_tokens: StrictInt = Field(ge=0)


class SystemOneResponse(BaseModel):
    """The 200 body: the model that answered, one answer per question id, and usage.

    Read a server's body with `strict=True`: lax parsing would make `"noul": true` a certain yes and `"0.5"` a
    number, an answer the server never gave."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str
    answers: dict[str, Answer]
    usage: Usage


SUM_TOLERANCE = 1e-4  # float32 backends and JSON round trips stay far inside this; a score vector does not


class InvalidProbabilitiesError(ValueError):
    """A backend (or an upstream) produced something that is not one probability per option."""


def normalise(probabilities: Sequence[float], num_options: int | None = None) -> list[float]:
    """Check a probability vector and rescale away its float noise; raise InvalidProbabilitiesError if it is not one.

    Accepted: finite values >= 0 summing to 1 within SUM_TOLERANCE (and `num_options` of them, when given).
    """
    values = [float(x) for x in probabilities]
    if num_options is not None and len(values) != num_options:
        raise InvalidProbabilitiesError(f"{len(values)} probabilities for {num_options} options")
    if not values:
        raise InvalidProbabilitiesError("empty probability vector")
    bad = [v for v in values if not math.isfinite(v) or v < 0.0]
    if bad:
        raise InvalidProbabilitiesError(f"probabilities must be finite and >= 0; got {bad[0]!r} in {values[:8]}")
    total = math.fsum(values)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise InvalidProbabilitiesError(f"probabilities sum to {total!r}, not 1 (tolerance {SUM_TOLERANCE})")
    return [p / total for p in values]


def _argmax(values: Sequence[float]) -> int:
    # First index of the maximum, so ties resolve by option order, never by anything outside the question.
    return max(range(len(values)), key=lambda i: (values[i], -i))


def build_answer(question: Question, probabilities: Sequence[float]) -> dict[str, Any]:
    """Turn one probability per option (in the question's option order) into the wire answer object."""
    if isinstance(question, NoulQuestion):
        return {"type": "noul", "noul": normalise(probabilities, 2)[0]}
    if isinstance(question, ChoiceQuestion):
        names = list(question.criteria)
        probs = normalise(probabilities, len(names))
        return {
            "type": "choice",
            "choice": names[_argmax(probs)],
            "probabilities": dict(zip(names, probs, strict=True)),
            "confidence": choice_confidence(probs),
        }
    if isinstance(question, ScoreQuestion):
        probs = normalise(probabilities, len(question.criteria))
        return {
            "type": "score",
            "score": expected_level(probs),
            "legend": {str(i): level for i, level in enumerate(question.criteria)},
            "probabilities": {str(i): p for i, p in enumerate(probs)},
            "confidence": score_confidence(probs),
        }
    raise TypeError(f"unknown question class {type(question).__name__}")
