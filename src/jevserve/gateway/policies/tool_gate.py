"""Tool gate: a tool call in an upstream reply is blocked or flagged when the decision finds it unsafe.

This is the one policy of the reply phase (the call does not exist before the upstream answers). Each call is asked
about as the bench's agent-action-risk state: the user's request and the proposed call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jevserve.gateway.config import ToolGateConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.types import Action, Phase, ToolCallDetail, Verdict
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, InputLimits, tool_call_text


class ToolGate(Policy):
    """Block or flag each tool call whose P(unsafe) ≥ threshold."""

    name = "tool_gate"
    question_key = "unsafe_action"
    phase = Phase.REPLY
    config: ToolGateConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """Nothing about the request itself."""
        return []

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """Nothing to gate before the reply."""
        return self.verdict(Action.SKIP, "no tool call yet")

    def asks_for_calls(
        self, user_text: str, calls: Sequence[Mapping[str, Any]], limits: InputLimits = DEFAULT_LIMITS
    ) -> list[Ask]:
        """One question per call, about the user's request and the call (its arguments bounded by `limits`)."""
        return [self.ask(f"{self.name}:{i}", tool_call_text(user_text, c, limits=limits)) for i, c in enumerate(calls)]

    def act_on_calls(self, calls: Sequence[Mapping[str, Any]], answers: Answers | None) -> list[Verdict]:
        """One verdict per call: block / flag / allow, with the call's id and function name in the detail."""
        out = []
        for i, call in enumerate(calls):
            p = None if answers is None else float(answers[f"{self.name}:{i}"][0])
            function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
            name = function.get("name") if isinstance(function.get("name"), str) else None
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            out.append(self.threshold_verdict(p, Action(self.config.action), detail=ToolCallDetail(call_id, name)))
        return out
