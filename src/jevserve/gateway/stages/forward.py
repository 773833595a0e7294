"""Stage 6, forward: send the planned body to the route's upstreams (gate, retries, fallback, breaker).

The reply comes back as an `UpstreamReply`: a whole JSON reply, an open stream, or an error body. An upstream error
that is JSON is passed to the client with its status; one that is not JSON becomes a 502 in the OpenAI shape, the
same whether the client streams or not. The upstream's status and headers arrive before the gateway sends its own,
so a 2xx answer to a stream request that is neither events nor JSON (an HTML page from a proxy) is read whole and
becomes the same 502; only what goes wrong after the events began ends the client's stream with an error event.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from jevserve.client import retry_after_s
from jevserve.gateway.context import RequestContext
from jevserve.gateway.errors import UpstreamError, UpstreamsBusyError
from jevserve.gateway.inference_headers import inference_headers
from jevserve.gateway.questions import LENGTH_LEVEL_TOKENS, middle_level_tokens
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.stages.act import Forward, prompt_tokens
from jevserve.gateway.upstream import Attempt, Dispatched, dispatch
from jevserve.serving import Request as QueueRequest

MIDDLE_LEVEL_TOKENS = middle_level_tokens(LENGTH_LEVEL_TOKENS)

logger = logging.getLogger(__name__)


@dataclass
class UpstreamReply:
    """What the upstream answered."""

    dispatched: Dispatched  # the upstream and its slot (held until a stream ends)
    status: int  # the status the client gets
    completion: dict[str, Any] | None = None  # a whole 2xx reply, parsed
    error: dict[str, Any] | None = None  # the error body of a failed reply
    streaming: bool = False  # True: a 2xx stream is open on `dispatched.response`

    @property
    def is_placeholder(self) -> bool:
        """True when the built-in placeholder upstream wrote the reply (never cached: it is no answer)."""
        return self.dispatched.upstream.is_placeholder


async def forward(gateway: Gateway, ctx: RequestContext, plan: Forward) -> UpstreamReply:
    """Call the upstream(s); raises UpstreamError (502) or RateLimitedError (429) when none can answer."""
    route = ctx.route
    stream = streams_upstream(ctx, plan)
    priority = None if plan.predicted_tokens is None else round(plan.predicted_tokens)
    # the gateway's own queue ranks by a prediction where its policy reads one (plf): a request without one (a route
    # with no priority decision, or one in shadow, sharing the upstream) ranks as the middle level, as a request
    # whose prediction failed does, rather than failing the ranking; a route's own level lengths where it has them
    middle = route.priority.middle_tokens if route.priority is not None else MIDDLE_LEVEL_TOKENS
    queued_as = plan.predicted_tokens if plan.predicted_tokens is not None else middle
    queue_request = QueueRequest(
        ctx.request_id, ctx.arrival, max(1, prompt_tokens(ctx.body)), predicted_output_tokens=queued_as
    )
    started = time.monotonic()
    try:
        dispatched = await dispatch(
            gateway.upstreams_for(route, list(plan.upstreams) if plan.upstreams else None),
            "/chat/completions" if ctx.is_chat else "/completions",
            upstream_body(plan, stream),
            stream=stream,
            request=queue_request,
            admission=route.admission,
            deadline_at=ctx.arrival + route.admission.deadline_s,
            priority=priority,
            headers=upstream_headers(ctx, plan),
        )
    except (UpstreamError, UpstreamsBusyError) as exc:  # the client's message names no host; the log keeps them
        _note_failure(gateway, ctx, exc, started, None, exc.attempts)
        raise
    ctx.upstream_ms = (time.monotonic() - started) * 1000  # until the first byte when streaming
    response = dispatched.response
    ctx.outcome = {
        "upstream": dispatched.upstream.name,
        "status": response.status_code,
        "attempts": [a.describe() for a in dispatched.attempts],
    }
    ctx.flags["x-jevserve-upstream"] = dispatched.upstream.name
    ctx.upstream_headers = passed_headers(response.headers)
    for attempt in dispatched.attempts:
        gateway.metrics.upstream_attempts.labels(attempt.upstream, attempt.outcome).inc()
    if stream and response.status_code < 400 and is_event_stream(response):
        gateway.metrics.upstream_ms.labels(dispatched.upstream.name).observe(ctx.upstream_ms)
        return UpstreamReply(dispatched, response.status_code, streaming=True)
    if stream:  # an error, or an answer that is no stream, to a stream request: read whole, as without stream
        try:
            await dispatched.read_whole()
        except UpstreamError as exc:  # its body broke off or stalled: a 502/504 as for a request that does not stream
            _note_failure(gateway, ctx, exc, started, dispatched.upstream.name, exc.attempts[-1:])
            raise
        ctx.upstream_ms = (time.monotonic() - started) * 1000
    gateway.metrics.upstream_ms.labels(dispatched.upstream.name).observe(ctx.upstream_ms)
    if stream and response.status_code < 400:
        return UpstreamReply(dispatched, 502, error=not_a_stream(response, dispatched.payload))
    return _whole_reply(dispatched, response)


def _note_failure(gateway: Gateway, ctx: RequestContext, exc: UpstreamError | UpstreamsBusyError, started: float,
                  upstream: str | None, new_attempts: Sequence[Attempt]) -> None:
    """Log, count and keep for the decision log a request no upstream answered (`upstream`: the one whose answer
    broke off, None when none answered); `new_attempts` are those not counted in the metrics yet."""
    ctx.upstream_ms = (time.monotonic() - started) * 1000
    ctx.outcome = {"upstream": upstream, "status": exc.status_code, "attempts": [a.describe() for a in exc.attempts]}
    for attempt in new_attempts:
        gateway.metrics.upstream_attempts.labels(attempt.upstream, attempt.outcome).inc()
    if isinstance(exc, UpstreamError):  # a full queue is load, counted and logged per request, not a warning
        logger.warning("request %s: %s (%s)", ctx.request_id, exc.message, "; ".join(ctx.outcome["attempts"]))


# The upstream's answer headers a client paces itself by (OpenAI's rate-limit headers, vLLM's and OpenAI's
# Retry-After, OpenAI's processing time); the rest (server, content length, cookies) are the gateway's own to set.
PASSED_HEADERS = frozenset({"openai-processing-ms"})
PASSED_PREFIXES = ("x-ratelimit-",)
MAX_PASSED_RETRY_AFTER_S = 600  # an upstream's Retry-After of 99999999999 s (or -5) is no wait to pass on as it is


def passed_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream headers the client gets with the answer; its Retry-After (seconds or a date) as whole seconds
    within [0, MAX_PASSED_RETRY_AFTER_S], and retry-after-ms with it where it gave one."""
    out = {name: value for name, value in headers.items()
           if name.lower() in PASSED_HEADERS or name.lower().startswith(PASSED_PREFIXES)}
    wait_s = retry_after_s(headers)
    if wait_s is not None and math.isfinite(wait_s):
        wait_s = min(max(wait_s, 0.0), MAX_PASSED_RETRY_AFTER_S)
        out["retry-after"] = str(math.ceil(wait_s))
        ms = headers.get("retry-after-ms")
        if ms is not None and retry_after_s({"retry-after-ms": ms}) is not None:  # read: an unreadable one is not
            out["retry-after-ms"] = str(round(wait_s * 1000))                   # made up from the Retry-After
    return out


