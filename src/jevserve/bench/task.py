"""What a JevServe-Bench task is: one decision a serving system makes, asked the same way about every item.

A task turns records of public data into `Item`s (a state a model reads, a label it never sees, a side of the
train/test split), sends every item the SAME fixed System One questions, and reads one score per item from the
answers. A rule tuned on the train side turns scores into actions; the default rule (what serving systems do
today) and the oracle (which knows the label) bracket the metric:

    score = 100 × (m − m_default) / (m_oracle − m_default)

The score is 0 for the default rule, 100 for the oracle, and may be negative.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import numpy as np

from jevserve.bench.metrics import Metric
from jevserve.bench.sources import content_id

Side = Literal["train", "test"]
CATEGORIES = ("guard", "agent", "verify", "route", "cache", "schedule")
Answers = Mapping[str, Mapping[str, Any]]  # question id -> wire answer object, as `POST /v1/systemone` returns it


@dataclass(frozen=True)
class Item:
    """One decision to make: what the model reads, the truth it never sees, and which side of the split it is on."""

    item_id: str  # unique within the task (a content hash, or a ShareGPT conversation id)
    state: str  # the text sent as the request's `state`
    label: Any  # the truth: a bool for yes/no decisions, a tuple for routing, a token count for reply length
    split: Side  # fixed by the item's split key (bench.sources.split_of) or by sharegpt_split
    source: str  # the data source the item came from (the per-source majority baseline reads it)
    group: str = ""  # items of one group share a side and are resampled together; "" = the item alone
    # numbers only the default rule reads (prompt tokens, turns), never sent to a model
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def cluster(self) -> str:
        """The unit of bootstrap resampling: the group when set, else the item."""
        return self.group or self.item_id


def frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only copy of `mapping`, for `Item.extra`."""
    return MappingProxyType(dict(mapping))


def noul(instructions: str, true: str | None = None, false: str | None = None) -> dict[str, Any]:
    """A yes/no question as its wire object."""
    question: dict[str, Any] = {"type": "noul", "instructions": instructions}
    criteria = {k: v for k, v in (("true", true), ("false", false)) if v is not None}
    if criteria:
        question["criteria"] = criteria
    return question


def choice(instructions: str, options: Mapping[str, str | None]) -> dict[str, Any]:
    """A choice question as its wire object; option names map to descriptions (None: the name says it)."""
    return {"type": "choice", "instructions": instructions, "criteria": dict(options)}


def score(instructions: str, levels: Sequence[str]) -> dict[str, Any]:
    """A score question as its wire object; levels from lowest to highest."""
    return {"type": "score", "instructions": instructions, "criteria": list(levels)}


def probability_of(answer: Mapping[str, Any] | None, positive: str | None = None) -> float:
    """P(positive) from one wire answer: a noul's `noul`, or a choice's probability of the `positive` option.

    A missing answer (the endpoint refused the request) reads as 0.5: no information either way.
    """
    if answer is None:
        return 0.5
    if answer["type"] == "noul":
        return float(answer["noul"])
    if answer["type"] == "choice":
        if positive is None:
            raise ValueError("a choice answer needs the name of its positive option")
        return float(answer["probabilities"][positive])
    raise ValueError(f"answer type {answer['type']!r} has no single probability; expected noul or choice")


