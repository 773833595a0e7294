"""Chat messages → texts the gateway needs besides the decision inputs: token estimates and the cache key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jevserve.serving.decision_inputs import decision_inputs, message_text

Message = Mapping[str, Any]


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, or the text parts of a list of content parts."""
    return message_text({"content": content})


def cache_key_text(messages: Sequence[Message]) -> str:
    """The conversation as the semantic cache compares it (`DecisionInputs.cache_text`)."""
    return decision_inputs({"messages": list(messages)}).cache_text
