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
    config = parse_config({"upstreams": [{"name": "u", "url": PLACEHOLDER_URL}]})  # named, never left out
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


# What the gateway cannot run with is refused when the config is read, so `jevserve gateway check` says so too:
# each of these once passed the check, then failed every request on its route (a question missing a field), stopped
# the start (a queue policy or store nobody knows), or left every request without its decision (level_tokens).
@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"routes": [{"model": "m", "guard": {"question": {"type": "choice", "instructions": "x"}}}]},
         r"routes\[0\]\.guard\.question: not a System One question: criteria: Field required"),
        ({"routes": [{"model": "m", "harm": {"question": {"type": "essay"}}}]},
         r"routes\[0\]\.harm\.question: not a System One question: question type 'essay'"),
        ({"routes": [{"model": "m", "priority": {"queue_policy": "lifo_magic"}}]},
         # only those the gateway runs: an outside tester was offered tlf and priority, then refused both
         r"routes\[0\]\.priority\.queue_policy: unknown queue policy 'lifo_magic'; expected one of: fcfs, plf, "
         r"plf-edf, plf-relage, spf$"),
        ({"routes": [{"model": "m", "priority": {"level_tokens": [1, 2]}}]},
         r"routes\[0\]\.priority: level_tokens has 2 values; the length question has 5 levels"),
        ({"routes": [{"model": "m", "priority": {"level_tokens": [1, 2, 3, 4, float("nan")]}}]},
         r"level_tokens must be finite numbers >= 0"),
        ({"store": "postgres://x"}, r"store: unknown store 'postgres://x'; expected 'memory' or a redis://"),
        # a YAML `true` was read as 1 second and a quoted "0.9" as 0.9: what is meant is not guessed
        ({"routes": [{"model": "m", "priority": {"aging_s": True}}]},
         r"routes\[0\]\.priority\.aging_s: Input should be a valid number"),
        ({"routes": [{"model": "m", "guard": {"threshold": "0.9"}}]},
         r"routes\[0\]\.guard\.threshold: Input should be a valid number"),
        ({"routes": [{"model": "m", "guard": {"enabled": "no"}}]},
         r"routes\[0\]\.guard\.enabled: Input should be a valid boolean"),
        # an upstream with its URL left out became the placeholder, which answered clients under their model's name
        ({"upstreams": [{"name": "a", "url": "http://127.0.0.1:9/v1"}, {"name": "b"}], "routes": [{"model": "m"}]},
         r"upstreams\[1\]\.url: Field required"),
    ],
)
def test_what_the_gateway_cannot_run_with_is_refused_at_reading(raw, said):
    with pytest.raises(ConfigError, match=said):
        parse_config(raw)


def test_a_custom_question_and_level_tokens_that_agree_are_taken():
    levels = ["short", "long"]
    question = {"type": "score", "instructions": "How long will the reply be?", "criteria": levels}
    config = parse_config({"store": "redis://127.0.0.1:6379/0", "routes": [
        {"model": "m", "priority": {"question": question, "level_tokens": [50, 800], "queue_policy": "fcfs"}}]})
    assert config.routes[0].priority.level_tokens == [50, 800]


def test_a_rate_written_as_a_percentage_says_how_to_write_it():
    with pytest.raises(ValueError, match=r"not a percentage: '1%' is 1/100, e.g. 1 % is 0.01"):
        parse_config({"routes": [{"model": "m", "guard": {"max_false_action_rate": "1%"}}]})


def test_a_relative_calibration_path_is_read_from_the_config_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "gw.yaml").write_text(
        "calibration: own.jsonl\n"
        "routes:\n"
        "  - model: m\n"
        "    guard: {max_false_action_rate: 0.05, calibration: sub/guard.jsonl}\n"
        "    cache: {max_false_action_rate: 0, calibration: packaged}\n"
        "    harm: {max_false_action_rate: 0.05, calibration: /abs/harm.jsonl}\n"
    )
    monkeypatch.chdir(tmp_path)  # started from elsewhere, as a service manager would
    config = load_config("conf/gw.yaml")
    route = config.routes[0]
    assert config.calibration == str(folder / "own.jsonl")
    assert route.guard.calibration == str(folder / "sub" / "guard.jsonl")
    assert route.cache.calibration == "packaged" and route.harm.calibration == "/abs/harm.jsonl"
    with pytest.raises(ConfigError, match="empty: give a calibration file's path or 'packaged'"):
        parse_config({"routes": [{"model": "m", "guard": {"max_false_action_rate": 0.05, "calibration": ""}}]})


