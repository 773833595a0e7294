"""An Envoy bootstrap with jevserve's ext_proc filter in front of model servers (`jevserve extproc --print-envoy`).

Routes match on `x-gateway-model-name`, which jevserve sets to the model its route decision chose (and asks Envoy to
route again with `clear_route_cache`); a request for any other model goes to the default cluster. There is one
cluster per upstream (named after it). Where two of jevserve's routes send the same model name to different
upstreams, that header cannot tell them apart: Envoy's json_to_metadata filter then copies the `model` the client
asked for (the jevserve route) into dynamic metadata before ext_proc rewrites the body, and those routes match on it
as well. Each route rewrites what the HTTP gateway's upstream client would: the path onto the upstream URL's base
path, and for an https upstream the Host header (the cluster itself speaks TLS with SNI and verifies the certificate
against the CA bundle at `CA_BUNDLE`). An upstream with `api_key_env` gets its key from Envoy's credential injector,
read from that environment variable when Envoy starts: the bootstrap names the variable, never the key. The keys
clients send are removed before the request leaves, as the HTTP gateway never forwards them either.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from jevserve.gateway.config import PLACEHOLDER_URL, GatewayConfig, UpstreamConfig
from jevserve.gateway.inference_headers import MODEL_NAME_HEADER
from jevserve.gateway.upstream import MAX_HINTED_BACKOFF_S, RETRYABLE_STATUSES

Address = tuple[str, int]
EXTPROC_CLUSTER = "jevserve"
CLIENT_KEY_HEADERS = ("authorization", "api-key", "x-api-key")  # context.tenant_of's key headers
_MANAGER_NAME = "envoy.filters.network.http_connection_manager"
_MANAGER_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_CLIENT_PATH = "/v1"  # the prefix OpenAI clients put before /chat/completions
# the CA bundle of Debian/Ubuntu images (Envoy's own among them) and Alpine: Envoy 1.40 refuses to match the
# certificate's name without a trusted CA file, and without that match any publicly trusted certificate would do
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
METADATA_NAMESPACE = "jevserve"
ROUTE_KEY = "route"  # the client's `model` (jevserve's route), under METADATA_NAMESPACE
# Envoy's response code details for the ext_proc filter's own failures (gRPC error, stream closed, message timeout);
# jevserve's immediate replies carry `jevserve_<status>` instead, so they are never rewritten
_EXTPROC_FAILED = "response.code_details.startsWith('ext_proc_error')"
UNREACHABLE_MESSAGE = (
    "the decision service (jevserve ext_proc) is unreachable or failed to answer; the request was not forwarded"
)
# a model server Envoy could not connect to after its retries (or its circuit breaker held the request back): the
# request never went out, so it may be sent again
_RESET = "response.code_details.startsWith('upstream_reset_before_response_started')"
_UPSTREAM_UNREACHABLE = (f"{_RESET} && (response.code_details.contains('connection_failure') || "
                         "response.code_details.contains('connection_timeout') || "
                         "response.code_details.contains('overflow'))")
UPSTREAM_UNREACHABLE_MESSAGE = "no upstream answered: the model server could not be reached; the request was not run"
# any other reset before the reply began (the connection closed or reset once the request was out: a server killed
# while it prefilled): evaluated after _UPSTREAM_UNREACHABLE, and said as the HTTP gateway says it (all resets were
# called "not run", which tells a client it may safely send the request again)
_UPSTREAM_RESET = _RESET
UPSTREAM_RESET_MESSAGE = ("the model server closed the connection before answering; not retried, since the model may "
                          "have run it")
# the route's idle timeout after the whole request went out: the upstream's `timeout_s` passed without a byte (the
# same timer answers 408 while the client is still sending, which stays as it is). The same timer also ends a request
# the ext_proc server stopped answering before it went out (in FULL_DUPLEX_STREAMED mode Envoy applies no
# message_timeout): that one has no upstream address (reading the absent attribute makes the filter false) and is
# jevserve's failure, not the model server's
_IDLE = "response.code == 504 && response.code_details == 'stream_idle_timeout'"
_UPSTREAM_SILENT = f"{_IDLE} && upstream.address != ''"
_EXTPROC_SILENT = _IDLE  # evaluated after _UPSTREAM_SILENT: what is left had no upstream
# the same timer also fires while a stuck ext_proc server holds a reply the model server sent: no CEL attribute tells
# the two apart once the request reached the model, so the message names both; the advice (no retry) holds for both
UPSTREAM_SILENT_MESSAGE = (
    "nothing came back within the model server's timeout after the request reached it (the model server silent, "
    "or jevserve holding its reply); not retried, since the model may have run it"
)

# a BUFFERED body over the listener's buffer (per_connection_buffer_limit_bytes), which Envoy answers itself
_PAYLOAD_TOO_LARGE = "response.code == 413 && response.code_details == 'request_payload_too_large'"


@dataclass(frozen=True)
class EnvoyUpstream:
    """One model server as Envoy reaches it: a cluster, and what each request to it is rewritten to."""

    name: str  # the cluster's name: the upstream's name in the config
    host: str
    port: int
    tls: bool = False
    base_path: str = _CLIENT_PATH  # the URL's path: a client's `/v1/...` is sent to `<base_path>/...`
    api_key_env: str | None = None  # environment variable Envoy reads the bearer key from
    # the HTTP gateway's upstream client settings (UpstreamConfig's defaults), carried into the cluster and route
    connect_timeout_s: float = 5.0
    timeout_s: float = 300.0  # after sending, this long without a byte ends the request
    max_retries: int = 2
    backoff_s: float = 0.25

    @classmethod
    def from_url(cls, name: str, url: str, api_key_env: str | None = None, **settings: Any) -> EnvoyUpstream:
        """An upstream from its base URL, as the gateway config gives it (`https://api.openai.com/v1`); `settings`
        are the timeout and retry fields above."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream {name!r}: {url!r} is not an http(s) URL Envoy can reach")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        return cls(name, parts.hostname, port, tls, parts.path.rstrip("/"), api_key_env, **settings)

    @classmethod
    def from_config(cls, upstream: UpstreamConfig) -> EnvoyUpstream:
        """An upstream as the gateway config declares it, with its timeouts and retries."""
        settings = {
            "connect_timeout_s": upstream.connect_timeout_s,
            "timeout_s": upstream.timeout_s,
            "max_retries": upstream.max_retries,
            "backoff_s": upstream.backoff_s,
        }
        return cls.from_url(upstream.name, upstream.url, upstream.api_key_env, **settings)

    @property
    def authority(self) -> str:
        """The Host header the HTTP gateway sends it (the port only when it is not the scheme's)."""
        default = 443 if self.tls else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def secret_name(self) -> str:
        return f"{self.name}-api-key"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _tls_socket(upstream: EnvoyUpstream) -> dict[str, Any]:
    # without a validation context Envoy accepts any certificate; SNI is only for names (RFC 6066: never an IP)
    san_type = "IP_ADDRESS" if _is_ip(upstream.host) else "DNS"
    context: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "common_tls_context": {
            "validation_context": {
                "trusted_ca": {"filename": CA_BUNDLE},
                "match_typed_subject_alt_names": [{"san_type": san_type, "matcher": {"exact": upstream.host}}],
            }
        },
    }
    if san_type == "DNS":
        context["sni"] = upstream.host
    return {"name": "envoy.transport_sockets.tls", "typed_config": context}


