"""A route's config → its policies, in the order their actions are applied."""

from __future__ import annotations

from jevserve.gateway.config import RouteConfig
from jevserve.gateway.policies.base import Policy
from jevserve.gateway.policies.cache import SemanticCacheDecision
from jevserve.gateway.policies.clarify import Clarify
from jevserve.gateway.policies.guard import HarmGuard, InjectionGuard
from jevserve.gateway.policies.priority import LengthPriority
from jevserve.gateway.policies.route import CostRoute
from jevserve.gateway.policies.tool_gate import ToolGate

# Order of precedence when several act: a block beats a clarifying question, which beats a cached answer.
_POLICIES = (
    ("guard", InjectionGuard),
    ("harm", HarmGuard),
    ("clarify", Clarify),
    ("cache", SemanticCacheDecision),
    ("route", CostRoute),
    ("priority", LengthPriority),
    ("tool_gate", ToolGate),
)


def build_policies(route: RouteConfig) -> tuple[Policy, ...]:
    """The enabled policies of `route`."""
    out = []
    for key, cls in _POLICIES:
        config = getattr(route, key)
        if config is not None and config.enabled:
            out.append(cls(config))
    return tuple(out)
