"""What `jevserve train --check` judges: a retrain's answers against the committed model's, not its weights.

A retrain's weights differ from the committed ones in their last bits (float32 sums in an order that depends on the
BLAS threads; the temperatures' bounded search moves with them), and a weight tolerance cannot say which of those
differences matter: one run passes it and the next fails it by chance (docs/training.md). What a user is served are
answers, so the check asks both models the same questions, each task's fixed questions about the first items of its
test side, and judges the largest difference in any answer's probabilities. The weights are still printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the command line reads ANSWER_TOLERANCE for its help, in installs without the bench's packages
    from jevserve.bench.task import Task
    from jevserve.decide.base import DecisionBackend, DecisionItem

# Largest difference in any option's probability a reproduction may show. A retrain of the pooled head from the same
# embeddings answered within 9.5e-5 of the committed head on these probes (its temperatures 2.5e-4 off, from a bounded
# search that moves with last-bit changes in the logits); 1e-3 leaves ten times that, and is still below the
# resolution any threshold is read at. A retrain with another seed moves answers by far more (docs/training.md).
ANSWER_TOLERANCE = 1e-3
# Test items asked about per task: enough states for every task's questions to be read on many texts, few enough
# that both models answer them in about a minute on two cores.
ITEMS_PER_TASK = 40
# States longer than this are left out: they cost the most encoder time and add no question the others do not ask.
MAX_STATE_CHARS = 4000


@dataclass(frozen=True)
class AnswerCheck:
    """How far apart two models' answers are on the probe items."""

    items: int
    largest: float  # largest absolute difference in any option's probability
    where: str  # the task and question of the largest difference

    @property
    def reproduced(self) -> bool:
        """Whether the answers agree within ANSWER_TOLERANCE."""
        return self.largest <= ANSWER_TOLERANCE


def probe_items(data, tasks: Sequence[Task], per_task: int = ITEMS_PER_TASK) -> list[tuple[str, DecisionItem]]:
    """(task and question, item) for each fixed question of each task about the first `per_task` test items of
    at most MAX_STATE_CHARS characters, in task-name order; a task whose data is missing is left out."""
    from jevserve.bench.sources import SourceMissingError
    from jevserve.decide.base import DecisionItem
    from jevserve.train.examples import decision_of

    probes = []
    for task in sorted(tasks, key=lambda t: t.name):
        try:
            items = task.load_items(data)
        except SourceMissingError:
            continue
        test = [item for item in items if item.split == "test" and len(item.state) <= MAX_STATE_CHARS][:per_task]
        for qid, question in task.questions.items():
            decision = decision_of(question)
            probes += [(f"{task.name}/{qid}", DecisionItem(item.state, decision)) for item in test]
    return probes


def compare_answers(committed: DecisionBackend, fresh: DecisionBackend,
                    probes: Sequence[tuple[str, DecisionItem]]) -> AnswerCheck:
    """Ask both models every probe and find the largest difference in any option's probability."""
    if not probes:
        raise ValueError("no probe items: fetch the bench data first (jevserve data fetch)")
    items = [item for _, item in probes]
    old, new = committed.decide(items), fresh.decide(items)
    gaps = [float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())
            for a, b in zip(old, new, strict=True)]
    worst = int(np.argmax(gaps))
    return AnswerCheck(items=len(items), largest=gaps[worst], where=probes[worst][0])
