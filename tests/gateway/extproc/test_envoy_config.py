"""`jevserve extproc --print-envoy`'s bootstrap for configs beyond docs/deploy.md's example: one cluster per upstream
(two routes sending the same model name to different upstreams), https upstreams, base paths, upstream keys, and
the reply when jevserve is unreachable; checked on the dict, by Envoy 1.40's own validation and on a live Envoy."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess

import httpx
import pytest
import yaml
from aiohttp import web

from jevserve.cli import main
from jevserve.gateway.config import parse_config
from jevserve.gateway.decider import FixedDecider
from jevserve.gateway.errors import GatewayError
from jevserve.gateway.extproc.binding import GatewayDecisions
from jevserve.gateway.extproc.envoy_config import CA_BUNDLE, bootstrap_for_config
from jevserve.gateway.inference_headers import MODEL_NAME_HEADER
from jevserve.gateway.runtime import build_gateway
from tests.gateway.extproc.deploy_examples import envoy_or_skip
from tests.gateway.extproc.live import free_port, running_envoy
from tests.gateway.extproc.scripted import serving_at

# the outside tester's configs: two routes on one upstream_model, and a hosted API beside a server under a path
COLLIDE = {
    "upstreams": [{"name": "gpu-a", "url": "http://10.0.0.1:8000/v1"}, {"name": "gpu-b", "url": "http://10.0.0.2:8000/v1"}],
    "routes": [
        {"model": "fast", "upstream_model": "Qwen/Qwen3-8B", "upstreams": ["gpu-a"]},
        {"model": "cheap", "upstream_model": "Qwen/Qwen3-8B", "upstreams": ["gpu-b"]},
    ],
}
HTTPS = {
    "upstreams": [
        {"name": "openai", "url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"},
        {"name": "local", "url": "http://127.0.0.1:8000/custom/prefix/v1"},
    ],
    "routes": [
        {"model": "gpt", "upstream_model": "gpt-4o-mini", "upstreams": ["openai"]},
        {"model": "local-model", "upstream_model": "Qwen/Qwen3-8B", "upstreams": ["local"]},
    ],
}


def _manager(bootstrap: dict) -> dict:
    return bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def _routes(bootstrap: dict) -> list[dict]:
    return _manager(bootstrap)["route_config"]["virtual_hosts"][0]["routes"]


def _clusters(bootstrap: dict) -> dict[str, dict]:
    return {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}


def _address(cluster: dict) -> dict:
    return cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]


def _print_envoy(tmp_path, data: dict, capsys, *flags: str) -> tuple[dict, str]:
    path = tmp_path / "gw.yaml"
    path.write_text(json.dumps(data))
    assert main(["extproc", "--config", str(path), "--print-envoy", *flags]) == 0
    out, err = capsys.readouterr()
    return yaml.safe_load(out), err


def test_routes_sharing_an_upstream_model_keep_their_own_upstreams() -> None:
    bootstrap, warnings = bootstrap_for_config(parse_config(COLLIDE))
    clusters = _clusters(bootstrap)
    assert _address(clusters["gpu-a"])["address"] == "10.0.0.1" and _address(clusters["gpu-b"])["address"] == "10.0.0.2"
    cheap, default = _routes(bootstrap)
    # the header carries Qwen/Qwen3-8B for both routes: the client's model tells them apart
    assert cheap["match"]["headers"][0]["string_match"] == {"exact": "Qwen/Qwen3-8B"}
    (asked,) = cheap["match"]["dynamic_metadata"]
    assert asked["value"] == {"string_match": {"exact": "cheap"}} and cheap["route"]["cluster"] == "gpu-b"
    assert default["route"]["cluster"] == "gpu-a" and "headers" not in default["match"]
    names = [f["name"] for f in _manager(bootstrap)["http_filters"]]
    assert names == ["envoy.filters.http.json_to_metadata", "envoy.filters.http.ext_proc", "envoy.filters.http.router"]
    assert warnings == []


def test_routes_with_their_own_model_names_need_no_metadata_filter() -> None:
    data = {**COLLIDE, "routes": [{**r, "upstream_model": r["model"]} for r in COLLIDE["routes"]]}
    bootstrap, _ = bootstrap_for_config(parse_config(data))
    names = [f["name"] for f in _manager(bootstrap)["http_filters"]]
    assert names == ["envoy.filters.http.ext_proc", "envoy.filters.http.router"]
    assert [r["route"]["cluster"] for r in _routes(bootstrap)] == ["gpu-b", "gpu-a"]


def test_a_route_target_named_like_its_routes_model_goes_where_the_route_decision_sends_it() -> None:
    # an outside tester's route decision picked `big-model` on gpu-b (as the decision log said); Envoy sent it to the
    # route's own gpu-a, without a word, and for another config warned of a fallback that was not in it
    route = {"model": "smart", "upstream_model": "big-model", "upstreams": ["gpu-a"], "route": {"targets": [
        {"model": "small-model", "cost": 0.1, "upstreams": ["gpu-a"]},
        {"model": "big-model", "cost": 1.0, "upstreams": ["gpu-b"]}]}}
    first = {"model": "agent", "upstream_model": "big-model", "upstreams": ["gpu-b"]}
    for routes in ([first, route], [route]):
        bootstrap, warnings = bootstrap_for_config(parse_config({**COLLIDE, "routes": routes}))
        sent = {}
        for r in _routes(bootstrap):
            headers = r["match"].get("headers")
            sent[headers[0]["string_match"]["exact"] if headers else "*"] = r["route"]["cluster"]
        assert sent["small-model"] == "gpu-a" and sent.get("big-model", sent["*"]) == "gpu-b", sent
        names = [f["name"] for f in _manager(bootstrap)["http_filters"]]
        assert "envoy.filters.http.json_to_metadata" not in names  # no two routes send one name apart
        (warning,) = warnings
        assert "sends 'big-model' to 'gpu-b', also when the route decision does not act" in warning
        assert "fallback" not in warning


def test_https_upstream_speaks_tls_with_sni_and_its_host(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-bootstrap")
    bootstrap, _ = bootstrap_for_config(parse_config(HTTPS))
    openai = _clusters(bootstrap)["openai"]
    assert _address(openai) == {"address": "api.openai.com", "port_value": 443}
    socket = openai["transport_socket"]
    assert socket["name"] == "envoy.transport_sockets.tls"
    context = socket["typed_config"]
    assert context["@type"].endswith("UpstreamTlsContext") and context["sni"] == "api.openai.com"
    validation = context["common_tls_context"]["validation_context"]
    assert validation["trusted_ca"] == {"filename": CA_BUNDLE}
    assert validation["match_typed_subject_alt_names"] == [{"san_type": "DNS", "matcher": {"exact": "api.openai.com"}}]
    local, default = _routes(bootstrap)
    assert default["route"]["cluster"] == "openai" and default["route"]["host_rewrite_literal"] == "api.openai.com"
    assert "transport_socket" not in _clusters(bootstrap)["local"] and "host_rewrite_literal" not in local["route"]
    assert "sk-never-in-the-bootstrap" not in yaml.safe_dump(bootstrap)


def test_a_base_path_other_than_v1_is_rewritten_onto() -> None:
    bootstrap, _ = bootstrap_for_config(parse_config(HTTPS))
    local, default = _routes(bootstrap)
    assert local["route"]["regex_rewrite"] == {"pattern": {"regex": "^/v1/"}, "substitution": "/custom/prefix/v1/"}
    assert "regex_rewrite" not in default["route"]  # https://api.openai.com/v1: the client's path as it is


def test_an_upstream_key_is_injected_from_its_variable_and_client_keys_removed() -> None:
    bootstrap, _ = bootstrap_for_config(parse_config(HTTPS))
    options = _clusters(bootstrap)["openai"]["typed_extension_protocol_options"]
    (protocol,) = options.values()
    injector, codec = protocol["http_filters"]
    assert codec["name"] == "envoy.filters.http.upstream_codec"  # an upstream filter chain must end with it
    generic = injector["typed_config"]["credential"]["typed_config"]
    assert injector["typed_config"]["overwrite"] is True and generic["header_value_prefix"] == "Bearer "
    (secret,) = bootstrap["static_resources"]["secrets"]
    assert secret["name"] == generic["credential"]["name"]
    assert secret["generic_secret"] == {"secret": {"environment_variable": "OPENAI_API_KEY"}}
    assert "typed_extension_protocol_options" not in _clusters(bootstrap)["local"]  # the key goes to its upstream only
    virtual_host = _manager(bootstrap)["route_config"]["virtual_hosts"][0]
    assert {"authorization", "api-key", "x-api-key"} <= set(virtual_host["request_headers_to_remove"])


def test_upstream_timeouts_and_retries_are_carried_into_the_cluster_and_route() -> None:
    data = {
        "upstreams": [
            {"name": "tuned", "url": "http://10.0.0.1:8000/v1", "connect_timeout_s": 1.5, "timeout_s": 30,
             "max_retries": 3, "backoff_s": 0.5},
            {"name": "once", "url": "http://10.0.0.2:8000/v1", "max_retries": 0},
        ],
        "routes": [{"model": "a", "upstreams": ["tuned"]}, {"model": "b", "upstreams": ["once"]}],
    }
    bootstrap, _ = bootstrap_for_config(parse_config(data))
    clusters = _clusters(bootstrap)
    assert clusters["tuned"]["connect_timeout"] == "1.5s" and clusters["once"]["connect_timeout"] == "5s"
    actions = {r["route"]["cluster"]: r["route"] for r in _routes(bootstrap)}
    tuned, once = actions["tuned"], actions["once"]
    assert tuned["idle_timeout"] == "30s" and tuned["timeout"] == "0s"  # silence is bounded, a long stream is not
    policy = tuned["retry_policy"]
    assert policy["num_retries"] == 3 and policy["retry_back_off"]["base_interval"] == "0.5s"
    assert policy["retriable_status_codes"] == [429, 503] and "connect-failure" in policy["retry_on"]
    assert "5xx" not in policy["retry_on"] and "reset," not in policy["retry_on"] + ","  # never once it was sent
    assert "retry_policy" not in once and once["idle_timeout"] == "300s"


def test_extproc_failures_answer_in_the_gateways_error_shape() -> None:
    bootstrap, _ = bootstrap_for_config(parse_config(COLLIDE))
    mapper, *upstream_failures = _manager(bootstrap)["local_reply_config"]["mappers"]
    assert "ext_proc_error" in mapper["filter"]["extension_filter"]["typed_config"]["expression"]
    body = mapper["body_format_override"]["json_format"]
    assert set(body["error"]) == set(GatewayError("x").body()["error"])
    assert body["error"]["code"] == "decisions_unavailable" and "unreachable" in body["error"]["message"]
    assert mapper["status_code"] == 503
    assert {"header": {"key": "retry-after", "value": "1"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"} in \
        mapper["headers_to_add"]  # as jevserve's own 503: the request never went out and may be sent again
    codes = [(m["status_code"], m["body_format_override"]["json_format"]["error"]["code"]) for m in upstream_failures]
    # as the HTTP gateway answers them (and jevserve answers a body over its limit); the idle timeout of a request
    # that never reached a model server (the ext_proc server stopped answering) is jevserve's 503
    assert codes == [(502, "upstream_failed"), (502, "upstream_failed"), (504, "upstream_timeout"),
                     (503, "decisions_unavailable"), (413, "payload_too_large")]
    # only a request that never went out is called not run: a server that took it and closed the connection may
    # have run it (every reset before the reply was called "not run", telling clients to send it again)
    messages = [m["body_format_override"]["json_format"]["error"]["message"] for m in upstream_failures[:2]]
    assert "was not run" in messages[0] and "may have run it" in messages[1]
    # Envoy's reasons for a request that never went out (its response code details): a connect timeout was told
    # "may have run it", after three tries that reached nothing
    not_sent = upstream_failures[0]["filter"]["extension_filter"]["typed_config"]["expression"]
    for reason in ("connection_failure", "connection_timeout", "overflow"):
        assert f"contains('{reason}')" in not_sent
    bare, _ = bootstrap_for_config(parse_config(COLLIDE), extproc=None)
    assert len(_manager(bare)["local_reply_config"]["mappers"]) == 4  # no ext_proc, no ext_proc failures


def test_print_envoy_warns_about_what_it_cannot_express(tmp_path, capsys) -> None:
    data = {
        "upstreams": [
            {"name": "a", "url": "http://10.0.0.1:8000/v1"},
            {"name": "b", "url": "http://10.0.0.2:8000/v1"},
            {"name": "demo", "url": "builtin:placeholder"},
        ],
        "routes": [{"model": "m", "upstreams": ["a", "b"]}, {"model": "d", "upstreams": ["demo"]}],
    }
    bootstrap, err = _print_envoy(tmp_path, data, capsys)
    assert "warning: --print-envoy: routes[0] (m): Envoy sends 'm' to upstream 'a' only" in err
    assert "upstream 'demo' is builtin:placeholder" in err
    assert _routes(bootstrap)[-1]["route"]["cluster"] == "a"


def test_print_envoy_says_how_the_upstream_key_reaches_envoy(tmp_path, capsys) -> None:
    _, err = _print_envoy(tmp_path, HTTPS, capsys)
    assert "upstream 'openai'" in err and "OPENAI_API_KEY" in err and "credential injector" in err
    _, err = _print_envoy(tmp_path, COLLIDE, capsys)
    assert err == ""


def test_an_upstream_named_like_the_extproc_cluster_is_refused(tmp_path, capsys) -> None:
    path = tmp_path / "gw.yaml"
    data = {"upstreams": [{"name": "jevserve", "url": "http://h:1/v1"}], "routes": [{"model": "m"}]}
    path.write_text(json.dumps(data))
    assert main(["extproc", "--config", str(path), "--print-envoy"]) == 2
    assert "may not be named 'jevserve'" in capsys.readouterr().err


# --- Envoy 1.40's own validation -------------------------------------------------------------------------------


def _envoy():
    envoy = envoy_or_skip()
    return envoy


def _validate(bootstrap: dict, tmp_path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(bootstrap))
    command = [str(_envoy()), "--mode", "validate", "-c", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env or {})


@pytest.mark.parametrize("data", [COLLIDE, HTTPS], ids=["collide", "https"])
def test_envoy_validates_the_bootstraps(data: dict, tmp_path) -> None:
    bootstrap, _ = bootstrap_for_config(parse_config(data))
    done = _validate(bootstrap, tmp_path, {"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK" in done.stdout + done.stderr


def test_envoy_refuses_the_bootstrap_while_the_key_variable_is_unset(tmp_path) -> None:
    """What docs/deploy.md says about api_key_env upstreams, checked on the binary."""
    bootstrap, _ = bootstrap_for_config(parse_config(HTTPS))
    done = _validate(bootstrap, tmp_path, {})
    assert done.returncode != 0
    assert "Environment variable doesn't exist: OPENAI_API_KEY" in done.stdout + done.stderr


# --- a live Envoy in front of the real binding ----------------------------------------------------------------


class Recorder:
    """A model server that answers any POST and records the path and headers that reached it."""

    def __init__(self, name: str, *, busy_first: int = 0, delay_s: float = 0.0, hangs_up: bool = False) -> None:
        self.name = name
        self.hangs_up = hangs_up  # read the request, then close the connection without answering (a crash)
        self.busy_first = busy_first  # answer this many requests 503, as a server that has no room yet
        self.delay_s = delay_s  # wait this long before answering
        self.received: list[tuple[str, dict[str, str], dict]] = []

    async def handle(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.json_response({"ok": True})
        body = await request.json()
        self.received.append((request.path, dict(request.headers), body))
        if len(self.received) <= self.busy_first:
            return web.json_response({"error": {"message": "busy"}}, status=503)
        if self.hangs_up:
            request.transport.close()
            await asyncio.sleep(0.2)
        await asyncio.sleep(self.delay_s)
        message = {"role": "assistant", "content": f"Hello from {self.name}"}
        completion = {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"]}
        completion["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
        return web.json_response(completion)


async def _serve(recorder: Recorder) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


def _chat(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


def _live(
    data: dict,
    scenario,
    *,
    extproc_up: bool = True,
    mode: str = "FULL_DUPLEX_STREAMED",
    behaviour: dict[str, dict] | None = None,
    down: set[str] = frozenset(),
):
    """Run `scenario(client, recorders)` against Envoy (the bootstrap for `data`, its upstreams replaced by
    recorders on loopback ports, keeping their paths, each behaving as `behaviour` names it) in front of jevserve's
    binding (or nothing, when down). Upstreams named in `down` point at a port nothing listens on."""
    envoy = _envoy()
    behaviour = behaviour or {}

    async def run():
        recorders = {u["name"]: Recorder(u["name"], **behaviour.get(u["name"], {})) for u in data["upstreams"]}
        served = {name: await _serve(r) for name, r in recorders.items()}
        upstreams = [
            {**u, "url": f"http://127.0.0.1:{served[u['name']][1]}/" + u["url"].split("/", 3)[3]}
            for u in data["upstreams"]
        ]
        config = parse_config({**data, "upstreams": upstreams})
        decisions = GatewayDecisions(build_gateway(config, FixedDecider({})))
        try:
            async with serving_at(decisions) as (_, port):
                listen = free_port()
                extproc = ("127.0.0.1", port if extproc_up else free_port())
                bootstrap, _ = bootstrap_for_config(config, listen=("127.0.0.1", listen), extproc=extproc)
                for name in down:
                    _address(_clusters(bootstrap)[name])["port_value"] = free_port()
                processor = _manager(bootstrap)["http_filters"][-2]["typed_config"]["processing_mode"]
                processor["request_body_mode"] = processor["response_body_mode"] = mode
                async with running_envoy(envoy, bootstrap, listen) as base, httpx.AsyncClient(base_url=base) as c:
                    return await scenario(c, recorders)
        finally:
            for runner, _ in served.values():
                await runner.cleanup()

    return asyncio.run(run())


@pytest.mark.parametrize("mode", ["FULL_DUPLEX_STREAMED", "BUFFERED"])
def test_live_envoy_sends_each_route_to_its_own_upstream(mode: str) -> None:
    async def scenario(client, recorders):
        for model in ("cheap", "fast", "cheap"):
            reply = await client.post("/v1/chat/completions", json=_chat(model))
            assert reply.status_code == 200, reply.text
        return {name: [body["model"] for _, _, body in r.received] for name, r in recorders.items()}

    received = _live(COLLIDE, scenario, mode=mode)
    assert received == {"gpu-a": ["Qwen/Qwen3-8B"], "gpu-b": ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B"]}


def test_live_envoy_rewrites_the_path_and_sends_the_upstreams_key(monkeypatch) -> None:
    monkeypatch.setenv("JEV_TEST_UPSTREAM_KEY", "sk-upstream")  # Envoy inherits this process's environment
    data = {
        "upstreams": [
            {"name": "keyed", "url": "http://h/custom/prefix/v1", "api_key_env": "JEV_TEST_UPSTREAM_KEY"},
            {"name": "open", "url": "http://h/v1"},
        ],
        "routes": [{"model": "k", "upstreams": ["keyed"]}, {"model": "o", "upstreams": ["open"]}],
    }

    async def scenario(client, recorders):
        for model in ("k", "o"):
            client_key = {"authorization": "Bearer sk-client"}
            reply = await client.post("/v1/chat/completions", json=_chat(model), headers=client_key)
            assert reply.status_code == 200, reply.text
        return recorders

    recorders = _live(data, scenario)
    ((path, headers, _),) = recorders["keyed"].received
    assert path == "/custom/prefix/v1/chat/completions" and headers["Authorization"] == "Bearer sk-upstream"
    ((path, headers, _),) = recorders["open"].received
    assert path == "/v1/chat/completions" and "Authorization" not in headers  # the client's key stays with Envoy
    assert headers[MODEL_NAME_HEADER] == "o"


def test_live_envoy_answers_an_openai_error_when_jevserve_is_unreachable() -> None:
    openai = pytest.importorskip("openai")

    async def scenario(client, recorders):
        reply = await client.post("/v1/chat/completions", json=_chat("fast"), headers={"x-request-id": "req-1"})
        sdk = openai.AsyncOpenAI(base_url=f"{str(client.base_url).rstrip('/')}/v1", api_key="sk-client", max_retries=0)
        try:
            await sdk.chat.completions.create(model="fast", messages=[{"role": "user", "content": "hi"}])
        except openai.APIStatusError as exc:
            return reply, exc, recorders
        raise AssertionError("the request went through with jevserve down")

    reply, error, recorders = _live(COLLIDE, scenario, extproc_up=False)
    assert reply.status_code == 503 and reply.headers["content-type"] == "application/json"
    assert reply.json()["error"]["code"] == "decisions_unavailable" and reply.headers["x-request-id"] == "req-1"
    assert error.status_code == 503 and error.code == "decisions_unavailable" and "unreachable" in error.message
    assert not any(r.received for r in recorders.values())


RETRIED = {
    "upstreams": [
        {"name": "retried", "url": "http://h/v1", "max_retries": 2, "backoff_s": 0.01},
        {"name": "once", "url": "http://h/v1", "max_retries": 0},
        {"name": "slow", "url": "http://h/v1", "timeout_s": 0.5, "max_retries": 0},
        {"name": "down", "url": "http://h/v1", "max_retries": 1, "backoff_s": 0.01},
    ],
    "routes": [
        {"model": "r", "upstreams": ["retried"]},
        {"model": "o", "upstreams": ["once"]},
        {"model": "s", "upstreams": ["slow"]},
        {"model": "d", "upstreams": ["down"]},
    ],
}


def test_live_envoy_retries_a_busy_upstream_as_configured_and_ends_a_silent_one() -> None:
    async def scenario(client, recorders):
        ids = {"x-request-id": "req-7"}
        replies = {m: await client.post("/v1/chat/completions", json=_chat(m), headers=ids) for m in ("r", "o", "s")}
        return replies, {name: len(r.received) for name, r in recorders.items()}

    busy = {"retried": {"busy_first": 2}, "once": {"busy_first": 1}, "slow": {"delay_s": 3.0}}
    replies, tries = _live(RETRIED, scenario, behaviour=busy)
    assert replies["r"].status_code == 200, replies["r"].text  # two 503s retried, the third try answered
    assert replies["o"].status_code == 503 and replies["o"].json() == {"error": {"message": "busy"}}  # the server's
    assert tries == {"retried": 3, "once": 1, "slow": 1, "down": 0}
    silent = replies["s"]  # 0.5 s without a byte ends it (not the server's 3 s), as the HTTP gateway's 504
    assert silent.status_code == 504 and silent.elapsed.total_seconds() < 2.5, silent.text
    assert silent.json()["error"]["code"] == "upstream_timeout" and silent.headers["x-request-id"] == "req-7"


def test_live_envoy_answers_an_openai_error_when_the_upstream_is_unreachable() -> None:
    async def scenario(client, recorders):
        return await client.post("/v1/chat/completions", json=_chat("d"))

    reply = _live(RETRIED, scenario, down={"down"})
    assert reply.status_code == 502 and reply.headers["content-type"] == "application/json"
    assert reply.json()["error"]["code"] == "upstream_failed" and "could not be reached" in reply.text


def test_live_envoy_says_a_request_a_model_server_took_and_hung_up_on_may_have_run() -> None:
    # it was told "could not be reached; the request was not run" (every reset before the reply matched), which
    # tells a client it may send it again, though the model server had it
    async def scenario(client, recorders):
        reply = await client.post("/v1/chat/completions", json=_chat("d"))
        return reply, len(recorders["down"].received)

    reply, received = _live(RETRIED, scenario, behaviour={"down": {"hangs_up": True}})
    assert received == 1  # taken once, not retried
    assert reply.status_code == 502 and reply.json()["error"]["code"] == "upstream_failed"
    assert "may have run it" in reply.text and "not run" not in reply.text


def _certificates(folder) -> tuple[str, str, str]:
    """A CA and a certificate it signed for `localhost`: (CA file, certificate file, key file)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary to make a test CA; install it with: make test-system-deps")
    ca, ca_key, cert, key, csr = (str(folder / n) for n in ("ca.pem", "ca.key", "cert.pem", "cert.key", "cert.csr"))
    extension = folder / "san.cnf"
    extension.write_text("subjectAltName=DNS:localhost\n")
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=ca"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
         "-extfile", str(extension)],
    ):
        subprocess.run([openssl, *command], check=True, capture_output=True, timeout=60)
    return ca, cert, key


