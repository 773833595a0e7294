"""The cache's keys for a request: the exact key (whole conversation and parameters) and the context key.

An exact repeat, the same conversation with the same parameters for the same tenant, is served from the exact tier
without asking anything. A near repeat is only compared with entries of the same context (system prompt, tools,
parameters, and every part of the turns the reuse question does not read), because the reuse question reads the
texts of the conversations' user and assistant turns only: it would not see that "Answer in French" and "Answer in
English" want different replies, nor two speakers' `name`s, two images or two tool results.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Request fields that do not change the reply: streaming and bookkeeping. `user` is not among them: it names the end
# user a reply was made for, and an app that sends all its customers through one key tells them apart by it, so a
# reply made for one is never served to another (a reply may hold what the app looked up for that customer).
IGNORED_PARAMS = frozenset({"messages", "tools", "stream", "stream_options", "metadata", "store"})
_CONTEXT_ROLES = ("system", "developer")
_READ_ROLES = ("user", "assistant")  # the turns whose texts the reuse question reads


def wants_a_fresh_reply(cache_control: Collection[str], params: Mapping[str, Any]) -> bool:
    """Whether a request must not be served from the cache (its reply may still be stored): `Cache-Control:
    no-cache`, or `store: true`, which asks the upstream to keep this completion (OpenAI's stored completions, for
    evals and distillation), which a reply from the cache never reaches. `store` is not in the key: the reply it
    gets is any other's, so it is stored for the requests without it."""
    # a lenient upstream may read `"true"` or 1 as true: looked up, such a request might not be kept where asked
    store = params.get("store")
    return "no-cache" in cache_control or store is True or store == 1 or (
        isinstance(store, str) and store.strip().lower() == "true")


@dataclass(frozen=True)
class CacheKeys:
    """A request's two cache keys."""

    exact: str  # exact_key: the same conversation, tools and parameters
    context: str  # context_key: the same system prompts, tools and parameters


def request_keys(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None, params: Mapping[str, Any] | None = None
) -> CacheKeys:
    """Both keys of a request (each message normalised once, for both)."""
    normal = [_normal(m) for m in messages]
    return CacheKeys(exact_key(normal, tools, params), context_key(normal, tools, params))


def exact_key(
    normal: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None, params: Mapping[str, Any] | None
) -> str:
    """A digest of the normalised conversation (`_normal` of each message), the tools and the reply-changing
    parameters."""
    return _digest({"messages": list(normal), "tools": list(tools or ()), "params": _params(params)})


def context_key(
    normal: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None, params: Mapping[str, Any] | None
) -> str:
    """A digest of what shapes a reply besides the texts of the user and assistant turns (of the normalised
    messages): system prompts, tools, parameters, and whatever else the turns carry (a speaker's `name`, images and
    other non-text parts, tool calls, tool results), which the reuse question cannot read and so must be the same for
    two requests it compares."""
    system = [m for m in normal if m.get("role") in _CONTEXT_ROLES]
    # turns with nothing unread leave no trace, so conversations of different lengths stay comparable
    unread = [u for u in (_unread(m) for m in normal if m.get("role") not in _CONTEXT_ROLES) if u]
    return _digest({"system": system, "tools": list(tools or ()), "params": _params(params), "unread": unread})


def _unread(normal: Mapping[str, Any]) -> Any:
    """What the reuse question does not read of a turn: for user and assistant turns everything but the role and the
    text (its string, or its text parts); a turn of any other role (tool, function) whole. `normal` is `_normal`'s."""
    if normal.get("role") not in _READ_ROLES:
        return dict(normal)
    rest = {k: v for k, v in normal.items() if k not in ("role", "content")}
    content = normal.get("content")
    parts = [p for p in content if not _is_text_part(p)] if isinstance(content, list) else []
    if parts:
        rest["parts"] = parts
    return rest


def _params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if k not in IGNORED_PARAMS}


def _normal(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message with its text NFC-normalised, its trailing whitespace and leading blank lines dropped (the indent of
    its first line and all inner whitespace kept: pasted code and YAML need them).

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
    return _LEADING_BLANK_LINES.sub("", unicodedata.normalize("NFC", text.replace("\r\n", "\n")).rstrip())


_LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")


def _digest(value: Any) -> str:
    raw = json.dumps(_same_numbers(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _same_numbers(value: Any) -> Any:
    """`value` with every whole float as its int: JSON's `1.0` and `1` are one number (a Python client sent
    `temperature: 1.0` and a JavaScript one `1`, and neither was served the other's sample). Booleans stay."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _same_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_same_numbers(v) for v in value]
    return value
