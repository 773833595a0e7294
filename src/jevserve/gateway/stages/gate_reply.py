"""Stage 7, gate the reply: the reply-phase policies (the tool gate) on the tool calls of a whole reply."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decider import timed_decide
from jevserve.gateway.decisions import header_part, policies_for
from jevserve.gateway.errors import DECIDER_UNAVAILABLE_RETRY_AFTER_S, BlockedError, DeciderUnavailableError
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.types import Action, Verdict


@dataclass(frozen=True)
class ReplyToolCall:
    """One tool call proposed in a reply: where it is, and the call in `tool_calls` form."""

    choice: int  # the index into the reply's `choices`
    position: int | None  # the index into that message's `tool_calls`; None: the legacy `function_call`
    call: dict[str, Any]


async def gate_reply(
    gateway: Gateway, ctx: RequestContext, completion: dict[str, Any], *, undecided: str | None = None
) -> dict[str, Any]:
    """The reply with blocked tool calls removed from every choice (and said so); sets `ctx.tool_verdicts`. When it
    removes nothing it returns `completion` itself, which the stream relays (streaming.py, extproc/calls.py) read as
    "send the held events as they came". Raises BlockedError when the request forces a tool call (`tool_choice`
    "required" or a named function, or a legacy `function_call` by name) and a choice is left without one: a reply
    without the call its client demanded is not an answer that client can read, so it is refused instead.
    `undecided` (why): the decider is not asked, and each call takes the gate's fallback, as when the decider has no
    answer in time (`jevserve extproc` past its deadline: the calls went on unjudged and unmarked, whatever the
    fallback said)."""
    gate = next((p for p in policies_for(ctx.route) if isinstance(p, ToolGate)), None)
    proposed = tool_calls_of(completion)
    if gate is None or not proposed or ctx.report is None or ctx.report.inputs is None:
        return completion
    calls = [c.call for c in proposed]
    ctx.reply_tool_calls = tuple(calls)  # remove_blocked_calls copies before it edits
    asks = gate.asks_for_calls(ctx.report.inputs.user_text, calls, ctx.route.input_limits())
    if undecided is None:
        answers, ms, *_ = await timed_decide(gateway.decider, asks, gateway.config.decision_timeout_ms / 1000)
        ctx.flags["x-jevserve-tool-gate-ms"] = f"{ms:.2f}"
    else:
        answers = None
        ctx.outcome["tool_gate_undecided"] = undecided
    ctx.tool_verdicts = tuple(gate.act_on_calls(calls, answers))
    if any(v.action is Action.FLAG and v.acts for v in ctx.tool_verdicts):
        # beside the request's own flags (harm, say), which a whole reply's headers carry too: it replaced them
        flagged = [f for f in ctx.flags.get("x-jevserve-flagged", "").split(",") if f]
        ctx.flags["x-jevserve-flagged"] = ",".join(dict.fromkeys([*flagged, "tool_call"]))
    gated = remove_blocked_calls(completion, proposed, ctx.tool_verdicts)
    field = forcing_field(ctx.body)
    if gated is not completion and field is not None:
        left = {c.choice for c in tool_calls_of(gated)}
        lost = [c for c, v in zip(proposed, ctx.tool_verdicts, strict=True)
                if c.choice not in left and v.action is Action.BLOCK and v.acts]
        if lost:
            names = ", ".join(dict.fromkeys(str(_function_name(c.call)) for c in lost))
            if all(v.fell_back for v in ctx.tool_verdicts if v.action is Action.BLOCK and v.acts):
                # nothing was judged: the decider's outage under a closed fallback, not the call's content (a 400
                # content_policy_violation said it was "judged unsafe", and clients never retry a 400)
                raise DeciderUnavailableError(
                    f"reply withheld: the tool_gate decision has no answer from the decider about its call to "
                    f"{names} and its fallback is closed, and the request's {field} requires a tool call; retry "
                    f"after {DECIDER_UNAVAILABLE_RETRY_AFTER_S:g} s", retry_after_s=DECIDER_UNAVAILABLE_RETRY_AFTER_S)
            raise BlockedError(
                f"reply blocked by the tool_gate decision: its call to {names} was judged unsafe to carry out, and the "
                f"request's {field} requires a tool call, so the reply without it is not sent",
                param=field,
            )
    return gated


def stream_trailer(ctx: RequestContext) -> bytes:
    """What a stream says of the tool gate after its held events, before `[DONE]`: its headers left before the
    calls were judged, so its verdicts are told in SSE comments, which clients that read only `data:` lines skip
    (adding a field to OpenAI's chunks would break strict ones). Where a call was blocked, every call's verdict as
    a whole reply's `x-jevserve-decisions` header gives it (`: x-jevserve-decisions: tool_gate=allow,tool_gate=block`:
    told only in the reply's prose, a blocked call could not be told from one the model never made); where one was
    flagged, `: x-jevserve-flagged: tool_call`. A reply the gate let through whole arrives as the upstream sent it."""
    trailer = b""
    if any(v.action is Action.BLOCK and v.acts for v in ctx.tool_verdicts):
        parts = ",".join(header_part(v, ctx.shows_scores) for v in ctx.tool_verdicts)
        trailer += f": x-jevserve-decisions: {parts}\n\n".encode()
    if "tool_call" in ctx.flags.get("x-jevserve-flagged", "").split(","):
        trailer += b": x-jevserve-flagged: tool_call\n\n"
    return trailer


def forcing_field(body: dict[str, Any]) -> str | None:
    """The field by which a chat request demands a tool call in every reply, or None: `tool_choice` "required" or
    naming a tool (or an `allowed_tools` choice in mode "required"), or the legacy `function_call` naming one."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools")
        if isinstance(allowed, dict) and allowed.get("mode") == "required":
            return "tool_choice"
    elif choice == "required" or isinstance(choice, dict):
        return "tool_choice"
    return "function_call" if isinstance(body.get("function_call"), dict) else None