def test_live_envoy_reaches_an_https_upstream_with_sni_and_its_host(tmp_path) -> None:
    envoy = _envoy()
    ca, cert, key = _certificates(tmp_path)
    recorder, names = Recorder("tls"), []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: names.append(name)

    async def run():
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", recorder.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
        try:
            hosted = {"name": "hosted", "url": f"https://localhost:{port}/v1"}
            config = parse_config({"upstreams": [hosted], "routes": [{"model": "m"}]})
            decisions = GatewayDecisions(build_gateway(config, FixedDecider({})))
            async with serving_at(decisions) as (_, extproc_port):
                listen = free_port()
                extproc = ("127.0.0.1", extproc_port)
                bootstrap, _ = bootstrap_for_config(config, listen=("127.0.0.1", listen), extproc=extproc)
                cluster = _clusters(bootstrap)["hosted"]
                _address(cluster)["address"] = "127.0.0.1"  # `localhost` may resolve to ::1 first; SNI keeps the name
                tls = cluster["transport_socket"]["typed_config"]
                tls["common_tls_context"]["validation_context"]["trusted_ca"]["filename"] = ca  # the test CA
                async with running_envoy(envoy, bootstrap, listen) as base, httpx.AsyncClient(base_url=base) as c:
                    return port, await c.post("/v1/chat/completions", json=_chat("m"))
        finally:
            await runner.cleanup()

    port, reply = asyncio.run(run())
    assert reply.status_code == 200, reply.text
    ((path, headers, _),) = recorder.received
    assert path == "/v1/chat/completions" and headers["Host"] == f"localhost:{port}"
    assert "localhost" in names  # the SNI Envoy sent


def test_print_envoy_takes_the_body_mode_and_the_listener_address_it_is_given(tmp_path, capsys) -> None:
    # `--body-mode BUFFERED` printed a FULL_DUPLEX_STREAMED filter, and the listener was 0.0.0.0 whatever was wanted
    def modes_and_listener(bootstrap: dict) -> tuple[set, str]:
        text = json.dumps(bootstrap)
        modes = {m for m in ("BUFFERED", "FULL_DUPLEX_STREAMED") if f'"{m}"' in text}
        listener = bootstrap["static_resources"]["listeners"][0]["address"]["socket_address"]["address"]
        return modes, listener

    assert modes_and_listener(_print_envoy(tmp_path, COLLIDE, capsys)[0]) == ({"FULL_DUPLEX_STREAMED"}, "0.0.0.0")
    chosen = _print_envoy(tmp_path, COLLIDE, capsys, "--body-mode", "BUFFERED", "--envoy-host", "127.0.0.1")[0]
    assert modes_and_listener(chosen) == ({"BUFFERED"}, "127.0.0.1")
