"""Stage 4, decide: every request-phase question of the route in one decision call (cache lookup first)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jevserve.gateway.cache import NoLookup, UsageRequired
from jevserve.gateway.cache_keys import wants_a_fresh_reply
from jevserve.gateway.config import RouteConfig
from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import DecisionReport, request_policies, run_decisions
from jevserve.gateway.errors import OverloadedError, PayloadTooLargeError
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.stages.read import token_id_prompt
from jevserve.gateway.types import Action

# request-phase decisions whose action refuses the request: forwarding the request without their answer is the one
# fallback an attacker gains from making the gateway busy
_REFUSING = (Action.BLOCK, Action.STRIP_TOOLS)
OVERLOAD_RETRY_AFTER_S = 1.0


async def decide(gateway: Gateway, ctx: RequestContext) -> None:
    """Set `ctx.report`: the route's verdicts about the request (a failed decider gives the fallbacks, no error).
    A request sent with `Cache-Control: no-cache` or `store: true` is not looked up in the cache (its reply is
    still stored; wants_a_fresh_reply); a stream
    that asks for a usage chunk is served only replies stored with usage (UsageRequired). Raises
    OverloadedError (429) when an enforced refusal got no answer in time (see `unanswered_refusals`)."""
    cache = gateway.cache if ctx.is_chat else None
    if cache is not None and wants_a_fresh_reply(ctx.cache_control, ctx.body):
        cache = NoLookup()
    elif cache is not None and ctx.streams and (ctx.body.get("stream_options") or {}).get("include_usage"):
        cache = UsageRequired(cache)
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
    if ctx.report.too_large and (unanswered := unanswered_refusals(ctx.route, ctx.report)):
        # the decider will never read this request as sent: its fallback (open by default) would let whoever sends
        # a request over the decider's size limits past the guard, and a retry gets the same answer, so no 429
        why = "the decider refused to read it as too large"
        ctx.report = _refused_undecided(ctx.report, unanswered, f"{why}: refused undecided")
        raise PayloadTooLargeError(
            f"the {' and '.join(unanswered)} decision(s) this request needs cannot be made: {why} "
            f"({ctx.report.error}); send a shorter request (fewer or shorter messages)")
    if gateway.config.on_decision_timeout == "reject":
        unanswered = unanswered_refusals(ctx.route, ctx.report)
        if unanswered:
            timeout = f"{gateway.config.decision_timeout_ms:g} ms"
            told = ctx.report.retry_after_s
            if told is not None:  # a remote decider's 429: its own load or rate limit, and its own hint
                why = f"were refused by the decider for its load (it asked for a retry after {told:.3g} s)"
            elif ctx.report.turned_away:
                why = f"would not be answered within {timeout} (the decider has more work queued than that)"
            else:
                why = f"got no answer within {timeout}"
            wait_s = max(OVERLOAD_RETRY_AFTER_S, told or 0.0)
            reason = f"{why}: refused undecided (on_decision_timeout: reject)"
            ctx.report = _refused_undecided(ctx.report, unanswered, reason)
            raise OverloadedError(
                f"the {' and '.join(unanswered)} decision(s) this request needs {why}: the gateway is overloaded and "
                f"does not forward a request undecided; retry after {wait_s:.3g} s",
                retry_after_s=wait_s,
            )


def _refused_undecided(report: DecisionReport, decisions: list[str], reason: str) -> DecisionReport:
    # the header and the log say what happened to these decisions, not the fallback that was not used
    return replace(report, verdicts=tuple(replace(v, action=Action.REJECT, reason=reason)
                                          if v.decision in decisions else v for v in report.verdicts))


def unanswered_refusals(route: RouteConfig, report: DecisionReport) -> list[str]:
    """The enforced decisions that could refuse the request (block, strip tools) and fell back because the decision
    call ran past its deadline or was refused as too large; empty when the decider answered, or failed by an error
    (its fallbacks then decide)."""
    if not (report.timed_out or report.too_large):
        return []
    refusing = enforced_refusals(route)
    return [v.decision for v in report.verdicts if v.fell_back and v.decision in refusing]


def enforced_refusals(route: RouteConfig) -> list[str]:
    """The route's enforced request-phase decisions whose action refuses the request (block, strip tools)."""
    return [
        p.name
        for p in request_policies(route)
        if p.config.mode == "enforce" and getattr(p.config, "action", None) in _REFUSING
    ]


def refused_without_answers(route: RouteConfig, on_decision_timeout: str) -> list[str]:
    """The decisions that refuse a request of `route` that gets no answers at all: under `reject` every enforced
    refusing one (the decision call's own timeout refuses it so), under `fallback` those whose fallback is closed."""
    refusing = set(enforced_refusals(route))
    return [p.name for p in request_policies(route)
            if p.name in refusing and (on_decision_timeout == "reject" or p.config.fallback == "closed")]


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat body's messages, or a completions body's prompt as one user turn and its `suffix` as another (the
    model reads both; a batch of several prompts is refused by the route stage where decisions read them)."""
    if "messages" in body:
        return body["messages"]
    prompt = body.get("prompt")
    if token_id_prompt(body):  # on a route with no decisions only (the route stage refuses it elsewhere): no text
        return [{"role": "user", "content": ""}]
    text = prompt if isinstance(prompt, str) else "\n".join(prompt or [])
    suffix = body.get("suffix")
    if isinstance(suffix, str) and suffix.strip():  # a turn of its own: judged alone and with the prompt
        return [{"role": "user", "content": text}, {"role": "user", "content": suffix}]
    return [{"role": "user", "content": text}]
