"""The playground's four decisions, their item pools (bench test sides) and the seeded, balanced round draw.

A round is five items: each of the four decisions once, in a shuffled order, and one more from a decision drawn at
random. For each position the right answer is drawn first, uniformly over the decision's answers (yes/no, or the
four reply-length bins), then an item with that answer: so a round is balanced in expectation whatever the test
side's class mix, and guessing the majority answer gets 50% (25% for length). The draw depends only on the seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jevserve.bench.length import LENGTH_BIN_EDGES, LENGTH_BIN_NAMES, length_bin

ROUND_SIZE = 5
MAX_STATE_CHARS = 1500  # longer prompts are left out of the pools: a person must read the item in a minute


@dataclass(frozen=True)
class PlayDecision:
    """One decision people play: which bench task's test side it draws from, and how it is asked."""

    key: str  # short name used in URLs and the database
    task: str  # bench task name
    title: str
    prompt: str  # the question shown to the player
    options: tuple[tuple[str, str], ...]  # (answer value, button label), in display order

    def option_label(self, value: str | None) -> str:
        """The button label of an answer value ('–' for none)."""
        return dict(self.options).get(value or "", "–")


YES_NO = (("yes", "Yes"), ("no", "No"))
_BIN_LABELS = (  # each with its unit: shown side by side, "very long (≥ 500)" read as no count of anything
    f"short (< {LENGTH_BIN_EDGES[0]} tokens)",
    f"medium ({LENGTH_BIN_EDGES[0]}–{LENGTH_BIN_EDGES[1] - 1} tokens)",
    f"long ({LENGTH_BIN_EDGES[1]}–{LENGTH_BIN_EDGES[2] - 1} tokens)",
    f"very long (≥ {LENGTH_BIN_EDGES[2]} tokens)",
)

DECISIONS: Mapping[str, PlayDecision] = MappingProxyType({
    d.key: d
    for d in (
        PlayDecision("injection", "guard-injection", "Prompt injection",
                     "Does this text try to make an AI assistant ignore, change or reveal its instructions?", YES_NO),
        PlayDecision("harmful", "guard-overrefusal", "Harmful, or only sounds harmful",
                     "Should a responsible assistant refuse this request because answering it could cause harm?",
                     YES_NO),
        PlayDecision("cache", "cache-pairs", "Reuse a cached answer",
                     "Does the answer to the cached question also correctly answer the new question?", YES_NO),
        PlayDecision("length", "schedule-reply-length", "Reply length",
                     "How long will a complete, helpful reply to this request be (in Qwen3 tokens)?",
                     tuple(zip(LENGTH_BIN_NAMES, _BIN_LABELS, strict=True))),
    )
})
TASK_DECISION = MappingProxyType({d.task: d.key for d in DECISIONS.values()})


def answer_value(decision: PlayDecision, label: Any) -> str:
    """The playground answer a bench label (or a stored prediction) stands for: yes/no, or a length bin name."""
    if decision.key == "length":
        return LENGTH_BIN_NAMES[int(length_bin([float(label)])[0])]
    return "yes" if bool(label) else "no"


@dataclass(frozen=True)
class PoolItem:
    """A test item a round may draw."""

    item_id: str
    state: str
    label: Any  # the bench label (bool, or reply tokens)
    truth: str  # answer_value of the label


@dataclass(frozen=True)
class Pools:
    """Per decision key, its pool items by id and the ids grouped by right answer (sorted, for a stable draw)."""

    items: Mapping[str, Mapping[str, PoolItem]]
    by_truth: Mapping[str, Mapping[str, tuple[str, ...]]]

    @classmethod
    def from_items(cls, items: Mapping[str, Sequence[PoolItem]]) -> Pools:
        """Pools from each decision's items (decisions without items are left out)."""
        by_id = {k: {i.item_id: i for i in v} for k, v in items.items() if v}
        by_truth: dict[str, dict[str, tuple[str, ...]]] = {}
        for key, pool in by_id.items():
            grouped: dict[str, list[str]] = {}
            for item in pool.values():
                grouped.setdefault(item.truth, []).append(item.item_id)
            by_truth[key] = {t: tuple(sorted(ids)) for t, ids in grouped.items()}
        return cls(MappingProxyType(by_id), MappingProxyType(by_truth))

    def get(self, decision: str, item_id: str) -> PoolItem | None:
        """A pool item, or None when the decision or id is unknown."""
        return self.items.get(decision, {}).get(item_id)


def load_pools(data: Any) -> Pools:
    """The test sides of the four decisions' bench tasks as the bench scores them: near-duplicates of training
    texts dropped with real data (so every item has a stored answer on the board), prompts over MAX_STATE_CHARS
    left out."""
    from jevserve.bench import TASKS
    from jevserve.bench.pipeline import load_tasks
    from jevserve.bench.sources import SourceMissingError

    loaded, skipped = load_tasks([TASKS[d.task] for d in DECISIONS.values()], data, log=lambda message: None,
                                 everyday=False)
    if skipped:
        raise SourceMissingError(skipped[0].task, f"bench task {skipped[0].task} has no data", skipped[0].command)
    test_sides = {entry.task.name: entry.test for entry in loaded}
    items = {
        decision.key: [
            PoolItem(i.item_id, i.state, i.label, answer_value(decision, i.label))
            for i in test_sides[decision.task]
            if len(i.state) <= MAX_STATE_CHARS
        ]
        for decision in DECISIONS.values()
    }
    return Pools.from_items(items)


def draw_round(pools: Pools, seed: int, size: int = ROUND_SIZE) -> list[tuple[str, str]]:
    """(decision key, item id) per position: every decision once in shuffled order, the rest drawn at random."""
    rng = random.Random(seed)
    keys = sorted(pools.items)
    if not keys:
        raise ValueError("no playground items: every decision's data is missing")
    order = rng.sample(keys, len(keys))[:size]
    order += [rng.choice(keys) for _ in range(size - len(order))]
    drawn: list[tuple[str, str]] = []
    for key in order:
        truths = sorted(pools.by_truth[key])
        ids = pools.by_truth[key][rng.choice(truths)]
        taken = {i for k, i in drawn if k == key}
        fresh = [i for i in ids if i not in taken] or list(ids)
        drawn.append((key, rng.choice(fresh)))
    return drawn
