"""Stage 5, act: the request-phase verdicts → refuse (400), answer here (clarify, cached reply), or a forward plan.

Each final action has one handler; every other enforced verdict shapes the upstream body (tools stripped, model and
thinking chosen) or the queue (priority). Verdicts in shadow mode change nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decisions import DecisionReport
from jevserve.gateway.errors import DECIDER_UNAVAILABLE_RETRY_AFTER_S, BlockedError, DeciderUnavailableError
from jevserve.gateway.policies import POLICIES
from jevserve.gateway.shapes import chat_completion, rough_tokens
from jevserve.gateway.types import Action, ClarifyDetail, GuardDetail, PriorityDetail, RouteDetail, Verdict
from jevserve.serving.decision_inputs import message_text

# what `strip_tools` removes: the tools API's fields and the legacy functions API's
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


@dataclass(frozen=True)
class Answer:
    """The gateway answers the request itself with this chat completion; the upstream is not called."""

    completion: dict[str, Any]


@dataclass(frozen=True)
class Forward:
    """How to call the upstream."""

    body: dict[str, Any]  # the body to send (the stream flag is the forward stage's)
    upstreams: tuple[str, ...] | None  # upstream names chosen by the route decision; None: the route's
    predicted_tokens: float | None  # the predicted reply length, which orders the queue; None: arrival order


def act(ctx: RequestContext) -> Answer | Forward:
    """What to do with the request; raises BlockedError for a block."""
    report = ctx.report
    flagged = [v.decision for v in report.verdicts if v.action is Action.FLAG and v.acts]
    if flagged:
        ctx.flags["x-jevserve-flagged"] = ",".join(flagged)
    final = report.final
    if final is not None:
        return _FINAL[final.action](ctx, final)
    return _forward_plan(ctx, report)


def _block(ctx: RequestContext, verdict: Verdict) -> Answer:
    if verdict.fell_back and verdict.probability is None:
        # `fallback: closed` with no answer read: the decider's outage, not the client's text (a 400
        # content_policy_violation told the client its text was at fault, and clients never retry a 400). The
        # decider's own words stay in the log and /healthz: they name its address and settings, the operator's
        raise DeciderUnavailableError(
            f"request refused undecided: the {verdict.decision} decision has no answer from the decider and its "
            f"fallback is closed; retry after {DECIDER_UNAVAILABLE_RETRY_AFTER_S:g} s",
            retry_after_s=DECIDER_UNAVAILABLE_RETRY_AFTER_S,
        )
    detail = verdict.detail if isinstance(verdict.detail, GuardDetail) else None
    place = _client_place(ctx, detail.place if detail is not None else None)
    where = f" on {detail.source}" if detail is not None else ""
    if detail is not None and place is not None and place not in detail.source:  # not "(documents)" twice
        where += f" ({place})"
    # every other decision that blocked it: a harmful request the guard blocked first was otherwise told only that
    # it read as a prompt injection
    also = "".join(f"; the {v.decision} decision blocks it too{_why(ctx, v)}" for v in ctx.report.verdicts
                   if v is not verdict and v.action is Action.BLOCK and v.acts)
    raise BlockedError(
        f"request blocked by the {verdict.decision} decision{where}{_why(ctx, verdict)}{also}",
        param=_param(ctx, place),
    )


def _why(ctx: RequestContext, verdict: Verdict) -> str:
    """A block's reason: its probability and threshold where the route shows scores (a fallback's says why no
    answer was read), then, for a scored block only, what the text read as (a fallback's or an unread text's block
    read nothing)."""
    why = f" ({verdict.reason})" if ctx.shows_scores or verdict.probability is None else ""
    policy = POLICIES.get(verdict.decision)
    scored = policy is not None and policy.blocks_because and verdict.probability is not None
    return why + (f": {policy.blocks_because}" if scored else "")


def _client_place(ctx: RequestContext, place: str | None) -> str | None:
    """A guard text's place as the client's request has it: a completions request's prompt and suffix are read as
    the turns messages[0] and messages[1] (stages.decide.messages_of)."""
    if place is None or ctx.endpoint == "chat":
        return place
    return place.replace("messages[0]", "prompt").replace("messages[1]", "suffix")


def _param(ctx: RequestContext, place: str | None) -> str:
    """The field the client sent the blocked text in: one message, the suffix or a template field where the guard
    read one, else the whole (`messages`, `prompt`)."""
    whole = "messages" if ctx.endpoint == "chat" else "prompt"
    if place is None or " " in place:  # none known, or several texts read as one
        return whole
    return place


def _clarify(ctx: RequestContext, verdict: Verdict) -> Answer:
    assert isinstance(verdict.detail, ClarifyDetail)
    ctx.flags["x-jevserve-clarify"] = "1"
    return Answer(chat_completion(ctx.model, verdict.detail.message, prompt_tokens=prompt_tokens(ctx.body)))


def _serve_cached(ctx: RequestContext, verdict: Verdict) -> Answer:
    ctx.flags["x-jevserve-cache"] = "hit"
    return Answer(dict(ctx.report.cached_response or {}))


_FINAL: dict[Action, Callable[[RequestContext, Verdict], Answer]] = {
    Action.BLOCK: _block,
    Action.CLARIFY: _clarify,
    Action.SERVE_CACHED: _serve_cached,
}


def _forward_plan(ctx: RequestContext, report: DecisionReport) -> Forward:
    route = ctx.route
    body = dict(ctx.body)
    body["model"] = route.upstream_model or route.model
    upstreams = None
    for verdict in report.verdicts:
        if not verdict.acts:
            continue
        if verdict.action is Action.STRIP_TOOLS:
            for key in TOOL_FIELDS:
                body.pop(key, None)
        elif verdict.action is Action.ROUTE and isinstance(verdict.detail, RouteDetail):
            detail = verdict.detail
            body["model"] = detail.model or body["model"]
            upstreams = detail.upstreams
            if detail.thinking is not None and detail.thinking_field:
                set_dotted(body, detail.thinking_field, detail.thinking)
    priority = report.verdict("priority")
    predicted = None
    if priority is not None and priority.acts and isinstance(priority.detail, PriorityDetail):
        predicted = priority.detail.predicted_tokens
    if predicted is None and route.priority is not None and route.priority.enabled and route.priority.mode != "shadow":
        # no prediction (backend down): the middle level, so the request neither jumps nor starves the queue; in
        # shadow the decision changes nothing, so no priority is sent
        predicted = route.priority.middle_tokens
    return Forward(body, upstreams, predicted)


def set_dotted(body: dict[str, Any], path: str, value: Any) -> None:
    """Set `a.b.c` in nested dicts, creating them (copies the dicts it changes, never the caller's)."""
    keys = path.split(".")
    node = body
    for key in keys[:-1]:
        child = node.get(key)
        child = dict(child) if isinstance(child, dict) else {}
        node[key] = child
        node = child
    node[keys[-1]] = value


def prompt_tokens(body: dict[str, Any]) -> int:
    """A rough prompt token count for answers the gateway writes (and for the queue's request size)."""
    if "messages" in body:
        return sum(rough_tokens(message_text(m)) for m in body["messages"])
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and not all(isinstance(p, str) for p in prompt):  # token ids: counted
        return sum(len(p) if isinstance(p, list) else 1 for p in prompt)
    return rough_tokens(prompt if isinstance(prompt, str) else "\n".join(prompt or []))
