"""The ext_proc seam bound to the gateway's stages: the same config, policies, decider, cache, store and log.

    request   → read → route → limit → decide → act        (pipeline.plan_request, as the HTTP app runs it)
                 error / Answer: an immediate reply, recorded at once
                 Forward: the planned upstream body and headers handed to Envoy (which forwards it)
    reply     → gate the reply (a held whole reply with tool calls) → store → record     (at the stream's end)
                 a held 2xx reply that is not a JSON object: the HTTP gateway's 502 `bad_upstream_answer` instead
                 a live stream on a route with a tool gate: its events pass until one carries a tool call; from
                 there they are kept back, and the calls judged at its end, as the HTTP relay does (calls.py)
    other paths → the HTTP gateway's answers: `GET /v1/models` its model list, anything else 404 / 405

What the HTTP gateway's forward stage does itself (pick an upstream, queue, retry) is Envoy's (and the endpoint
picker's) job here; jevserve tells it the model (`x-gateway-model-name`, for route matching) and, for routes with an
`inference` block, the llm-d / GIE headers.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from jevserve.gateway.context import RequestContext, request_context, usable_request_id
from jevserve.gateway.decisions import policies_for
from jevserve.gateway.endpoints import ENDPOINT_PATHS, MODELS_PATH, http_error_body, model_entry, model_list
from jevserve.gateway.errors import BlockedError, DeciderUnavailableError, GatewayError, OverloadedError
from jevserve.gateway.extproc.calls import CallWatch
from jevserve.gateway.extproc.respond import JSON_TYPE, REQUEST_ID
from jevserve.gateway.extproc.seam import Exchange, Respond, ResponseEdit, ResponsePlan, StreamEnd
from jevserve.gateway.extproc.seam import Forward as ForwardOutcome
from jevserve.gateway.inference_headers import MODEL_NAME_HEADER, client_control_headers
from jevserve.gateway.pipeline import plan_request, refuse
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.responses import (
    CLIENT_CLOSED,
    GatewayResponse,
    completion_response,
    error_response,
    json_response,
)
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.stages import Answer, Forward, gate_reply, record
from jevserve.gateway.stages.decide import OVERLOAD_RETRY_AFTER_S, refused_without_answers
from jevserve.gateway.stages.forward import bad_upstream_answer, streams_upstream, upstream_body, upstream_headers
from jevserve.gateway.stages.gate_reply import stream_trailer
from jevserve.gateway.stages.store_reply import store_reply
from jevserve.gateway.streaming import StreamSummary, summarise
from jevserve.protocol import strict_json

# path suffix → the HTTP gateway's endpoint, matched as a suffix so that a data plane may serve the API under another
# prefix; the longest first, since "/chat/completions" also ends with "/completions"
ENDPOINTS = tuple(sorted(((path, endpoint) for endpoint, path in ENDPOINT_PATHS.items()), key=lambda e: -len(e[0])))
SSE_TYPE = "text/event-stream"


def _path(headers: Mapping[str, str]) -> str:
    # decoded as uvicorn decodes it for the HTTP gateway (`%2F` is a slash there), so both front ends read one path
    return urllib.parse.unquote(headers.get(":path", "").split("?", 1)[0]).rstrip("/")


def endpoint_of(headers: Mapping[str, str]) -> str | None:
    """`chat` or `completions` for an inference request (a POST to one of them), else None."""
    if headers.get(":method", "").upper() != "POST":
        return None
    path = _path(headers)
    return next((endpoint for suffix, endpoint in ENDPOINTS if path.endswith(suffix)), None)


def other_request(gateway: Gateway, headers: Mapping[str, str]) -> GatewayResponse:
    """What the HTTP gateway answers a request that is no inference request: its model list for `GET /v1/models`
    (the route names clients ask for, not the upstream's), 405 for another method on an endpoint, else 404. Nothing
    reaches the upstream undecided."""
    method, path = headers.get(":method", "").upper(), _path(headers)
    # the stream gave every request an id (the data plane's, or its own): the answer carries it, as every reply does
    request_id = {REQUEST_ID: headers[REQUEST_ID]} if usable_request_id(headers.get(REQUEST_ID)) else {}
    one = path.partition(MODELS_PATH + "/")[2] if MODELS_PATH + "/" in path else None
    if path.endswith(MODELS_PATH) or one:
        if method in ("GET", "HEAD"):
            if one:
                status, body = model_entry(gateway, one)
                return GatewayResponse(status, headers=request_id, body=body)
            return GatewayResponse(200, headers=request_id, body=model_list(gateway))
        return GatewayResponse(405, headers={**request_id, "allow": "GET, HEAD"}, body=http_error_body(405))
    if any(path.endswith(suffix) for suffix, _ in ENDPOINTS):
        return GatewayResponse(405, headers={**request_id, "allow": "POST"}, body=http_error_body(405))
    return GatewayResponse(404, headers=request_id, body=http_error_body(404))


def context_of(headers: Mapping[str, str]) -> RequestContext | None:
    """A fresh request context for an inference request (its endpoint, tenant, cache directives and the data
    plane's request id), None for any other request."""
    endpoint = endpoint_of(headers)
    if endpoint is None:
        return None
    ctx = request_context(endpoint, headers)  # with the data plane's id, so its access log and jevserve's line up
    ctx.trace, ctx.upstream_id = {}, None  # the data plane sends the client's headers and its own id on itself
    return ctx


# The client's headers that describe its body's bytes, not the JSON jevserve sends on in its place: a
# `content-encoding` (the body was read as plain JSON, and a model server that honours the header failed to
# decompress what it got; the HTTP gateway sends none), and digests of the client's bytes (RFC 9530's, and the older
# Content-MD5), which a proxy or server that checks them finds wrong. Its `content-type` is replaced, not removed.
CLIENT_BODY_HEADERS = ("content-encoding", "content-md5", "content-digest", "repr-digest")


def rewritten_body_headers(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The client's headers that describe its body's bytes (CLIENT_BODY_HEADERS) present in `headers`: removed
    wherever jevserve sends its own JSON on instead, as it sets its own `content-type` (a client's `charset=utf-16`
    went on with UTF-8 JSON, and a server that honours the charset misread it)."""
    return tuple(name for name in CLIENT_BODY_HEADERS if name in headers)


async def rendered(response: GatewayResponse) -> Respond:
    """A stage answer (JSON body or SSE events) as an immediate reply."""
    if response.events is None:
        return rendered_json(response)
    headers = {k.lower(): v for k, v in response.headers.items()}
    body = b"".join([event async for event in response.events])
    headers.update({"content-type": SSE_TYPE, "cache-control": "no-cache"})
    return Respond(response.status, body, headers, details=f"jevserve_{response.status}")


def rendered_json(response: GatewayResponse) -> Respond:
    """A stage answer with a JSON body (every error) as an immediate reply."""
    headers = {k.lower(): v for k, v in response.headers.items()}
    headers["content-type"] = JSON_TYPE
    return Respond(response.status, response.json_bytes(), headers, details=f"jevserve_{response.status}")


class GatewayDecisions:
    """`jevserve extproc`'s decisions: one gateway (as `jevserve gateway` builds it), an exchange per request."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.name = gateway.decider.name

    def open(self) -> Exchange:
        """A fresh exchange for one HTTP request."""
        return GatewayExchange(self.gateway)

    async def aclose(self) -> None:
        """Close the decider, store, cache and log."""
        await self.gateway.aclose()


class GatewayExchange(Exchange):
    """One HTTP request through the gateway's stages, with Envoy doing the forwarding."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.ctx: RequestContext | None = None
        self.plan: Forward | None = None
        self.recorded = False
        self.gated: dict[str, Any] | None = None  # the held reply after the tool gate
        self.forwarded_at: float | None = None  # monotonic time the request went on to the data plane
        self.upstream_status: int | None = None  # the reply's status, once its headers arrived
        self.response_plan = ResponsePlan.PASS
        self.watch: CallWatch | None = None  # HOLD_CALLS: a 2xx event stream, read as it passes
        self.compressed: str | None = None  # a held reply's content-encoding, when it came compressed regardless
        self.client_headers: Mapping[str, str] = {}  # the request's headers as the client sent them

    async def request(self, headers: Mapping[str, str], body: bytes) -> ForwardOutcome | Respond:
        """Run the request-phase stages; an error or a gateway answer becomes an immediate reply."""
        gateway = self.gateway
        self.client_headers = headers
        ctx = self.ctx = context_of(headers)
        if ctx is None:
            return await rendered(other_request(gateway, headers))  # not counted, as in the HTTP gateway
        try:
            plan = await plan_request(gateway, ctx, body)
        except GatewayError as exc:
            self.recorded = True
            return await rendered(refuse(gateway, ctx, exc))
        if isinstance(plan, Answer):
            self.recorded = True
            record(gateway, ctx, 200)
            return await rendered(completion_response(ctx, plan.completion))
        self.plan = plan
        self.forwarded_at = time.monotonic()
        return self._forward(plan)

    def _forward(self, plan: Forward) -> ForwardOutcome:
        ctx = self.ctx
        stream = streams_upstream(ctx, plan)
        sent = dict(upstream_body(plan, stream))
        upstreams = self.gateway.upstreams_for(ctx.route, list(plan.upstreams) if plan.upstreams else None)
        if plan.predicted_tokens is not None and upstreams and all(u.takes_priority for u in upstreams):
            sent["priority"] = round(plan.predicted_tokens)  # what dispatch() adds for vLLM upstreams
        # the model always, so Envoy's routes can match it; then the route's llm-d / GIE headers
        headers = {MODEL_NAME_HEADER: str(sent["model"]), "content-type": JSON_TYPE, **upstream_headers(ctx, plan)}
        decisions = ctx.headers()
        if "x-jevserve-decisions" in decisions:  # Envoy's routes (and the model server's logs) may read them
            headers["x-jevserve-decisions"] = decisions["x-jevserve-decisions"]
        # the client's own priority, fairness, SLO or decision headers never reach the endpoint picker
        removed = tuple(h for h in client_control_headers(self.client_headers) if h not in headers)
        removed += rewritten_body_headers(self.client_headers)
        # the HTTP gateway gates every whole chat reply on a tool-gated route, and holds a live stream's calls:
        # upstreams add tools of their own, and clients send `tools: []`, so a reply may carry calls unasked for
        gates_calls = ctx.is_chat and any(isinstance(p, ToolGate) for p in policies_for(ctx.route))
        if gates_calls and not stream:
            response_plan = ResponsePlan.HOLD
        elif gates_calls:
            response_plan = ResponsePlan.HOLD_CALLS
        elif self._may_store():
            response_plan = ResponsePlan.OBSERVE
        else:
            response_plan = ResponsePlan.PASS
        self.response_plan = response_plan
        if response_plan is not ResponsePlan.PASS:
            # the reply is read here: Envoy passed the client's Accept-Encoding on, and a gzipped stream's tool calls
            # went through unjudged (no `data:` line to read), so the upstream is asked for it uncompressed
            headers["accept-encoding"] = "identity"
        return ForwardOutcome(
            set_headers=headers,
            remove_headers=removed,
            body=json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode(),
            response=response_plan,
            response_headers=decisions,
        )

    def failed_open(self, reason: str) -> ForwardOutcome | None:
        """The request with its route's own upstream model and the model header Envoy's routes match, when the
        decisions failed after the route was found: forwarded with the client's name for it, it went to the first
        route's cluster under a name no model server serves (a vLLM answers 404). No decision acts on it; that is
        counted (`jevserve_gateway_failed_open_total`) and logged (`upstream.failed_open`), so it can be alerted on."""
        self.gateway.metrics.failed_open.inc()
        ctx = self.ctx
        if ctx is not None:
            ctx.outcome["failed_open"] = reason
        if ctx is None or ctx.route is None or not isinstance(ctx.body, dict):
            return None
        model = ctx.route.upstream_model or ctx.route.model
        sent = {**ctx.body, "model": model}
        removed = (*client_control_headers(self.client_headers), *rewritten_body_headers(self.client_headers))
        return ForwardOutcome(set_headers={MODEL_NAME_HEADER: model, "content-type": JSON_TYPE}, remove_headers=removed,
                              body=json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode(),
                              response_headers={"x-jevserve-decisions": "failed-open"})

    def past_deadline(self, reason: str) -> Respond | None:
        """A request whose decisions ran past the stream's deadline is refused 429 with Retry-After where the HTTP
        gateway would refuse it for a decision call that timed out (its route's enforced guard or harm under
        `on_decision_timeout: reject`, or one whose fallback is closed): failing open forwarded it undecided, so that
        a few near-limit bodies sent at once, whose reading alone outlasted the deadline, carried an injection past
        an enforced guard. Before the route is known, every route's decisions count."""
        gateway, ctx = self.gateway, self.ctx
        if ctx is None or self.recorded:  # not a decision endpoint, or already answered
            return None
        routes = [ctx.route] if ctx.route is not None else list(gateway.config.routes)
        refusing = sorted({name for route in routes
                           for name in refused_without_answers(route, gateway.config.on_decision_timeout)})
        if not refusing:
            return None
        self.recorded = True
        error = OverloadedError(
            f"the {' and '.join(refusing)} decision(s) this request needs were not made in time ({reason}): the "
            f"gateway is overloaded and does not forward a request undecided; retry after "
            f"{OVERLOAD_RETRY_AFTER_S:g} s",
            retry_after_s=OVERLOAD_RETRY_AFTER_S,
        )
        return rendered_json(refuse(gateway, ctx, error))

    def _may_store(self) -> bool:
        route = self.ctx.route
        enabled = self.gateway.cache is not None and route.cache is not None and route.cache.enabled
        return enabled and self.ctx.is_chat and "no-store" not in self.ctx.cache_control

    async def response_headers(self, status: int, headers: Mapping[str, str]) -> ResponseEdit:
        """Note the upstream's status; a 2xx reply whose tool calls are to be held is watched as it streams (or kept
        whole when it is not a stream)."""
        if self.forwarded_at is not None:  # the upstream's time to its first byte, as the HTTP gateway counts it
            self.ctx.upstream_ms = (time.monotonic() - self.forwarded_at) * 1000
        self.upstream_status = status
        if self.ctx is not None:
            self.ctx.outcome["status"] = status  # the upstream's, even when the client gets another
        encoding = headers.get("content-encoding", "").strip().lower()
        if self.response_plan in (ResponsePlan.HOLD, ResponsePlan.HOLD_CALLS) and 200 <= status < 300 and (
                encoding not in ("", "identity")):
            # compressed though asked for identity: its calls cannot be read, so it is held and refused (a 502),
            # never passed on unjudged
            self.compressed = encoding
            self.response_plan = ResponsePlan.HOLD
            return ResponseEdit(hold_whole=True)
        if self.response_plan is ResponsePlan.HOLD_CALLS and 200 <= status < 300:
            if headers.get("content-type", "").lower().startswith(SSE_TYPE):
                self.watch = CallWatch()
            else:
                # JSON from a server that ignores `stream: true`, or a proxy's HTML page: held whole and judged at its
                # end (response_body), so that one that is not a JSON object gets the 502 with its status, not a 200
                self.response_plan = ResponsePlan.HOLD
                return ResponseEdit(hold_whole=True)
        return ResponseEdit()

    def response_chunk(self, piece: bytes) -> int:
        """A live stream's events pass until one carries a tool call; from there on they are kept back. Error
        replies pass: they carry no calls."""
        return self.watch.feed(piece) if self.watch is not None else 0

    async def response_release(self, *, undecided: str | None = None) -> bytes | None:
        """The tool gate on the calls kept back: None when it removes none and flags none, else the held choices
        replayed without the blocked calls, a flagged call told in a comment before `[DONE]` (calls.py)."""
        ctx = self.ctx
        if self.watch is None:
            return None
        return await self.watch.release(ctx.body["model"],
                                        lambda reply: gate_reply(self.gateway, ctx, reply, undecided=undecided),
                                        trailer=lambda: stream_trailer(ctx))

    async def response_body(self, body: bytes, *, undecided: str | None = None) -> ResponseEdit | Respond:
        """The tool gate on a held whole reply; the reply re-rendered (as events when the client streams). A 2xx
        reply that is not the JSON object asked for (events from a server that ignores `stream: false`, an HTML
        page) cannot be judged: it becomes the HTTP gateway's 502, never a reply passed on unjudged."""
        status = self.upstream_status or 0
        if not 200 <= status < 300:
            return ResponseEdit()  # an error reply passes through as it is: it has no tool calls to judge
        if self.compressed is not None:
            error = bad_upstream_answer("")
            error["error"]["message"] = (f"upstream sent its reply compressed ({self.compressed}) though asked for "
                                         "it uncompressed (accept-encoding: identity); the tool gate cannot read it")
            return await rendered(json_response(self.ctx, 502, error))
        completion = _json_object(body)
        if completion is None:
            error = bad_upstream_answer(body.decode("utf-8", "replace"))
            return await rendered(json_response(self.ctx, 502, error))
        if "choices" not in completion:
            return ResponseEdit()  # a 2xx error object passes through as it is
        ctx = self.ctx
        if ctx.is_chat:
            try:
                completion = await gate_reply(self.gateway, ctx, completion, undecided=undecided)
            except (BlockedError, DeciderUnavailableError) as exc:  # a forced call blocked: the HTTP gateway's 400
                return await rendered(error_response(ctx, exc))
        self.gated = completion
        answer = await rendered(completion_response(ctx, completion))
        return ResponseEdit(set_headers=answer.headers, body=answer.body)

    async def close(self, end: StreamEnd) -> None:
        """Store a complete, successful reply (the HTTP gateway's condition) and record the request, those the
        stream answered itself (413, 503, a misconfigured filter) included."""
        if self.recorded:
            return
        # a request refused before its decisions ran has no context yet: the one the HTTP gateway makes for its 413
        ctx = self.ctx or (context_of(end.request_headers) if end.immediate else None)
        if ctx is None:
            return
        status = end.status if end.status is not None else CLIENT_CLOSED  # the client went away before any reply
        if end.error is not None:
            ctx.outcome["stream_error"] = end.error
            if not end.complete and not end.immediate:
                # the data plane ended the stream in the reply's middle: its client went away (or the upstream
                # broke off, which Envoy does not tell apart here); the client did not get the status's reply, so it
                # is counted as the HTTP gateway counts a client that left, not as the reply's 200
                status = CLIENT_CLOSED
        # a stream read as it passed (tool gate, cache), summarised once: for the log here and the cache below
        read = not end.immediate and end.response_body is not None and ctx.streams and self.plan is not None
        summary = summarise(end.response_body) if read else None
        refused = self.watch.summary.refused_status if self.watch is not None else None
        if refused is not None and end.error is None and 200 <= status < 300:
            # a call the request forced, blocked after the 200 went out: the client read a refusal (error event),
            # logged and counted as the HTTP gateway counts it
            ctx.outcome.setdefault("status", status)
            status = refused
        elif summary is not None and summary.status != 200 and end.error is None and 200 <= status < 300 and (
                self.gated is None):
            # it broke: cut before [DONE], or a malformed event. The client had its 200 and what came; the log says
            # what the HTTP gateway says of it (it logged these 200)
            ctx.outcome["stream_error"] = summary.error or "upstream closed the stream before [DONE]"
            ctx.outcome.setdefault("status", status)
            status = summary.status
        if not end.immediate:
            ctx.outcome.setdefault("status", status)
            completion = self.gated if self.gated is not None else self._observed(end, summary)
            if completion is not None and end.complete and end.error is None:
                await store_reply(self.gateway, ctx, status, completion, placeholder=False)
        record(self.gateway, ctx, status)

    def _observed(self, end: StreamEnd, summary: StreamSummary | None) -> dict[str, Any] | None:
        if end.response_body is None:
            return None
        if summary is not None:
            return summary.completion(self.ctx.body["model"]) if summary.status == 200 else None
        return _json_object(end.response_body)


def _json_object(body: bytes) -> dict[str, Any] | None:
    """`body` parsed when it is a JSON object, else None."""
    try:
        payload = strict_json.loads(body)  # a reply with NaN or 1e400 in it is no JSON to cache or read calls from
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None

