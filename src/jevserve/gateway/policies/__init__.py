"""Decision policies: each asks its questions about a request and turns the answers into an action."""

from jevserve.gateway.policies.base import Policy, RequestView, Verdict
from jevserve.gateway.policies.build import build_policies

__all__ = ["Policy", "RequestView", "Verdict", "build_policies"]