def test_a_relative_log_path_is_written_beside_the_config_as_its_calibration_is_read(tmp_path, monkeypatch):
    # started by a service manager from another folder, the log landed there while the calibration file named the
    # same way was found beside the config
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "gw.yaml").write_text("log: {path: logs/decisions.jsonl, backups: 2}\nroutes: [{model: m}]\n")
    (folder / "home.yaml").write_text("log: {path: ~/d.jsonl}\nroutes: [{model: m}]\n")
    (folder / "off.yaml").write_text("log: false\nroutes: [{model: m}]\n")
    monkeypatch.chdir(tmp_path)
    config = load_config("conf/gw.yaml")
    assert config.log.path == str(folder / "logs" / "decisions.jsonl") and config.log.backups == 2
    assert load_config("conf/home.yaml").log.path == "~/d.jsonl"  # the home folder, expanded where it is opened
    assert load_config("conf/off.yaml").log.path is None
    assert parse_config({"log": {"path": "d.jsonl"}, "routes": [{"model": "m"}]}).log.path == "d.jsonl"  # no file


def test_a_block_given_as_a_scalar_and_an_unknown_field_of_a_later_model_are_explained():
    # an outside tester's `log: /path`, `guard: true` and `rate_limit: {rps: 5}`: pydantic's class names, and an
    # empty list of known fields for a model defined after the one that holds it
    with pytest.raises(ConfigError) as caught:
        parse_config({"log": "/tmp/d.jsonl", "routes": [{"model": "m", "guard": 3, "rate_limit": {"rps": 5}}]})
    message = str(caught.value)
    assert "log: write `log: {path: /tmp/d.jsonl}`: log is a mapping (fields: path, max_bytes, backups)" in message
    assert "routes[0].guard: expected a mapping of settings (`guard: {}` takes the defaults; fields: enabled," in (
        message)
    assert "got the number 3" in message and "GuardConfig" not in message and "LogConfig" not in message
    assert "routes[0].rate_limit.rps: unknown field; expected one of: requests_per_s, burst" in message


def test_a_decision_switched_with_a_boolean_and_a_list_item_given_as_a_scalar():
    # `guard: false` as YAML users write a switch (it was refused), and `routes: [m]` got a hint to write `routes: {}`
    config = parse_config({"routes": [{"model": "m", "guard": False, "harm": True}]})
    assert config.routes[0].guard.enabled is False and config.routes[0].harm.enabled is True
    with pytest.raises(ConfigError) as caught:
        parse_config({"routes": ["m"]})
    assert "routes[0]: each item of routes is a mapping such as `{model: ...}`" in str(caught.value)


def test_blocks_without_an_enabled_field_take_false_as_off():
    config = parse_config({"log": False, "routes": [{"model": "m", "rate_limit": False, "inference": False}]})
    assert config.log.path is None and config.routes[0].rate_limit is None and config.routes[0].inference is None


def test_a_name_yaml_read_as_a_boolean_says_to_quote_it():
    import yaml

    with pytest.raises(ConfigError, match=r"routes\[0\]\.model: .*YAML read an unquoted yes/no/on/off as false: quote"):
        parse_config(yaml.safe_load("routes: [{model: off}]"))


def test_a_rate_limits_burst_is_a_whole_number_of_requests():
    # a bucket of 1.5 let one request through at once: a fraction of a request was taken silently
    assert parse_config({"routes": [{"model": "m", "rate_limit": {"requests_per_s": 1, "burst": 3}}]}).routes[
        0].rate_limit.burst == 3
    with pytest.raises(ConfigError) as caught:
        parse_config({"routes": [{"model": "m", "rate_limit": {"requests_per_s": 1, "burst": 1.5}}]})
    assert "routes[0].rate_limit.burst" in str(caught.value)


