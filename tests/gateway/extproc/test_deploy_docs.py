"""docs/deploy.md's examples: parsed, every field jevserve relies on checked against the xds-protos descriptors
(and, for the Envoy bootstrap, against Envoy 1.40.0's own config validation)."""

from __future__ import annotations

import subprocess

import yaml
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.access_loggers.filters.cel.v3 import cel_pb2  # noqa: F401 (registers the Any type)
from envoy.extensions.filters.http.ext_proc.v3 import ext_proc_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401 (registers the Any type)
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import json_format

from jevserve.gateway.config import parse_config
from jevserve.gateway.extproc import StreamSettings, wire
from jevserve.gateway.extproc.envoy_config import envoy_bootstrap
from jevserve.gateway.extproc.server import READY_SERVICES
from jevserve.gateway.inference_headers import MODEL_NAME_HEADER as MODEL_HEADER
from tests.gateway.extproc.deploy_examples import (
    DOC_DEFAULT_MODEL,
    DOC_MODELS,
    envoy_or_skip,
    example_documents,
    examples,
)

SUPPORTED_REQUEST_MODES = {"BUFFERED", "BUFFERED_PARTIAL", "FULL_DUPLEX_STREAMED"}
# Envoy Gateway's ExtProcBodyProcessingMode values and the BodySendMode each configures (api/v1alpha1/ext_proc_types.go)
EG_BODY_MODES = {
    "Streamed": "STREAMED",
    "Buffered": "BUFFERED",
    "BufferedPartial": "BUFFERED_PARTIAL",
    "FullDuplexStreamed": "FULL_DUPLEX_STREAMED",
}


def _seconds(text: str) -> float:
    assert text.endswith("s") and not text.endswith("ms"), f"expected a duration in seconds, got {text!r}"
    return float(text[:-1])


def _bootstrap() -> bootstrap_pb2.Bootstrap:
    # ParseDict fails on any field, enum value or Any type the descriptors do not know
    return json_format.ParseDict(example_documents("envoy-bootstrap")[0], bootstrap_pb2.Bootstrap())


def _ext_proc_filter() -> ext_proc_pb2.ExternalProcessor:
    listener = _bootstrap().static_resources.listeners[0]
    manager = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    names = [f.name for f in manager.http_filters]
    assert names == ["envoy.filters.http.ext_proc", "envoy.filters.http.router"]
    config = ext_proc_pb2.ExternalProcessor()
    manager.http_filters[0].typed_config.Unpack(config)
    return config


def test_every_example_is_present_and_parses() -> None:
    assert set(examples()) == {
        "envoy-bootstrap",
        "envoy-gateway-policy",
        "inference-extension",
        "inference-route",
        "inference-objective",
    }
    for name in examples():
        assert example_documents(name), name


def test_bootstrap_is_what_envoy_bootstrap_builds() -> None:
    """So the live test, which runs envoy_bootstrap() on loopback ports, runs the documented bootstrap."""
    assert example_documents("envoy-bootstrap")[0] == envoy_bootstrap(DOC_MODELS, DOC_DEFAULT_MODEL)


def test_bootstrap_matches_the_descriptors_and_what_jevserve_needs() -> None:
    config = _ext_proc_filter()
    mode = config.processing_mode
    assert wire.mode_name(mode.request_body_mode) in SUPPORTED_REQUEST_MODES
    if mode.request_body_mode == wire.FULL_DUPLEX_STREAMED:
        assert mode.request_trailer_mode == mode.SEND
    assert mode.request_header_mode == mode.SEND and mode.response_header_mode == mode.SEND
    assert config.message_timeout.ToTimedelta().total_seconds() > StreamSettings().deadline_s
    name = config.grpc_service.envoy_grpc.cluster_name
    cluster = next(c for c in _bootstrap().static_resources.clusters if c.name == name)
    options = http_protocol_options_pb2.HttpProtocolOptions()
    cluster.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].Unpack(options)
    assert options.explicit_http_config.HasField("http2_protocol_options")  # gRPC needs HTTP/2


def test_bootstrap_routes_on_the_header_jevserve_sets() -> None:
    listener = _bootstrap().static_resources.listeners[0]
    manager = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(manager)
    routes = manager.route_config.virtual_hosts[0].routes
    assert [h.name for h in routes[0].match.headers] == [MODEL_HEADER]
    clusters = {c.name for c in _bootstrap().static_resources.clusters}
    assert {r.route.cluster for r in routes} <= clusters


