"""One request's way through the gateway's stages: what each stage found, for the next stage, headers and the log.

Nothing here knows HTTP: a front end (the OpenAI-compatible app, an Envoy ext_proc server) builds the context from
what it received and turns the stages' results into its own kind of answer.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jevserve.gateway.config import RouteConfig
from jevserve.gateway.decisions import DecisionReport, header_part
from jevserve.gateway.types import Verdict
from jevserve.protocol.chat import stream_requested

# Request ids: a random per-process prefix and a counter (32 hex digits, like a uuid4's hex). uuid4 reads the
# OS's random source on every call, a syscall per request that a loaded host makes slow.
_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count()


def _new_id_prefix() -> None:
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = os.urandom(8).hex(), itertools.count()


os.register_at_fork(after_in_child=_new_id_prefix)  # forked workers must not share a prefix


def new_request_id() -> str:
    """A request id unique within this process and, by its random prefix, across replicas."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


def usable_request_id(value: str | None) -> bool:
    """Whether a caller's `x-request-id` (a client's, or a data plane's behind Envoy) can be jevserve's id too, so
    their logs and jevserve's line up: 1-128 printable ASCII characters, safe in a header and a log line."""
    return value is not None and 0 < len(value) <= 128 and value.isascii() and value.isprintable()


# W3C trace context: passed from the client to the upstream as it came, so a trace spans the gateway
TRACE_HEADERS = ("traceparent", "tracestate")


def request_context(endpoint: str, headers: Mapping[str, str]) -> RequestContext:
    """A request's context from its headers: tenant, cache directives, the caller's request id where usable (else a
    new one) and its trace context."""
    ctx = RequestContext(endpoint, tenant=tenant_of(headers))
    ctx.cache_control = cache_directives(headers.get("cache-control"))
    ctx.upstream_id = ctx.request_id
    request_id = headers.get("x-request-id")
    if usable_request_id(request_id):
        ctx.request_id = request_id
        # sent on with a suffix of its own: vLLM takes the header as its engine's request id, which must be unique
        # (a client that reuses one id for requests in flight would give its engine duplicates), and the caller's
        # id still starts it, so the two logs line up by prefix
        ctx.upstream_id = f"{request_id[:96]}-{ctx.upstream_id}"
    ctx.trace = {name: headers[name] for name in TRACE_HEADERS if usable_request_id(headers.get(name))}
    return ctx


def cache_directives(cache_control: str | None) -> frozenset[str]:
    """The directives of a request's `Cache-Control` header the gateway's cache honours: `no-cache` (do not serve
    this request from the cache; `max-age=0`, which asks for a reply no older than now, counts as it) and `no-store`
    (do not store its reply); others are ignored."""
    found = set()
    for directive in (cache_control or "").split(","):
        name, _, value = directive.partition("=")
        name = name.strip().lower()
        if name == "max-age" and value.strip().strip('"') == "0":
            name = "no-cache"
        found.add(name)
    return frozenset(found & {"no-cache", "no-store"})


# The headers clients send their key in besides `Authorization`: Azure OpenAI's SDKs (`api-key`) and Anthropic-style
# clients (`x-api-key`). A key in any of them makes its own tenant: cached replies and rate limits are never shared
# between two keys, whatever header carries them.
KEY_HEADERS = ("api-key", "x-api-key")


