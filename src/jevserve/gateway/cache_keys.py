"""The cache's keys for a request: the exact key (whole conversation and parameters) and the context key.

An exact repeat, the same conversation with the same parameters for the same tenant, is served from the exact tier
without asking anything. A near repeat is only compared with entries of the same context (system prompt, tools and
parameters), because the reuse question reads the conversations' user and assistant turns and would not see that
"Answer in French" and "Answer in English" want different replies.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Request fields that do not change the reply: streaming, who asks, and bookkeeping.
IGNORED_PARAMS = frozenset({"messages", "tools", "stream", "stream_options", "user", "metadata", "store"})
_CONTEXT_ROLES = ("system", "developer")


@dataclass(frozen=True)
class CacheKeys:
    """A request's two cache keys."""

    exact: str  # exact_key: the same conversation, tools and parameters
    context: str  # context_key: the same system prompts, tools and parameters


def request_keys(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None, params: Mapping[str, Any] | None = None
) -> CacheKeys:
    """Both keys of a request."""
    return CacheKeys(exact_key(messages, tools, params), context_key(messages, tools, params))


def exact_key(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None, params: Mapping[str, Any] | None
) -> str:
    """A digest of the normalised conversation, the tools and the reply-changing parameters."""
    return _digest({"messages": [_normal(m) for m in messages], "tools": list(tools or ()), "params": _params(params)})


def context_key(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None, params: Mapping[str, Any] | None
) -> str:
    """A digest of what shapes a reply besides the conversation's turns: system prompts, tools and parameters."""
    system = [_normal(m) for m in messages if m.get("role") in _CONTEXT_ROLES]
    return _digest({"system": system, "tools": list(tools or ()), "params": _params(params)})


def _params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if k not in IGNORED_PARAMS}


def _normal(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message with its text NFC-normalised and stripped at both ends (inner whitespace kept: code needs it).

    Content made only of text parts (`[{"type": "text", "text": …}, …]`) is keyed as the string of its texts joined
    by line breaks, as the decisions read it and as vLLM's chat templates receive it, so it repeats the same text
    sent as a string; a list holding any other part (an image, a part with more fields) is keyed part by part."""
    out = {k: v for k, v in message.items() if k != "content"}
    content = message.get("content")
    if isinstance(content, list) and content and all(_is_text_part(p) for p in content):
        content = "\n".join(p["text"] for p in content)
    if isinstance(content, str):
        out["content"] = _text(content)
    elif isinstance(content, list):
        out["content"] = [
            {**p, "text": _text(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in content
        ]
    else:
        out["content"] = content
    return out


def _is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str) and len(part) == 2
    )


def _text(text: str) -> str:
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n")).strip()


def _digest(value: Any) -> str:
    raw = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