def test_bootstrap_passes_envoys_own_validation(tmp_path) -> None:
    envoy = envoy_or_skip()
    path = tmp_path / "bootstrap.yaml"
    path.write_text(examples()["envoy-bootstrap"])
    done = _validate(envoy, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK" in done.stdout + done.stderr


def test_envoy_validation_refuses_duplex_without_request_trailers(tmp_path) -> None:
    """The fact docs/deploy.md states about FULL_DUPLEX_STREAMED, checked on the binary."""
    envoy = envoy_or_skip()
    broken = examples()["envoy-bootstrap"].replace("request_trailer_mode: SEND", "request_trailer_mode: SKIP")
    path = tmp_path / "broken.yaml"
    path.write_text(broken)
    done = _validate(envoy, path)
    assert done.returncode != 0
    assert "request_trailer_mode has to be set to SEND" in done.stderr + done.stdout


def _validate(envoy, path) -> subprocess.CompletedProcess:
    command = [str(envoy), "--mode", "validate", "-c", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def _check_policy(policy: dict, route_name: str) -> None:
    assert policy["apiVersion"] == "gateway.envoyproxy.io/v1alpha1" and policy["kind"] == "EnvoyExtensionPolicy"
    target = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route_name}
    assert target in policy["spec"]["targetRefs"]
    (ext_proc,) = policy["spec"]["extProc"]
    assert ext_proc["backendRefs"][0]["port"] == 9002
    assert _seconds(ext_proc["messageTimeout"]) > StreamSettings().deadline_s
    modes = {part: EG_BODY_MODES[ext_proc["processingMode"][part]["body"]] for part in ("request", "response")}
    for mode in modes.values():
        # the value Envoy Gateway configures exists in the descriptors (an EnumTypeWrapper, not a dict)
        assert mode in wire.BodyMode.keys()  # noqa: SIM118
    assert modes["request"] in SUPPORTED_REQUEST_MODES
    if "FULL_DUPLEX_STREAMED" in modes.values():
        assert ext_proc["failOpen"] is False  # Envoy Gateway's own validation rule


def test_envoy_gateway_policy_uses_modes_and_timeouts_jevserve_supports() -> None:
    (policy,) = example_documents("envoy-gateway-policy")
    _check_policy(policy, "llm")


def test_inference_extension_example_puts_jevserve_on_the_route_that_picks_pools_by_its_header() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in example_documents("inference-extension")}
    pools = {name: d for (kind, name), d in docs.items() if kind == "InferencePool"}
    assert set(pools) == {"qwen3-small", "qwen3-large"}
    for pool in pools.values():
        assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
        spec = pool["spec"]
        assert spec["selector"]["matchLabels"] and spec["targetPorts"][0]["number"] == 8000
        assert spec["endpointPickerRef"]["failureMode"] in ("FailOpen", "FailClose")
    route = docs[("HTTPRoute", "llm")]
    first, last = route["spec"]["rules"]
    assert [h["name"].lower() for h in first["matches"][0]["headers"]] == [MODEL_HEADER]
    assert "headers" not in last["matches"][0]  # everything jevserve did not route elsewhere
    for rule in (first, last):
        (ref,) = rule["backendRefs"]
        assert ref["kind"] == "InferencePool" and ref["name"] in pools
    _check_policy(docs[("EnvoyExtensionPolicy", "jevserve-decisions")], "llm")
    deployment = docs[("Deployment", "jevserve-extproc")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "extproc" and container["args"][container["args"].index("--port") + 1] == "9002"
    assert container["livenessProbe"]["grpc"]["service"] == "liveness"
    assert container["readinessProbe"]["grpc"]["service"] in READY_SERVICES
    service = docs[("Service", "jevserve-extproc")]
    assert service["spec"]["ports"][0]["port"] == 9002


def test_examples_are_plain_yaml_without_templating() -> None:
    for name, text in examples().items():
        assert "{{" not in text, name
        yaml.safe_load_all(text)


def test_inference_route_example_is_a_valid_gateway_config_and_names_the_documented_objective() -> None:
    (data,) = example_documents("inference-route")
    config = parse_config(data)
    inference = config.routes[0].inference
    assert inference is not None and config.routes[0].priority is not None  # the headers need the prediction
    names = [band.name for band in inference.objectives]
    (objective,) = example_documents("inference-objective")
    assert objective["metadata"]["name"] in names
    # llm-d-router's CRD (config/crd/bases/llm-d.ai_inferenceobjectives.yaml): group llm-d.ai, version v1alpha2
    assert objective["apiVersion"] == "llm-d.ai/v1alpha2" and objective["kind"] == "InferenceObjective"
    assert objective["spec"]["priority"] < 0  # the band shed first at saturation
    pools = {d["metadata"]["name"] for d in example_documents("inference-extension") if d["kind"] == "InferencePool"}
    assert objective["spec"]["poolRef"] == {"group": "inference.networking.k8s.io", "name": "qwen3-large"}
    assert objective["spec"]["poolRef"]["name"] in pools
