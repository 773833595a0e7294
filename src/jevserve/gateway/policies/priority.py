"""Queue priority: predicted reply length from the length question, for a length-aware queue order.

The expected reply tokens are Σ P(level) × tokens(level). A vLLM upstream gets them (rounded) as its `priority`
(smaller is served first, as `plf` does); for other upstreams the gateway's own queue orders by the configured
serving policy (see gateway/queueing.py).
"""

from __future__ import annotations

from jevserve.gateway.config import PriorityConfig
from jevserve.gateway.policies.base import Answers, Policy, RequestView, Verdict, frozen


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
            return Verdict(
                self.name,
                "skip",
                None,
                None,
                True,
                "decision unavailable: no prediction, arrival order",
                frozen({"queue_policy": self.config.queue_policy}),
            )
        predicted = float(sum(p * t for p, t in zip(probabilities, levels, strict=True)))
        detail = {"predicted_tokens": predicted, "priority": round(predicted), "queue_policy": self.config.queue_policy}
        return Verdict(
            self.name, "prioritise", None, None, False, f"predicted {predicted:.0f} reply tokens", frozen(detail)
        )
