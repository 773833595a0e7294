"""The policy registry (config key → class, each with the phase it runs in) and a route's policies."""

from __future__ import annotations

from jevserve.gateway.config import RouteConfig
from jevserve.gateway.policies.base import Policy
from jevserve.gateway.policies.cache import SemanticCacheDecision
from jevserve.gateway.policies.clarify import Clarify
from jevserve.gateway.policies.guard import HarmGuard, InjectionGuard
from jevserve.gateway.policies.priority import LengthPriority
from jevserve.gateway.policies.route import CostRoute
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.gateway.types import Phase

# Config key → policy class. The order is the order of precedence when several act on one request: a block beats a
# clarifying question, which beats a cached answer.
POLICIES: dict[str, type[Policy]] = {}


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Register `cls` under its `name` (its config key); a name registered twice is an error."""
    if cls.name in POLICIES:
        raise ValueError(f"policy {cls.name!r} is already registered ({POLICIES[cls.name].__name__})")
    POLICIES[cls.name] = cls
    return cls


for _cls in (InjectionGuard, HarmGuard, Clarify, SemanticCacheDecision, CostRoute, LengthPriority, ToolGate):
    register_policy(_cls)


def build_policies(route: RouteConfig, phase: Phase | None = None) -> tuple[Policy, ...]:
    """The enabled policies of `route` (of one `phase`, or all), in order of precedence."""
    out = []
    for key, cls in POLICIES.items():
        config = getattr(route, key, None)
        if config is not None and config.enabled and (phase is None or cls.phase is phase):
            out.append(cls(config))
    return tuple(out)
