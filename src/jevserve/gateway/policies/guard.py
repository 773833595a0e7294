"""Guard policies: prompt injection (block, strip tools or flag) and harmful requests (block or flag).

The injection question is asked about the request, about each of the first `max_sentences` sentences of the latest
user message (so harmless text around an injection cannot dilute it), and, when `scan_tool_results` is on, about
each tool result sent back since the last assistant turn (where indirect injections ride in). All go in the same
decision call; the highest probability counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.gateway.config import GuardConfig, HarmConfig
from jevserve.gateway.conversation import last_user_text, sentences, trailing_tool_results
from jevserve.gateway.decider import Ask, ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView, Verdict


class InjectionGuard(Policy):
    """Act on a prompt injection when P(injection) ≥ threshold."""

    name = "guard"
    question_key = "injection"
    config: GuardConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """The request, its sentences, then each trailing tool result."""
        out = [ask(self.name, view.state, self.wire)]
        for i, sentence in enumerate(sentences(last_user_text(view.messages), self.config.max_sentences)):
            out.append(ask(f"{self.name}:sentence{i}", sentence, self.wire))
        if self.config.scan_tool_results:
            for i, text in enumerate(trailing_tool_results(view.messages)):
                out.append(ask(f"{self.name}:tool{i}", text, self.wire))
        return out

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """block / strip_tools / flag, or allow."""
        if answers is None:
            return self.threshold_verdict(None, self.config.action)
        keys = [k for k in answers if k == self.name or k.startswith(f"{self.name}:")]
        p = max((float(answers[k][0]) for k in keys), default=None)
        where = max(keys, key=lambda k: float(answers[k][0])) if keys else self.name
        source = {"tool": "a tool result", "sentence": "a sentence of the request"}.get(
            where.partition(":")[2].rstrip("0123456789"), "the request"
        )
        return self.threshold_verdict(p, self.config.action, source=source)


class HarmGuard(Policy):
    """Refuse a harmful request when P(refuse) ≥ threshold; borderline-harmless requests stay under it."""

    name = "harm"
    question_key = "refuse"
    config: HarmConfig

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """block / flag, or allow."""
        return self.threshold_verdict(self.yes(answers), self.config.action)