class Task(ABC):
    """A decision, its data, its fixed questions, its rules and its metric; subclasses fill in the class fields."""

    name: ClassVar[str]  # e.g. "guard-injection"; also the key of TASKS
    category: ClassVar[str]  # one of CATEGORIES
    sources: ClassVar[tuple[str, ...]]  # bench.sources names (or "sharegpt"); package, version, licence come from them
    summary: ClassVar[str]  # one line for `jevserve bench list`
    questions: ClassVar[Mapping[str, dict[str, Any]]]  # the fixed questions, the same for every item
    primary: ClassVar[str]  # the question whose probability is the model's score
    positive_option: ClassVar[str | None] = None  # for a choice primary: the option that means "positive"
    metric: ClassVar[Metric]
    thresholded: ClassVar[bool] = True  # scores become actions by a threshold tuned on train
    headline: ClassVar[bool] = True  # counted in the headline average (False: only in the all-task average)
    pooled: ClassVar[bool] = False  # positives and negatives come from different sources: show source-only baselines
    default_tunes_direction: ClassVar[bool] = False  # the default rule's threshold may point either way
    rule_text: ClassVar[str]  # how answers become the action
    default_text: ClassVar[str]  # the default rule, in words
    # why the default is what a production system does today without a decision model ("its default rule, or chance")
    default_why: ClassVar[str] = ""
    oracle_text: ClassVar[str] = "knows the label and takes the right action on every item"
    cap_text: ClassVar[str] = "no cap: every item is used"
    # What the decision reads on everyday traffic (bench.everyday): "guard" (each untrusted text alone), "request"
    # (the latest request with its context), or None where the decision does not act on ordinary requests.
    everyday_reads: ClassVar[str | None] = None

    @abstractmethod
    def load_items(self, data: Any) -> tuple[Item, ...]:
        """Every item of the task, with its side of the split; raises SourceMissingError when data is missing."""

    @abstractmethod
    def supervision(self, item: Item) -> dict[str, Any]:
        """Per question id, the right answer derived from the label (True/False, an option name, a level index),
        or None where the label says nothing about that question."""

    @abstractmethod
    def default_scores(self, items: Sequence[Item], data: Any) -> np.ndarray:
        """The default rule's score per item (higher = act); a threshold tuned on train turns it into actions."""

    def request(self, item: Item) -> dict[str, Any]:
        """The request body (without `model`): the item's state and a copy of the task's fixed questions."""
        return {"state": item.state, "questions": copy.deepcopy(dict(self.questions))}

    def everyday_items(self, request_id: str, texts: Sequence[str], body: Mapping[str, Any]) -> list[Item]:
        """The items this decision reads for one everyday request: by default one per text, the text as state."""
        return [Item(item_id=f"{request_id}#{k}", state=text, label=False, split="test", source="everyday")
                for k, text in enumerate(texts)]

    def labels(self, items: Sequence[Item]) -> np.ndarray:
        """The labels as the metric reads them (booleans by default)."""
        return np.array([bool(item.label) for item in items], dtype=bool)

    def oracle(self, labels: np.ndarray) -> np.ndarray:
        """What the oracle decides for these labels (by default: the label itself)."""
        return labels.copy()

    def target(self, labels: np.ndarray) -> np.ndarray:
        """The 0/1 truth the model's probability predicts (calibration, automation); by default the label."""
        return labels.astype(bool)

    def model_scores(
        self, train: Sequence[Item], train_answers: Sequence[Answers | None], test: Sequence[Item],
        test_answers: Sequence[Answers | None],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The model's score per train and test item: P(positive) from the primary question."""
        return self._primary(train_answers), self._primary(test_answers)

    def details(
        self, train: Sequence[Item], test: Sequence[Item], train_answers: Sequence[Answers | None],
        test_answers: Sequence[Answers | None],
    ) -> dict[str, Any] | None:
        """Extra numbers a task reports next to its score (None: nothing beyond the metric)."""
        return None

    def _primary(self, answers: Sequence[Answers | None]) -> np.ndarray:
        return np.array(
            [probability_of(a.get(self.primary) if a else None, self.positive_option) for a in answers],
            dtype=np.float64,
        )


def state_key(item: Item) -> str:
    """The content id of what the model reads (bench.sources.content_id of the state), for leak checks across tasks:
    training on the train sides must never read a state that is on some task's test side."""
    return content_id("text", item.state)


def split_items(items: Sequence[Item]) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    """(train, test) in the items' order."""
    return tuple(i for i in items if i.split == "train"), tuple(i for i in items if i.split == "test")
