"""agent-clarify: ask the user for a missing detail instead of acting (BFCL multi-turn, missing parameter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.sources import content_id, split_of
from jevserve.bench.task import Item, Task, frozen, noul

QUESTIONS = {
    "ask": noul(
        "Is a detail the assistant needs to carry out the current request missing, so that it should ask the user "
        "before acting?",
        true="The request leaves out something the action needs (which file, which amount, which name, ...)",
        false="The request, with the earlier requests, says everything the action needs",
    ),
}


def clarify_state(tool_names: Sequence[str], turns: Sequence[str], current: int) -> str:
    """What the agent knows at one turn: its tools, the earlier user requests and the current one."""
    lines = [f"Tools: {', '.join(tool_names)}"]
    if current:
        lines.append("Earlier requests:")
        lines += [f"{i + 1}. {turn}" for i, turn in enumerate(turns[:current])]
    lines.append(f"Current request: {turns[current]}")
    return "\n".join(lines)


class AgentClarify(Task):
    """Each turn up to the under-specified one is an item: act (earlier turns) or ask (the under-specified turn)."""

    name = "agent-clarify"
    category = "agent"
    sources = ("bfcl-miss-param",)
    summary = "ask for a missing detail instead of calling a tool (BFCL multi-turn, missing parameter)"
    questions = QUESTIONS
    primary = "ask"
    metric = BalancedAccuracy()
    everyday_reads = "request"
    rule_text = "ask when P(ask) ≥ t; t tuned on train for balanced accuracy"
    default_text = "never ask: the agent always acts on the request (what tool-calling loops do today)"

    default_why = (
        "Tool-calling loops today act on the request as given and never stop to ask: no deployed rule "
        "decides when a parameter is missing, so the default is chance (never ask, balanced accuracy 0.5)."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """For every conversation, its turns up to and including the under-specified one (one group each)."""
        items, seen = [], set()
        for conv in data.source("bfcl-miss-param"):
            names = sorted({f.name for f in conv.functions})
            for turn in range(conv.missing_turn + 1):
                state = clarify_state(names, conv.turns, turn)
                item_id = content_id("text", state)
                if item_id in seen:
                    continue
                seen.add(item_id)
                items.append(
                    Item(item_id=item_id, state=state, label=turn == conv.missing_turn, split=split_of(conv.split_key),
                         source="bfcl-miss-param", group=conv.split_key, extra=frozen({"turn": turn}))
                )
        return tuple(items)

    def supervision(self, item: Item) -> dict[str, Any]:
        """The ask question's answer is the label."""
        return {"ask": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """A constant: the agent never asks."""
        return np.zeros(len(items))
