"""Reading and checking OpenAI request bodies: size limit, JSON, and the fields the gateway relies on."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from jevserve.gateway.errors import BadRequestError, PayloadTooLargeError


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The body as a JSON object; 413 over `max_bytes`, 400 for anything that is not a JSON object."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLargeError(f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLargeError(f"request body is over the limit of {max_bytes} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequestError(f"request body must be a JSON object, got {type(body).__name__}")
    if b"\\ud" in raw.lower():  # an escaped UTF-16 half: valid JSON, but no UTF-8 upstream (or log) can carry it
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError as exc:
            raise BadRequestError(
                f"request body holds a lone UTF-16 surrogate ({exc.object[exc.start]!r}); send valid Unicode"
            ) from None
    return body


def check_chat(body: dict[str, Any]) -> None:
    """The chat fields the gateway reads: `model` (string), `messages` (non-empty list of objects with a role)."""
    _check_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequestError("'messages' must be a non-empty array of message objects", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequestError(f"messages[{i}] must be an object with a string 'role'", param=f"messages[{i}]")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise BadRequestError(
                f"messages[{i}].content must be a string, an array of content parts or null, "
                f"got {type(content).__name__}",
                param=f"messages[{i}].content",
            )
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequestError("'tools' must be an array", param="tools")
    _check_stream(body)


def check_completion(body: dict[str, Any]) -> None:
    """The legacy completion fields: `model` and a string (or list of strings) `prompt`."""
    _check_model(body)
    prompt = body.get("prompt")
    if not (isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(p, str) for p in prompt))):
        raise BadRequestError("'prompt' must be a string or an array of strings", param="prompt")
    _check_stream(body)


def _check_model(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequestError("'model' must be a non-empty string", param="model")


def _check_stream(body: dict[str, Any]) -> None:
    if not isinstance(body.get("stream", False), bool):
        raise BadRequestError("'stream' must be true or false", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequestError("'stream_options' must be an object", param="stream_options")
