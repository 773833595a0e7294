"""Applying verdicts to a request body and to an upstream reply (pure: dicts in, dicts out)."""

from __future__ import annotations

import copy
from typing import Any

from jevserve.gateway.decisions import DecisionReport
from jevserve.gateway.policies.base import Verdict


def upstream_body(body: dict[str, Any], report: DecisionReport, default_model: str) -> dict[str, Any]:
    """The body sent upstream: model chosen by the route decision, tools stripped by the guard, thinking switch."""
    out = dict(body)
    out["model"] = default_model
    guard = report.verdict("guard")
    if guard is not None and guard.action == "strip_tools":
        out.pop("tools", None)
        out.pop("tool_choice", None)
        out.pop("parallel_tool_calls", None)
    route = report.verdict("route")
    if route is not None and route.action == "route":
        if route.detail.get("model"):
            out["model"] = route.detail["model"]
        if "thinking" in route.detail:
            set_dotted(out, route.detail["thinking_field"], bool(route.detail["thinking"]))
    return out


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


def tool_calls_of(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls in choice 0 of a chat completion."""
    choices = completion.get("choices") or []
    if not choices:
        return []
    message = choices[0].get("message") or {}
    return list(message.get("tool_calls") or [])


def apply_tool_verdicts(completion: dict[str, Any], verdicts: list[Verdict]) -> dict[str, Any]:
    """Remove blocked tool calls from choice 0 and say why in its content; flagged calls stay."""
    blocked = {v.detail.get("call_id") for v in verdicts if v.action == "block"}
    if not blocked:
        return completion
    out = copy.deepcopy(completion)
    choice = out["choices"][0]
    message = choice["message"]
    kept = [c for c in message.get("tool_calls") or [] if c.get("id") not in blocked]
    names = [v.detail.get("function") for v in verdicts if v.action == "block"]
    note = f"[jevserve gateway: blocked tool call(s) {', '.join(map(str, names))}: judged unsafe to carry out]"
    message["content"] = (message.get("content") or "") + ("\n" if message.get("content") else "") + note
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
        choice["finish_reason"] = "stop"
    return out


def cacheable(status: int, completion: dict[str, Any]) -> bool:
    """Only complete, successful, tool-free answers are stored: 2xx, every choice finished with `stop`."""
    choices = completion.get("choices") or []
    if not 200 <= status < 300 or not choices:
        return False
    return all(c.get("finish_reason") == "stop" and not (c.get("message") or {}).get("tool_calls") for c in choices)
