"""The gateway's value types: actions, the phase a policy runs in, each policy's detail, and the verdict.

A verdict says what one decision concluded (`action`) and why (`probability`, `threshold`, `reason`); its `detail`
is the policy's own frozen dataclass, so code that acts on a verdict reads named fields, never string keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Action(StrEnum):
    """What the gateway does about a decision (the string value is what headers, logs and metrics show)."""

    ALLOW = "allow"  # nothing to do
    BLOCK = "block"  # refuse the request (400) or remove a tool call from the reply
    STRIP_TOOLS = "strip_tools"  # forward without the request's tools
    FLAG = "flag"  # forward unchanged, marked in a header and the log
    CLARIFY = "clarify"  # answer with a clarifying question instead of calling the model
    SERVE_CACHED = "serve_cached"  # answer with a cached reply
    ROUTE = "route"  # send to the model (and thinking setting) in the detail
    PRIORITISE = "prioritise"  # queue by the predicted reply length in the detail
    SKIP = "skip"  # the decision had nothing to decide
    REJECT = "reject"  # no answer in time for a decision that could refuse: the request is refused 429, undecided


# The actions that answer the request without calling the upstream, in the order they win over each other.
FINAL_ACTIONS = (Action.BLOCK, Action.CLARIFY, Action.SERVE_CACHED)


class Phase(StrEnum):
    """When a policy runs: on the request before the upstream is called, or on the upstream's reply."""

    REQUEST = "request"
    REPLY = "reply"


class Mode(StrEnum):
    """`enforce` acts on the verdict; `shadow` computes, logs and reports it but lets the request through."""

    ENFORCE = "enforce"
    SHADOW = "shadow"


@dataclass(frozen=True)
class GuardDetail:
    """Which untrusted text scored highest."""

    source: str  # "the user's message", "a tool result" or "the system or developer prompt"
    # characters of the judged texts that no guard question read (the middle of a text longer than the windows
    # reach: InputLimits, `unread_chars`); 0 when every text was read whole or in windows
    unread_chars: int = 0
    # where that text is in the request, as the client numbered it ("messages[3]", "messages[2] + messages[3]" for
    # turns read as one text, or a template field's name); None where not known
    place: str | None = None


@dataclass(frozen=True)
class ClarifyDetail:
    """The clarifying question the gateway answers with."""

    message: str


@dataclass(frozen=True)
class CacheDetail:
    """The cached entry a cache verdict is about."""

    tier: str  # "exact" (the same conversation and parameters) or "semantic" (nearest by embedding)
    entry_id: str
    similarity: float  # cosine with the request's text (1.0 for an exact repeat)


@dataclass(frozen=True)
class RouteDetail:
    """The model a request goes to, and the thinking switch."""

    model: str | None = None  # the upstream model name; None: the route's own
    cost: float | None = None
    upstreams: tuple[str, ...] | None = None  # None: the route's upstreams
    thinking: bool | None = None  # None: thinking is not configured
    thinking_probability: float | None = None
    thinking_field: str | None = None  # dotted path set in the upstream body


@dataclass(frozen=True)
class PriorityDetail:
    """The predicted reply length, which orders the upstream queue."""

    queue_policy: str
    predicted_tokens: float | None = None  # None: no prediction (arrival order)
    priority: int | None = None  # predicted_tokens rounded, sent to vLLM upstreams


@dataclass(frozen=True)
class ToolCallDetail:
    """The tool call a tool-gate verdict is about."""

    call_id: str | None
    function: str | None


Detail = GuardDetail | ClarifyDetail | CacheDetail | RouteDetail | PriorityDetail | ToolCallDetail


@dataclass(frozen=True)
class Verdict:
    """What one decision said and what the gateway does about it."""

    decision: str  # the policy: guard, harm, clarify, cache, route, priority, tool_gate
    action: Action
    probability: float | None = None  # the probability compared with the threshold; None when none was asked
    threshold: float | None = None
    fell_back: bool = False  # True: the backend failed or was slow and the configured fallback decided
    reason: str = ""
    detail: Detail | None = None
    mode: Mode = Mode.ENFORCE

    @property
    def triggered(self) -> bool:
        """True when the action would change what the gateway does (anything but allow and skip)."""
        return self.action not in (Action.ALLOW, Action.SKIP)

    @property
    def acts(self) -> bool:
        """True when the gateway carries the action out (triggered and not in shadow mode)."""
        return self.triggered and self.mode is Mode.ENFORCE

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, for logs and responses."""
        return {
            "decision": self.decision,
            "action": str(self.action),
            "probability": self.probability,
            "threshold": self.threshold,
            "fell_back": self.fell_back,
            "reason": self.reason,
            "mode": str(self.mode),
            "detail": dataclasses.asdict(self.detail) if self.detail is not None else {},
        }
