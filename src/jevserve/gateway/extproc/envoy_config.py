"""An Envoy bootstrap with jevserve's ext_proc filter in front of model servers (`jevserve extproc --print-envoy`).

Routes match on `x-gateway-model-name`, which jevserve sets to the model its route decision chose (and asks Envoy to
route again with `clear_route_cache`); a request for any other model goes to the default cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jevserve.gateway.inference_headers import MODEL_NAME_HEADER

Address = tuple[str, int]
_MANAGER_NAME = "envoy.filters.network.http_connection_manager"
_MANAGER_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"


def _cluster(name: str, address: Address, *, http2: bool = False) -> dict[str, Any]:
    host, port = address
    cluster: dict[str, Any] = {"name": name, "type": "STRICT_DNS"}
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},  # gRPC needs HTTP/2
            }
        }
    endpoint = {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
    cluster["load_assignment"] = {"cluster_name": name, "endpoints": [{"lb_endpoints": [endpoint]}]}
    return cluster


def ext_proc_filter(
    *, request_body_mode: str, response_body_mode: str, message_timeout_s: float, cluster: str = "jevserve"
) -> dict[str, Any]:
    """The ext_proc HTTP filter: headers, body and trailers of both directions sent to jevserve."""
    return {
        "name": "envoy.filters.http.ext_proc",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "grpc_service": {"envoy_grpc": {"cluster_name": cluster}},
            "failure_mode_allow": False,  # jevserve unreachable: a 500, never an undecided request
            "message_timeout": f"{message_timeout_s:g}s",
            "processing_mode": {
                "request_header_mode": "SEND",
                "request_body_mode": request_body_mode,
                "request_trailer_mode": "SEND",  # required with FULL_DUPLEX_STREAMED; harmless otherwise
                "response_header_mode": "SEND",
                "response_body_mode": response_body_mode,
                "response_trailer_mode": "SEND",
            },
        },
    }


def envoy_bootstrap(
    models: Mapping[str, Address],
    default_model: str,
    *,
    listen: Address = ("0.0.0.0", 10000),
    extproc: Address | None = ("127.0.0.1", 9002),
    request_body_mode: str = "FULL_DUPLEX_STREAMED",
    response_body_mode: str = "FULL_DUPLEX_STREAMED",
    message_timeout_s: float = 2.0,
    max_body_bytes: int = 4 * 1024 * 1024,
) -> dict[str, Any]:
    """A static Envoy bootstrap: model name → model server address; `extproc=None` leaves the filter out."""
    if default_model not in models:
        raise ValueError(f"default model {default_model!r} is not among the models: {sorted(models)}")
    if "jevserve" in models:
        raise ValueError("a model may not be named 'jevserve': that is the ext_proc server's cluster")
    names = {model: model for model in models}  # one cluster per model, named after it
    routes = [
        {
            "match": {"prefix": "/", "headers": [{"name": MODEL_NAME_HEADER, "string_match": {"exact": model}}]},
            "route": {"cluster": names[model], "timeout": "300s"},
        }
        for model in models
        if model != default_model
    ]
    routes.append({"match": {"prefix": "/"}, "route": {"cluster": names[default_model], "timeout": "300s"}})
    router = {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
    filters = [{"name": "envoy.filters.http.router", "typed_config": router}]
    clusters = [_cluster(names[m], address) for m, address in models.items()]
    if extproc is not None:
        modes = {"request_body_mode": request_body_mode, "response_body_mode": response_body_mode}
        filters.insert(0, ext_proc_filter(**modes, message_timeout_s=message_timeout_s))
        clusters.insert(0, _cluster("jevserve", extproc, http2=True))
    manager = {
        "@type": _MANAGER_TYPE,
        "stat_prefix": "llm",
        "route_config": {"virtual_hosts": [{"name": "llm", "domains": ["*"], "routes": routes}]},
        "http_filters": filters,
    }
    host, port = listen
    listener = {
        "name": "llm",
        "address": {"socket_address": {"address": host, "port_value": port}},
        "per_connection_buffer_limit_bytes": max_body_bytes,  # BUFFERED bodies up to jevserve's limit
        "filter_chains": [{"filters": [{"name": _MANAGER_NAME, "typed_config": manager}]}],
    }
    return {"static_resources": {"listeners": [listener], "clusters": clusters}}
