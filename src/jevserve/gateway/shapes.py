"""OpenAI response objects the gateway writes itself: completions, chunks, usage and SSE framing."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any


def completion_id() -> str:
    """A fresh `chatcmpl-…` id."""
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """An OpenAI `usage` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def rough_tokens(text: str) -> int:
    """A token count for replies the gateway writes itself (~4 characters a token), at least 1."""
    return max(1, len(text) // 4)


def chat_completion(
    model: str, text: str, *, prompt_tokens: int = 0, finish_reason: str | None = "stop"
) -> dict[str, Any]:
    """A complete `chat.completion` with one assistant message."""
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": usage(prompt_tokens, rough_tokens(text)),
    }


REASONING_FIELDS = ("reasoning_content", "reasoning")  # a reasoning model's thinking, by the names servers use


def completion_to_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A complete chat completion replayed as `chat.completion.chunk`s (role, reasoning, content with its logprobs,
    finish, optional usage)."""
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }
    chunks = []
    for choice in completion["choices"]:
        message = choice.get("message") or {}
        index = choice.get("index", 0)
        chunks.append(
            {
                **base,
                "choices": [{"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
            }
        )
        # a reasoning model's reasoning (vLLM's `reasoning_content`, newer servers' `reasoning`) comes first, as the
        # upstream streamed it
        reasoning = {k: message[k] for k in REASONING_FIELDS if isinstance(message.get(k), str) and message[k]}
        if reasoning:
            chunks.append({**base, "choices": [{"index": index, "delta": reasoning, "finish_reason": None}]})
        delta: dict[str, Any] = {}
        if message.get("content"):
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
        if message.get("function_call"):  # the legacy functions API
            delta["function_call"] = message["function_call"]
        if delta:
            carried: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": None}
            if choice.get("logprobs") is not None:  # the whole reply's logprobs, with its content
                carried["logprobs"] = choice["logprobs"]
            chunks.append({**base, "choices": [carried]})
        chunks.append(
            {**base, "choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}]}
        )
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion.get("usage")})
    return chunks


def sse(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event carrying JSON (or the literal `[DONE]`)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def text_completion_from_chat(chat: dict[str, Any]) -> dict[str, Any]:
    """A `text_completion` object carrying a chat completion's texts (for /v1/completions served by the gateway)."""
    return {
        "id": chat["id"].replace("chatcmpl-", "cmpl-"),
        "object": "text_completion",
        "created": chat["created"],
        "model": chat["model"],
        "choices": [
            {
                "index": c.get("index", 0),
                "text": (c.get("message") or {}).get("content") or "",
                "logprobs": None,
                "finish_reason": c.get("finish_reason"),
            }
            for c in chat["choices"]
        ],
        "usage": chat.get("usage"),
    }


def text_completion_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A complete `text_completion` replayed as streamed `text_completion` chunks (text, finish, optional usage)."""
    base = {k: completion[k] for k in ("id", "object", "created", "model")}
    chunks = []
    for choice in completion["choices"]:
        index = choice.get("index", 0)
        common = {"index": index, "logprobs": None}
        chunks.append({**base, "choices": [{**common, "text": choice.get("text") or "", "finish_reason": None}]})
        chunks.append({**base, "choices": [{**common, "text": "", "finish_reason": choice.get("finish_reason")}]})
    if include_usage:
        chunks.append({**base, "choices": [], "usage": completion.get("usage")})
    return chunks


def endpoint_events(completion: dict[str, Any], *, include_usage: bool) -> list[bytes]:
    """A complete chat or text completion as the SSE events of a stream, `[DONE]` last."""
    if completion.get("object") == "text_completion":
        chunks = text_completion_chunks(completion, include_usage=include_usage)
    else:
        chunks = completion_to_chunks(completion, include_usage=include_usage)
    return [*(sse(c) for c in chunks), sse("[DONE]")]
