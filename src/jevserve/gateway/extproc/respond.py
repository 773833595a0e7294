"""The ext_proc server's own error replies (body too large, decisions unavailable, a misconfigured filter), in
OpenAI's error shape `{"error": {"message", "type", "param", "code"}}`. Replies the gateway's stages write (blocks,
clarifying questions, cached answers) are rendered by the stages themselves (gateway/responses.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from jevserve.gateway.extproc.seam import Respond

JSON_TYPE = "application/json"
REQUEST_ID = "x-request-id"


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
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    headers = {**(headers or {}), "content-type": JSON_TYPE}
    return Respond(status, payload, headers, details=f"jevserve_{code or status}")