def tenant_of(headers: Mapping[str, str]) -> str:
    """The tenant of a request's headers (a case-insensitive mapping, or one with lower-case names): a digest of the
    key it carries (never the key itself), or `default` when it carries none. A bearer key is digested alone (so
    `Bearer k` and `bearer  k` are one tenant); any other `Authorization` scheme (Basic, …) with its credentials, and
    the key headers of KEY_HEADERS with their name."""
    scheme, _, token = (headers.get("authorization") or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        return _digest(token)
    if scheme:
        return _digest(f"authorization:{scheme.lower()} {token}")
    for name in KEY_HEADERS:
        value = (headers.get(name) or "").strip()
        if value:
            return _digest(f"{name}:{value}")
    return "default"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class RequestContext:
    """One request as the stages fill it in (read → route → limit → decide → act → forward → gate → store → record)."""

    endpoint: str  # "chat" (/v1/chat/completions) or "completions" (/v1/completions)
    tenant: str = "default"  # whose rate limits and cache entries apply
    request_id: str = field(default_factory=new_request_id)
    arrival: float = field(default_factory=time.monotonic)  # monotonic seconds
    body: dict[str, Any] = field(default_factory=dict)  # the request body, once read
    route: RouteConfig | None = None  # the virtual model's route, once resolved
    report: DecisionReport | None = None  # the request-phase decisions
    tool_verdicts: tuple[Verdict, ...] = ()  # the reply-phase decisions, one per tool call
    # the calls the upstream replied with, before the gate removed any: logged, so a decision log calibrates the gate
    reply_tool_calls: tuple[dict[str, Any], ...] = ()
    upstream_ms: float = 0.0  # time spent waiting for the upstream (until its first byte when streaming)
    outcome: dict[str, Any] = field(default_factory=dict)  # the upstream's name, status and attempts, for the log
    flags: dict[str, str] = field(default_factory=dict)  # extra x-jevserve-* headers
    upstream_headers: dict[str, str] = field(default_factory=dict)  # the upstream's, passed on (forward.passed_headers)
    stored: bool = False  # the reply went into the cache (replay rebuilds the cache from this)
    cache_control: frozenset[str] = frozenset()  # the client's `no-cache` / `no-store` (cache_directives)
    trace: dict[str, str] = field(default_factory=dict)  # the client's W3C trace context, sent on upstream
    upstream_id: str | None = None  # the x-request-id sent upstream (None: the data plane sends its own)
    frozen_overhead_ms: float | None = None  # overhead_ms once first asked (see there)

    @property
    def is_chat(self) -> bool:
        """True for a chat-completions request."""
        return self.endpoint == "chat"

    @property
    def model(self) -> str:
        """The resolved route's virtual model (never a client-chosen string, so metric labels stay bounded)."""
        return self.route.model if self.route is not None else "(unknown)"

    @property
    def streams(self) -> bool:
        """True when the client asked for a stream."""
        return stream_requested(self.body)  # read checked it: true, false or null

    @property
    def shows_scores(self) -> bool:
        """Whether the client is told probabilities and thresholds (the route's `client_details: scores`)."""
        return self.route is not None and self.route.client_details == "scores"

    def total_ms(self) -> float:
        """Milliseconds since arrival."""
        return (time.monotonic() - self.arrival) * 1000

    def overhead_ms(self) -> float:
        """The time the gateway added: all but the upstream's. Fixed when first asked, which for a stream is when its
        headers go to the client: what follows is the upstream generating, whose time past its first byte is not in
        `upstream_ms` (the metric counted a stream's whole generation as overhead, 196 ms against 9 ms)."""
        if self.frozen_overhead_ms is None:
            self.frozen_overhead_ms = max(0.0, self.total_ms() - self.upstream_ms)
        return self.frozen_overhead_ms

    def headers(self) -> dict[str, str]:
        """The x-jevserve-* headers of the answer, after those of the upstream's passed on."""
        headers = {
            **self.upstream_headers,
            "x-request-id": self.request_id,
            "x-jevserve-overhead-ms": f"{self.overhead_ms():.2f}",
        }
        if self.report is not None:
            scores = self.shows_scores
            # the request's verdicts and then the reply's tool gate; "none" only when neither ran (a route with a
            # tool gate alone read "none,tool_gate=...", a stray part for a client splitting k=v pairs)
            parts = [header_part(v, scores) for v in (*self.report.verdicts, *self.tool_verdicts)]
            headers["x-jevserve-decisions"] = ",".join(parts) or "none"
            headers["x-jevserve-decision-ms"] = f"{self.report.decision_ms:.2f}"
        headers.update(self.flags)
        return headers
