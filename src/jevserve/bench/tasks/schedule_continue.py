"""schedule-continue: after the first reply, will the user write again? (ShareGPT turn continuation)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.data import cap_train_side
from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.sharegpt_data import bench_side
from jevserve.bench.sources import content_id
from jevserve.bench.task import Item, Task, frozen, noul

MAX_PER_LABEL = 700

QUESTIONS = {
    "follow_up": noul(
        "Will the user probably write again after the assistant answers this first message?",
        true="It opens a longer exchange: an ongoing task, a draft to iterate on, a setup for more questions",
        false="A self-contained request that one reply settles",
    ),
}


class ScheduleContinue(Task):
    """From a conversation's opening message, predict whether the user follows up (keep its prefix cached)."""

    name = "schedule-continue"
    category = "schedule"
    sources = ("sharegpt",)
    summary = "predict from the opening message whether the user writes again after the first reply (ShareGPT)"
    questions = QUESTIONS
    primary = "follow_up"
    metric = BalancedAccuracy()
    default_tunes_direction = True
    rule_text = "keep the conversation's prefix cached when P(follow_up) ≥ t; t tuned on train for balanced accuracy"
    default_text = "prompt length: keep (or evict) above k characters, k and direction tuned on train"
    cap_text = (
        f"the simulator's requests (valid ShareGPT requests) that open a conversation (ids ending in _0: their "
        f"opening is the real one); train side: the train ones among {MAX_PER_LABEL} per label in seeded hash "
        "order; test side: every test one; one item per distinct opening"
    )

    default_why = (
        "Without a model a scheduler can only read the prompt's length to guess whether a user continues; "
        "the cut and direction are tuned on train (near chance here, and that is what such a rule gets)."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """First parts of ShareGPT conversations; label True when the user spoke again after the first reply."""
        items, seen = [], set()
        for request in data.sharegpt().requests:
            side = bench_side(request)
            item_id = content_id("text", request.prompt)
            if not (request.first_part and request.valid) or side is None or item_id in seen:
                continue
            seen.add(item_id)
            items.append(
                Item(item_id=item_id, state=request.prompt, label=request.follow_up, split=side, source="sharegpt",
                     extra=frozen({"chars": len(request.prompt)}))
            )
        return tuple(cap_train_side(items, MAX_PER_LABEL))

    def supervision(self, item: Item) -> dict[str, Any]:
        """The follow_up question's answer is the label."""
        return {"follow_up": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Characters in the opening message."""
        return np.array([float(i.extra["chars"]) for i in items])
