"""Queue priority: predicted reply length from the length question, for a length-aware queue order.

The expected reply tokens are Σ P(level) × tokens(level). A vLLM upstream gets them (rounded) as its `priority`
(smaller is served first, as `plf` does); for other upstreams the gateway's own queue orders by the configured
serving policy (see gateway/gate.py).
"""

from __future__ import annotations

from jevserve.gateway.config import PriorityConfig
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.types import Action, PriorityDetail, Verdict


class LengthPriority(Policy):
    """Predict the reply length; the queue policy does the rest."""

    name = "priority"
    question_key = "length"
    config: PriorityConfig

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """prioritise with `predicted_tokens` in detail; without an answer, no prediction (served by arrival)."""
        probabilities = None if answers is None else answers.get(self.name)
        levels = self.config.level_tokens
        if probabilities is None or len(probabilities) != len(levels):
            detail = PriorityDetail(self.config.queue_policy)
            return self.verdict(
                Action.SKIP, "decision unavailable: no prediction, arrival order", detail, fell_back=True
            )
        predicted = float(sum(p * t for p, t in zip(probabilities, levels, strict=True)))
        detail = PriorityDetail(self.config.queue_policy, predicted, round(predicted))
        return self.verdict(Action.PRIORITISE, f"predicted {predicted:.0f} reply tokens", detail)
