"""The one interface every decision backend implements.

A backend receives a batch of `DecisionItem`s — a rendered state and a model-facing question — and returns one
probability vector per item, in option order. It must treat every item on its own: the answer to an item may not
depend on which other items share the batch, their order or the batch size (beyond float noise well under 1e-4).
The batcher relies on this to group questions from concurrent requests freely.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jevserve.protocol import DecisionQuestion


@dataclass(frozen=True, slots=True)
class DecisionItem:
    """One question about one state, as a backend reads it."""

    state: str  # the rendered state text
    question: DecisionQuestion
    # the text `state` is a window of (the gateway's guard windows with `windows_in_context`): a backend that reads
    # token states may read the window's positions from that text's encoder pass (decide/tuned.py); any other
    # reads `state` alone. The answer depends on both, never on what else shares the batch.
    within: str | None = None


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What `GET /v1/models` says about a backend's model."""

    name: str  # the concrete model name answers carry in `model`
    description: str
    release_date: str  # YYYY-MM-DD
    aliases: tuple[str, ...] = ()  # other names a request may ask this model by (earlier names of the same weights)


@dataclass(frozen=True, slots=True)
class Decisions:
    """A backend's answers to a list of items, and the input tokens it counted (None: use `count_tokens`)."""

    probabilities: list[np.ndarray]
    input_tokens: int | None = None


class InputTooLongError(ValueError):
    """A state or question does not fit the backend's context budget and cannot be handled without cutting it."""


class DecisionBackend(ABC):
    """A decision model: probabilities for questions about states, one forward pass per batch, nothing generated."""

    card: ModelCard
    # True for a backend that answers many calls at once (a remote endpoint): the batcher then calls
    # `decide_async` once per request, concurrently, instead of queueing items for `decide` batches.
    concurrent: bool = False
    # True for a backend that reads a window from the pass over the text it is a window of (`DecisionItem.within`);
    # any other reads the window alone
    reads_windows_in_context: bool = False

    @abstractmethod
    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """Return one probability vector (float64, sums to 1, length = the question's option count) per item."""

    async def decide_async(self, items: Sequence[DecisionItem]) -> Decisions:
        """Answer one request's items without blocking the event loop (backends with `concurrent = True`)."""
        raise NotImplementedError(f"{type(self).__name__} answers through decide(), not decide_async()")

    def count_tokens(self, items: Sequence[DecisionItem]) -> int:
        """Input tokens the items cost, for `usage.input_tokens`; by default a whitespace word count."""
        seen_states: set[str] = set()
        total = 0
        for item in items:
            if item.state not in seen_states:
                seen_states.add(item.state)
                total += len(item.state.split())
            q = item.question
            total += len(q.instructions.split()) + sum(
                len(o.label.split()) + len(o.description.split()) for o in q.options
            )
        return total

    def check(self, items: Sequence[DecisionItem]) -> None:
        """Raise `InputTooLongError` for an item the backend cannot read whole; called before queueing."""
        return None

    def text_chars(self, items: Sequence[DecisionItem]) -> int:
        """Characters of the distinct texts (states, instructions, options) the items would have the backend read
        that `prepare` can read ahead; 0 for a backend that reads none ahead (the batcher then never calls it)."""
        return 0

    def prepare(self, items: Sequence[DecisionItem], budget_s: float) -> bool:
        """Read what of the items' texts is not read yet for about `budget_s` seconds, keeping it; True once nothing
        is left, so that `decide` on them then reads none of it. Called in the backend's thread, between other
        requests' batches, for requests whose texts would hold the backend for long (decide/batcher.py)."""
        return True

    @property
    def identity_parts(self) -> tuple[str, ...]:
        """What its answers depend on beyond its card that a few fixed probe questions may not show (a part that
        answers only some questions); part of the gateway's cache key for scores (`LocalDecider.identity`)."""
        return ()

    def close(self) -> None:
        """Release threads, sessions or connections the backend holds."""
        return None