def _credential_filters(upstream: EnvoyUpstream) -> list[dict[str, Any]]:
    # an upstream filter on the cluster, so the key reaches this upstream only; the codec filter must come last
    injector = {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.credential_injector.v3.CredentialInjector",
        "overwrite": True,
        "credential": {
            "name": "envoy.http.injected_credentials.generic",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.http.injected_credentials.generic.v3.Generic",
                "credential": {"name": upstream.secret_name},
                "header_value_prefix": "Bearer ",
            },
        },
    }
    codec = {"@type": "type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec"}
    return [
        {"name": "envoy.filters.http.credential_injector", "typed_config": injector},
        {"name": "envoy.filters.http.upstream_codec", "typed_config": codec},
    ]


def _cluster(name: str, address: Address, *, http2: bool = False, upstream: EnvoyUpstream | None = None) -> dict:
    host, port = address
    cluster: dict[str, Any] = {"name": name, "type": "STRICT_DNS"}
    if upstream is not None:
        cluster["connect_timeout"] = _duration(upstream.connect_timeout_s)
    if http2:
        cluster["typed_extension_protocol_options"] = {
            _PROTOCOL_OPTIONS: {
                "@type": f"type.googleapis.com/{_PROTOCOL_OPTIONS}",
                "explicit_http_config": {"http2_protocol_options": {}},  # gRPC needs HTTP/2
            }
        }
    if upstream is not None and upstream.api_key_env:
        cluster["typed_extension_protocol_options"] = {
            _PROTOCOL_OPTIONS: {
                "@type": f"type.googleapis.com/{_PROTOCOL_OPTIONS}",
                "explicit_http_config": {"http_protocol_options": {}},
                "http_filters": _credential_filters(upstream),
            }
        }
    if upstream is not None and upstream.tls:
        cluster["transport_socket"] = _tls_socket(upstream)
    endpoint = {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
    cluster["load_assignment"] = {"cluster_name": name, "endpoints": [{"lb_endpoints": [endpoint]}]}
    return cluster


def _extproc_cluster(address: Address) -> dict:
    """The ext_proc server's cluster, health-checked over grpc.health.v1. In FULL_DUPLEX_STREAMED mode Envoy applies
    no `message_timeout`, so a server that is alive but stuck (a wedged process, a black-holed pod) would hold every
    request until the stream's idle timeout; two missed checks a second apart mark it unhealthy, and with the panic
    threshold at 0 Envoy then fails new requests at once (a 503, `decisions_unavailable`) instead of sending them to
    it. Requests already waiting on it still wait out their idle timeout."""
    cluster = _cluster(EXTPROC_CLUSTER, address, http2=True)
    # Envoy checks a cluster it sees no traffic on once a minute (no_traffic_interval), and the filter's gRPC streams
    # do not count as traffic there: without the two no-traffic intervals the second check came a minute late
    every = {"interval": "1s", "no_traffic_interval": "1s", "no_traffic_healthy_interval": "1s"}
    cluster["health_checks"] = [
        {"timeout": "1s", **every, "unhealthy_threshold": 2, "healthy_threshold": 1, "grpc_health_check": {}}
    ]
    cluster["common_lb_config"] = {"healthy_panic_threshold": {"value": 0}}  # no healthy server: fail, never guess
    return cluster


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def _retry_policy(upstream: EnvoyUpstream) -> dict[str, Any]:
    """Retries as the HTTP gateway makes them: only while the request cannot have reached the model (no connection,
    a stream refused or reset before the request went out, a 429 or 503), with a doubling backoff from `backoff_s`
    and an upstream's Retry-After honoured up to 5 s (upstream.MAX_HINTED_BACKOFF_S)."""
    base = max(upstream.backoff_s, 0.001)  # Envoy needs a positive interval
    return {
        "retry_on": "connect-failure,refused-stream,reset-before-request,retriable-status-codes",
        "retriable_status_codes": sorted(RETRYABLE_STATUSES),
        "num_retries": upstream.max_retries,
        # Envoy's back-off doubles as the gateway's does, jittered, up to 10 × the base by default
        "retry_back_off": {"base_interval": _duration(base)},
        "rate_limited_retry_back_off": {
            "reset_headers": [{"name": "retry-after", "format": "SECONDS"}],
            "max_interval": _duration(MAX_HINTED_BACKOFF_S),
        },
    }


def _route_action(upstream: EnvoyUpstream) -> dict[str, Any]:
    # the gateway's `timeout_s` bounds the silence after sending, not the whole reply (a stream may run longer while
    # bytes keep coming): Envoy's idle timeout, with its whole-reply timeout off
    action: dict[str, Any] = {
        "cluster": upstream.name,
        "timeout": "0s",
        "idle_timeout": _duration(upstream.timeout_s),
    }
    if upstream.max_retries:
        action["retry_policy"] = _retry_policy(upstream)
    if upstream.tls:  # a hosted API picks its virtual host (and checks SNI against it) by Host
        action["host_rewrite_literal"] = upstream.authority
    if upstream.base_path != _CLIENT_PATH:  # `/v1/chat/completions` → `<base_path>/chat/completions`
        action["regex_rewrite"] = {"pattern": {"regex": f"^{_CLIENT_PATH}/"}, "substitution": f"{upstream.base_path}/"}
    return action


def _cel_filter(expression: str) -> dict[str, Any]:
    return {
        "extension_filter": {
            "name": "envoy.access_loggers.extension_filters.cel",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
                "expression": expression,
            },
        }
    }


