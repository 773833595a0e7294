"""The registry of queue policies by config key (`fcfs`, `spf`, `plf`, `tlf`)."""

from __future__ import annotations

from collections.abc import Callable

from jevserve.serving.errors import DuplicatePolicyError, UnknownPolicyError
from jevserve.serving.queue import (
    FirstComeFirstServed,
    PredictedLengthFirst,
    ShortestPromptFirst,
    TrueLengthFirst,
)
from jevserve.serving.types import QueuePolicy

QueuePolicyFactory = Callable[..., QueuePolicy]

QUEUE_POLICIES: dict[str, QueuePolicyFactory] = {}


def register_queue_policy(name: str, factory: QueuePolicyFactory) -> None:
    """Register `factory` under `name`; a name can be registered once."""
    if name in QUEUE_POLICIES:
        raise DuplicatePolicyError(f"queue policy {name!r} is already registered (by {QUEUE_POLICIES[name]!r})")
    QUEUE_POLICIES[name] = factory


def queue_policy_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(QUEUE_POLICIES)


def make_queue_policy(name: str, *, aging_s: float | None = None, decision_delay_s: float = 0.0) -> QueuePolicy:
    """Build the policy registered as `name` with the given aging and decision delay."""
    try:
        factory = QUEUE_POLICIES[name]
    except KeyError:
        raise UnknownPolicyError(
            f"unknown queue policy {name!r}; expected one of: {', '.join(queue_policy_names())}"
        ) from None
    return factory(aging_s=aging_s, decision_delay_s=decision_delay_s)


for _cls in (FirstComeFirstServed, ShortestPromptFirst, PredictedLengthFirst, TrueLengthFirst):
    register_queue_policy(_cls.name, _cls)
