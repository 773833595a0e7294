"""Tool gate: a tool call in an upstream reply is blocked or flagged when the decision finds it unsafe.

This is the one decision asked after the upstream answers (the call does not exist before). Each call is asked
about as the bench's agent-action-risk state: the user's request and the proposed call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jevserve.gateway.config import ToolGateConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView, Verdict, frozen
from jevserve.serving.decision_inputs import tool_call_text


class ToolGate(Policy):
    """Block or flag each tool call whose P(unsafe) ≥ threshold."""

    name = "tool_gate"
    question_key = "unsafe_action"
    config: ToolGateConfig

    def asks_for_calls(self, user_text: str, calls: Sequence[Mapping[str, Any]]) -> list[Ask]:
        """One question per call, about the user's request and the call."""
        return [self.ask(f"{self.name}:{i}", tool_call_text(user_text, c)) for i, c in enumerate(calls)]

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """Nothing before the upstream answers."""
        return []

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """Before the reply: nothing to gate."""
        return Verdict(self.name, "skip", reason="no tool call yet")

    def act_on_calls(self, calls: Sequence[Mapping[str, Any]], answers: Answers | None) -> list[Verdict]:
        """One verdict per call: block / flag / allow, with the call's id and name in detail."""
        out = []
        for i, call in enumerate(calls):
            p = None if answers is None else float(answers[f"{self.name}:{i}"][0])
            verdict = self.threshold_verdict(p, self.config.action)
            name = (call.get("function") or {}).get("name")
            out.append(
                Verdict(
                    verdict.decision,
                    verdict.action,
                    verdict.probability,
                    verdict.threshold,
                    verdict.fell_back,
                    verdict.reason,
                    frozen({"call_id": call.get("id"), "function": name}),
                )
            )
        return out