def is_event_stream(response: httpx.Response) -> bool:
    """Whether a 2xx answer to a stream request is relayed as a stream: server-sent events (or no content type,
    leniently). Anything else, JSON included (an upstream that ignores `stream: true`), is read whole and answered
    with a 502 before the client's stream starts, as is a 204, 205 or 304, which has no body to stream (relayed, it
    was a 200 holding one error event)."""
    if response.status_code in NO_BODY_STATUSES:
        return False
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind in ("", "text/event-stream")


NO_BODY_STATUSES = frozenset({204, 205, 304})  # RFC 9110: these carry no content


def streams_upstream(ctx: RequestContext, plan: Forward) -> bool:
    """The upstream streams when the client asked for a stream. A tool gate reads a streamed reply's calls by
    holding the events from the first call on (streaming.relay): asked whole instead, a stream request kept
    `stream_options`, which vLLM refuses without `stream: true`, lost the reasoning and logprobs of its chunks, and
    had the whole generation, not the gap between bytes, under the upstream's timeout."""
    return ctx.streams


def upstream_body(plan: Forward, stream: bool) -> dict:
    """The body sent upstream: the client's fields as sent (no `stream: false` added to a body that had none), its
    stream flag set to `stream` where it differs. Both front ends send this."""
    return plan.body if plan.body.get("stream", False) is stream else {**plan.body, "stream": stream}


