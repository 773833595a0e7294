"""The gateway's HTTP app: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `/healthz`,
`/metrics`. Errors are answered in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from jevserve.gateway.cache import Embed
from jevserve.gateway.config import GatewayConfig
from jevserve.gateway.decider import Decider, make_decider
from jevserve.gateway.errors import GatewayError
from jevserve.gateway.proxy import handle, json_response
from jevserve.gateway.runtime import Gateway, build_gateway
from jevserve.gateway.store import Store

logger = logging.getLogger("jevserve.gateway")


def create_app(
    config: GatewayConfig,
    *,
    decider: Decider | None = None,
    store: Store | None = None,
    transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    embed: Embed | None = None,
) -> FastAPI:
    """Build the gateway app; `decider` defaults to the config's (`embedded`), `transports` replace upstreams'
    network by upstream name (tests), `embed` the semantic cache's encoder."""
    gateway = build_gateway(
        config, decider or make_decider(config.decider), store=store, transports=transports, embed=embed
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await gateway.aclose()  # the decision log is flushed and closed last

    app = FastAPI(title="jevserve gateway", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.gateway = gateway

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> Response:
        return json_response(exc.body(), exc.status_code, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        error = {"message": str(exc.detail), "type": "invalid_request_error", "param": None, "code": None}
        return json_response({"error": error}, exc.status_code)

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

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await handle(gateway, request, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await handle(gateway, request, "completions")

    @app.get("/v1/models")
    async def models() -> Response:
        data = [
            {
                "id": r.model,
                "object": "model",
                "created": 0,
                "owned_by": "jevserve-gateway",
                "description": r.description,
            }
            for r in config.routes
        ]
        return json_response({"object": "list", "data": data})

    @app.get("/healthz")
    async def healthz() -> Response:
        return json_response(await health(gateway))

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")

    return app


async def health(gateway: Gateway) -> dict:
    """Liveness plus each upstream's circuit and in-flight count."""
    upstreams = {}
    for name, upstream in gateway.upstreams.items():
        circuit = await gateway.store.circuit(name)
        upstreams[name] = {
            "url": upstream.config.url,
            "in_flight": await gateway.store.in_flight(name),
            "waiting": upstream.gate.num_waiting,
            "circuit": "open" if circuit.open_until else "closed",
        }
    return {"status": "ok", "decider": gateway.decider.name, "upstreams": upstreams}
