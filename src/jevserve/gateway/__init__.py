"""The decision gateway: an OpenAI-compatible proxy that asks one System One call per request and acts on it."""

from jevserve.gateway.config import GatewayConfig, RouteConfig, default_config, load_config, parse_config
from jevserve.gateway.decider import Decider, FixedDecider, LocalDecider, RemoteDecider, make_decider
from jevserve.gateway.decisions import DecisionReport, run_decisions, run_decisions_sync
from jevserve.gateway.errors import ConfigError, GatewayError
from jevserve.gateway.policies import Verdict

__all__ = [
    "ConfigError",
    "Decider",
    "DecisionReport",
    "FixedDecider",
    "GatewayConfig",
    "GatewayError",
    "LocalDecider",
    "RemoteDecider",
    "RouteConfig",
    "Verdict",
    "default_config",
    "load_config",
    "make_decider",
    "parse_config",
    "run_decisions",
    "run_decisions_sync",
]
