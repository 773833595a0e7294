"""Decision policies: each asks its questions about a request and turns the answers into a typed verdict."""

from jevserve.gateway.policies.base import CacheCandidate, Policy, RequestView
from jevserve.gateway.policies.build import POLICIES, build_policies, register_policy
from jevserve.gateway.types import Verdict

__all__ = ["POLICIES", "CacheCandidate", "Policy", "RequestView", "Verdict", "build_policies", "register_policy"]
