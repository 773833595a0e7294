"""Stage 4, decide: every request-phase question of the route in one decision call (cache lookup first)."""

from __future__ import annotations

from typing import Any

from jevserve.gateway.cache import NoLookup
from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import run_decisions
from jevserve.gateway.runtime import Gateway


async def decide(gateway: Gateway, ctx: RequestContext) -> None:
    """Set `ctx.report`: the route's verdicts about the request (a failed decider gives the fallbacks, no error).
    A request sent with `Cache-Control: no-cache` is not looked up in the cache (its reply is still stored)."""
    cache = gateway.cache if ctx.is_chat else None
    if cache is not None and "no-cache" in ctx.cache_control:
        cache = NoLookup()
    ctx.report = await run_decisions(
        messages_of(ctx.body),
        config=ctx.route,
        decider=gateway.decider,
        tools=ctx.body.get("tools") if ctx.is_chat else None,
        cache=cache,
        tenant=ctx.tenant,
        timeout_ms=gateway.config.decision_timeout_ms,
        params={k: v for k, v in ctx.body.items() if k not in ("messages", "tools")},
    )


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat body's messages, or a completions body's prompt as one user turn."""
    if "messages" in body:
        return body["messages"]
    prompt = body.get("prompt")
    return [{"role": "user", "content": prompt if isinstance(prompt, str) else "\n".join(prompt or [])}]
