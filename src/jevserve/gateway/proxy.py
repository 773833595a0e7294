"""The request flow of `/v1/chat/completions` and `/v1/completions`:

    read + check body → route → rate limit → ONE decision call → block | clarify | cached answer
                                                               → else: rewrite body → gate + upstream(s)
    → tool gate on tool calls in the reply → store in cache → log → response with x-jevserve-* headers

Gateway-written answers (clarify, cache hit, placeholder) are ordinary chat completions, streamed as chunks when
the client asked for a stream. When a route gates tool calls and the request offers tools, the upstream is asked
without streaming and its reply is replayed as chunks, so the gate is never skipped because a client streams.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response, StreamingResponse

from jevserve.gateway.actions import apply_tool_verdicts, cacheable, tool_calls_of, upstream_body
from jevserve.gateway.body import check_chat, check_completion, read_json
from jevserve.gateway.config import RouteConfig
from jevserve.gateway.conversation import content_text
from jevserve.gateway.decider import timed_decide
from jevserve.gateway.decisions import DecisionReport, policies_for, resolve_route, run_decisions
from jevserve.gateway.errors import BlockedError, GatewayError, RateLimitedError
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.shapes import chat_completion, completion_to_chunks, rough_tokens, sse, text_completion_from_chat
from jevserve.gateway.streaming import StreamSummary, relay
from jevserve.gateway.upstream import Dispatched, dispatch
from jevserve.serving import Request as QueueRequest


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response (NaN refused, compact)."""
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


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


def tenant_of(request: HttpRequest) -> str:
    """The tenant: a digest of the bearer key (the key itself is never stored), or `default`."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return hashlib.sha256(token.strip().encode()).hexdigest()[:16]
    return "default"


class Flow:
    """One request's way through the gateway; its fields end up in the headers and the log."""

    def __init__(self, gateway: Gateway, endpoint: str) -> None:
        self.gateway = gateway
        self.endpoint = endpoint
        self.request_id = new_request_id()
        self.arrival = time.monotonic()
        self.upstream_ms = 0.0
        self.report: DecisionReport | None = None
        self.tool_verdicts: list = []
        self.outcome: dict[str, Any] = {}
        self.flags: dict[str, str] = {}
        self.route_model = "(unknown)"  # set once the request's model resolved to a route

    def headers(self) -> dict[str, str]:
        """The x-jevserve-* headers."""
        total_ms = (time.monotonic() - self.arrival) * 1000
        headers = {
            "x-request-id": self.request_id,
            "x-jevserve-overhead-ms": f"{max(0.0, total_ms - self.upstream_ms):.2f}",
        }
        if self.report is not None:
            decisions = self.report.header()
            if self.tool_verdicts:
                decisions += "," + ",".join(f"tool_gate={v.action}" for v in self.tool_verdicts)
            headers["x-jevserve-decisions"] = decisions
            headers["x-jevserve-decision-ms"] = f"{self.report.decision_ms:.2f}"
        headers.update(self.flags)
        return headers

    def record(self, status: int, body: dict[str, Any], model: str) -> None:
        """Count metrics and write the decision log line."""
        gateway = self.gateway
        gateway.metrics.requests.labels(self.endpoint, model, str(status)).inc()
        total_ms = (time.monotonic() - self.arrival) * 1000
        gateway.metrics.overhead_ms.observe(max(0.0, total_ms - self.upstream_ms))
        if self.report is not None:
            gateway.metrics.decision_ms.observe(self.report.decision_ms)
            for v in self.report.verdicts:
                gateway.metrics.decisions.labels(v.decision, v.action, str(v.fell_back).lower()).inc()
        if gateway.log is None:
            return
        gateway.log.write(
            {
                "request_id": self.request_id,
                "time": time.time(),
                "endpoint": self.endpoint,
                "model": model,
                "messages": body.get("messages") or [{"role": "user", "content": body.get("prompt")}],
                "tools": body.get("tools"),
                "decisions": self.report.to_dict() if self.report is not None else None,
                "tool_gate": [v.to_dict() for v in self.tool_verdicts],
                "status": status,
                "upstream": self.outcome,
                "upstream_ms": self.upstream_ms,
                "total_ms": total_ms,
            }
        )


async def handle(gateway: Gateway, http: HttpRequest, endpoint: str) -> Response:
    """Serve one chat or legacy completion request (errors are raised as GatewayError, answered by the app)."""
    flow = Flow(gateway, endpoint)
    body: dict[str, Any] = {}
    try:
        body = await read_json(http, gateway.config.max_body_bytes)
        return await _handle(flow, http, body)
    except GatewayError as exc:
        # the model label is the resolved route's, never a client-chosen string (bounded metric labels)
        flow.record(exc.status_code, body, flow.route_model)
        exc.headers = {**flow.headers(), **exc.headers}
        raise


