"""Chat messages → the texts decisions read: the state, the cache key and the tool results.

A single user message (no system prompt, no earlier turns) goes to the decision model as its plain text, which is
the kind of state the bench tasks (and so the trained readout) use. A longer conversation goes as a JSON array of
`{"role", "content"}` objects, the structured state System One accepts; the order of turns is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

Message = Mapping[str, Any]


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def turns(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Each message as `{"role", "content"}` with text content (tool calls rendered as their JSON)."""
    out = []
    for message in messages:
        text = content_text(message.get("content"))
        calls = message.get("tool_calls")
        if calls:
            text = (text + "\n" if text else "") + json.dumps(calls, ensure_ascii=False, sort_keys=True)
        out.append({"role": str(message.get("role", "user")), "content": text})
    return out


def decision_state(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> str | list:
    """The state every request-level question reads (see the module docstring)."""
    rendered = turns(messages)
    if len(rendered) == 1 and rendered[0]["role"] == "user" and not tools:
        return rendered[0]["content"]
    state: list[Any] = list(rendered)
    if tools:
        state.insert(0, {"role": "tools", "content": ", ".join(tool_names(tools))})
    return state


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The function names of an OpenAI `tools` list."""
    names = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            names.append(str(function["name"]))
    return names


def last_user_text(messages: Sequence[Message]) -> str:
    """The latest user message's text ("" when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def cache_key_text(messages: Sequence[Message]) -> str:
    """The whole conversation as one text: what the semantic cache embeds and compares (multi-turn aware)."""
    rendered = turns(messages)
    if len(rendered) == 1 and rendered[0]["role"] == "user":
        return rendered[0]["content"]
    return "\n".join(f"{t['role']}: {t['content']}" for t in rendered)


def trailing_tool_results(messages: Sequence[Message]) -> list[str]:
    """Texts of the tool results sent back since the last assistant turn (what indirect injection rides in)."""
    out: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        out.append(content_text(message.get("content")))
    return out[::-1]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str, limit: int) -> list[str]:
    """The first `limit` sentences (or lines) of `text`, stripped; [] when it has fewer than two."""
    parts = [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]
    return parts[:limit] if len(parts) > 1 else []
