"""Stage 1, read: the request body as a checked JSON object (400 for anything the later stages cannot read)."""

from __future__ import annotations

import json
from typing import Any

from jevserve.gateway.errors import BadRequestError
from jevserve.protocol import strict_json
from jevserve.protocol.chat import CHAT_ROLES, CONTENT_OPTIONAL_ROLES, stream_requested

# Deeper bodies than MAX_JSON_DEPTH are refused: every later step (the decision texts, the log, the upstream call)
# serialises the body with recursive code, and no OpenAI request nests nearly this far (a tool's JSON schema: a dozen
# levels); the decision texts read every string down to it
from jevserve.serving.decision_inputs import MAX_JSON_DEPTH


def read_body(raw: bytes, endpoint: str) -> dict[str, Any]:
    """The body of a chat (`endpoint="chat"`) or legacy completions request, checked; raises BadRequestError."""
    too_deep = BadRequestError(f"request body nests arrays or objects more than {MAX_JSON_DEPTH} levels deep")
    if not raw.strip():
        raise BadRequestError("request body is empty: send a JSON object")
    try:
        body = strict_json.loads(raw)  # NaN, Infinity and 1e400 refused: no upstream or log could be sent them
    except strict_json.TooDeep:  # nested past what the parser can follow
        raise too_deep from None
    except ValueError as exc:  # not JSON, not UTF-8, NaN, or a number past what Python converts (4,300 digits)
        if (compressed := strict_json.compression_of(raw)) is not None:
            raise BadRequestError(f"request body is {compressed}-compressed, which the gateway does not read: send "
                                  "it uncompressed (no Content-Encoding)") from None
        raise BadRequestError(f"request body is not valid JSON: {exc}") from None
    if _deeper_than(body, MAX_JSON_DEPTH):
        raise too_deep
    if not isinstance(body, dict):
        raise BadRequestError(f"request body must be a JSON object, got {type(body).__name__}")
    if b"\\ud" in raw.lower():  # an escaped UTF-16 half: valid JSON, but no UTF-8 upstream (or log) can carry it
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError as exc:
            raise BadRequestError(
                f"request body holds a lone UTF-16 surrogate ({exc.object[exc.start]!r}); send valid Unicode"
            ) from None
    (check_chat if endpoint == "chat" else check_completion)(body)
    return body


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists or objects more than `limit` levels deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def check_chat(body: dict[str, Any]) -> None:
    """The chat fields the gateway reads: `model`, `messages` (objects with a role and text content), `tools`."""
    _check_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequestError("'messages' must be a non-empty array of message objects", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequestError(f"messages[{i}] must be an object with a string 'role'", param=f"messages[{i}]")
        if message["role"] not in CHAT_ROLES:  # the decisions read text by role: one they do not know would go unjudged
            raise BadRequestError(
                f"messages[{i}].role must be one of {', '.join(CHAT_ROLES)}; got {message['role']!r}",
                param=f"messages[{i}].role",
            )
        content = message.get("content")
        if content is None and message["role"] not in CONTENT_OPTIONAL_ROLES:
            raise BadRequestError(f"messages[{i}].content is missing or null; a {message['role']} message needs "
                                  "a string or an array of content parts (only an assistant turn may have none)",
                                  param=f"messages[{i}].content")
        if content is not None and not isinstance(content, str | list):
            raise BadRequestError(
                f"messages[{i}].content must be a string, an array of content parts or null, "
                f"got {type(content).__name__}",
                param=f"messages[{i}].content",
            )
        call_id = message.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, str):  # an object there went on unjudged
            raise BadRequestError(f"messages[{i}].tool_call_id must be a string, got {type(call_id).__name__}",
                                  param=f"messages[{i}].tool_call_id")
        for j, part in enumerate(content if isinstance(content, list) else ()):  # the decisions read the text parts
            if not isinstance(part, dict) or (part.get("type") == "text" and not isinstance(part.get("text"), str)):
                raise BadRequestError(
                    f"messages[{i}].content[{j}] must be a content part object; a text part needs a string 'text'",
                    param=f"messages[{i}].content[{j}]",
                )
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequestError("'tools' must be an array", param="tools")
    for j, tool in enumerate(tools or ()):  # the decisions read the tool list as text, the tool gate its functions
        if not isinstance(tool, dict):
            raise BadRequestError(f"tools[{j}] must be a tool object", param=f"tools[{j}]")
    _check_stream(body)


def check_completion(body: dict[str, Any]) -> None:
    """The legacy completion fields: `model` and a string (or list of strings) `prompt`, and no `messages`."""
    _check_model(body)
    if "messages" in body:
        # a chat field on the completions endpoint: the model server reads the prompt, and the decisions read the
        # messages when there are any, so a prompt forwarded beside them went unjudged (an outside red-teamer's)
        raise BadRequestError("'messages' is a chat field: send it to /v1/chat/completions, or send 'prompt' alone",
                              param="messages")
    prompt = body.get("prompt")
    if token_id_prompt(body):
        pass  # valid for vLLM and OpenAI; the route stage refuses it where a decision would have to read it
    elif not (isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(p, str) for p in prompt))):
        raise BadRequestError("'prompt' must be a string or an array of strings (or token ids)", param="prompt")
    if body.get("suffix") is not None and not isinstance(body["suffix"], str):  # the decisions read a string only
        raise BadRequestError("'suffix' must be a string", param="suffix")
    _check_stream(body)


def token_id_prompt(body: dict[str, Any]) -> bool:
    """Whether a legacy completions body's `prompt` is token ids (a list of integers, or a list of such lists)."""
    prompt = body.get("prompt")
    return (isinstance(prompt, list) and bool(prompt) and all(_token_ids(p) for p in prompt)) or _token_ids(prompt)


def _token_ids(value: Any) -> bool:
    """A non-empty list of integers (a prompt as token ids)."""
    return isinstance(value, list) and bool(value) and all(type(t) is int for t in value)


def _check_model(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequestError("'model' must be a non-empty string", param="model")


def _check_stream(body: dict[str, Any]) -> None:
    try:
        stream_requested(body)
    except ValueError as exc:
        raise BadRequestError(str(exc), param="stream") from None
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequestError("'stream_options' must be an object", param="stream_options")