async def _handle(flow: Flow, http: HttpRequest, body: dict[str, Any]) -> Response:
    gateway = flow.gateway
    endpoint = flow.endpoint
    is_chat = endpoint == "chat"
    (check_chat if is_chat else check_completion)(body)
    route = resolve_route(gateway.config, body["model"])
    flow.route_model = route.model
    tenant = tenant_of(http)
    if route.rate_limit is not None:
        wait_s = await gateway.store.take_token(
            f"rate:{route.model}:{tenant}", route.rate_limit.requests_per_s, route.rate_limit.burst
        )
        if wait_s > 0:
            raise RateLimitedError(
                f"rate limit of {route.rate_limit.requests_per_s}/s for this key", retry_after_s=wait_s
            )
    messages = body["messages"] if is_chat else [{"role": "user", "content": _prompt_text(body["prompt"])}]
    flow.report = report = await run_decisions(
        messages,
        config=route,
        decider=gateway.decider,
        tools=body.get("tools") if is_chat else None,
        cache=gateway.cache if is_chat else None,
        tenant=tenant,
        timeout_ms=gateway.config.decision_timeout_ms,
    )
    final = report.final
    if final is not None and final.action == "block":
        source = final.detail.get("source")
        where = f" on {source}" if source else ""
        raise BlockedError(
            f"request blocked by the {final.decision} decision{where} ({final.reason})", param="messages"
        )
    if final is not None and final.action in ("clarify", "serve_cached"):
        if final.action == "clarify":
            completion = chat_completion(route.model, final.detail["message"], prompt_tokens=_prompt_tokens(messages))
            flow.flags["x-jevserve-clarify"] = "1"
        else:
            completion = dict(report.cached_response or {})
            flow.flags["x-jevserve-cache"] = "hit"
        flow.record(200, body, route.model)
        return _gateway_answer(completion, body, is_chat, flow)
    return await _forward(flow, route, body, report, tenant, is_chat, messages)


def _prompt_text(prompt: str | list[str]) -> str:
    return prompt if isinstance(prompt, str) else "\n".join(prompt)


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(rough_tokens(content_text(m.get("content"))) for m in messages)


def _gateway_answer(completion: dict[str, Any], body: dict[str, Any], is_chat: bool, flow: Flow) -> Response:
    if not is_chat:
        completion = text_completion_from_chat(completion)
    if not body.get("stream"):
        return json_response(completion, headers=flow.headers())
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    if is_chat:
        events = [sse(c) for c in completion_to_chunks(completion, include_usage=include_usage)]
    else:
        events = [sse({**completion, "usage": completion["usage"] if include_usage else None})]
    events.append(sse("[DONE]"))
    return StreamingResponse(_iterate(events), media_type="text/event-stream", headers=flow.headers())


