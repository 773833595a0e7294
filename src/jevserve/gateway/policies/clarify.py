"""Clarify: answer with a clarifying question instead of calling the model when a needed detail is missing."""

from __future__ import annotations

from jevserve.gateway.config import ClarifyConfig
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.types import Action, ClarifyDetail, Verdict


class Clarify(Policy):
    """Ask the user back when P(a needed detail is missing) ≥ threshold."""

    name = "clarify"
    question_key = "ask"
    config: ClarifyConfig

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """clarify (with the configured message) or allow."""
        return self.threshold_verdict(self.yes(answers), Action.CLARIFY, detail=ClarifyDetail(self.config.message))