def test_a_rate_in_e_notation_without_a_point_says_yaml_read_it_as_text():
    # PyYAML reads 1e-2 as the text "1e-2", quoted or not: "write it without quotes" sent the user in circles
    import yaml

    with pytest.raises(ConfigError) as caught:
        parse_config(yaml.safe_load("routes: [{model: m, guard: {max_false_action_rate: 1e-2}}]"))
    assert "YAML reads 1e-2 as text: write 0.01 or put a point in it, 1.0e-2" in str(caught.value)
    assert parse_config(yaml.safe_load("routes: [{model: m, guard: {max_false_action_rate: 1.0e-2}}]")).routes[
        0].guard.max_false_action_rate == 0.01


def test_a_setting_outside_its_choices_is_named_with_what_was_given():
    with pytest.raises(ConfigError) as caught:
        parse_config({"routes": [{"model": "m", "guard": {"mode": "Shadow", "threshold": 0.9}}]})
    assert "routes[0].guard.mode: Input should be 'enforce' or 'shadow', got 'Shadow'" in str(caught.value)


def test_an_upstream_nothing_answers_at_is_warned_of_at_start():
    """A new user's gateway said ready and /healthz ok with its only upstream down, until the first 502."""
    import socket

    from jevserve.gateway.upstream import unreachable_upstream_warnings

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    try:
        config = parse_config({"upstreams": [
            {"name": "up", "url": f"http://127.0.0.1:{listening.getsockname()[1]}/v1"},
            {"name": "down", "url": f"http://127.0.0.1:{port}/v1"},
            {"name": "p", "url": "builtin:placeholder"}]})
        lines = unreachable_upstream_warnings(config)
    finally:
        listening.close()
        closed.close()
    assert lines == [f"warning: upstreams[1] (down): nothing answers at 127.0.0.1:{port} "
                     "(connection refused); requests to it get 502 until it is up"]


@pytest.mark.parametrize("port", ["99999", "65536", "-1", "abc", "0"])
def test_an_upstream_url_with_no_usable_port_is_refused_by_the_config(port):
    """An outside re-tester's port 99999 passed `gateway check` and crashed the start-up's reachability warning."""
    from jevserve.gateway.upstream import _unreachable

    with pytest.raises(ConfigError, match=r"upstreams\[0\]\.url: names no port a server can listen on"):
        parse_config({"upstreams": [{"name": "u", "url": f"http://127.0.0.1:{port}/v1"}]})
    assert "names no port a server can listen on" in _unreachable(0, "u", f"http://127.0.0.1:{port}/v1", 0.1)


def test_a_key_written_twice_an_empty_file_and_a_dollar_variable_are_refused_not_read_otherwise(tmp_path):
    # an outside operator's configs: a route's second `guard:` replaced its first and a second `routes:` dropped the
    # routes above it, both "valid"; an empty file was "valid (0 routes)"; `api_key_env: $VLLM_KEY` was looked up as
    # a variable of that name and the start said to export it while it was
    from jevserve.gateway.config import load_config

    def refused(text: str) -> str:
        path = tmp_path / "gw.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(path)
        return str(info.value)

    said = refused("routes:\n  - model: m\n    guard: {max_false_action_rate: 0.01}\n    guard: {threshold: 0.2}\n")
    assert "the key 'guard' appears twice (first on line 3)" in said
    assert "the key 'routes' appears twice" in refused("routes:\n  - model: a\nroutes:\n  - model: b\n")
    assert "the config file is empty" in refused("")
    said = refused("upstreams:\n  - {name: u, url: 'http://127.0.0.1:9/v1', api_key_env: $VLLM_KEY}\n"
                   "routes:\n  - model: m\n")
    assert "api_key_env: takes the environment variable's name, not its value: write VLLM_KEY" in said
    # what a merge brings in may be overridden, as YAML intends
    path = tmp_path / "merged.yaml"
    path.write_text("routes:\n  - &base {model: x, description: d}\n  - <<: *base\n    model: y\n")
    assert [r.model for r in load_config(path).routes] == ["x", "y"]
