"""OpenAI chat messages as every reader of them here (the gateway, its calibration files, the engine) takes them."""

from __future__ import annotations

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")  # OpenAI's chat roles, as it spells them

# The roles whose message may come with no content (missing or null): an assistant turn that only calls tools.
# OpenAI refuses it for any other role, and vLLM's chat templates would render such a turn as nothing.
CONTENT_OPTIONAL_ROLES = frozenset({"assistant"})
