"""Route: the cheapest target when a small model suffices, else the most expensive; thinking on or off."""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.gateway.config import RouteDecisionConfig
from jevserve.gateway.decider import Ask, wire_to_decision
from jevserve.gateway.policies.base import Answers, Policy, RequestView, Verdict, frozen
from jevserve.gateway.questions import DEFAULTS


class CostRoute(Policy):
    """P(cheap model suffices) ≥ threshold → the cheapest target; otherwise the costliest (ties: config order)."""

    name = "route"
    question_key = "cheap_ok"
    config: RouteDecisionConfig

    def __init__(self, config: RouteDecisionConfig) -> None:
        super().__init__(config)
        thinking = config.thinking
        self.thinking_wire = None
        if thinking is not None and thinking.enabled:
            self.thinking_wire = dict(thinking.question) if thinking.question else dict(DEFAULTS["thinking"])
            self.thinking_question = wire_to_decision(self.thinking_wire)

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """cheap_ok when there are targets to choose from; thinking when configured."""
        out = []
        if len(self.config.targets) >= 2:
            out.append(self.ask(self.name, view.inputs.request_text))
        if self.thinking_wire is not None:
            out.append(self.ask("thinking", view.inputs.request_text, self.thinking_question))
        return out

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """route (with the chosen model and thinking switch in detail) or skip when there is nothing to choose."""
        targets = self.config.targets
        detail: dict = {}
        verdict = None
        if len(targets) >= 2:
            cheap = min(targets, key=lambda t: t.cost)
            strong = max(targets, key=lambda t: t.cost)
            verdict = self.threshold_verdict(self.yes(answers), "route", "route")
            # hit (or closed fallback) = cheap; fall back open = the strong model: never worse answers when blind
            use_cheap = verdict.probability is not None and verdict.probability >= self.config.threshold
            if verdict.fell_back:
                use_cheap = self.config.fallback == "closed"
            chosen = cheap if use_cheap else strong
            detail.update(model=chosen.model, cost=chosen.cost, upstreams=chosen.upstreams)
        elif len(targets) == 1:
            detail.update(model=targets[0].model, cost=targets[0].cost, upstreams=targets[0].upstreams)
        thinking = self.config.thinking
        if self.thinking_wire is not None and thinking is not None:
            p = self.yes(answers, "thinking")
            on = (p >= thinking.threshold) if p is not None else thinking.fallback == "closed"
            detail.update(thinking=on, thinking_probability=p, thinking_field=thinking.field)
        if verdict is None:
            return Verdict(self.name, "route" if detail else "skip", None, None, False, "no choice", frozen(detail))
        return Verdict(
            self.name,
            "route",
            verdict.probability,
            verdict.threshold,
            verdict.fell_back,
            verdict.reason,
            frozen(detail),
        )
