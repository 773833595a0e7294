"""Config loading: defaults that run offline, and errors that name the YAML path at fault."""

from __future__ import annotations

import pytest

from jevserve.gateway.config import PLACEHOLDER_URL, default_config, load_config, parse_config
from jevserve.gateway.errors import ConfigError


def test_default_config_declares_routes_and_no_upstream():
    config = default_config()
    assert [r.model for r in config.routes] == ["jev-gateway", "jev-gateway-plain"]
    assert config.upstreams == []
    assert config.decider == "embedded"


def test_threshold_out_of_range_names_its_yaml_path():
    with pytest.raises(ConfigError, match=r"routes\[0\]\.guard\.threshold: must be between 0 and 1, got 1\.5"):
        parse_config({"routes": [{"model": "m", "guard": {"threshold": 1.5}}]})


def test_unknown_field_is_named():
    with pytest.raises(ConfigError, match=r"routes\[1\]\.cache\.ttl: unknown field"):
        parse_config({"routes": [{"model": "a"}, {"model": "b", "cache": {"ttl": 3}}]})


def test_route_naming_an_undeclared_upstream_is_rejected():
    with pytest.raises(ConfigError, match=r"routes\[0\]\.upstreams\[0\]: unknown upstream 'vllm'"):
        parse_config({"routes": [{"model": "a", "upstreams": ["vllm"]}]})


def test_upstream_url_must_be_http_or_placeholder():
    with pytest.raises(ConfigError, match=r"upstreams\[0\]\.url: must be an http\(s\) URL"):
        parse_config({"upstreams": [{"name": "u", "url": "ftp://x"}]})
    config = parse_config({"upstreams": [{"name": "u"}]})
    assert config.upstreams[0].url == PLACEHOLDER_URL


def test_bad_yaml_file_is_a_config_error(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text("routes: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    path.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