def _error_mapper(
    expression: str, status: int, message: str, error_type: str, code: str, *, retry_after_s: int | None = None
) -> dict[str, Any]:
    headers = {"x-request-id": "%REQ(x-request-id)%"}  # as on jevserve's own replies
    if retry_after_s is not None:
        headers["retry-after"] = str(retry_after_s)
    body = {"message": message, "type": error_type, "param": None, "code": code}
    return {
        "filter": _cel_filter(expression),
        "status_code": status,
        "headers_to_add": [{"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
                           for k, v in headers.items()],
        "body_format_override": {"json_format": {"error": body}, "content_type": "application/json"},
    }


def _local_reply_config(*, extproc: bool) -> dict[str, Any]:
    """Envoy's own failure replies in the HTTP gateway's error shape, status and code, where Envoy would answer a
    plain-text line (or an empty 500) that OpenAI clients report without its meaning: ext_proc's failures (jevserve
    unreachable, a broken stream, a timeout, silence until the idle timeout), a model server that could not be
    reached (after the retries), one that went silent for its `timeout_s`, and a BUFFERED body over the listener's
    buffer (the 413 jevserve answers itself in FULL_DUPLEX_STREAMED mode). Replies jevserve sends through ext_proc
    carry details of their own and are left as they are."""
    # not a number: the listener's buffer may be changed by hand, and the message must not name a limit that is not
    too_large = "request body is larger than the proxy accepts (its listener's per_connection_buffer_limit_bytes)"
    # Envoy answers with the first mapper whose filter holds: the model server's silence is told apart from the
    # ext_proc server's by the upstream address only the first has
    unavailable = ("api_error", "decisions_unavailable")
    mappers = [
        *([_error_mapper(_EXTPROC_FAILED, 503, UNREACHABLE_MESSAGE, *unavailable, retry_after_s=1)] if extproc else []),
        _error_mapper(_UPSTREAM_UNREACHABLE, 502, UPSTREAM_UNREACHABLE_MESSAGE, "upstream_error", "upstream_failed"),
        _error_mapper(_UPSTREAM_RESET, 502, UPSTREAM_RESET_MESSAGE, "upstream_error", "upstream_failed"),
        _error_mapper(_UPSTREAM_SILENT, 504, UPSTREAM_SILENT_MESSAGE, "upstream_error", "upstream_timeout"),
        # the ext_proc server silent: the request never went out, so it may be sent again (jevserve's own 503 says so
        # with Retry-After too)
        *([_error_mapper(_EXTPROC_SILENT, 503, UNREACHABLE_MESSAGE, *unavailable, retry_after_s=1)] if extproc else []),
        _error_mapper(_PAYLOAD_TOO_LARGE, 413, too_large, "invalid_request_error", "payload_too_large"),
    ]
    return {"mappers": mappers}


def route_metadata_filter() -> dict[str, Any]:
    """json_to_metadata: the client's `model` into dynamic metadata, read before ext_proc replaces the body (it
    buffers the body first, which jevserve needs whole anyway)."""
    rule = {
        "selectors": [{"key": "model"}],
        "on_present": {"metadata_namespace": METADATA_NAMESPACE, "key": ROUTE_KEY, "type": "STRING"},
    }
    return {
        "name": "envoy.filters.http.json_to_metadata",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.json_to_metadata.v3.JsonToMetadata",
            # jevserve reads the body as JSON whatever its content-type (`application/json; charset=utf-8` included)
            "request_rules": {
                "rules": [rule],
                "allow_content_types_regex": {"regex": ".*"},
                "allow_empty_content_type": True,
            },
        },
    }


