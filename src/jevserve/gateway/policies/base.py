"""What every decision policy shares: the request it looks at, its verdict, thresholds and fallbacks.

A policy is pure: `asks(view)` lists its questions, `act(view, answers)` returns a frozen `Verdict`. `answers` is
None when the decision backend failed or was slow; then the policy takes its configured fallback: "open" acts as
if the decision said no (allow, serve nothing from cache, ...), "closed" as if it said yes (block, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from jevserve.gateway.config import PolicyConfig
from jevserve.gateway.decider import Ask, wire_to_decision
from jevserve.gateway.questions import DEFAULTS
from jevserve.protocol import DecisionQuestion, Text, render_text
from jevserve.serving.decision_inputs import DecisionInputs

Answers = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class CacheCandidate:
    """The nearest cached conversation of the tenant, found by embedding before the decision call."""

    entry_id: str
    key_text: str  # the cached conversation's text
    similarity: float  # cosine with the new request
    response: Mapping[str, Any]  # the cached chat completion


@dataclass(frozen=True)
class RequestView:
    """One request as the policies see it: the texts each decision reads, and the cache's nearest entry."""

    inputs: DecisionInputs
    cache_candidate: CacheCandidate | None = None


@dataclass(frozen=True)
class Verdict:
    """What one decision said and what the gateway does about it."""

    decision: str  # the policy: guard, harm, route, cache, clarify, priority, tool_gate
    action: str  # allow, block, strip_tools, flag, clarify, serve_cached, route, prioritise, skip
    probability: float | None = None  # the probability compared with the threshold; None when none was asked
    threshold: float | None = None
    fell_back: bool = False  # True: the backend failed or was slow and the configured fallback decided
    reason: str = ""
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def triggered(self) -> bool:
        """True when the action changes what the gateway does (anything but allow and skip)."""
        return self.action not in ("allow", "skip")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, for logs and responses."""
        return {
            "decision": self.decision,
            "action": self.action,
            "probability": self.probability,
            "threshold": self.threshold,
            "fell_back": self.fell_back,
            "reason": self.reason,
            "detail": dict(self.detail),
        }


def frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy, for `Verdict.detail`."""
    return MappingProxyType(dict(mapping))


class Policy:
    """Base of the decision policies: its config, its question, and the threshold-or-fallback step."""

    name = "policy"
    question_key = ""  # the default question in questions.DEFAULTS

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.wire = dict(config.question) if config.question else dict(DEFAULTS[self.question_key])
        # validated once here, not on every request (pydantic validation per question was per-request CPU)
        self.question = wire_to_decision(self.wire)

    def ask(self, question_id: str, state: Text, question: DecisionQuestion | None = None) -> Ask:
        """Ask `question` (default: this policy's) about `state`."""
        return Ask(question_id, render_text(state), question or self.question)

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """The questions this policy needs about `view` (by default its one question about the request)."""
        return [self.ask(self.name, view.inputs.request_text)]

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """The verdict from `answers` (None: the fallback)."""
        raise NotImplementedError

    def yes(self, answers: Answers | None, question_id: str | None = None) -> float | None:
        """P(yes) of a noul answer (or P(first option)); None when the backend gave none."""
        if answers is None:
            return None
        probabilities = answers.get(question_id or self.name)
        return None if probabilities is None else float(probabilities[0])

    def threshold_verdict(self, p: float | None, on: str, off: str = "allow", **detail: Any) -> Verdict:
        """`on` when p ≥ threshold (or, without p, when the fallback is closed); `off` otherwise."""
        t = self.config.threshold
        if p is None:
            closed = self.config.fallback == "closed"
            return Verdict(
                self.name,
                on if closed else off,
                None,
                t,
                True,
                f"decision unavailable: fallback {self.config.fallback}",
                frozen(detail),
            )
        hit = p >= t
        reason = f"P={p:.3f} {'≥' if hit else '<'} {t}"
        return Verdict(self.name, on if hit else off, p, t, False, reason, frozen(detail))
