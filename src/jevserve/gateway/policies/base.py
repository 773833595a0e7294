"""What every decision policy shares: the request it looks at, its question, thresholds, fallbacks and mode.

A policy is pure: `asks(view)` lists its questions, `act(view, answers)` returns a frozen `Verdict`. `answers` is
None when the decision backend failed or was slow; then the policy takes its configured fallback: "open" acts as
if the decision said no (allow, serve nothing from cache, ...), "closed" as if it said yes (block, ...). A policy in
`shadow` mode decides the same way, and its verdict carries the mode so that nothing acts on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from jevserve.gateway.config import PolicyConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.questions import DEFAULTS, wire_to_decision
from jevserve.gateway.types import Action, Detail, Mode, Phase, Verdict
from jevserve.protocol import DecisionQuestion, Text, render_text
from jevserve.serving.decision_inputs import DecisionInputs

Answers = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class CacheCandidate:
    """A cached reply that may answer the request: an exact repeat, or the nearest entry by embedding."""

    tier: str  # "exact" or "semantic"
    entry_id: str
    key_text: str  # the cached conversation's text
    similarity: float  # cosine with the new request (1.0 for an exact repeat)
    response: Mapping[str, Any]  # the cached chat completion


@dataclass(frozen=True)
class RequestView:
    """One request as the policies see it: the texts each decision reads, and the cache's candidate."""

    inputs: DecisionInputs
    cache_candidate: CacheCandidate | None = None


class Policy:
    """Base of the decision policies: its config, its question, and the threshold-or-fallback step."""

    name: ClassVar[str] = "policy"
    question_key: ClassVar[str] = ""  # the default question in questions.DEFAULTS
    phase: ClassVar[Phase] = Phase.REQUEST
    # what a scored block by this policy tells the client the text read as ("" for a policy that never blocks a
    # request): "blocked by the guard decision" alone told a support user asking for a human nothing they could act on
    blocks_because: ClassVar[str] = ""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.threshold = config.effective_threshold  # a rate must be resolved first (operating_points.py)
        self.mode = Mode(config.mode)
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

    def verdict(self, action: Action, reason: str, detail: Detail | None = None, **fields: Any) -> Verdict:
        """A verdict of this policy, in its mode."""
        return Verdict(self.name, action, reason=reason, detail=detail, mode=self.mode, **fields)

    def threshold_verdict(
        self, p: float | None, on: Action, off: Action = Action.ALLOW, detail: Detail | None = None
    ) -> Verdict:
        """`on` when p ≥ threshold (or, without p, when the fallback is closed); `off` otherwise."""
        t = self.threshold
        if p is None:
            closed = self.config.fallback == "closed"
            reason = f"decision unavailable: fallback {self.config.fallback}"
            return self.verdict(on if closed else off, reason, detail, threshold=t, fell_back=True)
        hit = p >= t
        reason = f"P={comparison(p, t)}"
        return self.verdict(on if hit else off, reason, detail, probability=p, threshold=t)


def _reads_as_bound(shown: str, threshold: float) -> bool:
    # a threshold of 0.99981 shown "1.000" reads as one nothing reaches, though it acts on a few requests
    return float(shown) in (0.0, 1.0) and 0.0 < threshold < 1.0


def threshold_text(threshold: float) -> str:
    """A threshold for people to read and to copy into a config: three decimals, more (up to 9) where three would
    change it (a rate-set 0.990525 printed as 0.991 moved the operating point when copied) or read as 0 or 1."""
    for decimals in range(3, 10):
        shown = f"{threshold:.{decimals}f}"
        if abs(float(shown) - threshold) < 1e-12 and not _reads_as_bound(shown, threshold):
            break
    return shown


def comparison(p: float, threshold: float) -> str:
    """`0.985 < 0.990`, both at the same precision, with as many decimals (3 to 6; up to 9 near 0 or 1) as it takes
    for the two to read differently and the threshold not to read as 0 or 1 (the rule of `threshold_text`):
    "0.985 ≥ 0.9854" looked false although 0.98546 ≥ 0.9854 holds."""
    for decimals in range(3, 10):
        shown_p, shown_t = f"{p:.{decimals}f}", f"{threshold:.{decimals}f}"
        if (shown_p != shown_t or decimals >= 6) and not _reads_as_bound(shown_t, threshold):
            break  # 6 decimals for equal values, up to 9 near a bound
    return f"{shown_p} {'≥' if p >= threshold else '<'} {shown_t}"
