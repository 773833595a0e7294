"""What the rule-made training families share: which side a template is on, and the questions they ask.

Every rule-made family (trigger words, perturbations, cache pairs, tool calls) writes its texts from templates. A
template is on the test side or the train side by a hash of its text, so the examples measured on
(`side="test"`) come from templates no training example was made from: what is measured is whether the rule was
learnt, not whether its wording was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import cache

from jevserve.protocol import DecisionQuestion
from jevserve.train.examples import decision_of

TEST_PERCENT = 25  # of templates, held out for measuring


def template_side(template: str) -> str:
    """ "test" for about a quarter of templates (by hash), else "train"."""
    digest = int(hashlib.sha256(b"template\x1f" + template.encode()).hexdigest()[:8], 16)
    return "test" if digest % 100 < TEST_PERCENT else "train"


def stable_pick(key: str, choices: int) -> int:
    """A choice among `choices` that depends only on `key` (so an example never depends on which others exist)."""
    return int(hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % choices


def unambiguous(cases: Iterable[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """(text, label) cases with each text once, at its first appearance; a text made with both labels is dropped as
    ambiguous (rule families compose texts from parts, and two compositions can meet)."""
    cases = list(cases)
    labels: dict[str, set[bool]] = {}
    for text, label in cases:
        labels.setdefault(text, set()).add(label)
    out, seen = [], set()
    for text, label in cases:
        if text not in seen and len(labels[text]) == 1:
            seen.add(text)
            out.append((text, label))
    return out


@cache
def question(task: str, question_id: str) -> DecisionQuestion:
    """A bench task's question in the model-facing form (the gateway asks the same wording)."""
    from jevserve.bench.tasks import TASKS

    return decision_of(dict(TASKS[task].questions[question_id]))


def injection() -> DecisionQuestion:
    """The guard's question (bench guard-injection)."""
    return question("guard-injection", "injection")


def jailbreak() -> DecisionQuestion:
    """The bench's jailbreak question (guard-jailbreak)."""
    return question("guard-jailbreak", "jailbreak")


def refuse() -> DecisionQuestion:
    """The harm guard's question (bench guard-harmful and guard-overrefusal)."""
    return question("guard-harmful", "refuse")


def reuse() -> DecisionQuestion:
    """The cache's question (bench cache-pairs)."""
    return question("cache-pairs", "reuse")


def unsafe_action() -> DecisionQuestion:
    """The tool gate's question (bench agent-action-risk)."""
    return question("agent-action-risk", "unsafe")
