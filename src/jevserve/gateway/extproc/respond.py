"""Replies the ext_proc server sends in the upstream's place, in OpenAI's shapes.

An error is `{"error": {"message", "type", "param", "code"}}` as JSON, whether or not the client asked for a stream
(OpenAI answers a failed streaming request the same way, before any event). A gateway-written answer (a
clarifying question, a cached reply) is a chat completion, sent as server-sent events ending in `[DONE]` when the
request streams, so streaming clients parse it like any other stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jevserve.gateway.errors import GatewayError
from jevserve.gateway.extproc.seam import Respond
from jevserve.gateway.shapes import completion_to_chunks, sse, text_completion_from_chat

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream"


def _json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def error_reply(
    status: int,
    message: str,
    *,
    code: str | None = None,
    error_type: str = "invalid_request_error",
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Respond:
    """An OpenAI-shaped error reply."""
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return Respond(
        status, _json(body), {**(headers or {}), "content-type": JSON_TYPE}, details=f"jevserve_{code or status}"
    )


def gateway_error_reply(exc: GatewayError, headers: Mapping[str, str] | None = None) -> Respond:
    """A gateway error (its status, OpenAI body and headers such as Retry-After) as a reply."""
    merged = {**(headers or {}), **{k.lower(): v for k, v in exc.headers.items()}, "content-type": JSON_TYPE}
    return Respond(exc.status_code, _json(exc.body()), merged, details=f"jevserve_{exc.code or exc.status_code}")


def answer_reply(
    completion: dict[str, Any],
    *,
    stream: bool,
    chat: bool = True,
    include_usage: bool = False,
    headers: Mapping[str, str] | None = None,
    details: str = "jevserve_answer",
) -> Respond:
    """A chat completion the gateway wrote, as JSON or as a stream of chunks (legacy completions: one event)."""
    if not chat:
        completion = text_completion_from_chat(completion)
    if not stream:
        return Respond(200, _json(completion), {**(headers or {}), "content-type": JSON_TYPE}, details)
    if chat:
        events = [sse(c) for c in completion_to_chunks(completion, include_usage=include_usage)]
    else:
        events = [sse({**completion, "usage": completion.get("usage") if include_usage else None})]
    events.append(sse("[DONE]"))
    stream_headers = {**(headers or {}), "content-type": SSE_TYPE, "cache-control": "no-cache"}
    return Respond(200, b"".join(events), stream_headers, details)
