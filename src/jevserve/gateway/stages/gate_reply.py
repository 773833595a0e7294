"""Stage 7, gate the reply: the reply-phase policies (the tool gate) on the tool calls of a whole reply."""

from __future__ import annotations

import copy
from typing import Any

from jevserve.gateway.context import RequestContext
from jevserve.gateway.decider import timed_decide
from jevserve.gateway.decisions import policies_for
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.runtime import Gateway
from jevserve.gateway.types import Action, ToolCallDetail, Verdict


async def gate_reply(gateway: Gateway, ctx: RequestContext, completion: dict[str, Any]) -> dict[str, Any]:
    """The reply with blocked tool calls removed (and said so); sets `ctx.tool_verdicts`."""
    gate = next((p for p in policies_for(ctx.route) if isinstance(p, ToolGate)), None)
    calls = tool_calls_of(completion)
    if gate is None or not calls or ctx.report is None or ctx.report.inputs is None:
        return completion
    ctx.reply_tool_calls = tuple(calls)  # remove_blocked_calls copies before it edits
    asks = gate.asks_for_calls(ctx.report.inputs.user_text, calls, ctx.route.input_limits())
    answers, ms, _error = await timed_decide(gateway.decider, asks, gateway.config.decision_timeout_ms / 1000)
    ctx.tool_verdicts = tuple(gate.act_on_calls(calls, answers))
    ctx.flags["x-jevserve-tool-gate-ms"] = f"{ms:.2f}"
    if any(v.action is Action.FLAG and v.acts for v in ctx.tool_verdicts):
        ctx.flags["x-jevserve-flagged"] = "tool_call"
    return remove_blocked_calls(completion, ctx.tool_verdicts)


def tool_calls_of(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls in choice 0 of a chat completion (entries that are not objects are left out)."""
    choices = completion.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return []
    message = choices[0].get("message") or {}
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def remove_blocked_calls(completion: dict[str, Any], verdicts: tuple[Verdict, ...]) -> dict[str, Any]:
    """Remove blocked tool calls from choice 0 and say why in its content; flagged calls stay."""
    blocked = [
        v.detail for v in verdicts if v.action is Action.BLOCK and v.acts and isinstance(v.detail, ToolCallDetail)
    ]
    if not blocked:
        return completion
    blocked_ids = {d.call_id for d in blocked}
    out = copy.deepcopy(completion)
    choice = out["choices"][0]
    message = choice["message"]
    kept = [c for c in message.get("tool_calls") or [] if c.get("id") not in blocked_ids]
    names = ", ".join(str(d.function) for d in blocked)
    note = f"[jevserve gateway: blocked tool call(s) {names}: judged unsafe to carry out]"
    message["content"] = (message.get("content") or "") + ("\n" if message.get("content") else "") + note
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
        choice["finish_reason"] = "stop"
    return out