def _asked_for(route: str) -> dict[str, Any]:
    """A route match on the client's `model`, as route_metadata_filter() recorded it."""
    path = [{"key": ROUTE_KEY}]
    return {"filter": METADATA_NAMESPACE, "path": path, "value": {"string_match": {"exact": route}}}


def ext_proc_filter(
    *, request_body_mode: str, response_body_mode: str, message_timeout_s: float, cluster: str = EXTPROC_CLUSTER
) -> dict[str, Any]:
    """The ext_proc HTTP filter: headers, body and trailers of both directions sent to jevserve."""
    return {
        "name": "envoy.filters.http.ext_proc",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "grpc_service": {"envoy_grpc": {"cluster_name": cluster}},
            "failure_mode_allow": False,  # jevserve unreachable: an error, never an undecided request
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
    models: Mapping[str, Address | EnvoyUpstream],
    default_model: str,
    *,
    listen: Address = ("0.0.0.0", 10000),
    extproc: Address | None = ("127.0.0.1", 9002),
    request_body_mode: str = "FULL_DUPLEX_STREAMED",
    response_body_mode: str = "FULL_DUPLEX_STREAMED",
    message_timeout_s: float = 2.0,
    max_body_bytes: int = 4 * 1024 * 1024,
    by_route: Mapping[tuple[str, str], EnvoyUpstream] | None = None,
) -> dict[str, Any]:
    """A static Envoy bootstrap: model name (the `x-gateway-model-name` value) → its upstream; a bare address is a
    plain-HTTP upstream named after the model. `by_route` overrides that for (the client's model, model name) pairs
    whose jevserve route sends the model name elsewhere. `extproc=None` leaves the filter out."""
    by_route = dict(by_route or {})
    if default_model not in models:
        raise ValueError(f"default model {default_model!r} is not among the models: {sorted(models)}")
    targets = {
        model: target if isinstance(target, EnvoyUpstream) else EnvoyUpstream(model, *target)
        for model, target in models.items()
    }
    upstreams: dict[str, EnvoyUpstream] = {}
    for upstream in [*targets.values(), *by_route.values()]:
        first = upstreams.setdefault(upstream.name, upstream)
        if first != upstream:
            raise ValueError(f"two different upstreams are named {upstream.name!r}: {first} and {upstream}")
    if extproc is not None and EXTPROC_CLUSTER in upstreams:
        raise ValueError(f"an upstream may not be named {EXTPROC_CLUSTER!r}: that is the ext_proc server's cluster")
    routes = [
        {
            "match": {
                "prefix": "/",
                "headers": [{"name": MODEL_NAME_HEADER, "string_match": {"exact": model}}],
                "dynamic_metadata": [_asked_for(asked)],
            },
            "route": _route_action(upstream),
        }
        for (asked, model), upstream in by_route.items()
    ]
    routes += [
        {
            "match": {"prefix": "/", "headers": [{"name": MODEL_NAME_HEADER, "string_match": {"exact": model}}]},
            "route": _route_action(upstream),
        }
        for model, upstream in targets.items()
        if model != default_model
    ]
    routes.append({"match": {"prefix": "/"}, "route": _route_action(targets[default_model])})
    router = {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
    filters = [{"name": "envoy.filters.http.router", "typed_config": router}]
    clusters = [_cluster(u.name, (u.host, u.port), upstream=u) for u in upstreams.values()]
    virtual_host = {
        "name": "llm",
        "domains": ["*"],
        "routes": routes,
        # the HTTP gateway never passes a client's key on; an upstream's own key is added after this (api_key_env)
        "request_headers_to_remove": list(CLIENT_KEY_HEADERS),
    }
    manager: dict[str, Any] = {
        "@type": _MANAGER_TYPE,
        "stat_prefix": "llm",
        "route_config": {"virtual_hosts": [virtual_host]},
        "http_filters": filters,
    }
    if extproc is not None:
        modes = {"request_body_mode": request_body_mode, "response_body_mode": response_body_mode}
        filters.insert(0, ext_proc_filter(**modes, message_timeout_s=message_timeout_s))
        clusters.insert(0, _extproc_cluster(extproc))
    manager["local_reply_config"] = _local_reply_config(extproc=extproc is not None)
    if by_route:
        filters.insert(0, route_metadata_filter())
    host, port = listen
    listener = {
        "name": "llm",
        "address": {"socket_address": {"address": host, "port_value": port}},
        "per_connection_buffer_limit_bytes": max_body_bytes,  # BUFFERED bodies up to jevserve's limit
        "filter_chains": [{"filters": [{"name": _MANAGER_NAME, "typed_config": manager}]}],
    }
    resources: dict[str, Any] = {"listeners": [listener], "clusters": clusters}
    secrets = [
        {"name": u.secret_name, "generic_secret": {"secret": {"environment_variable": u.api_key_env}}}
        for u in upstreams.values()
        if u.api_key_env
    ]
    if secrets:  # read when Envoy starts; it refuses to start while a variable is unset
        resources["secrets"] = secrets
    return {"static_resources": resources}


def bootstrap_for_config(
    config: GatewayConfig,
    *,
    listen: Address = ("0.0.0.0", 10000),
    extproc: Address | None = ("127.0.0.1", 9002),
    message_timeout_s: float = 2.0,
    body_mode: str = "FULL_DUPLEX_STREAMED",
) -> tuple[dict[str, Any], list[str]]:
    """The bootstrap `--print-envoy` prints for a gateway config, and a warning for each thing in the config it
    cannot express (Envoy would silently do something else with it). Raises ValueError when there is nothing to
    route to."""
    declared = {u.name: u for u in config.upstreams}
    if not declared:
        raise ValueError("the config declares no upstreams (the model servers Envoy should route to)")
    if not config.routes:
        raise ValueError("the config declares no routes")
    warnings: list[str] = []
    reachable: dict[str, EnvoyUpstream] = {}
    for u in config.upstreams:
        if u.url == PLACEHOLDER_URL:
            warnings.append(
                f"upstream {u.name!r} is {PLACEHOLDER_URL}, which only `jevserve gateway` serves: Envoy has no "
                "server to send its requests to, so they are answered 503; give it a real URL"
            )
            reachable[u.name] = EnvoyUpstream(u.name, "127.0.0.1", 9)  # the discard port: nothing answers
        else:
            reachable[u.name] = EnvoyUpstream.from_config(u)
    models: dict[str, EnvoyUpstream] = {}
    by_route: dict[tuple[str, str], EnvoyUpstream] = {}

    def add(asked: str, model: str, names: list[str], where: str) -> None:
        if len(names) > 1:
            warnings.append(
                f"{where}: Envoy sends {model!r} to upstream {names[0]!r} only; the fallback to "
                f"{', '.join(repr(n) for n in names[1:])} is the HTTP gateway's (list one upstream, or add them to "
                "the cluster by hand)"
            )
        upstream = reachable[names[0]]
        if models.setdefault(model, upstream).name != upstream.name:  # the header alone would pick the first
            by_route.setdefault((asked, model), upstream)

    for i, route in enumerate(config.routes):
        names = route.upstreams or list(declared)
        own = route.upstream_model or route.model
        # what the route sends each model name to: its targets' upstreams (what the route decision picks) over its
        # own model's, where a target has the same name: Envoy matches the name, so one of the two must win
        sends = {own: (names, f"routes[{i}] ({route.model})")}
        for j, target in enumerate(route.route.targets if route.route is not None else ()):
            where = f"routes[{i}].route.targets[{j}] ({route.model})"
            chosen = target.upstreams or names
            if target.model == own and chosen[0] != names[0]:
                warnings.append(
                    f"{where}: the route's upstream_model {own!r} is also this target, with other upstreams "
                    f"({', '.join(chosen)} against the route's {', '.join(names)}); Envoy routes a model name to one "
                    f"upstream, so it sends {own!r} to {chosen[0]!r}, also when the route decision does not act "
                    f"(where the HTTP gateway uses {names[0]!r}); give the target another model name to keep them apart"
                )
            sends[target.model] = (chosen, where)
        for model, (chosen, where) in sends.items():
            add(route.model, model, chosen, where)
    first_route = config.routes[0]
    default = first_route.upstream_model or first_route.model
    for u in {u.name: u for u in [*models.values(), *by_route.values()]}.values():
        if u.api_key_env:
            warnings.append(
                f"upstream {u.name!r}: Envoy adds `Authorization: Bearer ${u.api_key_env}` itself (credential "
                f"injector); start Envoy with {u.api_key_env} set, or it refuses the bootstrap"
            )
    bootstrap = envoy_bootstrap(
        models,
        default,
        listen=listen,
        extproc=extproc,
        message_timeout_s=message_timeout_s,
        max_body_bytes=config.max_body_bytes,
        by_route=by_route,
        request_body_mode=body_mode,
        response_body_mode=body_mode,
    )
    return bootstrap, warnings