def tool_calls_of(completion: dict[str, Any]) -> list[ReplyToolCall]:
    """The tool calls of every choice of a chat completion, in order: each message's `tool_calls` (entries that are
    not objects are left out) and its legacy `function_call` (the `functions` API), as a call of type function."""
    out = []
    choices = completion.get("choices")
    for i, choice in enumerate(choices if isinstance(choices, list) else []):
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        for j, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, dict):
                out.append(ReplyToolCall(i, j, call))
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            out.append(ReplyToolCall(i, None, {"type": "function", "function": legacy}))
    return out


def remove_blocked_calls(
    completion: dict[str, Any], proposed: Sequence[ReplyToolCall], verdicts: Sequence[Verdict]
) -> dict[str, Any]:
    """Remove each blocked call (by its place, so calls sharing an id or without one are judged one by one) from its
    choice and say why in that choice's content; flagged calls stay. A choice left without calls ends with
    `finish_reason` stop."""
    blocked: dict[int, list[ReplyToolCall]] = {}
    unjudged: set[int] = set()  # choices whose calls were withheld for want of an answer (a closed fallback)
    for call, verdict in zip(proposed, verdicts, strict=True):
        if verdict.action is Action.BLOCK and verdict.acts:
            blocked.setdefault(call.choice, []).append(call)
            if verdict.fell_back:
                unjudged.add(call.choice)
    if not blocked:
        return completion
    out = copy.deepcopy(completion)
    for index, calls in blocked.items():
        choice = out["choices"][index]
        message = choice["message"]
        positions = {c.position for c in calls}
        if None in positions:
            message.pop("function_call", None)
        kept = [c for j, c in enumerate(message.get("tool_calls") or []) if j not in positions]
        names = ", ".join(str(_function_name(c.call)) for c in calls)
        note = (f"[jevserve gateway: withheld tool call(s) {names}: the decider could not judge them and the tool "
                "gate's fallback is closed]" if index in unjudged else
                f"[jevserve gateway: blocked tool call(s) {names}: judged unsafe to carry out]")
        message["content"] = (message.get("content") or "") + ("\n" if message.get("content") else "") + note
        if kept:
            message["tool_calls"] = kept
        else:
            message.pop("tool_calls", None)
            if "function_call" not in message:
                choice["finish_reason"] = "stop"
    return out


def _function_name(call: dict[str, Any]) -> str | None:
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else None
