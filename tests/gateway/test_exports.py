"""The gateway package's public exports, pinned."""

import jevserve.gateway as gateway


def test_public_exports():
    assert gateway.__all__ == [
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
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
