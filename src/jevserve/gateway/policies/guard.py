"""Guard policies: prompt injection (block, strip tools or flag) and harmful requests (block or flag).

The injection question is asked about each untrusted text on its own (`DecisionInputs.guard_texts`: the latest user
turn, each tool result sent back since the last assistant turn, long texts in windows of whole sentences); the
operator's system prompt is trusted unless `judge_system_prompt` is on. All go in the same decision call; the
highest probability counts, so harmless text elsewhere in the request cannot dilute an injection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from jevserve.gateway.config import GuardConfig, HarmConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.types import Action, GuardDetail, Verdict

_SOURCE_NAMES = {
    "user": "the user's message",
    "tool": "a tool result",
    "system": "the system or developer prompt",
    "history": "an earlier turn",
    "field": "the documents a chat template renders",
    "template": "a chat template's variables (chat_template_kwargs)",
}


class InjectionGuard(Policy):
    """Act on a prompt injection when P(injection) ≥ threshold for any untrusted text."""

    name = "guard"
    question_key = "injection"
    blocks_because = "it reads as an attempt to override or reveal an AI assistant's instructions (a prompt injection)"
    config: GuardConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """One question per untrusted text (tool results only when `scan_tool_results` is on)."""
        inputs = view.inputs
        return [
            replace(self.ask(f"{self.name}:{i}", text), within=within)
            for i, (text, source, within) in enumerate(
                zip(inputs.guard_texts, inputs.guard_sources, inputs.guard_within, strict=True)
            )
            if source != "tool" or self.config.scan_tool_results
        ]

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """block / strip_tools / flag, or allow; `source` in detail names the text that scored highest, and
        `unread_chars` what no question read (with `unread_text: act`, any makes the guard act without asking)."""
        action = Action(self.config.action)
        inputs = view.inputs
        unread = {i: n for i, n in enumerate(inputs.guard_unread)
                  if n and (inputs.guard_sources[i] != "tool" or self.config.scan_tool_results)}
        total_unread = sum(unread.values())
        if unread and self.config.unread_text == "act":
            first = min(unread)
            source = _SOURCE_NAMES[inputs.guard_sources[first]]
            return self.verdict(action, f"{total_unread} characters of {source} are past what the guard's windows read "
                                f"(max_windows × window_chars) and were read by no question (unread_text: act)",
                                GuardDetail(source, total_unread, _place(inputs.guard_places, first)))
        if answers is None:
            return self.threshold_verdict(None, action)
        scores = {k: float(v[0]) for k, v in answers.items() if k.startswith(f"{self.name}:")}
        if not scores:
            return self.verdict(Action.ALLOW, "no untrusted text to judge")
        where = max(scores, key=lambda k: (scores[k], -int(k.partition(":")[2])))
        index = int(where.partition(":")[2])
        detail = GuardDetail(_SOURCE_NAMES[inputs.guard_sources[index]], total_unread,
                             _place(inputs.guard_places, index))
        return self.threshold_verdict(scores[where], action, detail=detail)


def _place(places: Sequence[str], index: int) -> str | None:
    return places[index] if index < len(places) else None


class HarmGuard(Policy):
    """Refuse a harmful request when P(refuse) ≥ threshold; borderline-harmless requests stay under it."""

    name = "harm"
    question_key = "refuse"
    blocks_because = "it reads as a request for harmful content"
    config: HarmConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """The request text, and the latest user turn's windows where the route judges harm in windows."""
        texts = view.inputs.harm_texts
        if len(texts) == 1:
            return [self.ask(self.name, texts[0])]
        return [self.ask(f"{self.name}:{i}", text) for i, text in enumerate(texts)]

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """block / flag, or allow; in windows, the highest P(refuse) counts."""
        if answers is None or self.name in answers:
            return self.threshold_verdict(self.yes(answers), Action(self.config.action))
        scores = [float(v[0]) for k, v in answers.items() if k.startswith(f"{self.name}:")]
        return self.threshold_verdict(max(scores) if scores else None, Action(self.config.action))