def upstream_headers(ctx: RequestContext, plan: Forward) -> dict[str, str]:
    """Headers added to the upstream request: the llm-d / GIE headers of the route's `inference` block (both front
    ends, this stage and the ext_proc server, send them), the request's id where this front end sends it (vLLM
    takes it as its own with `--enable-request-id-headers`, so the two logs line up) and the client's trace context."""
    request_id = {"x-request-id": ctx.upstream_id} if ctx.upstream_id else {}
    return {**request_id, **ctx.trace, **inference_headers(
        ctx.route.inference, predicted_tokens=plan.predicted_tokens, tenant=ctx.tenant, model=plan.body.get("model")
    )}


def _whole_reply(dispatched: Dispatched, response: httpx.Response) -> UpstreamReply:
    payload = dispatched.payload  # None for a reply with 1e400 in it too: it could not be sent on (or cached)
    if response.status_code in (429, 503) and not isinstance(payload, dict):
        # a refusal for load in plain text (a proxy's "Too Many Requests"): still a refusal the client should back
        # off from, with the upstream's Retry-After, not a 502 it retries at once
        return UpstreamReply(dispatched, response.status_code, error=refused_for_load(response))
    if payload is None:
        return UpstreamReply(dispatched, 502, error=bad_upstream_answer(response.text))
    if response.status_code >= 400 or not isinstance(payload, dict):
        error = payload if isinstance(payload, dict) else bad_upstream_answer(response.text)
        return UpstreamReply(dispatched, response.status_code if isinstance(payload, dict) else 502, error=error)
    return UpstreamReply(dispatched, response.status_code, completion=payload)


def not_a_stream(response: httpx.Response, payload: Any) -> dict[str, Any]:
    """The error body for a 2xx answer to a stream request that is not a stream of events (`payload`: its JSON value,
    None when it is none)."""
    kind = response.headers.get("content-type", "none")
    if not isinstance(payload, dict):  # by what it is: a JSON object sent as text/plain is no stream either
        return bad_upstream_answer(response.text)
    error = bad_upstream_answer(response.text)
    error["error"]["message"] = (
        f"upstream answered a streaming request without any event (content-type {kind}, {len(response.content):,} "
        "bytes of JSON): check that it supports stream: true"
    )
    return error


def _what_it_is(text: str) -> str:
    head = text.lstrip()[:16].lower()
    if head.startswith(("data:", "event:", ":")):
        return "server-sent events (an upstream that streams although asked not to?)"
    if head.startswith(("<!doctype", "<html", "<")):
        return "an HTML or XML page (a proxy's error page?)"
    return "text that is not a JSON object" if text.strip() else "an empty body"


def refused_for_load(response: httpx.Response) -> dict[str, Any]:
    """The error body for an upstream's 429 or 503 whose body is no JSON object (it is not quoted, as below)."""
    limited = response.status_code == 429
    when = "after the Retry-After it gave" if "retry-after" in response.headers else "later"
    return {
        "error": {
            "message": f"the upstream is {'rate limiting' if limited else 'unavailable'} ({response.status_code}); "
            f"retry {when}",
            "type": "rate_limit_error" if limited else "upstream_error",
            "param": None,
            "code": "upstream_rate_limited" if limited else "upstream_unavailable",
        }
    }


def bad_upstream_answer(text: str) -> dict[str, Any]:
    """The error body for an upstream reply that is not a JSON object. It says what the reply looks like and never
    quotes it: a reply the gateway could not judge (tool calls it would gate) must not reach the client inside the
    error either."""
    return {
        "error": {
            "message": f"upstream sent a non-JSON answer: {_what_it_is(text)}, {len(text):,} characters",
            "type": "upstream_error",
            "param": None,
            "code": "bad_upstream_answer",
        }
    }
