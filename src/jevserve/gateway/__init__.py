"""The decision gateway: an OpenAI-compatible proxy that asks one System One call per request and acts on it.

The request path is a row of stages (stages/, run in order by `pipeline.serve`) that any front end can call; the
HTTP app (app.py) is one such front end.
"""

from jevserve.gateway.config import GatewayConfig, RouteConfig, default_config, load_config, parse_config
from jevserve.gateway.context import RequestContext
from jevserve.gateway.decider import Decider, FixedDecider, LocalDecider, RemoteDecider, make_decider
from jevserve.gateway.decisions import DecisionReport, run_decisions, run_decisions_sync
from jevserve.gateway.errors import ConfigError, GatewayError
from jevserve.gateway.pipeline import serve
from jevserve.gateway.responses import GatewayResponse
from jevserve.gateway.types import Action, Mode, Phase, Verdict

__all__ = [
    "Action",
    "ConfigError",
    "Decider",
    "DecisionReport",
    "FixedDecider",
    "GatewayConfig",
    "GatewayError",
    "GatewayResponse",
    "LocalDecider",
    "Mode",
    "Phase",
    "RemoteDecider",
    "RequestContext",
    "RouteConfig",
    "Verdict",
    "default_config",
    "load_config",
    "make_decider",
    "parse_config",
    "run_decisions",
    "run_decisions_sync",
    "serve",
]
