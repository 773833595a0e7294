"""The gateway's HTTP front end: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `/healthz`,
`/metrics`. A request is read here (413 over `max_body_bytes`) and served by the stages (pipeline.py); errors are
answered in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from jevserve.gateway.cache import Embed
from jevserve.gateway.config import GatewayConfig
from jevserve.gateway.context import request_context
from jevserve.gateway.decider import Decider, decider_for, recheck_decider
from jevserve.gateway.endpoints import (
    API_PREFIX,
    ENDPOINT_PATHS,
    MODELS_PATH,
    http_error_body,
    model_entry,
    model_list,
)
from jevserve.gateway.errors import GatewayError, PayloadTooLargeError, RequestTimeoutError
from jevserve.gateway.operating_points import Progress
from jevserve.gateway.pipeline import refuse, serve
from jevserve.gateway.responses import CLIENT_CLOSED, GatewayResponse
from jevserve.gateway.runtime import Gateway, build_gateway
from jevserve.gateway.stages import record
from jevserve.gateway.store import Store, store_state
from jevserve.protocol.body import BODY_TIMEOUT_S, BodyTimeoutError, BodyTooLargeError, read_capped

logger = logging.getLogger("jevserve.gateway")
# the headers a browser page may read of an answer (CORS exposes none but a few by default)
CLIENT_HEADERS = ("x-jevserve-decisions", "x-jevserve-decision-ms", "x-jevserve-overhead-ms", "x-jevserve-upstream",
                  "x-jevserve-cache", "x-jevserve-clarify", "x-jevserve-flagged", "x-jevserve-tool-gate-ms",
                  "retry-after", "x-request-id",
                  # the upstream's pacing headers passed on (stages/forward.py): OpenAI's names for them
                  "retry-after-ms", "openai-processing-ms", "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens",
                  "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests",
                  "x-ratelimit-reset-tokens")


def create_app(
    config: GatewayConfig,
    *,
    decider: Decider | None = None,
    store: Store | None = None,
    transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    embed: Embed | None = None,
    progress: Progress | None = None,
) -> FastAPI:
    """Build the gateway app; `decider` defaults to the config's (`embedded`), `transports` replace upstreams'
    network by upstream name (tests), `embed` the semantic cache's encoder."""
    gateway = build_gateway(
        config,
        decider or decider_for(config),
        store=store,
        transports=transports,
        embed=embed,
        progress=progress,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await gateway.warm_up()  # before "ready": the first requests are judged against warm timings
        yield
        await gateway.aclose()  # the decision log is flushed and closed last

    app = FastAPI(title="jevserve gateway", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan,
                  redirect_slashes=False)  # any other path with a slash too many: a 404 in OpenAI's shape
    app.state.gateway = gateway
    if config.cors_origins:  # a web page on another origin calling the gateway: its browser asks first (preflight)
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
            expose_headers=["x-request-id", *CLIENT_HEADERS],  # what the page may read of an answer
            max_age=600,
        )

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> Response:
        return json_response(exc.body(), exc.status_code, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return json_response(http_error_body(exc.status_code, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        # a bug must still answer in the OpenAI shape, with its reason, never as a bare 500 page
        logger.exception("unexpected error serving %s", request.url.path)
        error = {
            "message": f"internal gateway error: {type(exc).__name__}: {exc}",
            "type": "api_error",
            "param": None,
            "code": "internal_error",
        }
        return json_response({"error": error}, 500)

    async def chat_completions(request: Request) -> Response:
        return await handle(gateway, request, "chat")

    async def completions(request: Request) -> Response:
        return await handle(gateway, request, "completions")

    # Plain Starlette routes: the handlers read the request themselves, so FastAPI's per-request dependency
    # solving (~0.2 ms of CPU) would buy nothing on the hot path.
    # A trailing slash is the same endpoint, as in the ext_proc server (which strips it): Starlette's own answer was
    # a 307 with an empty body, which the OpenAI clients do not follow for a POST
    for path, handler in ((ENDPOINT_PATHS["chat"], chat_completions), (ENDPOINT_PATHS["completions"], completions)):
        for served in (API_PREFIX + path, API_PREFIX + path + "/"):
            app.add_route(served, handler, methods=["POST"])

    # HEAD as well: what load balancers' probes and uptime monitors send (a 405 reads as down)
    @app.api_route(API_PREFIX + MODELS_PATH, methods=["GET", "HEAD"])
    @app.api_route(API_PREFIX + MODELS_PATH + "/", methods=["GET", "HEAD"], include_in_schema=False)
    async def models() -> Response:
        return json_response(model_list(gateway))

    # a route's name may hold a "/" (Qwen/Qwen3-8B)
    @app.api_route(API_PREFIX + MODELS_PATH + "/{model_id:path}", methods=["GET", "HEAD"])
    async def model(model_id: str) -> Response:
        status, body = model_entry(gateway, model_id)
        return json_response(body, status)

    @app.api_route("/healthz", methods=["GET", "HEAD"])
    async def healthz() -> Response:
        return json_response(await health(gateway))

    @app.api_route("/metrics", methods=["GET", "HEAD"])
    async def metrics() -> Response:
        await refresh_gauges(gateway)
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")

    return app


async def refresh_gauges(gateway: Gateway) -> None:
    """Read each upstream's circuit, queue and in-flight count into the gauges (at scrape time)."""
    now = time.time()
    for name, upstream in gateway.upstreams.items():
        circuit = await gateway.store.circuit(name)
        gateway.metrics.circuit_open.labels(name).set(1 if circuit.open_until > now else 0)
        gateway.metrics.queue_depth.labels(name).set(upstream.gate.num_waiting)
        gateway.metrics.in_flight.labels(name).set(await gateway.store.in_flight(name))
    if gateway.log is not None:
        gateway.metrics.log_records_lost.set(gateway.log.num_failed)


async def health(gateway: Gateway) -> dict:
    """Liveness plus each upstream's circuit and in-flight count, and why the decider fails when it does."""
    upstreams = {}
    for name, upstream in gateway.upstreams.items():
        circuit = await gateway.store.circuit(name)
        upstreams[name] = {
            "url": upstream.config.url,
            "in_flight": await gateway.store.in_flight(name),
            "waiting": upstream.gate.num_waiting,
            # half_open: its reset passed and the next request is its trial (while the trial runs, it is open)
            "circuit": ("open" if circuit.open_until > time.time() else "half_open" if circuit.open_until else
                        "closed"),
        }
    store = store_state(gateway.store)  # a shared store says whether it answers
    # a failing decider leaves every decision to its fallback: still serving (200), but not as configured; asked
    # again here (at most every few seconds) so that health recovers without waiting for a request
    problem = await recheck_decider(gateway.decider)
    # a decision log that cannot be written loses records while requests are answered: serving, not as configured
    log_problem = gateway.log.problem if gateway.log is not None else None
    return {"status": "degraded" if problem or log_problem else "ok", "decider": gateway.decider.name,
            **({"decider_problem": problem} if problem else {}),
            **({"log_problem": log_problem} if log_problem else {}), "store": store, "upstreams": upstreams}


def json_response(payload: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response (NaN refused, compact)."""
    return to_http(GatewayResponse(status, dict(headers or {}), body=payload))


async def handle(gateway: Gateway, request: Request, endpoint: str) -> Response:
    """Serve one chat or legacy completions request through the stages."""
    ctx = request_context(endpoint, request.headers)
    try:
        raw = await read_body(request, gateway.config.max_body_bytes, gateway.config.body_timeout_s)
    except (PayloadTooLargeError, RequestTimeoutError) as exc:
        return to_http(refuse(gateway, ctx, exc))
    # A client that leaves before the answer (a timeout, a retry) has its request cancelled, the upstream request
    # with it: the connection to the upstream closes and vLLM aborts the generation, instead of generating a whole
    # reply for nobody. A stream's relay stops the same way once it has begun (Starlette's streaming response).
    served = asyncio.create_task(serve(gateway, ctx, raw))
    gone = asyncio.create_task(_client_gone(request))
    await asyncio.wait({served, gone}, return_when=asyncio.FIRST_COMPLETED)
    if served.done():
        gone.cancel()
        return to_http(served.result())
    served.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await served
    record(gateway, ctx, CLIENT_CLOSED)
    return Response(status_code=CLIENT_CLOSED)  # nobody reads it


async def _client_gone(request: Request) -> None:
    """Return once the client has closed its connection (the body is read: what comes next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def read_body(request: Request, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The request body; raises PayloadTooLargeError (413) as soon as it is over `max_bytes`, RequestTimeoutError
    (408) when it has not all arrived within `timeout_s`."""
    try:
        return await read_capped(request.headers.get("content-length"), request.stream(), max_bytes, timeout_s)
    except BodyTooLargeError as exc:  # the gateway's limit is a config key: say which
        raise PayloadTooLargeError(f"{exc} (the gateway config's max_body_bytes)") from None
    except BodyTimeoutError as exc:
        raise RequestTimeoutError(str(exc), headers={"Connection": "close"}) from None


def to_http(response: GatewayResponse) -> Response:
    """A stage's answer as a Starlette response."""
    if response.events is not None:
        return StreamingResponse(response.events, media_type="text/event-stream", headers=response.headers)
    return Response(
        response.json_bytes(), status_code=response.status, media_type="application/json", headers=response.headers
    )
