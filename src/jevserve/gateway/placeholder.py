"""The built-in stand-in upstream: an OpenAI-compatible handler whose replies say plainly they are placeholders.

It runs as an httpx transport, so requests to it go through the same upstream client (retries, breaker, queue)
as a real server's. It lets every decision be tried with no LLM at hand.
"""

from __future__ import annotations

import json

import httpx

from jevserve.gateway.shapes import chat_completion, endpoint_events, rough_tokens, text_completion_from_chat

PLACEHOLDER_TEXT = (
    "[placeholder reply: this jevserve gateway has no LLM upstream configured, so no model wrote this text. "
    "The gateway's decisions ran on your request; add an upstream to the config to get real answers.]"
)


def _prompt_tokens(body: dict) -> int:
    messages = body.get("messages") or [{"content": body.get("prompt", "")}]
    return sum(rough_tokens(str(m.get("content") or "")) for m in messages if isinstance(m, dict))


def placeholder_handler(request: httpx.Request) -> httpx.Response:
    """Answer `/chat/completions` and `/completions` with the placeholder text; `/models` lists `placeholder`."""
    path = request.url.path
    if request.method == "GET" and path.endswith("/models"):
        return httpx.Response(200, json={"object": "list", "data": [{"id": "placeholder", "object": "model"}]})
    if request.method != "POST" or not path.endswith(("/chat/completions", "/completions")):
        return httpx.Response(404, json={"error": {"message": f"no route {path}", "type": "invalid_request_error"}})
    body = json.loads(request.content or b"{}")
    completion = chat_completion(
        str(body.get("model", "placeholder")), PLACEHOLDER_TEXT, prompt_tokens=_prompt_tokens(body)
    )
    if not path.endswith("/chat/completions"):
        completion = text_completion_from_chat(completion)
    if not body.get("stream"):
        return httpx.Response(200, json=completion)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    events = b"".join(endpoint_events(completion, include_usage=include_usage))
    return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})


def placeholder_transport() -> httpx.AsyncBaseTransport:
    """The placeholder as an async httpx transport."""
    return httpx.MockTransport(placeholder_handler)
