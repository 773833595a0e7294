"""The gateway package's public exports, pinned."""

import jevserve.gateway as gateway


def test_public_exports():
    assert gateway.__all__ == [
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
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