async def _iterate(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


async def _forward(
    flow: Flow,
    route: RouteConfig,
    body: dict[str, Any],
    report: DecisionReport,
    tenant: str,
    is_chat: bool,
    messages: list[dict[str, Any]],
) -> Response:
    gateway = flow.gateway
    sent = upstream_body(body, report, route.upstream_model or route.model)
    route_verdict = report.verdict("route")
    names = route_verdict.detail.get("upstreams") if route_verdict is not None else None
    upstreams = gateway.upstreams_for(route, names)
    priority_verdict = report.verdict("priority")
    predicted = priority_verdict.detail.get("predicted_tokens") if priority_verdict is not None else None
    if predicted is None and route.priority is not None:
        # no prediction (backend down): the middle level, so the request neither jumps nor starves the queue
        levels = route.priority.level_tokens
        predicted = levels[len(levels) // 2]
    queue_request = QueueRequest(
        flow.request_id, flow.arrival, max(1, _prompt_tokens(messages)), predicted_output_tokens=predicted
    )
    gate_tools = is_chat and bool(body.get("tools")) and any(isinstance(p, ToolGate) for p in policies_for(route))
    stream = bool(body.get("stream")) and not gate_tools
    started = time.monotonic()
    dispatched = await dispatch(
        upstreams,
        "/chat/completions" if is_chat else "/completions",
        {**sent, "stream": stream},
        stream=stream,
        request=queue_request,
        admission=route.admission,
        deadline_at=flow.arrival + route.admission.deadline_s,
        priority=None if predicted is None else round(predicted),
    )
    response = dispatched.response
    flow.outcome = {
        "upstream": dispatched.upstream.name,
        "status": response.status_code,
        "attempts": [a.describe() for a in dispatched.attempts],
    }
    flow.flags["x-jevserve-upstream"] = dispatched.upstream.name
    for a in dispatched.attempts:
        gateway.metrics.upstream_attempts.labels(a.upstream, str(a.status or a.error)).inc()
    if stream:
        return await _relay_stream(flow, dispatched, route, body, report, tenant, started)
    flow.upstream_ms = (time.monotonic() - started) * 1000
    try:
        payload = response.json()
    except ValueError:
        payload = {
            "error": {
                "message": f"upstream sent a non-JSON answer: {response.text[:200]!r}",
                "type": "upstream_error",
                "param": None,
                "code": "bad_upstream_answer",
            }
        }
        flow.record(502, body, route.model)
        return json_response(payload, 502, flow.headers())
    if response.status_code >= 400:
        flow.record(response.status_code, body, route.model)
        return json_response(payload, response.status_code, flow.headers())
    if is_chat:
        payload = await _gate_tool_calls(flow, route, messages, payload)
        store = gateway.cache is not None and route.cache is not None and route.cache.enabled
        # placeholder replies are not answers: never cached
        if store and not dispatched.upstream.is_placeholder and cacheable(200, payload):
            await _cache_reply(gateway, tenant, route, payload, report)
    flow.record(response.status_code, body, route.model)
    if body.get("stream"):  # the client streams but the reply was gated: replay it as chunks
        return _gateway_answer(payload, body, is_chat, flow)
    return json_response(payload, response.status_code, flow.headers())


async def _gate_tool_calls(
    flow: Flow, route: RouteConfig, messages: list[dict[str, Any]], completion: dict[str, Any]
) -> dict[str, Any]:
    gate = next((p for p in policies_for(route) if isinstance(p, ToolGate)), None)
    calls = tool_calls_of(completion)
    if gate is None or not calls:
        return completion
    asks = gate.asks_for_calls(flow.report.inputs.user_text, calls)
    answers, ms, _error = await timed_decide(flow.gateway.decider, asks, flow.gateway.config.decision_timeout_ms / 1000)
    flow.tool_verdicts = gate.act_on_calls(calls, answers)
    flow.flags["x-jevserve-tool-gate-ms"] = f"{ms:.2f}"
    if any(v.action == "flag" for v in flow.tool_verdicts):
        flow.flags["x-jevserve-flagged"] = "tool_call"
    return apply_tool_verdicts(completion, flow.tool_verdicts)


async def _relay_stream(
    flow: Flow,
    dispatched: Dispatched,
    route: RouteConfig,
    body: dict[str, Any],
    report: DecisionReport,
    tenant: str,
    started: float,
) -> Response:
    gateway = flow.gateway
    response = dispatched.response
    if response.status_code >= 400:
        await response.aread()
        await dispatched.close()
        flow.upstream_ms = (time.monotonic() - started) * 1000
        flow.record(response.status_code, body, route.model)
        try:
            payload = response.json()
        except ValueError:
            payload = {"error": {"message": response.text[:500], "type": "upstream_error", "param": None, "code": None}}
        return json_response(payload, response.status_code, flow.headers())
    flow.upstream_ms = (time.monotonic() - started) * 1000  # until the first byte: the stream is the upstream's
    headers = flow.headers()
    summary = StreamSummary()

    async def on_end(done: StreamSummary) -> None:
        await dispatched.close()
        status = 200 if done.error is None else 502
        if done.error is not None:
            flow.outcome["stream_error"] = done.error
        flow.record(status, body, route.model)
        if (
            gateway.cache is not None
            and route.cache is not None
            and route.cache.enabled
            and done.error is None
            and done.finish_reason == "stop"
            and not done.had_tool_calls
            and done.done
            and not dispatched.upstream.is_placeholder
        ):
            completion = chat_completion(body["model"], "".join(done.text))
            if done.usage:
                completion["usage"] = done.usage
            await _cache_reply(gateway, tenant, route, completion, report)

    return StreamingResponse(relay(response, summary, on_end), media_type="text/event-stream", headers=headers)


async def _cache_reply(
    gateway: Gateway, tenant: str, route: RouteConfig, reply: dict[str, Any], report: DecisionReport
) -> None:
    """Store a whole 200 reply under the conversation's text, with the route's cache settings; a conversation too
    long to compare whole is not stored (it could only be compared by its cut text)."""
    if report.inputs is None or not report.inputs.cache_complete:
        return
    await gateway.cache.put(
        tenant,
        report.inputs.cache_text,
        reply,
        ttl_s=route.cache.ttl_s,
        max_entries=route.cache.max_entries,
        vector=report.cache_vector,
    )
