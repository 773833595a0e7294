"""The answers the stages produce, independent of any front end: status, headers, and a JSON body or SSE events.

A gateway-written answer (a clarifying question, a cached reply, an error) has the shape of the endpoint asked:
`chat.completion` (chunks when streaming) for /v1/chat/completions, `text_completion` for /v1/completions.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from jevserve.gateway.context import RequestContext
from jevserve.gateway.errors import GatewayError
from jevserve.gateway.shapes import endpoint_events, text_completion_from_chat

# nginx's status for a request whose client closed the connection before its answer, as logged and counted (both
# front ends)
CLIENT_CLOSED = 499


@dataclass
class GatewayResponse:
    """What a front end sends back: a JSON body, or a stream of server-sent events."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None  # JSON body (None when streaming)
    events: AsyncIterator[bytes] | None = None  # SSE bytes (None for a JSON body)

    def json_bytes(self) -> bytes:
        """The JSON body, compact, NaN refused."""
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def error_response(ctx: RequestContext, exc: GatewayError) -> GatewayResponse:
    """An error in OpenAI's shape, with the request's headers and the error's own (Retry-After), which replace an
    upstream's of the same name whatever its case."""
    own = {name.lower() for name in exc.headers}
    headers = {name: value for name, value in ctx.headers().items() if name.lower() not in own}
    return GatewayResponse(exc.status_code, {**headers, **exc.headers}, body=exc.body())


def json_response(ctx: RequestContext, status: int, body: dict[str, Any]) -> GatewayResponse:
    """A JSON answer passed through as it is (an upstream's reply or error)."""
    return GatewayResponse(status, ctx.headers(), body=body)


def completion_response(ctx: RequestContext, completion: dict[str, Any]) -> GatewayResponse:
    """A whole chat completion in the endpoint's shape, as chunks when the client streams."""
    if not ctx.is_chat and completion.get("object") == "chat.completion":
        completion = text_completion_from_chat(completion)
    if not ctx.streams:
        return GatewayResponse(200, ctx.headers(), body=completion)
    include_usage = bool((ctx.body.get("stream_options") or {}).get("include_usage"))
    events = endpoint_events(completion, include_usage=include_usage)
    return GatewayResponse(200, ctx.headers(), events=_iterate(events))


def stream_response(ctx: RequestContext, events: AsyncIterator[bytes]) -> GatewayResponse:
    """An upstream's stream relayed as it comes."""
    return GatewayResponse(200, ctx.headers(), events=events)


async def _iterate(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event
