"""agent-tool-fit: call a tool only when one of the offered functions can do what the user asks (BFCL)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jevserve.bench.data import cap_train_side
from jevserve.bench.metrics import BalancedAccuracy
from jevserve.bench.sources import ChatMessage, FunctionDoc, content_id, split_of
from jevserve.bench.task import Item, Task, frozen, noul
from jevserve.bench.tasks.common import record_item

MAX_PER_LABEL = 300
MAX_DESCRIPTION_CHARS = 300  # long API descriptions are cut so one case cannot dominate the time budget
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset((
    "the", "a", "an", "of", "to", "in", "for", "and", "or", "on", "with", "by", "is", "are", "be", "this", "that",
    "it", "at", "as", "from", "my", "me", "i", "you", "your",
))  # fmt: skip

QUESTIONS = {
    "fits": noul(
        "Can one of the listed functions carry out what the user asks?",
        true="A call to one of the functions does what the user wants",
        false="None of the functions does what the user wants; the assistant should answer without a tool call",
    ),
}


def _signature(function: Any) -> str:
    parameters = json.loads(function.parameters_json or "{}")
    names = ", ".join(parameters.get("properties", {})) if isinstance(parameters, dict) else ""
    description = function.description
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[:MAX_DESCRIPTION_CHARS].rstrip() + "…"
    return f"- {function.name}({names}): {description}"


def tool_state(messages: Sequence[Any], functions: Sequence[Any]) -> str:
    """What the gate reads: the conversation (the last message is the request) and the candidate functions."""
    if len(messages) == 1:
        conversation = f"Request: {messages[0].content}"
    else:
        conversation = "Conversation:\n" + "\n".join(f"{m.role}: {m.content}" for m in messages)
    return conversation + "\nFunctions:\n" + "\n".join(_signature(f) for f in functions)


def offered_function(tool: Mapping[str, Any]) -> FunctionDoc | None:
    """An OpenAI `tools` entry as the function document BFCL cases carry (None when it names no function)."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return None
    parameters = function.get("parameters") or {}
    return FunctionDoc(function["name"], str(function.get("description") or ""), json.dumps(parameters, sort_keys=True))


def _wrong_candidates(case: Any) -> Item | None:
    # A fitting case's request with only the candidates a right answer does not call: none of them fits.
    others = tuple(f for f in case.functions if f.name not in case.expected_names)
    if not case.expected_names or not others or len(others) == len(case.functions):
        return None
    state = tool_state(case.messages, others)
    return Item(
        item_id=content_id("text", state),
        state=state,
        label=False,
        split=split_of(case.split_key),
        source="bfcl:wrong-candidates",
        group=case.split_key,  # with the case it came from: same side, resampled together
        extra=frozen({
            "request": case.messages[-1].content,
            "functions": tuple(f"{f.name} {f.description}" for f in others),
        }),
    )


def _overlap(request: str, functions: Sequence[str]) -> float:
    words = set(_WORD.findall(request.lower())) - _STOP
    if not words:
        return 0.0
    return max((len(words & (set(_WORD.findall(f.lower())) - _STOP)) / len(words) for f in functions), default=0.0)


class AgentToolFit(Task):
    """Gate tool calls: fitting BFCL cases versus irrelevance cases and fitting requests left with wrong candidates."""

    name = "agent-tool-fit"
    category = "agent"
    sources = ("bfcl-relevance",)
    summary = "call a tool only when an offered function fits the request (BFCL, incl. wrong-candidate negatives)"
    questions = QUESTIONS
    primary = "fits"
    metric = BalancedAccuracy()
    pooled = True  # negatives come from other BFCL categories than positives, or are derived from positives
    everyday_reads = "request"
    rule_text = "call a tool when P(fits) ≥ t; t tuned on train for balanced accuracy"
    default_text = (
        "lexical tool retrieval: the largest share of the request's content words found in one function's name and "
        "description; call when ≥ t, t tuned on train"
    )
    cap_text = (
        f"train side: the train cases among {MAX_PER_LABEL} fitting and {MAX_PER_LABEL} non-fitting ones (seeded "
        "hash order); test side: every test case; negatives are BFCL "
        "irrelevance cases and fitting cases whose right functions were removed from the candidates; function "
        f"descriptions are cut at {MAX_DESCRIPTION_CHARS} characters"
    )

    default_why = (
        "Tool-retrieval layers pick and gate tools by lexical overlap between the request and the tool's "
        "name and description (BM25-style); that overlap is the default."
    )

    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Capped fitting cases, irrelevance cases and derived wrong-candidate cases."""
        items = []
        for case in data.source("bfcl-relevance"):
            request = case.messages[-1].content
            functions = tuple(f"{f.name} {f.description}" for f in case.functions)
            items.append(
                record_item(case, tool_state(case.messages, case.functions), case.relevant, f"bfcl:{case.category}",
                            request=request, functions=functions)
            )
            if case.relevant:
                derived = _wrong_candidates(case)
                if derived is not None:
                    items.append(derived)
        return tuple(cap_train_side(items, MAX_PER_LABEL))

    def everyday_items(self, request_id: str, texts: Sequence[str], body: Mapping[str, Any]) -> list[Item]:
        """For an everyday request that offers tools: its request text with the offered functions, as the gate reads
        a BFCL case (none for a request without tools)."""
        functions = [offered_function(t) for t in body.get("tools") or () if isinstance(t, Mapping)]
        functions = [f for f in functions if f is not None]
        if not functions or not texts:
            return []
        state = tool_state([ChatMessage("user", texts[0])], functions)
        extra = frozen({"request": texts[0], "functions": tuple(f"{f.name} {f.description}" for f in functions)})
        return [Item(item_id=f"{request_id}#0", state=state, label=False, split="test", source="everyday",
                     extra=extra)]

    def supervision(self, item: Item) -> dict[str, Any]:
        """The fits question's answer is the label."""
        return {"fits": bool(item.label)}

    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """Best content-word overlap between the request and one candidate function."""
        return np.array([_overlap(i.extra["request"], i.extra["functions"]) for i in items])
