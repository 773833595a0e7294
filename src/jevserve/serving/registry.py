"""The registries of queue policies (`fcfs`, `spf`, `plf`, `tlf`, `plf-edf`, `plf-relage`, `priority`) and routers
(`rr`, `jsq`, `lot`, `latency`, `utility`) by config key."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jevserve.serving.aging import RelativeAgingFirst, VirtualDeadlineFirst
from jevserve.serving.errors import DuplicatePolicyError, ServingError, UnknownPolicyError
from jevserve.serving.queue import (
    FirstComeFirstServed,
    PredictedLengthFirst,
    PriorityFirst,
    ShortestPromptFirst,
    TrueLengthFirst,
)
from jevserve.serving.routing import JoinShortestQueue, LatencyAware, LeastOutstandingTokens, RoundRobin, UtilityAware
from jevserve.serving.types import QueuePolicy, Router

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


def make_queue_policy(
    name: str, *, aging_s: float | None = None, decision_delay_s: float = 0.0, **options: object
) -> QueuePolicy:
    """Build the policy registered as `name` with the given aging and decision delay; `options` go to policies
    that take more (e.g. `plf-edf`: stretch, seconds_per_token)."""
    try:
        factory = QUEUE_POLICIES[name]
    except KeyError:
        raise UnknownPolicyError(
            f"unknown queue policy {name!r}; expected one of: {', '.join(queue_policy_names())}"
        ) from None
    try:
        return factory(aging_s=aging_s, decision_delay_s=decision_delay_s, **options)
    except TypeError as exc:
        raise ServingError(f"queue policy {name!r} cannot take these options {sorted(options)}: {exc}") from None
    except ValueError as exc:
        raise ServingError(f"queue policy {name!r}: {exc}") from None


def reads_predictions(name: str) -> bool:
    """Whether the queue policy registered as `name` orders by predicted reply lengths (False for unknown names)."""
    return bool(getattr(QUEUE_POLICIES.get(name), "reads_predictions", False))


for _cls in (FirstComeFirstServed, ShortestPromptFirst, PredictedLengthFirst, TrueLengthFirst,
             VirtualDeadlineFirst, RelativeAgingFirst, PriorityFirst):
    register_queue_policy(_cls.name, _cls)


RouterFactory = Callable[..., Router]

ROUTERS: dict[str, RouterFactory] = {}


def register_router(name: str, factory: RouterFactory) -> None:
    """Register a router factory under `name`; a name can be registered once."""
    if name in ROUTERS:
        raise DuplicatePolicyError(f"router {name!r} is already registered (by {ROUTERS[name]!r})")
    ROUTERS[name] = factory


def router_names() -> list[str]:
    """The registered router names, sorted."""
    return sorted(ROUTERS)


def make_router(name: str, *, models: Sequence[object] = (), **options: object) -> Router:
    """Build the router registered as `name`; every router gets the replicas' models (one `ReplicaModel` per
    replica id), and `options` go to the ones that take more (e.g. `utility`: qualities, costs, ttft_target_s)."""
    try:
        factory = ROUTERS[name]
    except KeyError:
        raise UnknownPolicyError(f"unknown router {name!r}; expected one of: {', '.join(router_names())}") from None
    try:
        return factory(models=models, **options)
    except TypeError as exc:
        raise ServingError(f"router {name!r} cannot take these options {sorted(options)}: {exc}") from None


for _router in (RoundRobin, JoinShortestQueue, LeastOutstandingTokens, LatencyAware, UtilityAware):
    register_router(_router.name, _router)
