"""The gateway's request path, read top to bottom: each stage is a named function in its own module (stages/).

    read → route → limit → decide → act → forward → gate the reply → store → record

`serve` runs them for one request and returns a `GatewayResponse`; the HTTP app (app.py) and any other front end
(an Envoy ext_proc server) call the same stages. A streamed reply ends through `finish`, as a whole reply does, so
the store condition and the log line are the same for both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import policies_for
from jevserve.gateway.errors import GatewayError
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.responses import (
    GatewayResponse,
    completion_response,
    error_response,
    json_response,
    stream_response,
)
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.stages import (
    Answer,
    Forward,
    UpstreamReply,
    act,
    decide,
    forward,
    gate_reply,
    limit,
    read_body,
    record,
    select_route,
    store_reply,
)
from jevserve.gateway.stages.gate_reply import stream_trailer
from jevserve.gateway.streaming import StreamSummary, relay


async def serve(gateway: Gateway, ctx: RequestContext, raw: bytes) -> GatewayResponse:
    """Serve one chat or legacy completions request whose body is `raw`."""
    try:
        plan = await plan_request(gateway, ctx, raw)
        if isinstance(plan, Answer):
            record(gateway, ctx, 200)
            return completion_response(ctx, plan.completion)
        reply = await forward(gateway, ctx, plan)
        if reply.streaming:
            return stream_response(ctx, _relay(gateway, ctx, reply))
        if reply.completion is None:
            record(gateway, ctx, reply.status)
            return json_response(ctx, reply.status, reply.error or {})
        completion = await gate_reply(gateway, ctx, reply.completion) if ctx.is_chat else reply.completion
        await finish(gateway, ctx, reply, reply.status, completion)
        return completion_response(ctx, completion)
    except GatewayError as exc:
        return refuse(gateway, ctx, exc)


async def plan_request(gateway: Gateway, ctx: RequestContext, raw: bytes) -> Answer | Forward:
    """The request phase every front end runs, read → route → limit → decide → act; raises GatewayError."""
    ctx.body = read_body(raw, ctx.endpoint)
    select_route(gateway, ctx)
    await limit(gateway, ctx)
    await decide(gateway, ctx)
    return act(ctx)


def refuse(gateway: Gateway, ctx: RequestContext, exc: GatewayError) -> GatewayResponse:
    """Answer an error a front end found before the stages ran (a body over the size limit), and record it."""
    record(gateway, ctx, exc.status_code)
    return error_response(ctx, exc)


async def finish(gateway: Gateway, ctx: RequestContext, reply: UpstreamReply, status: int, completion: dict) -> None:
    """The end of every forwarded request, streamed or not: store the reply when it may be served again, record."""
    await store_reply(gateway, ctx, status, completion, placeholder=reply.is_placeholder)
    record(gateway, ctx, status)


def _relay(gateway: Gateway, ctx: RequestContext, reply: UpstreamReply) -> AsyncIterator[bytes]:
    summary = StreamSummary()

    async def on_end(done: StreamSummary) -> None:
        await reply.dispatched.close(healthy=done.upstream_healthy)
        if done.error is not None:
            ctx.outcome["stream_error"] = done.error
        await finish(gateway, ctx, reply, done.status, done.completion(ctx.body["model"]))

    # A reply to a request that offered no tools streams live, and may still carry tool calls (tools the upstream
    # adds itself, or a client's empty list): with a tool gate on the route, those are held and judged whole.
    gated = ctx.is_chat and any(isinstance(p, ToolGate) for p in policies_for(ctx.route))
    return relay(reply.dispatched.response, summary, on_end, model=ctx.body["model"],
                 gate_calls=(lambda completion: gate_reply(gateway, ctx, completion)) if gated else None,
                 trailer=lambda: stream_trailer(ctx))
