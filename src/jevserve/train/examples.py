"""Training examples: (state, question, right option) from the train side of every bench task.

An example never comes from a test item: `task_examples` reads only items whose split is "train", and
`manifest.check_disjoint` proves it by content hash against every task's test side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jevserve.bench.sources.base import content_id
from jevserve.bench.task import Task
from jevserve.protocol import DecisionQuestion, SystemOneRequest, to_decision


@dataclass(frozen=True, slots=True)
class Example:
    """One supervised decision."""

    state: str
    question: DecisionQuestion
    answer: int  # index of the right option (noul: 0 = yes, 1 = no)
    family: str  # the task name, or "synthetic:<name>" for synthesized questions
    sources: tuple[str, ...]  # the data sources the example derives from (leave-one-task-out excludes by these)


def content_hash(text: str) -> str:
    """The content id of a state (the bench's `state_key`: sha1 of the normalised text), for the disjointness check."""
    return content_id("text", text)


def decision_of(question: dict[str, Any]) -> DecisionQuestion:
    """The model-facing form of a wire question (validated like a request)."""
    parsed = SystemOneRequest.model_validate({"state": "", "questions": {"q": question}})
    return to_decision(parsed.questions["q"])


def answer_index(question: DecisionQuestion, right: Any) -> int | None:
    """The option index a supervision value names: True/False (noul), an option name (choice), a level index."""
    if right is None:
        return None
    if question.kind == "noul":
        return 0 if bool(right) else 1
    if question.kind == "choice":
        names = [o.label for o in question.options]
        return names.index(right) if right in names else None
    index = int(right)
    return index if 0 <= index < question.num_options else None


def task_examples(task: Task, items: Iterable[Any]) -> list[Example]:
    """Every supervised (item, question) pair of the task's TRAIN items."""
    decisions = {qid: decision_of(q) for qid, q in task.questions.items()}
    examples = []
    for item in items:
        if item.split != "train":
            continue
        supervision = task.supervision(item)
        for qid, question in decisions.items():
            index = answer_index(question, supervision.get(qid))
            if index is not None:
                examples.append(Example(item.state, question, index, task.name, tuple(task.sources)))
    return examples


def families(examples: Sequence[Example]) -> dict[str, int]:
    """Examples per family, for the manifest."""
    counts: dict[str, int] = {}
    for ex in examples:
        counts[ex.family] = counts.get(ex.family, 0) + 1
    return dict(sorted(counts.items()))
