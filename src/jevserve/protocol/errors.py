"""Error shapes of the System One contract (SYSTEMONE_API.md §7) and jevserve's exception tree.

    SystemOneError                 an error with a status and a contract body
    ├── AuthenticationError        401/403, error_type "authentication_error"
    ├── UnknownModelError          404, error_type "not_found"
    ├── RequestTimeoutError        408, error_type "api_usage_error" (the body stalled past its deadline)
    ├── PayloadTooLargeError       413, error_type "api_usage_error"
    ├── UnsupportedMediaError      415, error_type "api_usage_error"
    ├── OverloadedError            429 + Retry-After, error_type "overloaded_error"
    └── BackendError               502, error_type "internal_error" (an upstream failed; never used for bad input)

Validation failures are not in this tree: they become 422 with pydantic's `detail[]` list (`validation_body`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


class SystemOneError(Exception):
    """An error the server reports with `{"detail": {"error_type": ..., "message": ...}}`."""

    status_code = 400
    error_type = "api_usage_error"

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The contract's error body for this error."""
        return error_body(self.error_type, self.message)


class AuthenticationError(SystemOneError):
    """A missing (403 is also allowed; 401 is used) or wrong bearer key; the 401 names the scheme it takes (RFC 9110
    requires a `WWW-Authenticate` challenge on every 401)."""

    status_code = 401
    error_type = "authentication_error"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class UnknownModelError(SystemOneError):
    """The request named a model this server does not serve."""

    status_code = 404
    error_type = "not_found"


class RequestTimeoutError(SystemOneError):
    """The request body did not arrive within the server's deadline (a client that stalls mid-body)."""

    status_code = 408


class PayloadTooLargeError(SystemOneError):
    """The body or the state is over the server's limit; nothing is truncated silently."""

    status_code = 413


class UnsupportedMediaError(SystemOneError):
    """A body encoding or media type the server cannot read."""

    status_code = 415


class OverloadedError(SystemOneError):
    """The decision queue is full; retry after the given number of seconds."""

    status_code = 429
    error_type = "overloaded_error"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, headers=retry_after_headers(retry_after_s))
        self.retry_after_s = retry_after_s


class BackendError(SystemOneError):
    """A remote decision backend failed; the request itself was valid."""

    status_code = 502
    error_type = "internal_error"


def retry_after_headers(retry_after_s: float) -> dict[str, str]:
    """`Retry-After` in whole seconds, rounded up (a client told whole seconds never comes back early), and
    `retry-after-ms` exact, as typesafe-sdk reads first."""
    return {"Retry-After": str(max(1, math.ceil(retry_after_s))), "retry-after-ms": str(int(retry_after_s * 1000))}


def error_body(error_type: str, message: str) -> dict[str, Any]:
    """`{"detail": {"error_type": ..., "message": ...}}`."""
    return {"detail": {"error_type": error_type, "message": message}}


def validation_body(errors: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The 422 shape: pydantic's errors with `loc` starting at "body", JSON-safe (no exception objects in ctx)."""
    detail = []
    for err in errors:
        item = {
            "loc": ["body", *err.get("loc", ())],
            "msg": str(err.get("msg", "invalid value")),
            "type": str(err.get("type", "value_error")),
        }
        detail.append(item)
    if not detail:
        detail.append({"loc": ["body"], "msg": "invalid request body", "type": "value_error"})
    return {"detail": detail}
