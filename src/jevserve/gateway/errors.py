"""Gateway errors, each carrying its OpenAI-shaped body.

GatewayError                  an HTTP answer other than 2xx: status, OpenAI `type`, `code`, message
├── BadRequestError           400 invalid_request_error (malformed JSON, wrong field types)
├── PayloadTooLargeError      413 invalid_request_error
├── RequestTimeoutError       408 invalid_request_error: the body stalled past `body_timeout_s`
├── UnknownModelError         404 model_not_found
├── BlockedError              400 content_policy_violation: a decision blocked the request
├── DeciderUnavailableError   503 decider_unavailable, with Retry-After: a closed fallback refused, no answer read
├── RateLimitedError          429 rate_limit_exceeded, with Retry-After: the client's rate limit
│   └── OverloadedError       429 gateway_overloaded, with Retry-After: the decider or every upstream queue is full
│       └── UpstreamsBusyError    the upstreams' queues: with the attempts, for the log and the metrics
└── UpstreamError             502 upstream_error: no upstream answered (the reason is in the message)
    ├── UpstreamUnavailableError  503 upstream_unavailable, with Retry-After: every upstream's circuit is open
    └── UpstreamTimeoutError      504 upstream_timeout: the upstream took the request and then sent nothing in time
ConfigError                   a config that cannot run; the message names the YAML path at fault
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


class GatewayError(Exception):
    """An error answer in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

    status_code = 500
    error_type = "api_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON body of the error answer."""
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}


class BadRequestError(GatewayError):
    """The request body is not valid JSON or not a valid request."""

    status_code = 400
    error_type = "invalid_request_error"


class PayloadTooLargeError(GatewayError):
    """The request body is over the configured size limit."""

    status_code = 413
    error_type = "invalid_request_error"
    code = "payload_too_large"


class RequestTimeoutError(GatewayError):
    """The request body did not arrive within `body_timeout_s` (a client that stalls mid-body)."""

    status_code = 408
    error_type = "invalid_request_error"
    code = "request_timeout"


class UnknownModelError(GatewayError):
    """The request names a model the config does not declare."""

    status_code = 404
    error_type = "invalid_request_error"
    code = "model_not_found"


class BlockedError(GatewayError):
    """A decision blocked the request or the reply; the message says which decision and why."""

    status_code = 400
    error_type = "invalid_request_error"
    code = "content_policy_violation"


# a failing decider is asked again this often (decider.DECIDER_RECHECK_S): a retry sooner finds it as it was
DECIDER_UNAVAILABLE_RETRY_AFTER_S = 5.0


class DeciderUnavailableError(GatewayError):
    """A decision with `fallback: closed` refused the request because the decider gave no answer (down, failing):
    the service's state, not the client's text, so a 503 a client retries, not a 400 it never does."""

    status_code = 503
    error_type = "api_error"
    code = "decider_unavailable"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})


class RateLimitedError(GatewayError):
    """Overload or a rate limit: retry after `retry_after_s` seconds."""

    status_code = 429
    error_type = "rate_limit_error"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})
        self.retry_after_s = retry_after_s


class OverloadedError(RateLimitedError):
    """The gateway is overloaded (its decider or every upstream queue), not the client over its rate limit: the same
    429 and Retry-After, which clients already retry, under a code of its own so the two can be told apart."""

    code = "gateway_overloaded"


class UpstreamsBusyError(OverloadedError):
    """Every upstream the request could go to was full (its queue) or gave no slot before the deadline: a 429, with
    the attempts for the log and the metrics, as an UpstreamError keeps them."""

    def __init__(self, message: str, *, retry_after_s: float, attempts: Sequence[Any] = ()) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.attempts = list(attempts)


class UpstreamError(GatewayError):
    """No upstream gave an answer; the message lists what each attempt got, as a client may read it (no addresses or
    exception texts: `attempts` keeps those for the log)."""

    status_code = 502
    error_type = "upstream_error"
    code = "upstream_failed"

    def __init__(self, message: str, *, attempts: Sequence[Any] = (), headers: dict[str, str] | None = None) -> None:
        super().__init__(message, headers=headers)
        self.attempts = list(attempts)


class UpstreamUnavailableError(UpstreamError):
    """Every upstream's circuit is open, so none was tried: retry after `retry_after_s`."""

    status_code = 503
    code = "upstream_unavailable"

    def __init__(self, message: str, *, attempts: Sequence[Any] = (), retry_after_s: float) -> None:
        super().__init__(message, attempts=attempts, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})


class UpstreamTimeoutError(UpstreamError):
    """The upstream took the request and then sent nothing within `timeout_s` (not retried: it may have run it)."""

    status_code = 504
    code = "upstream_timeout"


class ConfigError(ValueError):
    """A gateway config that cannot run; the message starts with the YAML path at fault."""
