"""OpenAI chat messages as every reader of them here (the gateway, its calibration files, the engine) takes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")  # OpenAI's chat roles, as it spells them

# The roles whose message may come with no content (missing or null): an assistant turn that only calls tools.
# OpenAI refuses it for any other role, and vLLM's chat templates would render such a turn as nothing.
CONTENT_OPTIONAL_ROLES = frozenset({"assistant"})


def stream_requested(body: Mapping[str, Any]) -> bool:
    """Whether a chat or completions body asks for a stream: `stream: true`. False, missing or null is no stream (null
    is "not given" in OpenAI's spec, and vLLM takes it so); any other value raises ValueError saying what is taken."""
    stream = body.get("stream")
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise ValueError(f"stream={json.dumps(stream)[:100]}; expected true, false or null")
    return stream
