"""Route: the cheapest target when a small model suffices, else the most expensive; thinking on or off."""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.gateway.config import RouteDecisionConfig, TargetConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.questions import DEFAULTS, wire_to_decision
from jevserve.gateway.types import Action, RouteDetail, Verdict


class CostRoute(Policy):
    """P(cheap model suffices) ≥ threshold → the cheapest target; otherwise the costliest (ties: config order)."""

    name = "route"
    question_key = "cheap_ok"
    config: RouteDecisionConfig

    def __init__(self, config: RouteDecisionConfig) -> None:
        super().__init__(config)
        thinking = config.thinking
        self.thinking_question = None
        if thinking is not None and thinking.enabled:
            wire = dict(thinking.question) if thinking.question else dict(DEFAULTS["thinking"])
            self.thinking_question = wire_to_decision(wire)

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """cheap_ok when there are targets to choose from; thinking when configured."""
        out = []
        if len(self.config.targets) >= 2:
            out.append(self.ask(self.name, view.inputs.request_text))
        if self.thinking_question is not None:
            out.append(self.ask("thinking", view.inputs.request_text, self.thinking_question))
        return out

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """route (the chosen model and thinking switch in the detail), or skip when there is nothing to choose."""
        targets = self.config.targets
        thinking = self._thinking(answers)
        if len(targets) < 2:
            target = targets[0] if targets else None
            detail = _detail(target, thinking)
            action = Action.ROUTE if target is not None or thinking else Action.SKIP
            return self.verdict(action, "no choice", detail)
        cheap = min(targets, key=lambda t: t.cost)
        strong = max(targets, key=lambda t: t.cost)
        verdict = self.threshold_verdict(self.yes(answers), Action.ROUTE, Action.ROUTE)
        if verdict.fell_back:  # open: the strong model, never worse answers when blind; closed: the cheap one
            use_cheap = self.config.fallback == "closed"
        else:
            use_cheap = verdict.probability is not None and verdict.probability >= self.threshold
        return self.verdict(
            Action.ROUTE,
            verdict.reason,
            _detail(cheap if use_cheap else strong, thinking),
            probability=verdict.probability,
            threshold=verdict.threshold,
            fell_back=verdict.fell_back,
        )

    def _thinking(self, answers: Answers | None) -> dict:
        thinking = self.config.thinking
        if self.thinking_question is None or thinking is None:
            return {}
        p = self.yes(answers, "thinking")
        on = (p >= thinking.effective_threshold) if p is not None else thinking.fallback == "closed"
        return {"thinking": on, "thinking_probability": p, "thinking_field": thinking.field}


def _detail(target: TargetConfig | None, thinking: dict) -> RouteDetail:
    if target is None:
        return RouteDetail(**thinking)
    upstreams = tuple(target.upstreams) if target.upstreams else None
    return RouteDetail(model=target.model, cost=target.cost, upstreams=upstreams, **thinking)
